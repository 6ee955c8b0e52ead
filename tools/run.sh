#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job: a local cluster (1 scheduler, 2 servers,
# 2 workers) that checks exact sums over 10 rounds of every dtype at sizes from 1 byte to 9 MiB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/tools/install-deps.sh"
"$ROOT/tools/build.sh"
exec "${BUILD_DIR:-$ROOT/build}/bin/zps" launch --servers 2 --workers 2 --timeout 600 -- check --rounds 10 "$@"
