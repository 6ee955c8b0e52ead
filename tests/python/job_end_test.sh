#!/usr/bin/env bash
# How a job ends when its workers end at different times (zps launch, 1 server, 2 workers):
#  1. rank 0 works alone ALONE_SECONDS (default 20) after rank 1 finished, with ZPS_RENDEZVOUS_TIMEOUT=15:
#     the job completes with exit 0 and nothing is stopped (the finished worker waits ZPS_JOB_END_TIMEOUT,
#     default a day, not the rendezvous timeout).
#  2. the same with ZPS_JOB_END_TIMEOUT=2 and 6 s alone: the finished worker gives up, naming the wait.
#  3. both workers exit 0 without calling init(): launch ends the job at once, exit 0, saying so.
#  4. worker 1 exits 0 without calling init() while worker 0 waits in init(): launch ends the job within
#     seconds (not the rendezvous timeout), exit 1, saying which worker never joined.
# Usage: job_end_test.sh <zps binary>. Skipped (77) when /usr/bin/python3 cannot import torch.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ZPS=$1
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

run() {  # run <mode> [args]: output in $OUT, exit code in $code, seconds in $took
  local start=$SECONDS
  "$HERE/launch.sh" "$ZPS" 1 2 "$HERE/job_end_worker.py" "$@" >"$OUT" 2>&1
  code=$? took=$((SECONDS - start))
  if [ "$code" -eq 77 ]; then cat "$OUT"; exit 77; fi
  echo "-- mode $*: exit $code after $took s"
}
expect() {  # expect <regex> <what>
  grep -qE "$1" "$OUT" || { echo "FAILED: $2"; tail -30 "$OUT"; exit 1; }
  echo "ok: $2"
}
fail() { echo "FAILED: $1"; tail -30 "$OUT"; exit 1; }

ALONE=${ALONE_SECONDS:-20}
echo "== 1. rank 0 works alone $ALONE s longer, ZPS_RENDEZVOUS_TIMEOUT=15 (shorter, so the old wait would fail)"
ZPS_RENDEZVOUS_TIMEOUT=15 run alone "$ALONE"
[ "$code" -eq 0 ] || fail "the job exited $code"
expect "worker 0: worked alone $ALONE s more" "rank 0 finished its work alone"
expect "\[worker 1\] worker 1: finished" "rank 1 finished (it was not stopped)"
grep -q "stopped by launch" "$OUT" && fail "launch stopped a process"
echo "ok: exit 0, nothing stopped"

echo "== 2. ZPS_JOB_END_TIMEOUT=2 and 6 s alone: the finished worker's wait is bounded by it"
ZPS_JOB_END_TIMEOUT=2 run alone 6
[ "$code" -ne 0 ] || fail "the job exited 0"
expect "did not end the job within 2 s of this worker finishing" "worker 1 says it waited ZPS_JOB_END_TIMEOUT"

echo "== 3. no worker calls init()"
run no_init
[ "$code" -eq 0 ] || fail "the job exited $code"
[ "$took" -le 60 ] || fail "launch took $took s (the rendezvous timeout is 300 s)"
expect "exited 0 without joining the job \(it never called init\(\)\)" "launch says the workers never joined"

echo "== 4. worker 1 exits 0 without init() while worker 0 waits in init()"
ZPS_RENDEZVOUS_TIMEOUT=120 run no_init_1
[ "$code" -eq 1 ] || fail "the job exited $code, not 1"
[ "$took" -le 60 ] || fail "launch took $took s (the rendezvous timeout is 120 s)"
expect "worker 1 exited 0 without joining the job" "launch names worker 1"
expect "ending the job: worker 1 exited without joining it" "launch ends the job"
echo "job end test: all checks passed"
