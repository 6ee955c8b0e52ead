#!/usr/bin/env bash
# zps.torch against torch.distributed DDP over Gloo, on this machine, in one run: the same models, data
# and batch, 2 workers each; DDP over the backend "zps" (1 server); zps.torch with 1 and with 2 servers, and with 1 server and every gradient alone
# (ZPS_TORCH_BUCKET_BYTES=0: what the buckets of small gradients gain). Then push_pull of one tensor
# from Python against `zps bench` at the same size (what the Python layer costs).
#
#   tools/bench/torch-compare.sh                        # ROUNDS=3 REPS=3 STEPS=20 MODELS="digits wide"
#   ROUNDS=1 REPS=1 STEPS=2 MODELS=digits PP_BYTES=1048576 tools/bench/torch-compare.sh   # a smoke run
#
# Each round runs every configuration once, one after the other, so all see the same machine; each run
# times REPS windows of STEPS steps after a warm-up (tools/bench/torch_compare.py). The table
# (tools/bench/torch_compare_table.py) shows, per configuration, the median over rounds of each run's
# median step time, samples/s (2 workers x BATCH rows per step) and the median over rounds of zps's
# speed relative to DDP in the same round (> 1: zps is faster). Needs a built zps (BUILD_DIR,
# default build) and a python3 that imports torch ($PYTHON, default /usr/bin/python3); exits 77 when
# that python cannot import torch or zps. Writes its raw results to $OUT_DIR/results.jsonl.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ZPS=$BUILD_DIR/bin/zps
PYTHON=${PYTHON:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-3}
STEPS=${STEPS:-20}
BATCH=${BATCH:-32}
MODELS=${MODELS:-digits wide}
PP_BYTES=${PP_BYTES:-4194304}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/torch-compare}
DRIVER=$ROOT/tools/bench/torch_compare.py
RESULTS=$OUT_DIR/results.jsonl

TOOL=torch-compare.sh
. "$ROOT/tools/bench/torch_runs.sh"
common=(--batch-size "$BATCH" --steps "$STEPS" --reps "$REPS")

ddp() {  # ddp MODEL: 2 processes, torch.distributed over Gloo on loopback
  gloo_pair "$OUT_DIR/ddp" timeout 600 "$PYTHON" "$DRIVER" --system ddp --model "$1" "${common[@]}" --label "ddp"
  keep "ddp $1" "$OUT_DIR/ddp-0.out"
}

zps_run() {  # zps_run SERVERS LABEL DRIVER-ARGS...: 2 workers under zps launch
  local servers=$1 label=$2
  shift 2
  "$ZPS" launch --servers "$servers" --workers 2 --progress 0 --timeout 600 -- \
    "$PYTHON" "$DRIVER" "$@" --label "$label" >"$OUT_DIR/$label.out" 2>&1
  keep "$label" "$OUT_DIR/$label.out"
}

echo "torch-compare: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of: models ($MODELS) x" \
     "{DDP/Gloo, DDP/zps 1 server, zps 1 server, zps 1 server without buckets, zps 2 servers}, push_pull vs zps bench at" \
     "$PP_BYTES B; batch $BATCH per worker"
for round in $(seq "$ROUNDS"); do
  for model in $MODELS; do
    ddp "$model"
    zps_run 1 "ddp-zps-1s" --system ddp-zps --model "$model" "${common[@]}"
    zps_run 1 "zps-1s" --system zps --model "$model" "${common[@]}"
    ZPS_TORCH_BUCKET_BYTES=0 zps_run 1 "zps-1s-nobuckets" --system zps --model "$model" "${common[@]}"
    zps_run 2 "zps-2s" --system zps --model "$model" "${common[@]}"
  done
  zps_run 1 "pushpull" --system pushpull --bytes "$PP_BYTES" --steps "$STEPS" --reps "$REPS"
  "$ZPS" launch --servers 1 --workers 2 --progress 0 --timeout 600 -- bench --sizes "$PP_BYTES" \
    --json "$OUT_DIR/bench.json" >"$OUT_DIR/bench.out" 2>&1
  if [ -s "$OUT_DIR/bench.json" ]; then
    tr -d '\n' <"$OUT_DIR/bench.json" | sed 's/^{/{"round":'"$round"',"label":"zps-bench",/' >>"$RESULTS"
    echo >>"$RESULTS"
  else
    echo "torch-compare.sh: zps bench wrote no JSON (see $OUT_DIR/bench.out)" >&2
    failed=1
  fi
  rm -f "$OUT_DIR/bench.json"
  echo "torch-compare: round $round of $ROUNDS done"
done

"$PYTHON" "$ROOT/tools/bench/torch_compare_table.py" "$RESULTS" "$BATCH" || failed=1
exit $failed
