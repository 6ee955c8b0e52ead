#!/usr/bin/env bash
# Runs the C API test program (capi_test.c) as the 2 workers of a 2-server job, twice:
#  1. every check passes and the job exits 0;
#  2. worker 1 ends with an error: the job exits non-zero and worker 0's wait says ABORTED naming worker 1.
# Usage: capi_test.sh <zps binary> <capi_test program>
set -uo pipefail
ZPS=$1
PROG=$2
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
export ZPS_PARTITION_BYTES=4096

echo "== 1. sums, tables and bad use through the C API (2 servers, 2 workers)"
"$ZPS" launch --servers 2 --workers 2 --timeout 120 -- "$PROG" 2>&1 | tee "$OUT" | grep -E "capi:|error|FAILED"
code=${PIPESTATUS[0]}
if [ "$code" -ne 0 ]; then echo "FAILED: the job exited $code, expected 0"; tail -40 "$OUT"; exit 1; fi
for r in 0 1; do
  grep -q "\[worker $r\] capi: worker $r: finished with exit code 0" "$OUT" ||
    { echo "FAILED: worker $r did not finish every check"; exit 1; }
done

echo "== 2. worker 1 fails: the job exits non-zero, worker 0 is told which worker failed"
"$ZPS" launch --servers 1 --workers 2 --timeout 120 -- "$PROG" --fail-worker 1 2>&1 | tee "$OUT" | grep -E "capi:|FAILED"
code=${PIPESTATUS[0]}
if [ "$code" -eq 0 ]; then echo "FAILED: the job exited 0 although worker 1 failed"; exit 1; fi
grep -q "\[worker 0\] capi: worker 0: push_pull while worker 1 fails -> ABORTED" "$OUT" ||
  { echo "FAILED: worker 0 did not see ABORTED naming worker 1"; tail -40 "$OUT"; exit 1; }
echo "capi test: the job exited $code (non-zero) and worker 0 named worker 1; all checks passed"
