#!/usr/bin/env bash
# zps against the limits of this machine, in one run: the loopback bounds (iperf3 TCP, raw ZeroMQ
# request-reply and stream, a single-thread a[i] += b[i]), MPI_Allreduce from Debian's Open MPI, and
# zps bench at the same sizes and process counts. The whole set is repeated REPEATS times, one after
# the other, and the table shows medians, so the ratios hold on a noisy machine.
#
#   tools/bench/compare.sh                 # BUILD_DIR=build REPEATS=3 OUT_DIR=$BUILD_DIR/compare
#   BASELINE=/path/to/old/zps tools/bench/compare.sh   # also an older zps, in the same repetitions:
#                                                      # a before and an after table, same references
#   LATENCY_ONLY=1 tools/bench/compare.sh  # only the round trips at 4 KiB, 64 KiB and 256 KiB (quick;
#                                          # latency is noisy, so use REPEATS=5 or more)
#   LATENCY_ONLY=1 LATENCY_CPU=0 tools/bench/compare.sh  # the same, every process of the round
#                                          # trips on CPU 0 (taskset): one speed per size, run to run
#
# Latency is compared like with like: a 1x1 zps push-pull on one host uses the server's ipc://
# socket, so its p50 is set against a raw ZeroMQ round trip of the same size over ipc://, and a run
# with ZPS_IPC=0 against the same over TCP. Unpinned, on a 2-core machine each run of either lands
# on one of two or three speeds (where its threads happen to be scheduled), so a ratio of medians
# swings; LATENCY_CPU=N runs both sides of every latency row on CPU N alone, where they are steady.
#
# Needs a built zps, g++ and libzmq (the build's own dependencies), python3 for the table, and
# iperf3 + Open MPI (openmpi-bin, libopenmpi-dev), which it installs with apt-get when they are
# missing and it runs as root; they are not zps dependencies. A reference that cannot run is shown
# as '-' and its goals as 'n/a'. Open MPI binds wildcard addresses, so it runs inside `unshare -n`
# where only loopback exists.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/compare}
REPEATS=${REPEATS:-3}
ZPS=$BUILD_DIR/bin/zps
BASELINE=${BASELINE:-}
RESULTS=$OUT_DIR/results.jsonl
mkdir -p "$OUT_DIR"
: >"$RESULTS"
[ -x "$ZPS" ] || { echo "compare.sh: $ZPS not found; build first (tools/build.sh)" >&2; exit 2; }
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || { echo "compare.sh: BASELINE=$BASELINE is not an executable" >&2; exit 2; }

# Sizes and counts of the goals in the performance issue.
LAT_SIZES="4096 65536 262144"    # 1 server x 1 worker push-pull p50 against a raw ZeroMQ round trip
BIG_SIZES=4194304,67108864       # 1 server x 1 worker goodput
LATENCY_ONLY=${LATENCY_ONLY:-0}
LATENCY_CPU=${LATENCY_CPU:-}
PIN=()  # the latency rows' command prefix
if [ -n "$LATENCY_CPU" ]; then
  taskset -c "$LATENCY_CPU" true 2>/dev/null ||
    { echo "compare.sh: LATENCY_CPU=$LATENCY_CPU is not a CPU taskset can use here (e.g. 0)" >&2; exit 2; }
  PIN=(taskset -c "$LATENCY_CPU")
  echo "compare.sh: the latency rows run on CPU $LATENCY_CPU only (LATENCY_CPU), raw ZeroMQ and zps alike"
fi
BENCH_PREFIX=()  # set to PIN while latency() runs zps
MPI_SIZES=1048576,4194304,16777216  # 2 workers x 2 servers against MPI_Allreduce -np 2
SUM_SIZE=4194304                 # a server sums partitions of ZPS_PARTITION_BYTES (4 MiB)

if [ "$LATENCY_ONLY" = 1 ]; then
  :
elif ! command -v iperf3 >/dev/null || ! command -v mpicxx >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "compare.sh: installing iperf3 and Open MPI (not zps dependencies)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev iperf3 \
      >"$OUT_DIR/apt.log" 2>&1 || echo "compare.sh: apt-get failed (see $OUT_DIR/apt.log); those references are skipped"
  else
    echo "compare.sh: iperf3 or mpicxx missing and cannot install them; those references are skipped"
  fi
fi

