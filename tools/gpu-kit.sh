#!/usr/bin/env bash
# Packs a CUDA build of zps, with every shared library it loads (the C library and its loader
# included), into one file that tools/gpu-check.sh unpacks and runs: .gpu-kit/zps-gpu-kit.tar.gz.
#
# Why: the GPU machines a session can borrow are offline, and their image has CUDA but not
# ZeroMQ, protobuf, gflags, glog, Catch2 or OpenBLAS, so gpu-check.sh cannot build zps there.
# The kit's programs do not depend on that machine's libraries either: their ELF interpreter is
# the kit's own ld-linux (an absolute path, $KIT_PREFIX/lib/...) and their RPATH is the kit's lib
# folder, so they run on any x86-64 Linux whatever its C library version. What the kit leaves to
# the machine is the GPU stack, which must match its driver: libcuda (the driver), and cuBLAS and
# NCCL (loaded with dlopen on first use; gpu-check.sh finds them there).
#
# Usage: tools/gpu-kit.sh            (builds $BUILD_DIR with CUDA, default build-gpu)
# Environment: BUILD_DIR, KIT_DIR (where the .tar.gz goes, default .gpu-kit),
#              KIT_PREFIX (where gpu-check.sh will unpack it, default /tmp/zps-gpu-kit),
#              ZPS_DATA_DIR (digits.csv for the training check, default data/).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
KIT_DIR=${KIT_DIR:-$ROOT/.gpu-kit}
KIT_PREFIX=${KIT_PREFIX:-/tmp/zps-gpu-kit}
DATA_DIR=${ZPS_DATA_DIR:-$ROOT/data}
KIT_FILE=$KIT_DIR/zps-gpu-kit.tar.gz
# The programs gpu-check.sh runs; the cuda-labelled ctest tests use the first three.
PROGRAMS=(zps_cuda_tests zps_cuda_sum_bandwidth zps_gpu_libraries_test zps)

