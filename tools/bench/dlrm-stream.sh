#!/usr/bin/env bash
# The DLRM example on a stream of ever-new ids, with the servers' tables under a memory budget against
# the same run unbounded, side by side: examples/torch/train_dlrm.py --drift-rows DRIFT (2 workers + 2
# servers, synthetic data whose every id is replaced by a new hashed id every DRIFT rows; the held-out
# rows are drawn as of the end of training, so the AUC is that on recent data) once with no budget and
# once with ZPS_TABLE_MEMORY_BYTES=B per server for each B in BUDGETS (least recently used rows
# evicted), per seed in SEEDS, each seed starting one run later in that order.
#
#   tools/bench/dlrm-stream.sh      # SEEDS="1 2 3" STEPS=800 DRIFT=100000 BUDGETS="16777216 4194304"
#   SEEDS=1 STEPS=30 DRIFT=5000 BUDGETS=1048576 TEST_ROWS=2000 tools/bench/dlrm-stream.sh   # a smoke run
#
# The table (tools/bench/dlrm_stream_table.py) shows per run the test AUC, each server's rows held,
# created and evicted and its peak resident memory (from the servers' exit lines), and ends with
# `goal:` lines per budget: the budget held (rows charged <= B on every server, rows evicted, created -
# evicted = held) and the median AUC loss against the unbounded run <= 0.002. Needs a built zps (BUILD_DIR, default build) and a python3 that
# imports torch ($PYTHON, default /usr/bin/python3); exits 77 when it cannot import torch or zps.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ZPS=$BUILD_DIR/bin/zps
PYTHON=${PYTHON:-/usr/bin/python3}
SEEDS=${SEEDS:-1 2 3}
STEPS=${STEPS:-800}
WARMUP=${WARMUP:-10}
SCALE=${SCALE:-0.01}
DRIFT=${DRIFT:-100000}
BUDGETS=${BUDGETS:-16777216 4194304}
TEST_ROWS=${TEST_ROWS:-50000}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/dlrm-stream}
EXAMPLE=$ROOT/examples/torch/train_dlrm.py
RESULTS=$OUT_DIR/results.jsonl

TOOL=dlrm-stream.sh
. "$ROOT/tools/bench/torch_runs.sh"

echo "dlrm-stream: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); seeds {$SEEDS}, scale $SCALE," \
     "$STEPS steps of 2 x 512 rows, ids replaced every $DRIFT rows, budgets {$BUDGETS} bytes per server"
round=0
for seed in $SEEDS; do
  round=$((round + 1))
  read -ra all <<<"0 $BUDGETS"
  for i in "${!all[@]}"; do
    budget=${all[(i + round - 1) % ${#all[@]}]}
    out=$OUT_DIR/budget$budget-seed$seed.out
    # 0: no budget (the default); the row's name says which setting the other run sets.
    if [ "$budget" = 0 ]; then setting=(); else setting=(ZPS_TABLE_MEMORY_BYTES="$budget"); fi
    env "${setting[@]}" "$ZPS" launch --servers 2 --workers 2 --progress 0 --timeout 1800 -- \
      "$PYTHON" "$EXAMPLE" --scale "$SCALE" --steps "$STEPS" --warmup "$WARMUP" --test-rows "$TEST_ROWS" \
      --seed "$seed" --drift-rows "$DRIFT" --json >"$out" 2>&1
    tables=$("$PYTHON" "$ROOT/tools/bench/dlrm_stream_table.py" --servers "$out") || { failed=1; tail -20 "$out"; continue; }
    keep "budget$budget" "$out" "\"seed\": $seed, \"budget\": $budget, \"servers\": $tables"
  done
done
"$PYTHON" "$ROOT/tools/bench/dlrm_stream_table.py" "$RESULTS" || failed=1
exit $failed
