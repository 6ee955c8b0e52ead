#!/usr/bin/env bash
# tools/gpu-kit.sh's kit must run on a machine that has none of zps's libraries (a borrowed GPU
# machine is offline and has no ZeroMQ, protobuf, glog, ...). This builds a kit from the test's CUDA
# build, unpacks it, and runs a 1x1 `zps check` job with the kit's programs in a private mount
# namespace where every library folder of this machine is an empty tmpfs: if the kit misses one
# library, or its programs use this machine's loader, the job cannot start. Skips (77) with the
# reason when mount namespaces are not available.
set -euo pipefail
ROOT=$1
BUILD_DIR=$2
WORK=$(mktemp -d)
PREFIX=/tmp/zps-kit-test-$$
trap 'rm -rf "$WORK" "$PREFIX"' EXIT

if ! probe=$(unshare --mount --propagation private true 2>&1); then
  echo "SKIPPED: unshare --mount does not work here ($probe)"
  exit 77
fi

GPU_KIT_SKIP_BUILD=1 BUILD_DIR=$BUILD_DIR KIT_DIR=$WORK KIT_PREFIX=$PREFIX "$ROOT/tools/gpu-kit.sh"
kit_bytes=$(stat -c %s "$WORK/zps-gpu-kit.tar.gz")
# It travels to the device machine inside a 64 MiB limit, with the repository.
if [ "$kit_bytes" -gt $((40 * 1024 * 1024)) ]; then
  echo "FAIL: the kit is $kit_bytes bytes, over 40 MiB"
  exit 1
fi
mkdir -p "$PREFIX"
tar -xzf "$WORK/zps-gpu-kit.tar.gz" -C "$PREFIX"

# The folder of this machine's C library goes last: `mount` itself needs it. /lib64 holds only the
# loader's link into that folder, which then dangles.
libc_dir=$(realpath "$(dirname "$(ldd /bin/sh | awk '$1 == "libc.so.6" {print $3}')")")
hidden=()
for dir in /usr/local/lib /usr/local/cuda/lib /usr/local/cuda/lib64 /lib/x86_64-linux-gnu; do
  [ -d "$dir" ] || continue
  dir=$(realpath "$dir")
  [ "$dir" = "$libc_dir" ] || [[ " ${hidden[*]} " == *" $dir "* ]] || hidden+=("$dir")
done
hidden+=("$libc_dir")
# Inside, bash can only run builtins once the folders are hidden, so it execs the kit's zps.
set +e
unshare --mount --propagation private bash -c '
  for dir in "${@:2}"; do mount -t tmpfs -o size=1m zps-kit-test "$dir" || exit 3; done
  exec "$1/bin/zps" launch --servers 1 --workers 1 --timeout 60 -- check --rounds 2 --sizes 7,4K,1M+3' \
  hide "$PREFIX" "${hidden[@]}" >"$WORK/job.log" 2>&1
rc=$?
set -e
cat "$WORK/job.log"
if [ $rc -ne 0 ]; then
  echo "FAIL: the kit's 1x1 check job exited $rc with ${hidden[*]} hidden"
  exit 1
fi
grep -q "values checked, 0 wrong" "$WORK/job.log" || { echo "FAIL: no '0 wrong' line from the job"; exit 1; }

# The kit's cuda test script: here (no GPU) every test must say Skipped, none Failed.
"$PREFIX/run-cuda-tests.sh" >"$WORK/cuda-tests.log" 2>&1 || { cat "$WORK/cuda-tests.log"; echo "FAIL: run-cuda-tests.sh"; exit 1; }
grep '\.\.\. ' "$WORK/cuda-tests.log"
tests=$(grep -c '^runTest ' "$PREFIX/run-cuda-tests.sh")
[ "$(grep -c '\.\.\. \(Skipped\|Passed\)$' "$WORK/cuda-tests.log")" -eq "$tests" ] ||
  { echo "FAIL: not every one of the $tests cuda tests ran"; exit 1; }
echo "kit test: $kit_bytes byte kit; a 1x1 check job ran with ${#hidden[@]} library folders hidden; $tests cuda tests listed"
