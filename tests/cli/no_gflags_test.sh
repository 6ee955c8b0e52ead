#!/usr/bin/env bash
# zps's flags are rows of the table of settings (ps/common/settings_table.cc) or a command's ZPS_FLAG
# (tools/command_line.h). A gflags DEFINE_* flag would compile but never be parsed (the command line
# refuses it as unknown) nor shown by zps help, so none may appear. Usage: no_gflags_test.sh SOURCE_DIR
set -uo pipefail
cd "$1" || exit 1
found=$(grep -rnE '^\s*(DEFINE|DECLARE)_(bool|int32|int64|uint64|uint32|double|string)\(' \
  --include='*.cc' --include='*.h' --include='*.cu' ps worker scheduler kernels tools include tests 2>/dev/null)
if [ -n "$found" ]; then
  echo "$found"
  echo "FAIL: gflags flags above; declare a setting in ps/common/settings_table.cc or a command flag with ZPS_FLAG"
  exit 1
fi
echo "no gflags flags: every flag is a setting or a command's ZPS_FLAG"
