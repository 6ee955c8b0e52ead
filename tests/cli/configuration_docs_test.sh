#!/usr/bin/env bash
# docs/configuration.md is what `zps help env --markdown` prints from the table of settings and the
# commands' flags; this fails when the two differ. Usage: configuration_docs_test.sh ZPS DOC
set -uo pipefail
ZPS=$1
DOC=$2
if ! diff -u "$DOC" <("$ZPS" help env --markdown); then
  echo "FAIL: $DOC differs from 'zps help env --markdown' (above: - the file, + the binary)."
  echo "Regenerate it: cmake --build build --target configuration-docs"
  exit 1
fi
echo "configuration docs: $DOC matches the table of settings"
