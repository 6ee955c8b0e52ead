#!/usr/bin/env bash
# Horovod's PyTorch test suite (test/parallel/test_torch.py, unchanged, from ../shared/peer-tests/horovod
# beside the repository) run against zps.torch as one zps job of WORKERS workers, `horovod.torch` being
# an alias of zps.torch that lives in tests/torch/horovod_alias. Prints the counts per outcome and every
# test that did not pass with its reason; fails when fewer than MIN_PASSED passed.
# Usage: horovod_suite_test.sh <zps binary> <workers> <min passed> [pytest -k expression]; with
# LOCAL_SIZE=L set, each worker node runs L local ranks (WORKERS x L processes).
# Skipped (77, with the reason) without the suite, torch, pytest, cloudpickle or mock.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ZPS=$1 WORKERS=$2 MIN_PASSED=$3 FILTER=${4:-}
SUITE=${HOROVOD_SUITE_DIR:-$(cd "$HERE/../.." && pwd)/../shared/peer-tests/horovod}
if [ ! -f "$SUITE/test/parallel/test_torch.py" ]; then
  echo "SKIPPED: Horovod's suite is not at $SUITE (../shared/peer-tests/horovod beside the repository)"
  exit 77
fi
for module in torch pytest cloudpickle mock; do
  if ! reason=$(/usr/bin/python3 -c "import $module" 2>&1); then
    echo "SKIPPED: /usr/bin/python3 cannot import $module (install python3-$module): ${reason##*$'\n'}"
    exit 77
  fi
done
REPORTS=$(mktemp -d)
trap '[ -n "${KEEP_REPORTS:-}" ] || rm -rf "$REPORTS"' EXIT
export HOROVOD_SUITE_DIR=$SUITE
export PYTHONPATH=$HERE/horovod_alias${PYTHONPATH:+:$PYTHONPATH}
# A test that fails on one worker mid-operation leaves the others waiting: a short request timeout
# bounds that wait, so one such test cannot take the rest of the run with it.
export ZPS_REQUEST_TIMEOUT=${ZPS_REQUEST_TIMEOUT:-20}
NODES=(--servers 1 --workers "$WORKERS")
if [ -n "${LOCAL_SIZE:-}" ]; then NODES+=(--local-size "$LOCAL_SIZE"); fi
PROCESSES=$((WORKERS * ${LOCAL_SIZE:-1}))
start=$(date +%s)
"$ZPS" launch "${NODES[@]}" --timeout ${JOB_TIMEOUT:-600} -- /usr/bin/python3 "$HERE/horovod_suite.py" \
  "$SUITE" "$REPORTS" "$FILTER" >"$REPORTS/job.log" 2>&1
code=$?
echo "the job of $PROCESSES worker processes exited $code after $(($(date +%s) - start)) s"
grep -E "pytest exited|passed|failed" "$REPORTS/job.log" | grep -E "^\[worker [0-9.]+\] (worker|=+|[0-9]+ (passed|failed))" | tail -8
/usr/bin/python3 "$HERE/horovod_suite_summary.py" "$REPORTS" "$PROCESSES" "$MIN_PASSED" || { tail -40 "$REPORTS/job.log"; exit 1; }
