#!/usr/bin/env bash
# zps.torch.collectives (allgather, allreduce_op, reducescatter, alltoall, broadcast, barrier) with exact
# values on every worker of one `zps launch` job: tests/torch/collectives_job.py, whose every check
# prints a line; each worker must reach its last line and launch must exit 0. With a third argument,
# tests/torch/<job>_job.py instead (process_sets: process sets' operations; optimizer_join:
# DistributedOptimizer with join()).
# Usage: collectives_test.sh <build dir> <workers> [job]. Skipped (77) when /usr/bin/python3 cannot import torch.
set -uo pipefail
BUILD=$1 WORKERS=$2 JOB=${3:-collectives}
HERE=$(cd "$(dirname "$0")" && pwd)
if ! why=$(/usr/bin/python3 -c "import torch" 2>&1); then
  echo "SKIPPED: /usr/bin/python3 cannot import torch (install python3-torch): ${why##*$'\n'}"
  exit 77
fi
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
timeout 300 "$BUILD/bin/zps" launch --servers 1 --workers "$WORKERS" --progress 0 -- \
  /usr/bin/python3 "$HERE/${JOB}_job.py" >"$OUT" 2>&1
code=$?
grep -E "^\[worker [0-9]+\] (ok|FAILED)" "$OUT" | grep "worker 0\]"
if [ "$code" -ne 0 ]; then
  echo "FAILED: zps launch exited $code"
  grep -E "FAILED|Error" "$OUT" | head -20
  exit 1
fi
for ((r = 0; r < WORKERS; r++)); do
  grep -qE "^\[worker $r\] $JOB: [0-9]+ checks passed on worker $r of $WORKERS$" "$OUT" ||
    { echo "FAILED: worker $r did not pass every check"; tail -30 "$OUT"; exit 1; }
done
echo "ok: every check passed on all $WORKERS workers"
