#!/usr/bin/env bash
# The checks that need a GPU, in one run of at most ~8 minutes on a 16-core machine with one GPU
# (an H200 when borrowed): build with CUDA required (or unpack a kit, below), `zps version --gpu`
# (what zps sees: driver, GPUs, cuBLAS, NCCL), then
#   1. the cuda-labelled tests (CUDA sum kernels and optimizer kernels against the CPU ones);
#   2. the CUDA sum kernel's bandwidth as a share of the device's copy bandwidth;
#   3. a local job with ZPS_SERVER_ENGINE=cuda and zps check (also with 2 local ranks per node);
#   4. param mode (embedding tables, optimizer on the server) on the CUDA engine vs the CPU engine;
#   5. tensors in GPU memory through the worker: one local rank (pinned staging), and 2 local
#      ranks with NCCL on 2 GPUs, or on one GPU if NCCL allows two ranks to share it, otherwise a
#      SKIP with NCCL's reason;
#   6. zps train --device cuda on digits;
#   7. zps bench with the CPU engine and the CUDA engine, side by side;
# and a summary table. Every step runs even after a failure (so the table is complete); the exit
# code is non-zero when any step failed or a CUDA test was skipped (a skip here means the GPU was
# not usable). A SKIP row (a check this machine cannot make) does not fail the run. Logs go to
# $OUT_DIR (default $BUILD_DIR/gpu-check).
#
# Two ways to get the programs:
#   - a kit made by tools/gpu-kit.sh (.gpu-kit/zps-gpu-kit.tar.gz, or ZPS_GPU_KIT=<file>): unpacked
#     to KIT_PREFIX, no build. This is the way on a borrowed GPU machine, which is offline and has
#     none of zps's build dependencies;
#   - otherwise a build with CUDA required into BUILD_DIR (needs the packages of install-deps.sh).
#
# Environment: ZPS_GPU_KIT, KIT_PREFIX (default /tmp/zps-gpu-kit), BUILD_DIR (default build-gpu),
# OUT_DIR, ZPS_DATA_DIR (digits.csv; default data/, else the kit's copy, else fetched by
# tools/fetch-datasets.sh when the machine can reach the Debian mirrors).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/gpu-check}
KIT=${ZPS_GPU_KIT:-$ROOT/.gpu-kit/zps-gpu-kit.tar.gz}
KIT_PREFIX=${KIT_PREFIX:-/tmp/zps-gpu-kit}
export ZPS_DATA_DIR=${ZPS_DATA_DIR:-$ROOT/data}
if [ -f "$KIT" ]; then BIN=$KIT_PREFIX/bin; else BIN=$BUILD_DIR/bin; fi
ZPS=$BIN/zps
mkdir -p "$OUT_DIR"

declare -a NAMES=() RESULTS=() SECONDS_TAKEN=() NOTES=()
FAILED=0

# step NAME TIMEOUT COMMAND...: runs the command with a deadline, logs to $OUT_DIR/NAME.log and
# records PASS or FAIL; the check functions below add a note.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc
  STEP_FAILED_BEFORE=$FAILED
  echo "=== $name"
  timeout --kill-after=10 "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  rc=$?
  tail -n 25 "$OUT_DIR/$name.log"
  NAMES+=("$name")
  SECONDS_TAKEN+=($((SECONDS - start)))
  if [ $rc -eq 0 ]; then RESULTS+=(PASS); else RESULTS+=("FAIL($rc)"); FAILED=1; fi
  NOTES+=("")
  return $rc
}

