#!/usr/bin/env bash
# An emulated cluster on one machine: zps against MPI_Allreduce and torch.distributed (Gloo) on hosts
# whose links are limited to a rate R, so the network, not the CPU, is the limit, as on a real cluster.
#
# Each host is a network namespace with one veth on a bridge (10.78.0.i/24), all inside
# `unshare --net --mount`: only the addresses made here exist, nothing reaches another address. `tc`
# limits every host's link to RATE in both directions (tbf on both ends of its veth), plus DELAY (netem)
# when given. Per repetition, on the same hosts: zps bench (scheduler, SERVERS server hosts, WORKERS
# worker hosts; or LAYOUT=colocated: a server on each worker host), Open MPI's MPI_Allreduce with the ring
# algorithm forced and with its default choice, and Gloo all-reduce (when torch imports); with
# HALF_RATE=1 also zps at RATE/2, which shows the link is the limit when its time doubles. Then a table of
# medians, the bandwidth bounds, ratios and `goal:` lines. Exits 0 when it ran, met or not; 77 (with the
# reason) when namespaces or tc are not permitted here; 1 when a run failed or a result is missing.
#
#   tools/bench/cluster.sh                              # 4 workers x 4 servers, RATE=200mbit, 4 MiB, 64 MiB
#   WORKERS=2 SERVERS=2 SIZES=262144 REPEATS=1 tools/bench/cluster.sh   # the smoke test's size
#   LAYOUT=colocated DELAY=1ms RATE=500mbit tools/bench/cluster.sh
#   MODEL=resnet50 RATE=500mbit tools/bench/cluster.sh  # overlap: FIFO against priority scheduling
#   TORCH=wide,resnet50 RATE=100mbit tools/bench/cluster.sh   # real PyTorch: zps.torch, DDP/zps against DDP/Gloo
#   DLRM=1 RATE=100mbit tools/bench/cluster.sh                  # DLRM on server-held tables against DDP/Gloo
#
# With MODEL set it runs only `zps bench --model MODEL --compute_ms COMPUTE_MS --link_mbit R` (COMPUTE_MS
# defaults to comm: the compute equals the measured communication time) REPEATS times and prints worker
# 0's overlap table of each repetition, instead of the all-reduce comparison.
#
# With TORCH set (models of tools/bench/torch_compare.py, comma separated: wide, resnet50, digits) it
# trains instead, per repetition and model: zps.torch's DistributedOptimizer (scheduler and servers as
# above, the workers `torch_compare.py --system zps` on the worker hosts), DDP over the backend "zps"
# (a fresh scheduler and servers, `--system ddp-zps`) and then DDP over Gloo on the same worker hosts, real forward and backward passes and SGD on each, and
# tools/bench/torch_cluster_table.py prints the medians of each round's step time, samples/s and
# zps/DDP ratio, the link time per step, and `goal:` lines. BATCH (rows per worker; empty: 32 for the
# MLPs, 16 for resnet50: on one thread PyTorch 1.13 runs the 1x1 convolutions of a batch under 16
# without oneDNN, about 10x slower here), IMAGE_SIZE (resnet50's, 32), STEPS (timed steps per run,
# 3), WARMUP (1) and COMPUTE_STEPS (forward and backward passes timed first without communication, 2)
# shape each run.
#
# With DLRM=1 it trains examples/torch/train_dlrm.py instead (tables on the servers, Criteo-shaped
# synthetic data at DLRM_SCALE, 0.01, DLRM_STEPS steps of 512 rows per worker, 100, the first 10 left
# out of samples/s), then the same model in DistributedDataParallel over Gloo (tools/bench/dlrm_compare.py
# --system ddp: sparse table gradients, every table in every process), per round, and
# tools/bench/dlrm_cluster_table.py prints the medians of samples/s, AUC on DLRM_TEST_ROWS (20000)
# held-out rows and the ratio per round, with `goal:` lines (>= 2x DDP with the servers on their own
# hosts, >= 1.3x colocated). DLRM_ARGS adds train_dlrm.py arguments to both systems (the reference takes
# the model's and the tables' optimizer from them and ignores zps's row cache), e.g. DLRM_ARGS="--table-optimizer
# sgd --row-cache-steps 48 --row-cache-write-back 1".
#
# zps runs with its defaults: no ZPS_* setting unless one is given here (PARTITION, CREDIT) or in the
# environment, and the header line names every one that was. On these hosts the defaults are those of a
# job that spans hosts (docs/performance.md#defaults).
#
# Settings (environment): BUILD_DIR (build), OUT_DIR ($BUILD_DIR/cluster), WORKERS (4), SERVERS (4),
# LAYOUT (separate|colocated), RATE (tc rate, 200mbit), DELAY (netem delay, none), SIZES (bytes, comma
# separated), REPEATS (3), MIN_TIME (seconds per size and run, 1), HALF_RATE (1), GLOO (1), MPI (1),
# RUN_TIMEOUT (seconds for one run, 300), PARTITION (empty: zps's choice; bytes: ZPS_PARTITION_BYTES),
# CREDIT (empty: zps's choice; bytes: ZPS_PRIORITY=1 and ZPS_CREDIT_BYTES; 0: ZPS_PRIORITY=0, every
# partition sent at once), DELAY_VARIANT (2ms: after the runs at RATE, zps and MPI ring again with that
# delay on every link, where the kernel has netem; empty: none), QUEUE (tbf latency, the most a link's
# FIFO holds, 200ms), TRACE (1: zps writes its trace files, and
# tools/bench/cluster_trace.py prints where each round's time went, per repetition, or with MODEL
# tools/bench/overlap_trace.py where each schedule's forward pass waited; 0). Other ZPS_*
# variables in the environment reach every zps process (e.g. ZPS_PRIORITY, ZPS_CREDIT_BYTES). Needs root,
# ip, tc, unshare; python3-torch (and torchvision for resnet50) with TORCH; Open MPI (mpicxx, mpirun) and python3-torch are references and shown as '-' when missing (tools/install-deps.sh installs them).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/cluster}
WORKERS=${WORKERS:-4}
SERVERS=${SERVERS:-4}
LAYOUT=${LAYOUT:-separate}
RATE=${RATE:-200mbit}
DELAY=${DELAY:-}
SIZES=${SIZES:-4194304,67108864}
REPEATS=${REPEATS:-3}
MIN_TIME=${MIN_TIME:-1}
HALF_RATE=${HALF_RATE:-1}
GLOO=${GLOO:-1}
MPI=${MPI:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
PARTITION=${PARTITION:-}
CREDIT=${CREDIT:-}
DELAY_VARIANT=${DELAY_VARIANT-2ms}
MODEL=${MODEL:-}
COMPUTE_MS=${COMPUTE_MS:-comm}
ITERS=${ITERS:-5}
TRACE=${TRACE:-0}
TORCH=${TORCH:-}
BATCH=${BATCH:-}
IMAGE_SIZE=${IMAGE_SIZE:-32}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
COMPUTE_STEPS=${COMPUTE_STEPS:-2}
DLRM=${DLRM:-}
DLRM_SCALE=${DLRM_SCALE:-0.01}
DLRM_STEPS=${DLRM_STEPS:-100}
DLRM_TEST_ROWS=${DLRM_TEST_ROWS:-20000}
DLRM_ARGS=${DLRM_ARGS:-}
QUEUE=${QUEUE:-200ms}
ZPS=$BUILD_DIR/bin/zps
PY=/usr/bin/python3
SELF=$ROOT/tools/bench/cluster.sh

skip() { echo "cluster.sh: SKIPPED: $*"; exit 77; }
fail() { echo "cluster.sh: $*" >&2; exit 1; }

# ---- Outside: check, build the MPI reference, re-run inside `unshare --net --mount`. ----
if [ "${CLUSTER_INSIDE:-0}" != 1 ]; then
  [ -x "$ZPS" ] || fail "$ZPS not found; build first (tools/build.sh)"
  [[ $WORKERS =~ ^[1-9][0-9]?$ && $SERVERS =~ ^[1-9][0-9]?$ ]] || fail "WORKERS and SERVERS must be 1..99"
  [[ $LAYOUT == separate || $LAYOUT == colocated ]] || fail "LAYOUT must be separate or colocated"
  [[ $LAYOUT == separate || $SERVERS == "$WORKERS" ]] || fail "LAYOUT=colocated needs SERVERS = WORKERS"
  [[ $RATE =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || fail "RATE must look like 200mbit (kbit, mbit or gbit)"
  [[ -z $DELAY || $DELAY =~ ^[0-9.]+(us|ms)$ ]] || fail "DELAY must look like 1ms or 500us"
  [[ $QUEUE =~ ^[0-9]+(us|ms)$ ]] || fail "QUEUE must look like 200ms or 500us"
  [[ $TRACE == 0 || $TRACE == 1 ]] || fail "TRACE must be 0 or 1"
  [[ $SIZES =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "SIZES must be bytes, comma separated"
  [[ -z $PARTITION || $PARTITION =~ ^[1-9][0-9]*$ ]] || fail "PARTITION must be bytes (or empty: zps's choice)"
  [[ -z $CREDIT || $CREDIT =~ ^[0-9]+$ ]] || fail "CREDIT must be bytes, 0 (no priority), or empty (zps's choice)"
  [[ -z $DELAY_VARIANT || $DELAY_VARIANT =~ ^[0-9.]+(us|ms)$ ]] || fail "DELAY_VARIANT must look like 2ms, or be empty"
  [[ -z $MODEL || $MODEL =~ ^(resnet50|bert-base)$ ]] || fail "MODEL must be resnet50 or bert-base"
  [[ $COMPUTE_MS == comm || $COMPUTE_MS =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "COMPUTE_MS must be comm or milliseconds"
  [[ $ITERS =~ ^[1-9][0-9]?$ ]] || fail "ITERS must be 1..99"
  [[ -z $TORCH || $TORCH =~ ^(wide|resnet50|digits)(,(wide|resnet50|digits))*$ ]] ||
    fail "TORCH must be models of torch_compare.py, comma separated: wide, resnet50, digits"
  [[ -z $TORCH || -z $MODEL ]] || fail "TORCH and MODEL are two different runs; set one of them"
  [[ -z $DLRM || $DLRM == 1 ]] || fail "DLRM must be 1 (or empty)"
  [[ -z $DLRM || -z $MODEL$TORCH ]] || fail "DLRM, TORCH and MODEL are different runs; set one of them"
  [[ $DLRM_SCALE =~ ^(0\.[0-9]*[1-9][0-9]*|1|1\.0)$ ]] || fail "DLRM_SCALE must be in (0, 1]"
  [[ $DLRM_STEPS =~ ^[1-9][0-9]{1,4}$ && $DLRM_STEPS -gt 10 ]] || fail "DLRM_STEPS must be 11..99999"
  [[ $DLRM_TEST_ROWS =~ ^[1-9][0-9]{2,6}$ ]] || fail "DLRM_TEST_ROWS must be 100..9999999"
  [[ -z $BATCH || $BATCH =~ ^[1-9][0-9]{0,3}$ ]] || fail "BATCH must be 1..9999 rows (or empty: the model's default)"
  [[ $IMAGE_SIZE =~ ^[1-9][0-9]{0,3}$ && $IMAGE_SIZE -ge 32 ]] || fail "IMAGE_SIZE must be 32..9999 pixels"
  [[ $STEPS =~ ^[1-9][0-9]?$ && $WARMUP =~ ^[0-9][0-9]?$ && $COMPUTE_STEPS =~ ^[0-9][0-9]?$ ]] ||
    fail "STEPS must be 1..99, WARMUP and COMPUTE_STEPS 0..99"
  [ "$(id -u)" = 0 ] || skip "needs root for network namespaces, veth pairs, a bridge and tc (uid $(id -u))"
  for cmd in ip tc unshare timeout; do command -v $cmd >/dev/null || skip "$cmd is not installed"; done
  probe=$(unshare --net --mount --propagation private true 2>&1) || skip "unshare --net --mount does not work here: $probe"
  if [ -n "$TORCH$DLRM" ]; then
    modules="torch, zps.torch"; [[ $TORCH == *resnet50* ]] && modules+=", torchvision"
    why=$(PYTHONPATH=$BUILD_DIR/python $PY -c "import $modules" 2>&1) ||
      skip "$PY cannot import $modules (python3-torch, python3-torchvision, a build with zps_python): ${why##*$'\n'}"
  fi
  mkdir -p "$OUT_DIR" || fail "cannot create $OUT_DIR"
  rm -f "$OUT_DIR"/*.jsonl "$OUT_DIR"/*.log "$OUT_DIR"/*.json "$OUT_DIR"/*.links.txt
  rm -rf "$OUT_DIR"/trace-*
  if [ -z "$MODEL$TORCH$DLRM" ] && [ "$MPI" = 1 ] && command -v mpicxx >/dev/null && command -v mpirun >/dev/null; then
    mpicxx -O2 -std=c++17 -o "$OUT_DIR/mpi_allreduce" "$ROOT/tools/bench/mpi_allreduce.cc" || MPI=0
  else
    MPI=0
  fi
  if [ "$GLOO" = 1 ] && ! $PY -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then GLOO=0; fi
  export BUILD_DIR OUT_DIR WORKERS SERVERS LAYOUT RATE DELAY SIZES REPEATS MIN_TIME HALF_RATE GLOO MPI RUN_TIMEOUT PARTITION
  export MODEL COMPUTE_MS ITERS TRACE QUEUE CREDIT DELAY_VARIANT TORCH BATCH IMAGE_SIZE STEPS WARMUP COMPUTE_STEPS
  export DLRM DLRM_SCALE DLRM_STEPS DLRM_TEST_ROWS DLRM_ARGS
  CLUSTER_INSIDE=1 exec unshare --net --mount --propagation private -- bash "$SELF"
fi

# ---- Inside: the hosts. ----
RESULTS=$OUT_DIR/results.jsonl
: >"$RESULTS"
mkdir -p /run/netns && mount -t tmpfs cluster-netns /run/netns || fail "cannot mount a private /run/netns"
ip link set lo up
ip link add br0 type bridge && ip link set br0 up || fail "cannot create the bridge"

if [ "$LAYOUT" = separate ]; then HOSTS=$((SERVERS + WORKERS)); else HOSTS=$WORKERS; fi
server_host() { echo $(($1 + 1)); }                                                     # server i
worker_host() { if [ "$LAYOUT" = separate ]; then echo $((SERVERS + $1 + 1)); else echo $(($1 + 1)); fi; }
addr() { echo "10.78.0.$1"; }

# shape DEV RATE [NETNS]: tbf at RATE on DEV's egress, netem DELAY below it when DELAY is set. The burst
# is small against the sizes measured (128 KiB), and large enough for one segmentation-offload packet.
# QUEUE bounds the tbf's FIFO (200ms: 5 MB at 200mbit). The link_stats after each run show no drops
# with it; shallower queues (20ms, 5ms) drop under four workers' incast into one server and cost zps
# and TCP far more than the queueing delay (docs/performance-history.md).
shape() {
  local dev=$1 rate=$2 ns=${3:-} pre=()
  [ -z "$ns" ] || pre=(ip netns exec "$ns")
  "${pre[@]}" tc qdisc replace dev "$dev" root handle 1: tbf rate "$rate" burst 128kb latency "$QUEUE" || return 1
  [ -z "$DELAY" ] || "${pre[@]}" tc qdisc replace dev "$dev" parent 1:1 handle 10: netem delay "$DELAY" || return 1
}
shape_all() {
  for h in $(seq 1 $HOSTS); do
    shape "veth$h" "$1" && shape eth0 "$1" "h$h" || return 1
  done
}

for h in $(seq 1 $HOSTS); do
  ip netns add "h$h" &&
    ip link add "veth$h" type veth peer name eth0 netns "h$h" &&
    ip link set "veth$h" master br0 up &&
    ip netns exec "h$h" ip link set lo up &&
    ip netns exec "h$h" ip addr add "$(addr $h)/24" dev eth0 &&
    ip netns exec "h$h" ip link set eth0 up || fail "cannot create host h$h"
done
shape_all "$RATE" || skip "tc cannot shape a veth here (tbf/netem qdiscs unavailable?)"

PIDS=()
stop_all() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; PIDS=(); }
trap stop_all EXIT

# link_stats: every link's qdisc counters (bytes, packets, drops) in both directions.
link_stats() {
  for h in $(seq 1 $HOSTS); do
    echo "h$h out: $(ip netns exec "h$h" tc -s qdisc show dev eth0 | grep -m1 Sent)"
    echo "h$h in:  $(tc -s qdisc show dev "veth$h" | grep -m1 Sent)"
  done
}

# in_host H CMD...: runs CMD in host H's namespace.
in_host() { local h=$1; shift; ip netns exec "h$h" "$@"; }

# wait_all NAME: waits for PIDS up to RUN_TIMEOUT, then ends what is left; 0 when all exited 0.
wait_all() {
  local name=$1 deadline=$((SECONDS + RUN_TIMEOUT)) rc=0
  for p in "${PIDS[@]}"; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  done
  if [ $SECONDS -ge $deadline ]; then
    echo "cluster.sh: $name did not end within ${RUN_TIMEOUT}s; stopping it" >&2
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    sleep 1
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  fi
  for p in "${PIDS[@]}"; do wait "$p" || rc=1; done
  PIDS=()
  return $rc
}

# tag NAME < JSON lines: appends them to RESULTS with the repetition and the run's name.
tag() { grep '^{' | sed "s/^{/{\"rep\":$rep,\"run\":\"$1\",/" >>"$RESULTS"; }

# start_zps_roles NAME PORT: the scheduler and the servers of run NAME, on PORT; sets ZENV, the
# environment (DMLC_*, the zps settings) its workers get too.
start_zps_roles() {
  local name=$1 port=$2 root; root=$(addr "$(server_host 0)")
  ZENV=(env GLOG_logtostderr=1 DMLC_PS_ROOT_URI="$root" DMLC_PS_ROOT_PORT="$port" DMLC_NUM_SERVER="$SERVERS"
        DMLC_NUM_WORKER="$WORKERS" "${ZPS_SET[@]}")
  [ "$TRACE" = 0 ] || ZENV+=(ZPS_TRACE_ON=1 ZPS_TRACE_DIR="$OUT_DIR/trace-$name-$rep" ZPS_TRACE_END_STEP=1000)
  in_host "$(server_host 0)" "${ZENV[@]}" DMLC_ROLE=scheduler DMLC_NODE_HOST="$root" "$ZPS" >"$OUT_DIR/$name.scheduler.log" 2>&1 &
  PIDS+=($!)
  for i in $(seq 0 $((SERVERS - 1))); do
    local h; h=$(server_host "$i")
    in_host "$h" "${ZENV[@]}" DMLC_ROLE=server DMLC_NODE_HOST="$(addr $h)" "$ZPS" >"$OUT_DIR/$name.server$i.log" 2>&1 &
    PIDS+=($!)
  done
}

run_zps() {
  local name=$1
  start_zps_roles "$name" $((9000 + rep))
  rm -f "$OUT_DIR/$name.json"
  local what=(--sizes "$SIZES" --min_time "$MIN_TIME" --min_iters 3)
  [ -z "$MODEL" ] || what=(--model "$MODEL" --compute_ms "$COMPUTE_MS" --link_mbit "$(mbit "$RATE")" --min_iters "$ITERS"
                           --warmup_iters 1)
  for i in $(seq 0 $((WORKERS - 1))); do
    local h; h=$(worker_host "$i")
    in_host "$h" "${ZENV[@]}" DMLC_ROLE=worker DMLC_WORKER_ID="$i" DMLC_NODE_HOST="$(addr $h)" "$ZPS" bench \
      "${what[@]}" --json "$OUT_DIR/$name.w$i.json" >"$OUT_DIR/$name.worker$i.log" 2>&1 &
    PIDS+=($!)
  done
  wait_all "$name" || echo "cluster.sh: $name failed (see $OUT_DIR/$name.*.log)" >&2
  link_stats >"$OUT_DIR/$name.links.txt"
  [ -s "$OUT_DIR/$name.w0.json" ] && tag "$name" <"$OUT_DIR/$name.w0.json"
}

# The hosts MPI and Gloo run on: the worker hosts, one rank each.
run_mpi() {
  local name=$1 extra=("${@:2}") first; first=$(worker_host 0)
  : >"$OUT_DIR/hostfile"
  for i in $(seq 0 $((WORKERS - 1))); do echo "$(addr "$(worker_host "$i")") slots=1" >>"$OUT_DIR/hostfile"; done
  # mpirun starts its remote daemons through this instead of ssh: host 10.78.0.H is namespace hH.
  printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "h${host##*.}" sh -c "$*"\n' >"$OUT_DIR/netns-agent"
  chmod +x "$OUT_DIR/netns-agent"
  in_host "$first" timeout --kill-after=10 "$RUN_TIMEOUT" mpirun --allow-run-as-root -np "$WORKERS" \
    --hostfile "$OUT_DIR/hostfile" --map-by node --mca plm_rsh_agent "$OUT_DIR/netns-agent" \
    --mca plm_rsh_no_tree_spawn 1 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 "${extra[@]}" "$OUT_DIR/mpi_allreduce" "$SIZES" "$MIN_TIME" \
    >"$OUT_DIR/$name.log" 2>&1 || echo "cluster.sh: $name failed (see $OUT_DIR/$name.log)" >&2
  tag "$name" <"$OUT_DIR/$name.log"
}

run_gloo() {
  local name=$1 master; master=$(addr "$(worker_host 0)")
  for i in $(seq 0 $((WORKERS - 1))); do
    in_host "$(worker_host "$i")" env GLOO_SOCKET_IFNAME=eth0 $PY "$ROOT/tools/bench/gloo_allreduce.py" \
      "$i" "$WORKERS" "$master" $((29500 + rep)) "$SIZES" "$MIN_TIME" >"$OUT_DIR/$name.rank$i.log" 2>&1 &
    PIDS+=($!)
  done
  wait_all "$name" || echo "cluster.sh: $name failed (see $OUT_DIR/$name.rank*.log)" >&2
  tag "$name" <"$OUT_DIR/$name.rank0.log"
}

# torch_args MODEL: the arguments of tools/bench/torch_compare.py for one run of MODEL.
torch_args() {
  local batch=$BATCH
  [ -n "$batch" ] || { [ "$1" = resnet50 ] && batch=16 || batch=32; }
  echo --model "$1" --batch-size "$batch" --image-size "$IMAGE_SIZE" --steps "$STEPS" --warmup "$WARMUP" --reps 1 \
    --compute-steps "$COMPUTE_STEPS"
}

# run_torch SYSTEM MODEL: one training run of MODEL, SYSTEM zps (zps.torch's DistributedOptimizer, the
# scheduler and servers as run_zps starts them), ddp-zps (DistributedDataParallel over the backend
# "zps", the same scheduler and servers) or ddp (DistributedDataParallel over Gloo), a worker on each
# worker host; rank 0's JSON line goes to RESULTS.
run_torch() {
  local system=$1 model=$2 name="torch_$1_$2_round$rep" m port i h  # logs of every round kept
  m=$(tr , '\n' <<<"$TORCH" | grep -nx "$model" | cut -d: -f1)
  port=$((10 * rep + m))
  local driver=(/usr/bin/env PYTHONPATH="$BUILD_DIR/python" $PY "$ROOT/tools/bench/torch_compare.py" --system "$system"
                $(torch_args "$model") --label "$system")
  if [ "$system" != ddp ]; then
    start_zps_roles "$name" $(($([ "$system" = zps ] && echo 9100 || echo 9500) + port))
    for i in $(seq 0 $((WORKERS - 1))); do
      h=$(worker_host "$i")
      # DDP's env:// rendezvous needs torch's store (MASTER_*) whatever the backend, as with Gloo.
      in_host "$h" "${ZENV[@]}" DMLC_ROLE=worker DMLC_WORKER_ID="$i" DMLC_NODE_HOST="$(addr $h)" \
        MASTER_ADDR="$(addr "$(worker_host 0)")" MASTER_PORT=$((29300 + port)) "${driver[@]}" \
        >"$OUT_DIR/$name.worker$i.log" 2>&1 &
      PIDS+=($!)
    done
  else
    for i in $(seq 0 $((WORKERS - 1))); do
      in_host "$(worker_host "$i")" env RANK="$i" WORLD_SIZE="$WORKERS" MASTER_ADDR="$(addr "$(worker_host 0)")" \
        MASTER_PORT=$((29600 + port)) GLOO_SOCKET_IFNAME=eth0 "${driver[@]}" >"$OUT_DIR/$name.worker$i.log" 2>&1 &
      PIDS+=($!)
    done
  fi
  wait_all "$name" || echo "cluster.sh: $name failed (see $OUT_DIR/$name.*.log)" >&2
  link_stats >"$OUT_DIR/$name.links.txt"
  cat "$OUT_DIR/$name".worker*.log | tag "$name"
}

# run_dlrm SYSTEM: one DLRM training run, SYSTEM zps (examples/torch/train_dlrm.py on each worker host,
# the scheduler and servers as run_zps starts them) or ddp (tools/bench/dlrm_compare.py --system ddp:
# DistributedDataParallel over Gloo on the same worker hosts); rank 0's JSON line goes to RESULTS.
run_dlrm() {
  local system=$1 name="dlrm_$1_round$rep" i h
  local args=(--scale "$DLRM_SCALE" --steps "$DLRM_STEPS" --warmup 10 --test-rows "$DLRM_TEST_ROWS" --seed "$rep")
  local extra
  read -ra extra <<<"$DLRM_ARGS"
  args+=("${extra[@]}")
  local python=(/usr/bin/env PYTHONPATH="$BUILD_DIR/python" $PY)
  if [ "$system" = zps ]; then
    start_zps_roles "$name" $((9700 + rep))
    for i in $(seq 0 $((WORKERS - 1))); do
      h=$(worker_host "$i")
      in_host "$h" "${ZENV[@]}" DMLC_ROLE=worker DMLC_WORKER_ID="$i" DMLC_NODE_HOST="$(addr $h)" "${python[@]}" \
        "$ROOT/examples/torch/train_dlrm.py" "${args[@]}" --json >"$OUT_DIR/$name.worker$i.log" 2>&1 &
      PIDS+=($!)
    done
  else
    for i in $(seq 0 $((WORKERS - 1))); do
      in_host "$(worker_host "$i")" env RANK="$i" WORLD_SIZE="$WORKERS" MASTER_ADDR="$(addr "$(worker_host 0)")" \
        MASTER_PORT=$((29800 + rep)) GLOO_SOCKET_IFNAME=eth0 "${python[@]}" "$ROOT/tools/bench/dlrm_compare.py" \
        --system ddp "${args[@]}" >"$OUT_DIR/$name.worker$i.log" 2>&1 &
      PIDS+=($!)
    done
  fi
  wait_all "$name" || echo "cluster.sh: $name failed (see $OUT_DIR/$name.*.log)" >&2
  link_stats >"$OUT_DIR/$name.links.txt"
  cat "$OUT_DIR/$name".worker*.log | tag "$name"
}

# mbit RATE: the rate in Mbit/s (200mbit -> 200, 1gbit -> 1000, 500kbit -> 0.5).
mbit() { echo "$1" | sed -E 's/^([0-9]+)(kbit|mbit|gbit)$/\1 \2/' | { read -r n u
  case $u in kbit) echo "$n" | awk '{print $1 / 1000}' ;; mbit) echo "$n" ;; gbit) echo $((n * 1000)) ;; esac; }; }

# The zps settings this run gives (none: zps's defaults), and those already in the environment.
ZPS_SET=()
[ -z "$PARTITION" ] || ZPS_SET+=(ZPS_PARTITION_BYTES="$PARTITION")
if [ "$CREDIT" = 0 ]; then ZPS_SET+=(ZPS_PRIORITY=0); elif [ -n "$CREDIT" ]; then ZPS_SET+=(ZPS_PRIORITY=1 ZPS_CREDIT_BYTES="$CREDIT"); fi
SETTINGS="${ZPS_SET[*]} $(env | grep -E '^ZPS_' | grep -vE '^ZPS_(TRACE_ON|TRACE_DIR|TRACE_END_STEP)=' | tr '\n' ' ')"
SETTINGS=$(echo "$SETTINGS" | xargs)
SETTINGS="zps settings: ${SETTINGS:-none (defaults)}"

if [ -n "$MODEL" ]; then
  echo "cluster.sh: $MODEL overlap, $WORKERS worker hosts, $SERVERS server hosts, links at $RATE${DELAY:+ + $DELAY delay}, compute $COMPUTE_MS, $SETTINGS, $REPEATS repetitions"
  for rep in $(seq 1 "$REPEATS"); do
    echo "cluster.sh: repetition $rep of $REPEATS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    run_zps "overlap$rep"
    grep -E '^(#|goal:|  )' "$OUT_DIR/overlap$rep.worker0.log" | grep -vE '^# (peak RSS|Out of bounds)'
    if [ "$TRACE" = 1 ]; then
      compute=$(sed -nE 's/.*simulated compute ([0-9.]+) ms per iteration.*/\1/p' "$OUT_DIR/overlap$rep.worker0.log" | head -1)
      echo "# where the forward pass waited: $OUT_DIR/trace-overlap$rep-$rep"
      $PY "$ROOT/tools/bench/overlap_trace.py" "$OUT_DIR/trace-overlap$rep-$rep" "${compute:-0}" || rc=1
    fi
  done
  exit "${rc:-0}"
fi

if [ -n "$DLRM" ]; then
  echo "cluster.sh: DLRM at scale $DLRM_SCALE, $DLRM_STEPS steps of $WORKERS x 512 rows, $WORKERS worker hosts, $SERVERS server $([ "$LAYOUT" = separate ] && echo hosts || echo "processes on the worker hosts"), links at $RATE${DELAY:+ + $DELAY delay}, $SETTINGS, $REPEATS rounds of zps and DDP/Gloo${DLRM_ARGS:+, both with $DLRM_ARGS}"
  for rep in $(seq 1 "$REPEATS"); do
    echo "cluster.sh: round $rep of $REPEATS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    # Each round starts with the other system, so a load that rises or falls favours neither.
    if [ $((rep % 2)) = 1 ]; then run_dlrm zps; run_dlrm ddp; else run_dlrm ddp; run_dlrm zps; fi
  done
  $PY "$ROOT/tools/bench/dlrm_cluster_table.py" "$RESULTS" "$RATE" "$LAYOUT" "$WORKERS" "$SERVERS"
  exit $?
fi

if [ -n "$TORCH" ]; then
  echo "cluster.sh: PyTorch training, models $TORCH, $WORKERS worker hosts, $SERVERS server $([ "$LAYOUT" = separate ] && echo hosts || echo "processes on the worker hosts"), links at $RATE${DELAY:+ + $DELAY delay}, $SETTINGS, $REPEATS rounds of zps.torch, DDP over zps and DDP/Gloo per model"
  for model in $(tr , ' ' <<<"$TORCH"); do echo "cluster.sh: $model: torch_compare.py $(torch_args "$model")"; done
  for rep in $(seq 1 "$REPEATS"); do
    for model in $(tr , ' ' <<<"$TORCH"); do
      echo "cluster.sh: round $rep of $REPEATS, $model (load: $(cut -d' ' -f1-3 /proc/loadavg))"
      run_torch zps "$model"
      run_torch ddp-zps "$model"
      run_torch ddp "$model"
    done
  done
  $PY "$ROOT/tools/bench/torch_cluster_table.py" "$RESULTS" "$RATE" "$LAYOUT" "$WORKERS" "$SERVERS" "$TORCH"
  exit $?
fi

HALF=$(echo "$RATE" | sed -E 's/^([0-9]+)(.*)$/\1 \2/' | { read -r n u; echo "$((n / 2))$u"; })
echo "cluster.sh: $WORKERS worker hosts, $SERVERS server $([ "$LAYOUT" = separate ] && echo hosts || echo "processes on the worker hosts"), links at $RATE${DELAY:+ + $DELAY delay}, sizes $SIZES, $SETTINGS, $REPEATS repetitions"
for rep in $(seq 1 "$REPEATS"); do
  echo "cluster.sh: repetition $rep of $REPEATS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  run_zps zps
  if [ "$MPI" = 1 ]; then
    run_mpi mpi_ring --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
    run_mpi mpi_default
  fi
  [ "$GLOO" = 1 ] && run_gloo gloo
  if [ "$HALF_RATE" = 1 ]; then
    shape_all "$HALF" && run_zps zps_half
    shape_all "$RATE"
  fi
done

# The delay variant: the same links with DELAY_VARIANT more on each, where the kernel has netem.
VARIANT=""
if [ -n "$DELAY_VARIANT" ] && [ -z "$DELAY" ]; then
  if ! tc qdisc replace dev veth1 parent 1:1 handle 10: netem delay "$DELAY_VARIANT" 2>/dev/null; then
    VARIANT="skipped: this kernel has no netem qdisc, so link delay cannot be emulated here"
  else
    VARIANT=$DELAY_VARIANT
    DELAY=$DELAY_VARIANT
    shape_all "$RATE" || fail "cannot add $DELAY_VARIANT of delay to the links"
    for rep in $(seq 1 "$REPEATS"); do
      echo "cluster.sh: delay variant ($DELAY_VARIANT per link), repetition $rep of $REPEATS"
      run_zps zps_delay
      [ "$MPI" = 1 ] && run_mpi mpi_ring_delay --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
    done
  fi
fi
[[ $VARIANT == skipped* ]] && echo "cluster.sh: delay variant $VARIANT"

$PY "$ROOT/tools/bench/cluster_table.py" "$RESULTS" "$RATE" "$LAYOUT" "$WORKERS" "$SERVERS" "$SIZES" "$HALF_RATE" "$MPI" "$GLOO" "$VARIANT"
rc=$?
if [ "$TRACE" = 1 ]; then
  for rep in $(seq 1 "$REPEATS"); do
    echo
    echo "# repetition $rep, zps at $RATE: $OUT_DIR/trace-zps-$rep"
    $PY "$ROOT/tools/bench/cluster_trace.py" "$OUT_DIR/trace-zps-$rep" "$RATE" "$(tr , '\n' <<<"$SIZES" | sort -n | head -1)" || rc=1
  done
fi
exit $rc
