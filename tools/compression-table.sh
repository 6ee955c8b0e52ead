#!/usr/bin/env bash
# Gradient compression, measured: trains digits (mlp) and synthetic CTR once per compressor on a 2 server x
# 2 worker job on this machine (zps launch) and prints one markdown table of the test metric, the dense
# gradient bytes worker 0 pushed and the time per training step. docs/compression.md's table comes from here.
#
#   tools/compression-table.sh [path/to/zps]      (default build/bin/zps; ZPS_DATA_DIR as for zps train)
#
# Environment: COMPRESSORS (default "none fp16 topk randomk"), RATIO (ZPS_COMPRESS_RATIO, default 0.01),
# DIGITS_EPOCHS (10) and CTR_EPOCHS (3).
set -euo pipefail

ZPS=${1:-build/bin/zps}
COMPRESSORS=${COMPRESSORS:-none fp16 topk randomk}
RATIO=${RATIO:-0.01}
DIGITS_EPOCHS=${DIGITS_EPOCHS:-10}
CTR_EPOCHS=${CTR_EPOCHS:-3}
[[ -x "$ZPS" ]] || { echo "compression-table: $ZPS is not an executable; build zps first" >&2; exit 2; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# run NAME METRIC TRAIN-ARGS...: one training job; prints a table row.
run() {
  local name=$1 metric=$2 compressor=$3
  shift 3
  if ! ZPS_COMPRESSOR=$compressor ZPS_COMPRESS_RATIO=$RATIO ZPS_MIN_COMPRESS_BYTES=16384 \
      "$ZPS" launch --servers 2 --workers 2 --timeout 900 -- train "$@" >"$log" 2>&1; then
    echo "compression-table: $name with $compressor failed; its log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  # Worker 0's final lines: "Final test ... <metric> X ..." and "Traffic: ... N bytes pushed for M tensor
  # bytes, T ms per step".
  local final traffic value pushed tensor ms
  final=$(grep 'Final test' "$log" | grep 'Worker: 0' | tail -n 1)
  traffic=$(grep 'Traffic:' "$log" | grep 'Worker: 0' | tail -n 1)
  value=$(sed -E "s/.* $metric ([0-9.]+).*/\\1/" <<<"$final")
  pushed=$(sed -E 's/.* ([0-9]+) bytes pushed for.*/\1/' <<<"$traffic")
  tensor=$(sed -E 's/.* for ([0-9]+) tensor bytes.*/\1/' <<<"$traffic")
  ms=$(sed -E 's/.* ([0-9.]+) ms per step.*/\1/' <<<"$traffic")
  printf '| %s | %s | %s %s | %s | %.1f%% | %s |\n' "$name" "$compressor" "$metric" "$value" "$pushed" \
    "$(awk -v p="$pushed" -v t="$tensor" 'BEGIN { print t ? 100 * p / t : 0 }')" "$ms"
}

echo "2 servers x 2 workers on $(nproc) cores; ZPS_COMPRESS_RATIO=$RATIO; bytes are worker 0's dense-gradient pushes"
echo
echo "| model | compressor | test metric | bytes pushed | of dense | ms per step |"
echo "| --- | --- | --- | --- | --- | --- |"
for c in $COMPRESSORS; do
  run "digits mlp" accuracy "$c" --model mlp --data digits --epochs "$DIGITS_EPOCHS"
done
for c in $COMPRESSORS; do
  run "synthetic CTR" auc "$c" --model ctr --data synthetic-ctr --epochs "$CTR_EPOCHS" --batch_size 256 \
    --optimizer adam --lr 0.001 --hidden 64,32 --table_optimizer adagrad --table_lr 0.1
done
