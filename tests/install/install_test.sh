#!/usr/bin/env bash
# Installs the build into a temp prefix, builds tests/install/user_program against it with
# find_package(zps), and runs it as the workers of a local job.
set -euo pipefail
BUILD_DIR=$1
SRC_DIR=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD_DIR" --prefix "$WORK/prefix" >/dev/null
cmake -S "$SRC_DIR/user_program" -B "$WORK/build" -G Ninja -DCMAKE_PREFIX_PATH="$WORK/prefix" >/dev/null
cmake --build "$WORK/build" >/dev/null
"$WORK/prefix/bin/zps" launch --servers 1 --workers 2 --timeout 60 -- "$WORK/build/user_program" | tee "$WORK/out.txt"
grep -q "\[worker 1\] user_program: worker 1: 5 rounds OK" "$WORK/out.txt"
echo "install test: user program built against the installed package and ran"
