#!/usr/bin/env bash
# Opt-in fuzzing (issue 6; design.md section 4): configures a clang build with -DZPS_BUILD_FUZZ=ON,
# builds the libFuzzer targets, runs each for SECONDS on a scratch copy of its committed corpus
# (tests/fuzz/corpus/<target>/, which stays untouched) and prints a table of execs, execs/s, new
# corpus entries and crashes. Exits 1 when any target crashed, leaked, ran out of memory or timed
# out.
#
# Usage: tests/fuzz/run-fuzzers.sh [SECONDS=60] [TARGET...]     (targets: wire config dataset
#        checkpoint faults server; default all)
# Environment:
#   BUILD_DIR     the fuzz build dir (default: <repo>/build-fuzz); never an ordinary build dir,
#                 since the zps libraries in it are built with sanitizers
#   WORK_DIR      corpora copies, logs and crash inputs (default: a new folder under /tmp)
#   FUZZ_FORK=1   keep fuzzing after a crash (libFuzzer -fork=1 -ignore_crashes), to count more than
#                 the first one; the default stops a target at its first crash, like CI fuzzers do
#   FUZZ_MERGE=1  afterwards, rewrite tests/fuzz/corpus/<target>/ as a small set (at most
#                 MAX_CORPUS=250 inputs) that reaches every edge the old corpus and the run reached;
#                 seed-* and crash-* files stay, new crash inputs are never added
#
# Needs clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev), cmake, and the zps
# build dependencies (tools/install-deps.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DURATION=${1:-60}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then TARGETS=(wire config dataset checkpoint faults server); fi
BUILD_DIR=${BUILD_DIR:-$ROOT/build-fuzz}
WORK_DIR=${WORK_DIR:-$(mktemp -d /tmp/zps-fuzz-run.XXXXXX)}
CORPUS_ROOT=$ROOT/tests/fuzz/corpus
CXX_COMPILER=${CXX_COMPILER:-clang++}

die() { echo "run-fuzzers: $*" >&2; exit 2; }

if ! [[ $DURATION =~ ^[0-9]+$ ]] || [ "$DURATION" -eq 0 ]; then
  die "SECONDS must be a positive whole number, got '$DURATION'"
fi
for t in "${TARGETS[@]}"; do
  [ -d "$CORPUS_ROOT/$t" ] || die "unknown target '$t' (no corpus folder $CORPUS_ROOT/$t)"
done
command -v "$CXX_COMPILER" >/dev/null ||
  die "$CXX_COMPILER not found; install clang (apt-get install clang)"
# libFuzzer ships separately from clang on Debian; a one-line probe gives a clearer message than a
# failed link halfway through the build.
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe_dir/probe.cc"
if ! "$CXX_COMPILER" -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cc" \
    -o "$probe_dir/probe" 2>"$probe_dir/err"; then
  cat "$probe_dir/err" >&2
  die "$CXX_COMPILER cannot link a libFuzzer binary; install libclang-rt-14-dev" \
    "(or your clang's compiler-rt)"
fi

GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_CXX_COMPILER="$CXX_COMPILER" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZPS_BUILD_FUZZ=ON -DZPS_WITH_CUDA=OFF >/dev/null
elif ! grep -q '^ZPS_BUILD_FUZZ:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
  cmake "$BUILD_DIR" -DZPS_BUILD_FUZZ=ON >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${TARGETS[@]/#/zps_fuzz_}"

# Inputs larger than this are cut: every format under test shows its structure in a few KB, and
# large inputs only slow each exec down.
max_len() {
  case $1 in
    wire | server) echo 8192 ;;
    faults) echo 256 ;;
    *) echo 4096 ;;
  esac
}

echo "run-fuzzers: $DURATION s per target; logs, corpora and crash inputs in $WORK_DIR"
declare -A EXECS RATE NEW CRASHES
status=0
for t in "${TARGETS[@]}"; do
  dir=$WORK_DIR/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$CORPUS_ROOT/$t"/* "$dir/corpus/"
  before=$(find "$dir/corpus" -type f | wc -l)
  args=(-max_total_time="$DURATION" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
        -max_len="$(max_len "$t")" -artifact_prefix="$dir/artifacts/")
  if [ -f "$ROOT/tests/fuzz/$t.dict" ]; then args+=(-dict="$ROOT/tests/fuzz/$t.dict"); fi
  if [ "${FUZZ_FORK:-0}" = 1 ]; then
    args+=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  fi
  echo "run-fuzzers: $t ..."
  start=$(date +%s)
  # A crash makes libFuzzer exit non-zero; the artifacts folder is what we count.
  (cd "$dir" && "$BUILD_DIR/bin/zps_fuzz_$t" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1) || true
  elapsed=$(( $(date +%s) - start ))
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$dir/log" | tail -1 |
    grep -oE '[0-9]+$' || true)
  if [ -z "$execs" ]; then  # fork mode, or a run that died early: the last status line counts
    execs=$(grep -oE '^#[0-9]+' "$dir/log" | tail -1 | tr -d '#' || true)
  fi
  execs=${execs:-0}
  EXECS[$t]=$execs
  RATE[$t]=$(( execs / (elapsed > 0 ? elapsed : 1) ))
  NEW[$t]=$(( $(find "$dir/corpus" -type f | wc -l) - before ))
  CRASHES[$t]=$(find "$dir/artifacts" -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) | wc -l)
  if [ "${CRASHES[$t]}" -gt 0 ]; then status=1; fi
done

echo
printf '%-12s %12s %10s %8s %8s\n' target execs execs/s new crashes
for t in "${TARGETS[@]}"; do
  printf '%-12s %12s %10s %8s %8s\n' "$t" "${EXECS[$t]}" "${RATE[$t]}" "${NEW[$t]}" "${CRASHES[$t]}"
done

for t in "${TARGETS[@]}"; do
  if [ "${CRASHES[$t]}" -gt 0 ]; then
    echo
    echo "== $t: ${CRASHES[$t]} crash input(s) in $WORK_DIR/$t/artifacts (log: $WORK_DIR/$t/log)"
    grep -m 3 -E 'SUMMARY:|fuzz property failed|ERROR: libFuzzer' "$WORK_DIR/$t/log" || true
    echo "   reproduce: $BUILD_DIR/bin/zps_fuzz_$t INPUT; once fixed, copy INPUT to"
    echo "   tests/fuzz/corpus/$t/crash-<what> so that ctest's fuzz/replay-$t keeps it fixed"
  fi
done

if [ "${FUZZ_MERGE:-0}" = 1 ]; then
  # Not libFuzzer's -merge: it keeps every input that adds any feature, hundreds per target. The
  # minimizer keeps a greedy set cover of the edges, at most MAX_CORPUS inputs, seeds and crash
  # inputs always.
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${TARGETS[@]/#/zps_fuzz_minimize_}" >/dev/null
  for t in "${TARGETS[@]}"; do
    staging=$WORK_DIR/$t/minimized
    rm -rf "$staging"
    mkdir -p "$staging"
    "$BUILD_DIR/bin/zps_fuzz_minimize_$t" "${MAX_CORPUS:-250}" "$CORPUS_ROOT/$t" \
      "$WORK_DIR/$t/corpus" 2>"$WORK_DIR/$t/minimize.log" | sed -n 's/^keep //p' |
      while IFS= read -r f; do cp "$f" "$staging/"; done
    find "$CORPUS_ROOT/$t" -type f -delete
    cp "$staging"/* "$CORPUS_ROOT/$t/"
    echo "run-fuzzers: $t: $(tail -1 "$WORK_DIR/$t/minimize.log")"
  done
fi
exit $status
