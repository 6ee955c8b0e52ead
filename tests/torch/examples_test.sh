#!/usr/bin/env bash
# The examples in examples/torch/ as users run them (zps launch, 2 workers), with their results checked:
#   digits      train_digits.py: every epoch line of every worker, test accuracy >= 0.97 on both
#               workers, and the same accuracy on both (they hold the same weights)
#   regression  train_regression.py: every epoch line, test MSE within 40% of the noise floor (0.25)
#   ctr         train_ctr.py and `zps train --model ctr` on the same Criteo-format file (generated
#               by the example's own generator), same split, epochs and batch: AUCs within 0.01
# Usage: examples_test.sh <build dir> <source dir> digits|regression|ctr [data dir]
# Skipped (77) when /usr/bin/python3 cannot import torch.
set -uo pipefail
BUILD=$1 SRC=$2 WHAT=$3 DATA=${4:-$2/data}
ZPS=$BUILD/bin/zps
PY=/usr/bin/python3
if ! why=$("$PY" -c "import torch" 2>&1); then
  echo "SKIPPED: $PY cannot import torch (install python3-torch): ${why##*$'\n'}"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OUT=$T/out
fail() { echo "FAILED: $1"; tail -40 "$OUT"; exit 1; }
ok() { echo "ok: $1"; }
# launch SERVERS ARGS...: a 2-worker job whose output goes to $OUT; fails the test unless it exits 0.
launch() {
  local servers=$1
  shift
  timeout 600 "$ZPS" launch --servers "$servers" --workers 2 --progress 0 -- "$@" >"$OUT" 2>&1
  local code=$?
  [ "$code" -eq 0 ] || fail "zps launch ... $* exited $code"
}
# epochs N REGEX: both workers printed the epoch line for every epoch 1..N.
epochs() {
  local r e
  for r in 0 1; do
    for e in $(seq "$1"); do
      grep -qE "^\[worker $r\] Training\. Epoch $e, $2, Worker: $r$" "$OUT" || fail "worker $r printed no epoch $e line"
    done
  done
  ok "both workers printed 'Training. Epoch N, ...' for epochs 1..$1"
}
# metric NAME: the value each worker printed in "NAME: V", one per line (worker 0 first).
metric() { for r in 0 1; do sed -n "s/^\[worker $r\] $1: \([0-9.]*\) .*/\1/p" "$OUT" | head -1; done; }

case "$WHAT" in
  digits)
    [ -s "$DATA/digits.csv" ] || fail "$DATA/digits.csv missing (tools/fetch-datasets.sh $DATA)"
    # The example's own defaults (10 epochs), as a user runs it.
    launch 2 python3 "$SRC/examples/torch/train_digits.py" --data-dir "$DATA"
    epochs 10 "loss: [0-9.e+-]+"
    mapfile -t acc < <(metric "Test accuracy")
    echo "test accuracy: worker 0 ${acc[0]:-none}, worker 1 ${acc[1]:-none}"
    [ ${#acc[@]} -eq 2 ] && [ -n "${acc[0]}" ] || fail "a worker printed no test accuracy"
    "$PY" -c "import sys; sys.exit(0 if float('${acc[0]}') >= 0.97 else 1)" || fail "test accuracy ${acc[0]} < 0.97"
    [ "${acc[0]}" = "${acc[1]}" ] || fail "the workers' accuracies differ: their weights are not the same"
    ok "test accuracy ${acc[0]} >= 0.97 on both workers"
    ;;
  regression)
    launch 1 python3 "$SRC/examples/torch/train_regression.py" --epochs 5
    epochs 5 "MSE loss: [0-9.e+-]+"
    mapfile -t mse < <(metric "Test MSE")
    echo "test MSE: worker 0 ${mse[0]:-none}, worker 1 ${mse[1]:-none}"
    [ -n "${mse[0]:-}" ] || fail "no test MSE"
    "$PY" -c "import sys; sys.exit(0 if float('${mse[0]}') <= 0.35 else 1)" || fail "test MSE ${mse[0]} > 0.35"
    ok "test MSE ${mse[0]} <= 0.35 (noise floor 0.25)"
    ;;
  ctr)
    ROWS=${CTR_ROWS:-100000} EPOCHS=${CTR_EPOCHS:-3} BATCH=256
    PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH} "$PY" "$SRC/tests/torch/write_criteo.py" "$T/ctr.tsv" "$ROWS" ||
      fail "could not write the Criteo-format file"
    # --split random: the seeded permutation train_ctr.py repeats (zps train stratifies by default).
    launch 2 "$ZPS" train --model ctr --data "criteo:$T/ctr.tsv" --split random --epochs $EPOCHS --batch_size $BATCH \
      --optimizer momentum --lr 0.05 --hidden 128 --embedding_dim 8 --table_optimizer adagrad --table_lr 0.3
    zps_auc=$(sed -n 's/^\[worker 0\] Final test auc \([0-9.]*\) .*/\1/p' "$OUT")
    [ -n "$zps_auc" ] || fail "zps train printed no final test AUC"
    # The example scales --lr by the worker count (BytePS' convention): 0.025 x 2 is zps train's 0.05.
    launch 2 python3 "$SRC/examples/torch/train_ctr.py" --data "criteo:$T/ctr.tsv" --epochs $EPOCHS --batch-size $BATCH \
      --lr 0.025 --hidden 128 --embedding-dim 8 --table-lr 0.3
    epochs $EPOCHS "log loss: [0-9.e+-]+"
    mapfile -t auc < <(metric "Test AUC")
    echo "test AUC: zps train ${zps_auc}, train_ctr.py worker 0 ${auc[0]:-none}, worker 1 ${auc[1]:-none}"
    [ -n "${auc[0]:-}" ] || fail "train_ctr.py printed no test AUC"
    "$PY" -c "import sys; sys.exit(0 if abs(float('${auc[0]}') - float('$zps_auc')) <= 0.01 else 1)" ||
      fail "AUC ${auc[0]} is not within 0.01 of zps train's $zps_auc"
    ok "AUC ${auc[0]} within 0.01 of zps train's $zps_auc"
    ;;
  *)
    echo "usage: $0 <build dir> <source dir> digits|regression|ctr [data dir]"
    exit 2
    ;;
esac
