#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, integration, install, CUDA when a GPU
# is present). Ends with ctest's summary, the reason of every skipped test, and a last line
# "N passed, N failed, N skipped". Usage: tools/test.sh [ctest args...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/tools/install-deps.sh"
"$ROOT/tools/build.sh"
"$ROOT/tools/fetch-datasets.sh" "$ROOT/data"
cd "${BUILD_DIR:-$ROOT/build}"
# Two tests at a time: most wait on processes and sockets more than they compute, which keeps the
# whole run within CI's 30 minutes on 2 cores. A test that bounds how long something takes under load
# (a pod simulation, a barrier's deadline) has ctest's PROCESSORS 2 and runs alone.
# CTEST_PARALLEL_LEVEL=1 runs one at a time.
mkdir -p Testing
set +e
# Every test's output also goes to a JUnit file: Testing/Temporary/LastTest.log is no record of the
# run, since any later ctest call in this folder rewrites it (kit/ lists tests with ctest --show-only).
junit="$PWD/Testing/ctest-junit.xml"
rm -f "$junit"
ctest -j "${CTEST_PARALLEL_LEVEL:-2}" --output-on-failure --timeout 600 --output-junit "$junit" "$@" | tee Testing/ctest-output.log
code=${PIPESTATUS[0]}
set -e
# ctest shows no output of a skipped test, so no skip would say why: print each one's reason (the
# SKIPPED line the test wrote), then the totals as the last line.
[ -f "$junit" ] &&
  awk '/<testcase name="/ { match($0, /name="[^"]*"/); name = substr($0, RSTART + 6, RLENGTH - 7)
                            skipped = $0 ~ /status="notrun"/ }
       skipped && /^(\t*<system-out>)?SKIPPED/ {
         line = $0; sub(/^\t*<system-out>/, "", line); sub(/^SKIPPED:? ?/, "", line)
         text = "skipped " name ": " line
         gsub(/&lt;/, "<", text); gsub(/&gt;/, ">", text); gsub(/&quot;/, "\"", text); gsub(/&amp;/, "\\&", text)
         print text }' "$junit"
total=$(sed -n 's/.* tests failed out of \([0-9]*\)$/\1/p' Testing/ctest-output.log | tail -1)
failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of .*/\1/p' Testing/ctest-output.log | tail -1)
skipped=$(grep -c '(Skipped)$' Testing/ctest-output.log || true)
if [ -n "$total" ] && [ -n "$failed" ]; then
  echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"
fi
exit "$code"