# Marks the last step failed with a reason (a check on its output, not its exit code).
failLast() {
  local i=$((${#RESULTS[@]} - 1))
  RESULTS[i]=FAIL
  NOTES[i]="$1"
  FAILED=1
  echo "gpu-check: $1" >&2
}

noteLast() { NOTES[${#NOTES[@]} - 1]="$1"; }

# Marks the last step skipped with a reason: it could not run on this machine, which is not a failure.
skipLast() {
  local i=$((${#RESULTS[@]} - 1))
  [ "${RESULTS[$i]}" = PASS ] || FAILED=$STEP_FAILED_BEFORE
  RESULTS[i]=SKIP
  NOTES[i]="$1"
  echo "gpu-check: SKIP ${NAMES[$i]}: $1" >&2
}

# The test AUC of zps train's final line ("Final test ... auc 0.7312 ...").
lastAuc() { grep 'Final test' "$1" | grep -o 'auc [0-9.]*' | tail -n 1 | awk '{print $2}'; }

GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
GPUS=${GPUS:-0}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$OUT_DIR/nvidia-smi.txt" ||
  echo "no nvidia-smi" >"$OUT_DIR/nvidia-smi.txt"

if [ -f "$KIT" ]; then
  # The kit's programs carry their own libraries and loader (tools/gpu-kit.sh); `zps version` proves
  # they start on this machine.
  if step kit 120 bash -c "rm -rf '$KIT_PREFIX' && mkdir -p '$KIT_PREFIX' && tar -xzf '$KIT' -C '$KIT_PREFIX' &&
                            cat '$KIT_PREFIX/KIT' && '$ZPS' version"; then
    kit_commit=$(sed -n 's/^commit: //p' "$KIT_PREFIX/KIT")
    tree_commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || true)
    if [ -n "$tree_commit" ] && [ "${kit_commit%%+*}" != "$tree_commit" ]; then
      noteLast "WARNING: kit built from $kit_commit, this tree is $tree_commit: rerun tools/gpu-kit.sh"
    else
      noteLast "kit built from $kit_commit"
    fi
    [ -f "$ZPS_DATA_DIR/digits.csv" ] || ZPS_DATA_DIR=$KIT_PREFIX/data
  else
    echo "gpu-check: the kit's programs do not start here; nothing else can run" >&2
  fi
else
  # install-deps does nothing when everything is present (device machines are offline).
  if ! step build 420 bash -c "'$ROOT/tools/install-deps.sh' && BUILD_DIR='$BUILD_DIR' '$ROOT/tools/build.sh' -DZPS_WITH_CUDA=ON"; then
    echo "gpu-check: the build failed; nothing else can run (on an offline machine, bring a kit: tools/gpu-kit.sh)" >&2
  fi
fi

# cuBLAS and NCCL are loaded with dlopen on first use. CUDA images often keep them where the loader
# does not look (the toolkit's lib64, a Python wheel's nvidia/*/lib): add such folders to
# LD_LIBRARY_PATH. They hold GPU libraries only, so the machine's own programs are not affected.
for pattern in 'libcublas.so.[0-9]*' 'libnccl.so.[0-9]*'; do
  if ldconfig -p 2>/dev/null | grep -q "${pattern%%.so*}\.so\."; then continue; fi
  found=$(find /usr/local /opt /usr/lib -name "$pattern" 2>/dev/null | head -n 1)
  if [ -n "$found" ]; then
    LD_LIBRARY_PATH=$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
    echo "gpu-check: ${pattern%%.so*} from $(dirname "$found") (not in the loader's cache)"
  else
    echo "gpu-check: no ${pattern%%.so*} on this machine: the steps that need it will fail" >&2
  fi
done

if [ -x "$ZPS" ]; then
  # What zps sees: the driver, each GPU and whether it runs this build's kernels, cuBLAS and NCCL.
  step gpu-info 60 "$ZPS" version --gpu
  noteLast "$(grep -m1 '^  [0-9n]' "$OUT_DIR/gpu-info.log" | sed 's/^ *//' | cut -c 1-100)"

  # 1. CUDA kernel tests. ctest says "Skipped" when the binary exits 77 (no usable device).
  if [ -f "$KIT" ]; then cuda_tests=("$KIT_PREFIX/run-cuda-tests.sh")
  else cuda_tests=(ctest --test-dir "$BUILD_DIR" -L cuda --output-on-failure); fi
  if step cuda-tests 240 "${cuda_tests[@]}"; then
    if grep -q "Skipped\|Not Run" "$OUT_DIR/cuda-tests.log"; then
      failLast "CUDA tests were skipped: the GPU is not usable from this build"
    fi
  fi

  # 2. Sum kernel vs device copy bandwidth.
  if step sum-bandwidth 120 "$BIN/zps_cuda_sum_bandwidth"; then
    noteLast "$(grep -o 'sum/copy share: [0-9]*%' "$OUT_DIR/sum-bandwidth.log")"
  fi

  # 3. Whole jobs on the CUDA engine, with exact-sum checks.
  if ZPS_SERVER_ENGINE=cuda step check-cuda-engine 180 "$ZPS" launch --servers 2 --workers 2 --local-size 1 \
      --timeout 170 -- \
      check --rounds 5; then
    grep -q "(cuda reducer)" "$OUT_DIR/check-cuda-engine.log" || failLast "the servers did not run the cuda reducer"
    [ "$(grep -c ' 0 wrong' "$OUT_DIR/check-cuda-engine.log")" -eq 2 ] || failLast "not every worker reported 0 wrong"
  fi
  if ZPS_SERVER_ENGINE=cuda step check-local-size-2 180 "$ZPS" launch --servers 2 --workers 2 --local-size 2 \
      --timeout 170 -- check --rounds 3; then
    [ "$(grep -c ' 0 wrong' "$OUT_DIR/check-local-size-2.log")" -eq 4 ] || failLast "not every local rank reported 0 wrong"
    noteLast "$(grep -o 'network bytes [0-9]* pushed' "$OUT_DIR/check-local-size-2.log" | head -n 1) per node"
  fi

  # 4. Param mode on the CUDA engine: the same CTR job (embedding tables updated by Adam/Adagrad on
  #    the servers) with the CPU engine and the CUDA engine must reach the same test AUC.
  for engine in cpu cuda; do
    ZPS_SERVER_ENGINE=$engine step "param-$engine" 150 "$ZPS" launch --servers 2 --workers 2 --local-size 1 \
      --timeout 140 -- \
      train --model ctr --data synthetic-ctr --epochs 1 --batch_size 256 --optimizer adam --lr 0.001 \
      --hidden 64,32 --table_optimizer adagrad --table_lr 0.1
  done
  if [ -f "$OUT_DIR/param-cuda.log" ]; then
    cpu_auc=$(lastAuc "$OUT_DIR/param-cpu.log")
    cuda_auc=$(lastAuc "$OUT_DIR/param-cuda.log")
    if grep -q "engine failed" "$OUT_DIR/param-cuda.log"; then
      failLast "the CUDA engine failed on param rows: $(grep -m1 -o 'engine failed.*' "$OUT_DIR/param-cuda.log")"
    elif ! grep -q "(cuda reducer)" "$OUT_DIR/param-cuda.log"; then
      failLast "the servers did not run the cuda reducer"
    elif [ -z "$cpu_auc" ] || [ -z "$cuda_auc" ]; then
      failLast "no test AUC in the logs"
    elif awk -v a="$cpu_auc" -v b="$cuda_auc" 'BEGIN {d = a - b; exit !(d > 0.005 || d < -0.005)}'; then
      failLast "test AUC differs: cpu engine $cpu_auc, cuda engine $cuda_auc"
    else
      noteLast "test AUC cpu engine $cpu_auc, cuda engine $cuda_auc"
    fi
  fi

  # 5. Tensors in GPU memory (zps check --gpu_tensors) through the worker API: with one local rank
  #    they are staged through pinned memory (no NCCL); with 2 local ranks per node they go through
  #    NCCL. NCCL refuses two ranks on one GPU in one communicator (ncclInvalidUsage, "Duplicate
  #    GPU"); on a one-GPU machine that row is a SKIP with NCCL's reason, not a failure.
  if step gpu-tensors-local-1 120 "$ZPS" launch --servers 2 --workers 2 --local-size 1 --timeout 110 -- \
      check --gpu_tensors --rounds 3 --sizes 7,4K,1M+3,16M; then
    [ "$(grep -c 'tensors in GPU memory.* 0 wrong' "$OUT_DIR/gpu-tensors-local-1.log")" -eq 2 ] ||
      failLast "not every worker reported 0 wrong"
    grep -q "pinned staging (one local rank: no NCCL)" "$OUT_DIR/gpu-tensors-local-1.log" ||
      failLast "the workers did not stage the GPU tensors"
  fi
  if NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_DEBUG=${NCCL_DEBUG:-WARN} \
      step nccl-local-size-2 150 "$ZPS" launch --servers 2 --workers 2 --local-size 2 --timeout 140 -- \
      check --gpu_tensors --rounds 3 --sizes 7,4K,1M+3,16M; then
    [ "$(grep -c 'tensors in GPU memory.* 0 wrong' "$OUT_DIR/nccl-local-size-2.log")" -eq 4 ] ||
      failLast "not every local rank reported 0 wrong"
    grep -q "local reduction of GPU tensors with NCCL" "$OUT_DIR/nccl-local-size-2.log" ||
      failLast "the workers did not use the NCCL reducer"
    [ "${RESULTS[${#RESULTS[@]} - 1]}" = PASS ] &&
      noteLast "$GPUS GPU(s); $(grep -o 'network bytes [0-9]* pushed' "$OUT_DIR/nccl-local-size-2.log" | head -n 1) per node"
  elif [ "$GPUS" -lt 2 ] && grep -qi "duplicate GPU\|invalid usage\|ncclInvalidUsage" "$OUT_DIR/nccl-local-size-2.log"; then
    skipLast "$GPUS GPU: NCCL refuses 2 local ranks on one GPU ($(grep -m1 -io 'duplicate GPU[^;]*\|invalid usage[^;]*' "$OUT_DIR/nccl-local-size-2.log" | cut -c1-100))"
  fi

  # 6. Training with cuBLAS.
  [ -f "$ZPS_DATA_DIR/digits.csv" ] || "$ROOT/tools/fetch-datasets.sh" "$ZPS_DATA_DIR" >/dev/null 2>&1 || true
  if [ -f "$ZPS_DATA_DIR/digits.csv" ]; then
    if step train-cuda 240 "$ZPS" launch --servers 1 --workers 2 --local-size 1 --timeout 230 -- \
        train --model mlp --data digits --epochs 10 --device cuda; then
      grep -q "cuBLAS" "$OUT_DIR/train-cuda.log" || failLast "training did not run on cuBLAS"
      noteLast "$(grep -o 'Final test [^(]*' "$OUT_DIR/train-cuda.log" | head -n 1)"
    fi
  else
    NAMES+=(train-cuda); RESULTS+=(FAIL); SECONDS_TAKEN+=(0)
    NOTES+=("no $ZPS_DATA_DIR/digits.csv: run tools/fetch-datasets.sh where the mirrors are reachable")
    FAILED=1
  fi

  # 7. Server goodput, CPU engine vs CUDA engine (1 server, so its engine is the bottleneck).
  for engine in cpu cuda; do
    ZPS_SERVER_ENGINE=$engine step "bench-$engine" 150 "$ZPS" launch --servers 1 --workers 2 --local-size 1 \
      --timeout 140 -- \
      bench --sizes 64K,1M,16M,64M --min_time 0.5 --json "$OUT_DIR/bench-$engine.json"
  done
  if [ -f "$OUT_DIR/bench-cpu.log" ] && [ -f "$OUT_DIR/bench-cuda.log" ]; then
    echo "=== server goodput by engine (GB/s per worker, p50; zps bench, 1 server, 2 workers)"
    # Table rows of zps bench: size partitions iters p50 p99 goodput wrong, after the "[worker 0] " prefix.
    rows() { sed -n 's/^\[worker 0\] *//p' "$1" | awk '$1 ~ /^[0-9]+$/ && NF == 7 {print $1, $4, $6}'; }
    join <(rows "$OUT_DIR/bench-cpu.log" | sort -k1,1) <(rows "$OUT_DIR/bench-cuda.log" | sort -k1,1) |
      sort -n | awk 'BEGIN {printf "%12s %12s %12s %12s %12s %8s\n", "size(B)", "cpu p50(us)", "cuda p50(us)",
                                   "cpu GB/s", "cuda GB/s", "cuda/cpu"}
                     {printf "%12s %12s %12s %12s %12s %7.2fx\n", $1, $2, $4, $3, $5, ($3 > 0 ? $5 / $3 : 0)}' |
      tee "$OUT_DIR/bench-side-by-side.txt"
  fi
fi

echo
echo "=== gpu-check summary ($(head -n 1 "$OUT_DIR/nvidia-smi.txt"))"
printf "%-20s %-10s %6s  %s\n" step result secs note
for i in "${!NAMES[@]}"; do
  printf "%-20s %-10s %6s  %s\n" "${NAMES[$i]}" "${RESULTS[$i]}" "${SECONDS_TAKEN[$i]}" "${NOTES[$i]}"
done
echo "logs: $OUT_DIR"
echo "verified only by compilation until this script passes on a GPU: the CUDA engine, NCCL, cuBLAS"
if [ $FAILED -ne 0 ]; then
  echo "gpu-check: FAILED" >&2
  exit 1
fi
echo "gpu-check: PASS"
