#!/usr/bin/env bash
# tools/bench/cluster.sh at its smallest: 2 worker hosts and 2 server hosts in network namespaces, links
# limited with tc, one tiny size, one repetition. Checks that it exits 0, that the table has a zps number
# for the size (zps bench checked every sum: a wrong one is a missing result and exit 1), that MPI's and
# Gloo's columns are filled when they are installed, that it prints its goal lines and (TRACE=1) where a
# round's time went; that DLRM=1 trains both systems and prints its goal line (where torch imports);
# and that a bad setting is refused with a message. SKIPPED (77) where namespaces or tc are not permitted.
#   cluster_smoke_test.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=${1:?usage: cluster_smoke_test.sh REPO_ROOT BUILD_DIR}
build=${2:?usage: cluster_smoke_test.sh REPO_ROOT BUILD_DIR}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
check() { if ! grep -qE "$1" "$out/log"; then echo "FAIL: $2 (no line matching '$1')"; failed=1; fi; }

if RATE=bogus BUILD_DIR="$build" OUT_DIR="$out/run" "$root/tools/bench/cluster.sh" >"$out/bad" 2>&1; then
  echo "FAIL: RATE=bogus was accepted"; failed=1
elif ! grep -q "RATE must look like" "$out/bad"; then
  echo "FAIL: RATE=bogus without its message:"; cat "$out/bad"; failed=1
fi

WORKERS=2 SERVERS=2 SIZES=65536 REPEATS=1 MIN_TIME=0.05 HALF_RATE=0 RATE=1gbit TRACE=1 BUILD_DIR="$build" \
  OUT_DIR="$out/run" timeout --kill-after=10 540 "$root/tools/bench/cluster.sh" >"$out/log" 2>&1
rc=$?
cat "$out/log"
[ $rc = 77 ] && exit 77
if [ $rc != 0 ]; then echo "FAIL: cluster.sh exited $rc"; exit 1; fi
# | size | zps | MPI ring | MPI default | Gloo | ...
check '^\| 0.0625 MiB \| [0-9.]+ \|' "a zps goodput for 64 KiB"
if command -v mpirun >/dev/null && command -v mpicxx >/dev/null; then
  check '^\| 0.0625 MiB \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' "MPI ring and default goodputs"
fi
if /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  check '^\| 0.0625 MiB \| [0-9.]+ \| [^|]+ \| [^|]+ \| [0-9.]+ \|' "a Gloo goodput"
fi
check '^goal: zps goodput / PS bound, 0.0625 MiB, 2 workers x 2 servers: [0-9.]+ \(>= 0.85\) (met|NOT met)$' "the PS-bound goal line"
check '^goal: zps goodput / MPI ring, 0.0625 MiB' "the MPI ring goal line"
# TRACE=1: where the round's time went, from the trace files (size, partition, rounds, 7 more columns).
check '^ +65536 +65536 +[0-9]+( +[0-9.]+){7}$' "the trace summary row of 64 KiB"

if DLRM=1 DLRM_SCALE=2 BUILD_DIR="$build" OUT_DIR="$out/run" "$root/tools/bench/cluster.sh" >"$out/bad" 2>&1 ||
   ! grep -q "DLRM_SCALE must be in" "$out/bad"; then
  echo "FAIL: DLRM_SCALE=2 was not refused with its message:"; cat "$out/bad"; failed=1
fi
if PYTHONPATH="$build/python" /usr/bin/python3 -c 'import torch, zps.torch' 2>/dev/null; then
  # DLRM on the tables of 2 servers against DDP over Gloo: a dozen steps of each, one round.
  DLRM=1 WORKERS=2 SERVERS=2 DLRM_STEPS=12 DLRM_TEST_ROWS=500 REPEATS=1 RATE=1gbit BUILD_DIR="$build" \
    OUT_DIR="$out/dlrm" timeout --kill-after=10 300 "$root/tools/bench/cluster.sh" >"$out/log" 2>&1
  rc=$?
  cat "$out/log"
  [ $rc = 0 ] || { echo "FAIL: DLRM=1 cluster.sh exited $rc"; failed=1; }
  check '^  DDP/Gloo +[0-9]+ +0\.[0-9]{4} +0\.[0-9]{4}$' "DDP's DLRM row (samples/s, AUC, Bayes AUC)"
  check '^  zps +[0-9]+ +0\.[0-9]{4} +0\.[0-9]{4} +[0-9.]+ +[0-9.]+$' "zps's DLRM row with its ratio"
  check '^goal: 2\+2 hosts at 1gbit, DLRM: zps samples/s [0-9.]+x DDP/Gloo \(>= 2.0\) (met|NOT met)$' "the DLRM goal line"
else
  echo "SKIPPED part: the DLRM run needs torch and zps.torch (python3-torch, a build with the Python package)"
fi
[ $failed = 0 ] && echo "PASS"
exit $failed
