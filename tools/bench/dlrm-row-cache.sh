#!/usr/bin/env bash
# The worker-side row cache on the DLRM example, side by side in one run: examples/torch/train_dlrm.py
# (2 workers + 2 servers, synthetic Zipf data, exponent ZIPF) once per K in KS and per seed in SEEDS,
# --row-cache-steps K (0: no cache), each job with ZPS_METRICS_PORT so that worker 0 reads the servers'
# byte counters around the training steps.
#
#   tools/bench/dlrm-row-cache.sh                        # KS="0 8 16 32 64" SEEDS="1 2 3" STEPS=300
#   KS="0 4" SEEDS=1 STEPS=20 WARMUP=2 TEST_ROWS=2000 tools/bench/dlrm-row-cache.sh   # a smoke run
#
# The table (tools/bench/dlrm_row_cache_table.py) shows per K the medians over seeds of the embedding
# bytes per training sample the servers counted (pulled, pushed; the MLP gradients' exact share taken
# out), of their drop against K = 0 with the same seed, of the test AUC and its change against K = 0
# with the same seed, and of samples/s. Each seed runs every K, each seed starting one K later. Needs a
# built zps (BUILD_DIR, default build) and a python3 that imports torch ($PYTHON, default
# /usr/bin/python3); exits 77 when it cannot import torch or zps. Raw results: $OUT_DIR/results.jsonl.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ZPS=$BUILD_DIR/bin/zps
PYTHON=${PYTHON:-/usr/bin/python3}
KS=${KS:-0 8 16 32 64}
SEEDS=${SEEDS:-1 2 3}
STEPS=${STEPS:-300}
WARMUP=${WARMUP:-10}
SCALE=${SCALE:-0.01}
ZIPF=${ZIPF:-1.1}
TEST_ROWS=${TEST_ROWS:-50000}
CACHE_ROWS=${CACHE_ROWS:-100000}
TABLE_OPTIMIZER=${TABLE_OPTIMIZER:-adagrad}
WRITE_BACK=${WRITE_BACK:-0}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/dlrm-row-cache}
EXAMPLE=$ROOT/examples/torch/train_dlrm.py
RESULTS=$OUT_DIR/results.jsonl

TOOL=dlrm-row-cache.sh
. "$ROOT/tools/bench/torch_runs.sh"

# The scheduler's port and the 4 after it (launch gives them to the servers and workers), all free.
free_port() { "$PYTHON" "$ROOT/tools/free_ports.py" 5; }

echo "dlrm-row-cache: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); K in {$KS}, seeds {$SEEDS}," \
     "scale $SCALE, Zipf $ZIPF, $STEPS steps of 2 x 512 rows, cache of $CACHE_ROWS rows, $TABLE_OPTIMIZER" \
     "tables, write-back $WRITE_BACK"
read -ra ks <<<"$KS"
round=0
for seed in $SEEDS; do
  round=$((round + 1))
  for i in "${!ks[@]}"; do
    k=${ks[(i + round - 1) % ${#ks[@]}]}
    out=$OUT_DIR/k$k-seed$seed.out
    write_back=(); [ "$WRITE_BACK" = 1 ] && [ "$k" != 0 ] && write_back=(--row-cache-write-back 1)
    ZPS_METRICS_PORT=$(free_port) "$ZPS" launch --servers 2 --workers 2 --progress 0 --timeout 900 -- \
      "$PYTHON" "$EXAMPLE" --scale "$SCALE" --zipf "$ZIPF" --steps "$STEPS" --warmup "$WARMUP" \
      --test-rows "$TEST_ROWS" --seed "$seed" --row-cache-steps "$k" --row-cache-rows "$CACHE_ROWS" \
      --table-optimizer "$TABLE_OPTIMIZER" "${write_back[@]}" --json >"$out" 2>&1
    keep "k$k" "$out" "\"seed\": $seed"
  done
done
"$PYTHON" "$ROOT/tools/bench/dlrm_row_cache_table.py" "$RESULTS" || failed=1
exit $failed