g++ -O2 -std=c++17 -o "$OUT_DIR/loopback" "$ROOT/tools/bench/loopback.cc" -lzmq || exit 1
HAVE_MPI=0
if [ "$LATENCY_ONLY" != 1 ] && command -v mpicxx >/dev/null && command -v unshare >/dev/null &&
   mpicxx -O2 -std=c++17 -o "$OUT_DIR/mpi_allreduce" "$ROOT/tools/bench/mpi_allreduce.cc"; then
  HAVE_MPI=1
fi

# run NAME COMMAND...: appends the command's JSON lines, tagged with the repetition, to $RESULTS.
run() {
  local name=$1
  shift
  if ! timeout --kill-after=10 300 "$@" >"$OUT_DIR/$name.out" 2>"$OUT_DIR/$name.err"; then
    echo "compare.sh: $name failed (see $OUT_DIR/$name.err)" >&2
  fi
  grep '^{' "$OUT_DIR/$name.out" | sed "s/^{/{\"rep\":$rep,\"run\":\"$name\",/" >>"$RESULTS"
}

# bench NAME SERVERS WORKERS ARGS...: zps bench through zps launch; worker 0's JSON is the result.
# With BASELINE, the older zps runs the same right after, as base_NAME.
bench() {
  run_bench "$ZPS" "$@"
  [ -z "$BASELINE" ] || run_bench "$BASELINE" "base_$1" "${@:2}"
}

# The same over TCP (ZPS_IPC=0, NAME_tcp), for the baseline too when it knows ZPS_IPC (older builds
# always used ipc on one host).
BASE_HAS_IPC=0
# grep reads all of it: with pipefail, an early exit (grep -q) would fail the pipe by SIGPIPE.
[ -n "$BASELINE" ] && "$BASELINE" help env 2>/dev/null | grep ZPS_IPC >/dev/null && BASE_HAS_IPC=1
bench_tcp() {
  ZPS_IPC=0 run_bench "$ZPS" "$1_tcp" "${@:2}"
  [ "$BASE_HAS_IPC" = 0 ] || ZPS_IPC=0 run_bench "$BASELINE" "base_$1_tcp" "${@:2}"
}

# latency: raw ZeroMQ round trips and 1x1 zps push-pulls at LAT_SIZES, over ipc (zps's default on
# one host) and TCP (ZPS_IPC=0), interleaved so that both see the same load. A BASELINE older than
# ZPS_IPC always used ipc, so only its ipc run is made.
latency() {
  local size sizes=${LAT_SIZES// /,}
  for size in $LAT_SIZES; do
    run "zmq_rr_ipc_$size" "${PIN[@]}" "$OUT_DIR/loopback" rr "$size" 2000 ipc
    run "zmq_rr_tcp_$size" "${PIN[@]}" "$OUT_DIR/loopback" rr "$size" 2000 tcp
  done
  BENCH_PREFIX=("${PIN[@]}")
  bench bench_lat 1 1 --sizes "$sizes"
  bench_tcp bench_lat 1 1 --sizes "$sizes"
  BENCH_PREFIX=()
}

run_bench() {
  local zps=$1 name=$2 servers=$3 workers=$4
  shift 4
  rm -f "$OUT_DIR/$name.json"
  timeout --kill-after=10 300 "${BENCH_PREFIX[@]}" "$zps" launch --servers "$servers" --workers "$workers" --timeout 280 -- \
    bench --min_time 0.5 --json "$OUT_DIR/$name.json" "$@" >"$OUT_DIR/$name.log" 2>&1 ||
    echo "compare.sh: $name failed (see $OUT_DIR/$name.log)" >&2
  [ -s "$OUT_DIR/$name.json" ] && sed "s/^{/{\"rep\":$rep,\"run\":\"$name\",\"test\":\"zps_bench\",/" "$OUT_DIR/$name.json" >>"$RESULTS"
}

iperf() {
  command -v iperf3 >/dev/null || return 0
  local port=$((20000 + RANDOM % 20000))
  iperf3 -s -1 -p $port >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  iperf3 -c 127.0.0.1 -p $port -t 2 -J >"$OUT_DIR/iperf3.out" 2>&1
  wait $server 2>/dev/null
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"test":"iperf3","gbs":d["end"]["sum_received"]["bits_per_second"]/8e9}))' \
    "$OUT_DIR/iperf3.out" 2>/dev/null | sed "s/^{/{\"rep\":$rep,\"run\":\"iperf3\",/" >>"$RESULTS"
}

