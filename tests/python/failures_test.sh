#!/usr/bin/env bash
# A failing worker ends the job non-zero and every other worker is told which one failed and why:
#  1. the same name with different shapes (of one element count) on two workers: both raise, naming the tensor;
#  2. a worker's script raises: the other worker's push_pull (or init, when it had not joined yet) raises
#     ZpsJobAborted naming it and its exception.
# Usage: failures_test.sh <zps binary>
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ZPS=$1
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

run() {  # run <mode>: the job's output in $OUT, its exit code in $code
  "$HERE/launch.sh" "$ZPS" 1 2 "$HERE/failing_worker.py" "$1" >"$OUT" 2>&1
  code=$?
  if [ "$code" -eq 77 ]; then cat "$OUT"; exit 77; fi
  grep -E "raised|no error|scheduler.*failed" "$OUT"
}
expect() {  # expect <regex> <what>
  grep -qE "$1" "$OUT" || { echo "FAILED: $2"; tail -30 "$OUT"; exit 1; }
  echo "ok: $2"
}

echo "== 1. tensor 'w' of shape [2, 3] on worker 0, [3, 2] on worker 1"
run shape
[ "$code" -ne 0 ] || { echo "FAILED: the job exited 0"; exit 1; }
echo "ok: the job exited $code"
for r in 0 1; do
  expect "\[worker $r\] worker $r: raised Zps[A-Za-z]+: .*'w'" "worker $r raised naming tensor 'w'"
done
for r in 0 1; do
  expect "\[worker $r\] worker $r: raised ZpsInvalidArgument: .*rank 0: allreduce of 'w' with shape \[2, 3\] float32.*rank 1: allreduce of 'w' with shape \[3, 2\] float32" \
    "worker $r's message gives both ranks' shapes (same element count)"
done

echo "== 2. worker 1's script raises RuntimeError"
run raise
[ "$code" -ne 0 ] || { echo "FAILED: the job exited 0"; exit 1; }
echo "ok: the job exited $code"
expect "\[worker 1\] RuntimeError: boom in the training loop" "worker 1 printed its traceback"
expect "\[worker 0\] worker 0: raised ZpsJobAborted: .*worker 1 .*failed: worker 1's script raised RuntimeError: boom in the training loop" \
  "worker 0's init or push_pull raised ZpsJobAborted naming worker 1 and its exception"
echo "failures test: all checks passed"
