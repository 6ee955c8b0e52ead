#!/usr/bin/env bash
# zps.torch.collectives (allgather, allreduce_op, reducescatter, alltoall, broadcast, barrier) with exact
# values on every worker of one `zps launch` job: tests/torch/collectives_job.py, whose every check
# prints a line; each worker must reach its last line and launch must exit 0. With a third argument,
# tests/torch/<job>_job.py instead (process_sets: process sets' operations; optimizer_join:
# DistributedOptimizer with join()). With a fourth argument L, each worker node runs L local ranks
# (zps launch --local-size L, two servers): WORKERS x L processes, which print as "worker n.l".
# Usage: collectives_test.sh <build dir> <workers> [job] [local size]. Skipped (77) when /usr/bin/python3
# cannot import torch.
set -uo pipefail
BUILD=$1 WORKERS=$2 JOB=${3:-collectives} LOCAL=${4:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
if ! why=$(/usr/bin/python3 -c "import torch" 2>&1); then
  echo "SKIPPED: /usr/bin/python3 cannot import torch (install python3-torch): ${why##*$'\n'}"
  exit 77
fi
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
NODES=(--servers 1 --workers "$WORKERS") LABEL_0="worker 0"
if [ "$LOCAL" -gt 1 ]; then NODES=(--servers 2 --workers "$WORKERS" --local-size "$LOCAL") LABEL_0="worker 0.0"; fi
timeout 300 "$BUILD/bin/zps" launch "${NODES[@]}" --progress 0 -- \
  /usr/bin/python3 "$HERE/${JOB}_job.py" >"$OUT" 2>&1
code=$?
grep -E "^\[worker [0-9.]+\] (ok|FAILED)" "$OUT" | grep -F "[$LABEL_0]"
if [ "$code" -ne 0 ]; then
  echo "FAILED: zps launch exited $code"
  grep -E "FAILED|Error" "$OUT" | head -20
  exit 1
fi
PROCESSES=$((WORKERS * LOCAL))
for ((r = 0; r < PROCESSES; r++)); do
  label="worker $r"
  if [ "$LOCAL" -gt 1 ]; then label="worker $((r / LOCAL)).$((r % LOCAL))"; fi
  grep -qE "^\[$label\] $JOB: [0-9]+ checks passed on worker $r of $PROCESSES$" "$OUT" ||
    { echo "FAILED: rank $r ($label) did not pass every check"; tail -30 "$OUT"; exit 1; }
done
echo "ok: every check passed on all $PROCESSES processes ($WORKERS workers x $LOCAL local ranks)"
