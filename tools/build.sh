#!/usr/bin/env bash
# Configures and builds zps into $BUILD_DIR (default: build). Used by run.sh and test.sh.
# Extra arguments go to cmake's configure step, e.g. tools/build.sh -DZPS_WITH_CUDA=OFF
# BUILD_TARGETS names the targets to build (default: all of them, tests included), e.g.
# BUILD_TARGETS=zps tools/build.sh builds only the zps program, as tools/run.sh does.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
# ccache, when installed, makes rebuilds and builds in other checkouts (git worktrees) of the same
# sources nearly free; set base_dir in ccache's configuration to share objects across checkouts.
LAUNCHER=()
if command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" "${LAUNCHER[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
  cmake "$BUILD_DIR" "$@"
fi
TARGETS=()
for t in ${BUILD_TARGETS:-}; do TARGETS+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${TARGETS[@]}"
