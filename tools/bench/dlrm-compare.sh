#!/usr/bin/env bash
# DLRM on zps against the plain-PyTorch references, on this machine, in one run: the same model, data
# (synthetic, dlrm_data.py), optimizers, global batch and number of steps in
#   single   one process, torch.nn.EmbeddingBag(sparse=True) tables (tools/bench/dlrm_compare.py)
#   ddp      2 processes, DistributedDataParallel over Gloo, sparse table gradients allreduced
#   zps      2 workers + 2 servers under zps launch (examples/torch/train_dlrm.py), tables on the servers
#
#   tools/bench/dlrm-compare.sh                         # ROUNDS=3 STEPS=300 SCALE=0.01
#   ROUNDS=1 STEPS=12 WARMUP=2 TEST_ROWS=2000 tools/bench/dlrm-compare.sh   # a smoke run
#   FULL=1 tools/bench/dlrm-compare.sh                  # and a zps run at Criteo Kaggle's full size
#
# Each round runs every system once, one after the other, so all see the same machine, each round
# starting one system later than the one before. The table shows
# per system the median over rounds of samples/s (after WARMUP steps) and of the AUC on the held-out
# rows, the Bayes AUC, and the medians over rounds of zps's speed relative to each reference in the same
# round (> 1: zps is faster). The references hold every table in each process, so at SCALE=1 they need
# about 4.3 GB (rows and Adagrad state) per process; zps creates rows on first touch. Needs a built zps
# (BUILD_DIR, default build) and a python3 that imports torch ($PYTHON, default /usr/bin/python3);
# exits 77 when it cannot import torch or zps. Raw results go to $OUT_DIR/results.jsonl.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ZPS=$BUILD_DIR/bin/zps
PYTHON=${PYTHON:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-300}
WARMUP=${WARMUP:-10}
SCALE=${SCALE:-0.01}
TEST_ROWS=${TEST_ROWS:-50000}
FULL=${FULL:-0}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/dlrm-compare}
DRIVER=$ROOT/tools/bench/dlrm_compare.py
EXAMPLE=$ROOT/examples/torch/train_dlrm.py
RESULTS=$OUT_DIR/results.jsonl

TOOL=dlrm-compare.sh
. "$ROOT/tools/bench/torch_runs.sh"
common=(--steps "$STEPS" --warmup "$WARMUP" --test-rows "$TEST_ROWS")

single() {
  timeout 900 "$PYTHON" "$DRIVER" --system single --scale "$SCALE" "${common[@]}" >"$OUT_DIR/single.out" 2>&1
  keep single "$OUT_DIR/single.out" '"label": "single"'
}

ddp() {  # 2 processes, torch.distributed over Gloo on loopback
  gloo_pair "$OUT_DIR/ddp" timeout 900 "$PYTHON" "$DRIVER" --system ddp --scale "$SCALE" "${common[@]}"
  keep ddp "$OUT_DIR/ddp-0.out" '"label": "ddp"'
}

zps_run() {  # zps_run LABEL SCALE: 2 workers + 2 servers, no ZPS_* settings
  "$ZPS" launch --servers 2 --workers 2 --progress 0 --timeout 900 -- \
    "$PYTHON" "$EXAMPLE" --scale "$2" "${common[@]}" --json >"$OUT_DIR/$1.out" 2>&1
  keep "$1" "$OUT_DIR/$1.out" "\"label\": \"$1\""
}

echo "dlrm-compare: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of {single, ddp, zps}" \
     "at scale $SCALE, $STEPS steps of 2 x 512 rows$([ "$FULL" = 1 ] && echo ", and zps at full scale")"
zps_scaled() { zps_run zps "$SCALE"; }
zps_full() { [ "$FULL" != 1 ] || zps_run zps-full 1; }
systems=(single ddp zps_scaled zps_full)
for round in $(seq "$ROUNDS"); do
  # Each round starts one system later, so a load that rises or falls during the run favours none.
  for i in "${!systems[@]}"; do
    "${systems[(i + round - 1) % ${#systems[@]}]}"
  done
done
"$PYTHON" "$DRIVER" --table "$RESULTS" || failed=1
exit $failed
