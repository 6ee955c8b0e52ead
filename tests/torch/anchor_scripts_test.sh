#!/usr/bin/env bash
# The anchors' PyTorch scripts as users run them, with only the import line changed (written in
# tests/torch/anchor_scripts from the published examples' shape), as zps jobs of 2 workers:
#  1. Horovod's MNIST example, 3 epochs, with gradient_predivide_factor 2 and fp16 allreduce: exit 0 and
#     a test accuracy of at least 50% (ten classes: chance is 10%);
#  2. Horovod's synthetic benchmark with torchvision's ResNet-50 (batch 2, a few steps): exit 0 and its
#     "Total img/sec" line.
# Usage: anchor_scripts_test.sh <zps binary>. Skipped (77) without torch or torchvision.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ZPS=$1
for module in torch torchvision numpy; do
  if ! reason=$(/usr/bin/python3 -c "import $module" 2>&1); then
    echo "SKIPPED: /usr/bin/python3 cannot import $module (install python3-$module): ${reason##*$'\n'}"
    exit 77
  fi
done
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
run() {  # run <script> [args]
  local start=$SECONDS
  "$ZPS" launch --servers 1 --workers 2 --progress 0 --timeout 240 -- /usr/bin/python3 "$HERE/anchor_scripts/$1" \
    "${@:2}" >"$OUT" 2>&1
  code=$?
  echo "-- $*: exit $code after $((SECONDS - start)) s"
  [ "$code" -eq 0 ] || { echo "FAILED: exit $code"; tail -30 "$OUT"; exit 1; }
}

run horovod_mnist.py --epochs 3 --batch-size 32 --lr 0.02 --gradient-predivide-factor 2 --fp16-allreduce
grep "Test set" "$OUT"
accuracy=$(grep -oE "Accuracy: [0-9.]+%" "$OUT" | tail -1 | grep -oE "[0-9.]+")
[ -n "$accuracy" ] || { echo "FAILED: no accuracy line"; tail -20 "$OUT"; exit 1; }
awk -v a="$accuracy" 'BEGIN { exit !(a >= 50) }' || { echo "FAILED: accuracy $accuracy% < 50%"; exit 1; }
echo "ok: MNIST example, final accuracy $accuracy%"

run horovod_synthetic_benchmark.py --model resnet50 --batch-size 2 --num-warmup-batches 1 --num-batches-per-iter 1 \
  --num-iters 2
grep -E "^\[worker 0\] Total img/sec on 2 CPU\(s\): [0-9.]+" "$OUT" || { echo "FAILED: no total line"; tail -20 "$OUT"; exit 1; }
echo "ok: synthetic benchmark trained ResNet-50"
echo "anchor scripts test: all checks passed"