case $KIT_PREFIX in
  /*) ;;
  *) echo "gpu-kit: KIT_PREFIX must be an absolute path (it becomes the programs' ELF interpreter): $KIT_PREFIX" >&2; exit 2 ;;
esac
"$ROOT/tools/install-deps.sh" >/dev/null  # the build's packages, patchelf and jq; nothing when present

if [ "${GPU_KIT_SKIP_BUILD:-0}" != 1 ]; then
  BUILD_DIR=$BUILD_DIR "$ROOT/tools/build.sh" -DZPS_WITH_CUDA=ON
fi
for program in "${PROGRAMS[@]}"; do
  if [ ! -x "$BUILD_DIR/bin/$program" ]; then
    echo "gpu-kit: $BUILD_DIR/bin/$program is missing: is $BUILD_DIR a CUDA build (-DZPS_WITH_CUDA=ON)?" >&2
    exit 1
  fi
done
if [ ! -f "$DATA_DIR/digits.csv" ]; then
  "$ROOT/tools/fetch-datasets.sh" "$DATA_DIR"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/data"

# Libraries the machine must provide itself: the driver and the GPU libraries matched to it.
fromMachine() { [[ $(basename "$1") =~ ^lib(cuda|nvidia-|cublas|cublasLt|nccl)[.-] ]]; }

for program in "${PROGRAMS[@]}"; do
  cp "$BUILD_DIR/bin/$program" "$stage/bin/"
  strip --strip-debug "$stage/bin/$program"
  # ldd lists the whole closure, "name => /path (addr)" lines and the loader as "/path (addr)".
  while read -r library; do
    fromMachine "$library" || cp -Ln "$library" "$stage/lib/"
  done < <(ldd "$BUILD_DIR/bin/$program" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
done
# The whole C library, not only the parts ldd names: the machine's libcuda, cuBLAS and NCCL load
# into these processes and need libdl, librt, libpthread...; taken from the machine they would be
# another glibc version than the kit's libc and loader, which cannot be mixed.
# Those libraries have their own RUNPATH, so the kit's RPATH does not serve their needs: the programs
# name every part of the C library as needed, and a library already loaded is reused by its soname.
libc_dir=$(dirname "$(ldd "$BUILD_DIR/bin/zps" | awk '$1 == "libc.so.6" {print $3}')")
libc_parts=()
for library in libc.so.6 libm.so.6 libmvec.so.1 libdl.so.2 librt.so.1 libpthread.so.0 libresolv.so.2 \
  libutil.so.1 libanl.so.1; do
  [ -e "$libc_dir/$library" ] || continue
  cp -Ln "$libc_dir/$library" "$stage/lib/"
  libc_parts+=("$library")
done
loader=$(basename "$(ldd "$BUILD_DIR/bin/zps" | awk '$1 ~ /^\// {print $1}')")
for program in "${PROGRAMS[@]}"; do
  # --force-rpath writes DT_RPATH, which (unlike RUNPATH) also serves the libraries' own needs.
  # One change per call: patchelf 0.14 writes a wrong RPATH when --add-needed comes in the same call.
  for library in "${libc_parts[@]}"; do
    patchelf --print-needed "$stage/bin/$program" | grep -qxF "$library" ||
      patchelf --add-needed "$library" "$stage/bin/$program"
  done
  patchelf --set-interpreter "$KIT_PREFIX/lib/$loader" "$stage/bin/$program"
  patchelf --force-rpath --set-rpath "$KIT_PREFIX/lib" "$stage/bin/$program"
  # Checked, not trusted: a wrong interpreter or RPATH would only show on the GPU machine.
  [ "$(patchelf --print-interpreter "$stage/bin/$program")" = "$KIT_PREFIX/lib/$loader" ] &&
    [ "$(patchelf --print-rpath "$stage/bin/$program")" = "$KIT_PREFIX/lib" ] ||
    { echo "gpu-kit: patchelf did not rewrite $program" >&2; exit 1; }
done
cp "$DATA_DIR/digits.csv" "$stage/data/"

# The cuda-labelled ctest tests as a script, so the machine needs no ctest and no build tree.
{
  cat <<'HEADER'
#!/usr/bin/env bash
# Generated by tools/gpu-kit.sh from `ctest -L cuda`: runs each test; its skip code (77) = no usable GPU.
cd "$(dirname "$0")/bin" || exit 1
failed=0
runTest() {
  local name=$1 limit=$2 skip_code=$3 rc
  shift 3
  echo "=== $name: $*"
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  if [ $rc -eq 0 ]; then echo "$name ... Passed"
  elif [ $rc -eq "$skip_code" ]; then echo "$name ... Skipped"
  else echo "$name ... Failed (exit $rc)"; failed=1; fi
}
HEADER
  ctest --test-dir "$BUILD_DIR" -L cuda --show-only=json-v1 | jq -r '
    .tests[] | [.name,
                ((.properties // [])[] | select(.name == "TIMEOUT") | .value | tostring) // "300",
                (((.properties // [])[] | select(.name == "SKIP_RETURN_CODE") | .value | tostring) // "77"),
                (.command[0] | split("/") | last | "./" + .)] + .command[1:]
    | map(@sh) | "runTest " + join(" ")'
  echo "exit \$failed"
} >"$stage/run-cuda-tests.sh"
chmod +x "$stage/run-cuda-tests.sh"
if ! grep -q '^runTest ' "$stage/run-cuda-tests.sh"; then
  echo "gpu-kit: ctest lists no cuda-labelled tests in $BUILD_DIR" >&2
  exit 1
fi

commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+uncommitted changes"
{
  echo "commit: $commit"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo unknown)"
  echo "cuda code: $(grep -oh 'code=\[[a-z_0-9]*\]' "$BUILD_DIR"/build.ninja "$BUILD_DIR"/CMakeFiles/*.make 2>/dev/null | sort -u | tr '\n' ' ')"
  echo "prefix: $KIT_PREFIX"
  echo "from the machine: libcuda (driver), libcublas/libcublasLt, libnccl"
} >"$stage/KIT"

mkdir -p "$KIT_DIR"
# gzip, not xz: every Linux has gzip (a minimal Debian has no xz and no python3).
tar -C "$stage" -czf "$KIT_FILE.tmp" .
mv "$KIT_FILE.tmp" "$KIT_FILE"
echo "gpu-kit: $KIT_FILE ($(du -h "$KIT_FILE" | cut -f1), $(ls "$stage/lib" | wc -l) libraries, unpacks to $KIT_PREFIX)"
sed 's/^/gpu-kit:   /' "$stage/KIT"
