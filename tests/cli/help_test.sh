#!/usr/bin/env bash
# `zps help`, `zps COMMAND --help` and `-h`: exit 0, print the command's own flags, never the logging
# library's; an unknown command or flag exits 2 with one clear line. Usage: help_test.sh ZPS
set -uo pipefail
ZPS=$1
# Failures are counted in a file: expect also runs inside $(...), a subshell.
FAILS=$(mktemp)
trap 'rm -f "$FAILS"' EXIT
fail() { echo "FAIL: $*" >&2; echo x >>"$FAILS"; }

# expect CODE NEEDLE... -- ARGS...: runs zps ARGS, checks the exit code and that the output (stdout
# and stderr) holds every needle; help (exit 0) may never name a glog flag.
expect() {
  local code=$1; shift
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  local out rc
  out=$(env -u DMLC_ROLE "$ZPS" "$@" 2>&1); rc=$?
  [ "$rc" = "$code" ] || fail "zps $* exited $rc, not $code: $(echo "$out" | head -3)"
  for n in "${needles[@]}"; do
    grep -qF -- "$n" <<<"$out" || fail "zps $* does not print '$n'"
  done
  if [ "$code" = 0 ]; then
    for glog in --logtostderr --minloglevel --log_dir --stderrthreshold --flagfile; do
      if grep -qF -- "$glog" <<<"$out"; then fail "zps $* shows the logging library's $glog"; fi
    done
  fi
  echo "$out"
}

lines() { "$ZPS" "$@" 2>&1 | wc -l; }

# The overview.
expect 0 "usage: zps COMMAND" "train" "check" "zps help env" -- help >/dev/null
expect 0 "usage: zps COMMAND" -- --help >/dev/null
expect 0 "usage: zps COMMAND" -- -h >/dev/null

# Each command, in all three spellings.
for spelling in "help train" "train --help" "train -h"; do
  # shellcheck disable=SC2086
  out=$(expect 0 "usage: DMLC_ROLE=worker zps train" "--epochs=20" "--model=mlp" "--batch_size=32" -- $spelling)
  grep -qF -- "--rounds" <<<"$out" && fail "zps $spelling shows check's --rounds"
  grep -qF -- "--mode=" <<<"$out" && fail "zps $spelling shows bench's --mode"
done
expect 0 "--rounds=10" "--dtypes=all" "--gpu_tensors" -- help check >/dev/null
expect 0 "--rounds=10" -- check -h >/dev/null
# bench's --model is its own: a model's tensors, not train's model.
out=$(expect 0 "--mode=pushpull" "--model=" "resnet50" -- bench --help)
grep -qF -- "--model=mlp" <<<"$out" && fail "zps bench --help shows train's --model=mlp"
expect 0 "--host=" "--port=0" "DMLC_PS_ROOT_URI" -- help probe >/dev/null
expect 0 "--status_json" "ZPS_METRICS_PORT" -- status --help >/dev/null
expect 0 "--gpu" -- version -h >/dev/null
expect 0 "--servers S --workers W" -- help launch >/dev/null
expect 0 "zps trace merge" -- trace --help >/dev/null
expect 0 "DMLC_ROLE=scheduler zps" -- help "" >/dev/null

# Every setting, by its variables and flag.
expect 0 "DMLC_PS_ROOT_URI" "ZPS_HEARTBEAT_INTERVAL, PS_HEARTBEAT_INTERVAL  --heartbeat_interval" \
  "BYTEPS_LOCAL_SIZE" -- help env >/dev/null

# Help is short: only the command's own flags.
n=$(lines train --help)
[ "$n" -le 40 ] || fail "zps train --help prints $n lines"

# Unknown commands and flags: exit 2, one line that says what is wrong.
expect 2 "zps help: unknown command 'nope'" -- help nope >/dev/null
expect 2 "zps: unknown command 'nope'" -- nope >/dev/null
expect 2 "zps train: unknown flag --rounds; zps help train lists the flags" -- train --rounds 3 >/dev/null
expect 2 "zps check: unknown flag --logtostderr" -- check --logtostderr >/dev/null
expect 2 "zps train: --epochs='x' is not a whole number" -- train --epochs x >/dev/null
[ "$("$ZPS" nope 2>&1 | wc -l)" = 1 ] || fail "zps nope prints more than one line"

failures=$(wc -l <"$FAILS")
if [ "$failures" -gt 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "help: all checks passed"
