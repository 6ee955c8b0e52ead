#!/usr/bin/env bash
# DistributedDataParallel and every collective over the torch.distributed backend "zps", against Gloo:
# tests/torch/ddp_job.py (one script, only the backend string differs) checks each collective with exact
# values and trains 50 steps; under zps in `zps launch`, under gloo in processes started here with
# torch's environment. Then every rank must hold its backend's weights, and zps's must equal Gloo's
# within 1e-5 relative (tests/torch/ddp_compare.py).
# Usage: ddp_test.sh <build dir> <workers>. Skipped (77) when /usr/bin/python3 cannot import torch.
set -uo pipefail
BUILD=$1 WORKERS=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
if ! why=$("$PY" -c "import torch" 2>&1); then
  echo "SKIPPED: $PY cannot import torch (install python3-torch): ${why##*$'\n'}"
  exit 77
fi
T=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
fail() { echo "FAILED: $1"; tail -30 "$2"; exit 1; }

timeout 300 "$BUILD/bin/zps" launch --servers 1 --workers "$WORKERS" --progress 0 -- \
  "$PY" "$HERE/ddp_job.py" zps "$T" >"$T/zps.log" 2>&1 || fail "zps launch exited $?" "$T/zps.log"
grep -E "^\[worker 0\] (ok|skipped)" "$T/zps.log"

port=$("$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
for ((r = 0; r < WORKERS; r++)); do
  env -u DMLC_ROLE PYTHONPATH="$BUILD/python" RANK=$r WORLD_SIZE="$WORKERS" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    timeout 300 "$PY" "$HERE/ddp_job.py" gloo "$T" >"$T/gloo-$r.log" 2>&1 &
  pids+=($!)
done
for ((r = 0; r < WORKERS; r++)); do
  wait "${pids[$r]}" || fail "gloo rank $r exited $?" "$T/gloo-$r.log"
done
pids=()
grep -E "^skipped" "$T/gloo-0.log"
"$PY" "$HERE/ddp_compare.py" "$T" "$WORKERS" 1e-5 || exit 1
echo "ok: DDP over zps equals DDP over Gloo on $WORKERS workers, every collective exact"
