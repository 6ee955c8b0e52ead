#!/usr/bin/env bash
# Runs a zps.torch test script as the workers of a local job:
#   launch.sh <zps binary> <servers> <workers> <script> [args...]
# Exits 77 (skipped, with the reason) when Debian's /usr/bin/python3 cannot import torch.
set -uo pipefail
ZPS=$1 SERVERS=$2 WORKERS=$3
shift 3
PYTHON=${ZPS_TEST_PYTHON:-/usr/bin/python3}
if ! reason=$("$PYTHON" -c "import torch" 2>&1); then
  echo "SKIPPED: $PYTHON cannot import torch (install python3-torch): ${reason##*$'\n'}"
  exit 77
fi
exec "$ZPS" launch --servers "$SERVERS" --workers "$WORKERS" --timeout 240 -- "$PYTHON" "$@"
