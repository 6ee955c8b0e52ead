#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, integration, install, CUDA when a GPU
# is present). Ends with ctest's summary. Usage: tools/test.sh [ctest args...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/tools/install-deps.sh"
"$ROOT/tools/build.sh"
"$ROOT/tools/fetch-datasets.sh" "$ROOT/data"
cd "${BUILD_DIR:-$ROOT/build}"
# Sequential on purpose: the integration tests time start-up deadlines and share 2 cores.
ctest --output-on-failure --timeout 600 "$@"
