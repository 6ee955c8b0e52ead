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
# Sequential on purpose: the integration tests time start-up deadlines and share 2 cores.
mkdir -p Testing
set +e
ctest --output-on-failure --timeout 600 "$@" | tee Testing/ctest-output.log
code=${PIPESTATUS[0]}
set -e
# ctest shows no output of a skipped test, so no skip would say why: print each one's reason (the
# SKIPPED line the test wrote), then the totals as the last line.
[ -f Testing/Temporary/LastTest.log ] &&
  awk '/^[0-9]+\/[0-9]+ Test: /{name=$3} /^SKIPPED/{print "skipped " name ": " substr($0, 10)}' \
    Testing/Temporary/LastTest.log
total=$(sed -n 's/.* tests failed out of \([0-9]*\)$/\1/p' Testing/ctest-output.log | tail -1)
failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of .*/\1/p' Testing/ctest-output.log | tail -1)
skipped=$(grep -c '(Skipped)$' Testing/ctest-output.log || true)
if [ -n "$total" ] && [ -n "$failed" ]; then
  echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"
fi
exit "$code"
