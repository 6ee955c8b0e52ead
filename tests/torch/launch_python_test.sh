#!/usr/bin/env bash
# zps launch with Python workers, as a user runs it: no PYTHONPATH, and a `python3` first on PATH that
# cannot import torch.
#  1. The workers import zps from the python/ folder beside the binary's bin/ (a copy of the build's
#     layout, so the package cannot come from anywhere else), run as /usr/bin/python3 (launch says so
#     in a line), join the job and end it: launch exits 0.
#  2. A script that raises on worker 1: launch exits 1, and the scheduler, the server and worker 0 all
#     name worker 1 and its error (launch gives them a grace period after the first exit to say so).
#  3. No launcher (the BytePS way): zps scheduler and server, and two `python3 job.py` workers with the
#     DMLC environment and PYTHONPATH, all exit 0.
# Usage: launch_python_test.sh <build dir>. Skipped (77) when /usr/bin/python3 cannot import torch.
set -uo pipefail
BUILD=$1
if ! why=$(/usr/bin/python3 -c "import torch" 2>&1); then
  echo "SKIPPED: /usr/bin/python3 cannot import torch (install python3-torch): ${why##*$'\n'}"
  exit 77
fi
[ -f "$BUILD/python/zps/__init__.py" ] || { echo "FAILED: $BUILD/python/zps is not built (target zps_python)"; exit 1; }
# Inside the build tree: a hard link keeps /proc/self/exe (what launch looks beside) in the copy.
T=$(mktemp -d "$BUILD/launch-python-test.XXXXXX")
pids=()  # processes of case 3, stopped by pid if the test ends early
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/nopython"
ln "$BUILD/bin/zps" "$T/bin/zps" 2>/dev/null || cp "$BUILD/bin/zps" "$T/bin/zps"
cp -r "$BUILD/python" "$T/python"
# A python3 without Debian's packages: -S leaves dist-packages (so torch) off sys.path.
printf '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n' >"$T/nopython/python3"
chmod +x "$T/nopython/python3"
cat >"$T/job.py" <<'EOF'
import sys
import torch
import zps.torch as bps
bps.init()
print("worker %d: zps from %s, torch %s" % (bps.rank(), bps.__file__, torch.__version__), flush=True)
if len(sys.argv) > 1 and bps.rank() == 1:
    raise RuntimeError("boom on purpose")
bps.push_pull(torch.ones(4), name="t")
bps.shutdown()
EOF
OUT=$T/out
fail() { echo "FAILED: $1"; tail -40 "$OUT"; exit 1; }
expect() { grep -qE "$1" "$OUT" || fail "$2"; echo "ok: $2"; }

run() {
  env -u PYTHONPATH PATH="$T/nopython:$PATH" timeout 300 "$T/bin/zps" launch --servers 1 --workers 2 --progress 0 \
    -- python3 "$T/job.py" "$@" >"$OUT" 2>&1
  code=$?
}

echo "== 1. no PYTHONPATH, a python3 without torch first on PATH"
run
[ "$code" -eq 0 ] || fail "launch exited $code, expected 0"
echo "ok: launch exited 0"
expect "zps launch: the zps Python package is in $T/python " "launch names the package folder beside bin/"
expect "zps launch: python3 on PATH \($T/nopython/python3\) cannot import torch; workers run /usr/bin/python3" \
  "launch says it runs Debian's python3 instead"
for r in 0 1; do
  expect "\[worker $r\] worker $r: zps from $T/python/zps/torch/__init__.py, torch " "worker $r imported zps from there"
done

echo "== 2. worker 1's script raises"
run raise
[ "$code" -eq 1 ] || fail "launch exited $code, expected 1 (the failed script's exit code)"
echo "ok: launch exited 1"
expect "\[worker 1\] RuntimeError: boom on purpose" "worker 1's traceback is shown"
# Worker 1 ends the job through the scheduler, which tells every node; which process exits first
# varies, so launch's "first failure" may be the scheduler. Every one names worker 1.
for who in scheduler "server 0" "worker 0"; do
  expect "\[$who\] .*worker 1 .*failed: worker 1's script raised RuntimeError: boom on purpose" "$who names worker 1 and its error"
done
# Whether a worker also ends before launch's grace runs out depends on the machine's load; that it
# said why before launch stopped it is what counts, and the checks above saw that.
echo "== 3. without launch, the BytePS way: scheduler and server are zps, workers run the script"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2 PYTHONPATH=$T/python
DMLC_ROLE=scheduler timeout 120 "$T/bin/zps" >"$T/scheduler.log" 2>&1 & pids+=($!)
DMLC_ROLE=server timeout 120 "$T/bin/zps" >"$T/server.log" 2>&1 & pids+=($!)
for r in 0 1; do
  DMLC_ROLE=worker DMLC_WORKER_ID=$r timeout 120 /usr/bin/python3 "$T/job.py" >"$T/worker$r.log" 2>&1 & pids+=($!)
done
names=(scheduler server worker0 worker1)
for i in 0 1 2 3; do
  wait "${pids[$i]}"
  code=$?
  OUT=$T/${names[$i]}.log
  [ "$code" -eq 0 ] || fail "${names[$i]} exited $code"
done
for r in 0 1; do
  OUT=$T/worker$r.log
  expect "^worker $r: zps from $T/python/zps/torch/__init__.py" "worker $r joined with DMLC_ROLE=worker DMLC_WORKER_ID=$r"
done
echo "ok: scheduler, server and both workers exited 0"
echo "launch python test: all checks passed"