for rep in $(seq 1 "$REPEATS"); do
  echo "compare.sh: repetition $rep of $REPEATS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  latency
  [ "$LATENCY_ONLY" = 1 ] && continue
  iperf
  run zmq_stream "$OUT_DIR/loopback" stream 4M 1
  run add "$OUT_DIR/loopback" add $SUM_SIZE
  bench bench_1x1 1 1 --sizes $BIG_SIZES
  bench bench_2x2 2 2 --sizes $MPI_SIZES
  bench_tcp bench_2x2 2 2 --sizes $MPI_SIZES
  bench model_resnet50 2 2 --model resnet50
  if [ $HAVE_MPI = 1 ]; then
    run mpi unshare -n sh -c "ip link set lo up && mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 \
      --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      '$OUT_DIR/mpi_allreduce' $MPI_SIZES 0.5"
  fi
done

echo
echo "compare.sh: medians of $REPEATS repetitions; load average now $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
python3 - "$RESULTS" "$LATENCY_ONLY" <<'EOF'
import json, statistics, sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
latency_only = sys.argv[2] == "1"

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def ref(test, key, **match):
    return med([r.get(key) for r in rows if r.get("test") == test and all(r.get(k) == v for k, v in match.items())])

def zps(run, key, bytes=None, label=None, top=False):
    out = []
    for r in rows:
        if r.get("run") != run:
            continue
        if top:
            out.append(r.get(key))
            continue
        for row in r["rows"]:
            if (bytes is None or row["bytes"] == bytes) and (label is None or label in row["label"]):
                v = row.get(key)
                out.append(v if v is None or v >= 0 else None)
    return med(out)

def has(run):
    return any(r.get("run") == run for r in rows)

def fmt(v, unit=""):
    return "-" if v is None else (f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}") + unit

def goal(what, mine, reference, ratio, target, higher_is_better):
    if ratio is None:
        verdict = "n/a"
    else:
        verdict = "yes" if (ratio >= target if higher_is_better else ratio <= target) else "NO"
    sign = ">=" if higher_is_better else "<="
    table.append((what, mine, reference, fmt(ratio), f"{sign} {target}", verdict))

# The sizes of the rows, shared by the goal tables and the per-repetition speed-ups.
LATENCY_ROWS = ((4096, "4 KiB"), (65536, "64 KiB"), (262144, "256 KiB"))
GOODPUT_1X1_ROWS = ((4194304, "4 MiB"), (67108864, "64 MiB"))
GOODPUT_2X2_SIZES = (1048576, 4194304, 16777216)

iperf = ref("iperf3", "gbs")
bound = iperf / 2 if iperf else None
add = ref("add", "gbs")

def latency_goals(p):
    for size, name in LATENCY_ROWS:
        runs = (("bench_lat", "ipc"),) if not has(p + "bench_lat_tcp") else (("bench_lat", "ipc"), ("bench_lat_tcp", "tcp"))
        for run, transport in runs:
            lat = zps(p + run, "p50_us", size)
            rr = ref("zmq_rr", "p50_us", bytes=size, transport=transport)
            goal(f"{name} 1x1 pushpull p50 / raw ZeroMQ round trip, {transport}", fmt(lat, " us"), fmt(rr, " us"),
                 lat / rr if lat and rr else None, 1.3, False)

def goals(p):
    global table
    table = []
    latency_goals(p)
    if latency_only:
        return print_table()
    for size, name in GOODPUT_1X1_ROWS:
        g = zps(p + "bench_1x1", "goodput_gbs", size)
        goal(f"1x1 pushpull goodput {name} / (iperf3 / 2)", fmt(g, " GB/s"), fmt(bound, " GB/s"),
             g / bound if g and bound else None, 0.75, True)
    # Over ipc (zps's default on one host) and over TCP (ZPS_IPC=0), which a BASELINE older than
    # ZPS_IPC does not have: there its one run is the ipc row.
    runs = (("bench_2x2", "ipc"),) if not has(p + "bench_2x2_tcp") else (("bench_2x2", "ipc"), ("bench_2x2_tcp", "tcp"))
    for size in GOODPUT_2X2_SIZES:
        for run, transport in runs:
            g = zps(p + run, "goodput_gbs", size)
            m = ref("mpi_allreduce", "algbw_gbs", bytes=size)
            goal(f"2x2 goodput per worker {size >> 20} MiB / MPI_Allreduce np=2, {transport}", fmt(g, " GB/s"),
                 fmt(m, " GB/s"), g / m if g and m else None, 1.0, True)
    model = zps(p + "model_resnet50", "p50_us", label="tensors")
    fused = zps(p + "model_resnet50", "p50_us", label="fused")
    goal("resnet50 round / one fused tensor (2x2, p50)", fmt(model and model / 1000, " ms"),
         fmt(fused and fused / 1000, " ms"), model / fused if model and fused else None, 1.2, False)
    s = zps(p + "bench_2x2", "sum_gbs", 4194304)
    goal("server summation 4 MiB / single-thread a[i] += b[i]", fmt(s, " GB/s"), fmt(add, " GB/s"),
         s / add if s and add else None, 0.8, True)
    for run, what in (("bench_1x1", "1x1 sizes"), ("bench_2x2", "2x2 sizes"), ("model_resnet50", "resnet50 2x2")):
        rss = zps(p + run, "server_peak_rss_bytes", top=True)
        declared = zps(p + run, "declared_bytes", top=True)
        allowed = 2.5 * declared + 64 * 2**20 if declared else None
        goal(f"server peak RSS / (2.5 x its key bytes + 64 MiB), {what}", fmt(rss and rss / 2**20, " MiB"),
             fmt(allowed and allowed / 2**20, " MiB"), rss / allowed if rss and allowed else None, 1.0, False)
    print_table()

