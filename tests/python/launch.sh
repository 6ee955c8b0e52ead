#!/usr/bin/env bash
# Runs a zps.torch test script as the workers of a local job:
#   launch.sh <zps binary> <servers> <workers> <script> [args...]
# Exits 77 (skipped, with the reason) when Debian's /usr/bin/python3 cannot import torch (or
# $ZPS_TEST_REQUIRES).
set -uo pipefail
ZPS=$1 SERVERS=$2 WORKERS=$3
shift 3
PYTHON=${ZPS_TEST_PYTHON:-/usr/bin/python3}
# ZPS_TEST_REQUIRES names further modules the script imports (e.g. torchvision), each a Debian package.
for module in torch ${ZPS_TEST_REQUIRES:-}; do
  if ! reason=$("$PYTHON" -c "import $module" 2>&1); then
    echo "SKIPPED: $PYTHON cannot import $module (install python3-$module): ${reason##*$'\n'}"
    exit 77
  fi
done
exec "$ZPS" launch --servers "$SERVERS" --workers "$WORKERS" --timeout 240 -- "$PYTHON" "$@"
