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

# The Python package: installed where Debian's python3 looks under this prefix, with its library
# beside it; without the library, the import says what it tried.
PYDIR=$(find "$WORK/prefix/lib" -path "*/dist-packages/zps/__init__.py" -printf "%h\n" | head -1)
[ -n "$PYDIR" ] || { echo "FAILED: no zps package under $WORK/prefix/lib/*/dist-packages"; exit 1; }
[ -f "$PYDIR/libzps_c.so" ] || { echo "FAILED: no libzps_c.so beside $PYDIR"; exit 1; }
version=$(cd / && PYTHONPATH=$(dirname "$PYDIR") /usr/bin/python3 -c "import zps; print(zps.version())")
echo "install test: the installed Python package loads libzps_c.so, version $version"
mkdir -p "$WORK/nolib" && cp -r "$PYDIR" "$WORK/nolib/" && rm "$WORK/nolib/zps/libzps_c.so"
if msg=$(cd / && env -u ZPS_LIBRARY PYTHONPATH="$WORK/nolib" /usr/bin/python3 -c "import zps; zps.version()" 2>&1); then
  echo "FAILED: the package loaded without its library"; exit 1
fi
echo "$msg" | grep -q "cannot load libzps_c.so; tried: $WORK/nolib/zps/libzps_c.so (next to the package): no such file; \$ZPS_LIBRARY is not set" ||
  { echo "FAILED: the import error does not say what it tried: $msg"; exit 1; }
echo "install test: without its library the package says: ${msg##*$'\n'}"
