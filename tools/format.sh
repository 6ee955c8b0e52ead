#!/usr/bin/env bash
# Formats the tracked C, C++ and CUDA sources with clang-format and the repository's .clang-format.
#   tools/format.sh [FILE...]           rewrites the files (default: every tracked source)
#   tools/format.sh --check [FILE...]   changes nothing; lists each file that is not formatted with
#                                       the first lines of its diff, and exits 1 (ctest: format/check)
# Needs Debian's clang-format (tools/install-deps.sh installs it); CLANG_FORMAT names another binary.
# Output differs between clang-format versions, so the check is only as stable as the version is.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "format: $CLANG_FORMAT not found: install clang-format (tools/install-deps.sh)" >&2
  exit 2
fi
cd "$ROOT"
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.cpp' '*.cu' '*.cuh' '*.h' '*.hpp')
fi
if [ $check = 0 ]; then
  "$CLANG_FORMAT" -i --style=file "${files[@]}"
  echo "format: ${#files[@]} files formatted with $("$CLANG_FORMAT" --version)"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! out=$("$CLANG_FORMAT" --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" -); then
    printf '%s\n' "$out" | head -n 20
    bad=$((bad + 1))
  fi
done
if [ $bad -gt 0 ]; then
  echo "format: $bad of ${#files[@]} files are not formatted; tools/format.sh FILE... formats them"
  exit 1
fi
echo "format: ${#files[@]} files formatted as .clang-format says ($("$CLANG_FORMAT" --version))"
