#!/usr/bin/env bash
# The checks that need a GPU, in one short run for a borrowed device machine: build with CUDA required,
# then run the CUDA tests (CUDA reducer against the CPU reducer on exact data) and print nvidia-smi.
# Exits non-zero when a CUDA test fails or is skipped (a skip here means the GPU was not usable).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
"$ROOT/tools/install-deps.sh"
BUILD_DIR=$BUILD_DIR "$ROOT/tools/build.sh" -DZPS_WITH_CUDA=ON
cd "$BUILD_DIR"
ctest --output-on-failure -R '^cuda/' --timeout 300 | tee cuda-tests.txt
if grep -q "Skipped" cuda-tests.txt; then
  echo "gpu-check: CUDA tests were skipped; the GPU is not usable from this build" >&2
  exit 1
fi