def print_table():
    print()
    print("| what | zps | reference | ratio | goal | met |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in table:
        print("| " + " | ".join(row) + " |")

def per_rep(run, key, size=None, label=None):
    """{repetition: value} of one zps measurement."""
    out = {}
    for r in rows:
        if r.get("run") == run:
            for row in r["rows"]:
                if (size is None or row["bytes"] == size) and (label is None or label in row["label"]):
                    if row.get(key) is not None and row[key] > 0:
                        out[r["rep"]] = row[key]
    return out

def speedups():
    """After against BASELINE, repetition by repetition: both ran back to back in each, under the same
    load, so the ratio within a repetition is steadier than a ratio of the two columns' medians (a
    2-core machine moves a goodput by 2x from one repetition to the next)."""
    measures = []
    for run, transport in (("bench_lat", "ipc"), ("bench_lat_tcp", "tcp")):
        for size, name in LATENCY_ROWS:
            measures.append((f"{name} 1x1 pushpull p50, {transport}", run, "p50_us", size, None, False))
    if not latency_only:
        for size, name in GOODPUT_1X1_ROWS:
            measures.append((f"1x1 pushpull goodput {name}", "bench_1x1", "goodput_gbs", size, None, True))
        for size in GOODPUT_2X2_SIZES:
            for run, transport in (("bench_2x2", "ipc"), ("bench_2x2_tcp", "tcp")):
                measures.append((f"2x2 goodput per worker {size >> 20} MiB, {transport}", run, "goodput_gbs", size,
                                 None, True))
        measures.append(("resnet50 round (2x2, p50)", "model_resnet50", "p50_us", None, "tensors", False))
    print("\nafter against BASELINE, per repetition (speed-up: > 1 is faster; median, lowest, highest):\n")
    print("| what | speed-up | lowest | highest | repetitions |")
    print("| --- | --- | --- | --- | --- |")
    for what, run, key, size, label, higher in measures:
        after, before = per_rep(run, key, size, label), per_rep("base_" + run, key, size, label)
        both = sorted(set(after) & set(before))
        if not both:
            continue
        ratios = [(after[k] / before[k]) if higher else (before[k] / after[k]) for k in both]
        print(f"| {what} | {statistics.median(ratios):.3f} | {min(ratios):.3f} | {max(ratios):.3f} | {len(both)} |")

has_baseline = any(r.get("run", "").startswith("base_") for r in rows)
if has_baseline:
    print("\nbefore (BASELINE):")
    goals("base_")
    print("\nafter:")
goals("")
if has_baseline:
    speedups()
print()
for what, mine, reference, ratio, target, verdict in table:
    if what.startswith(("4 KiB", "64 KiB", "256 KiB")):
        met = {"yes": "met", "NO": "NOT met"}.get(verdict, "not measured")
        print(f"goal: {what}: {ratio}x ({target}x) {met}")
if latency_only:
    sys.exit(0)
print(f"also: raw ZeroMQ stream 4 MiB {fmt(ref('zmq_stream', 'gbs'), ' GB/s')}; server RSS right after start "
      f"{fmt((zps('bench_1x1', 'server_start_rss_bytes', top=True) or 0) / 2**20, ' MiB')} (the process before any "
      f"tensor: code and libraries); every measurement is in results.jsonl")
EOF
