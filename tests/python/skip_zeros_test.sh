#!/usr/bin/env bash
# ZPS_SKIP_ZEROS (tests/python/skip_zeros_job.py, 2 servers, 2 workers), run with the setting on and off:
# both give the same bits (the job checks each sum against the dense float32 sum); on, 10 rounds of a
# 90%-zero tensor push at most 14% and pull at most 23% of the dense bytes; off, at least the dense bytes. Usage: skip_zeros_test.sh <zps binary> <source dir>.
# Skipped (77) when /usr/bin/python3 cannot import torch.
set -uo pipefail
ZPS=$1 SRC=$2
PY=/usr/bin/python3
if ! reason=$("$PY" -c "import torch" 2>&1); then
  echo "SKIPPED: $PY cannot import torch (install python3-torch): ${reason##*$'\n'}"
  exit 77
fi
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAILED: $1"; tail -40 "$OUT"; exit 1; }

declare -A sums pushed pulled
for on in 1 0; do
  # The job reads the servers' byte counters from their metrics endpoints: zps launch gives the
  # scheduler this port and the servers and workers the next ones.
  port=$("$PY" "$SRC/tools/free_ports.py" 5) || fail "no 5 free ports in a row for ZPS_METRICS_PORT"
  ZPS_SKIP_ZEROS=$on ZPS_METRICS_PORT=$port timeout 300 "$ZPS" launch --servers 2 --workers 2 --progress 0 -- \
    "$PY" "$SRC/tests/python/skip_zeros_job.py" >"$OUT" 2>&1 || fail "ZPS_SKIP_ZEROS=$on: the job exited $?"
  [ "$(grep -c "^\[worker [01]\] skip zeros ok$" "$OUT")" = 2 ] || fail "ZPS_SKIP_ZEROS=$on: not both workers finished"
  echo "ZPS_SKIP_ZEROS=$on: $(grep -c "^\[worker 0\] ok:" "$OUT") checks passed on worker 0 (and on worker 1)"
  sums[$on]=$(sed -n 's/^\[worker 0\] sums \([0-9a-f]*\)$/\1/p' "$OUT")
  read -r pushed[$on] pulled[$on] dense < <(sed -n 's/^\[worker 0\] bytes pushed \([0-9]*\) pulled \([0-9]*\) dense \([0-9]*\)$/\1 \2 \3/p' "$OUT")
  [ -n "${sums[$on]}" ] && [ -n "${pushed[$on]}" ] || fail "ZPS_SKIP_ZEROS=$on: no sums or byte line"
  echo "ZPS_SKIP_ZEROS=$on: pushed ${pushed[$on]} pulled ${pulled[$on]} bytes of $dense dense"
done
[ "${sums[1]}" = "${sums[0]}" ] || fail "the sums' bits differ: ${sums[1]} with zeros skipped, ${sums[0]} without"
echo "ok: the same bits with and without skipping zeros (${sums[1]:0:16})"
[ "${pushed[0]}" -ge "$dense" ] && [ "${pulled[0]}" -ge "$dense" ] ||
  fail "ZPS_SKIP_ZEROS=0 moved fewer than the dense bytes"
# A push: the bitmap (1/32 of the dense bytes) and the 10% of values, 13.1%; a sum of two pushes has
# 19% of its elements not zero, 22.1%.
[ $((pushed[1] * 100)) -le $((dense * 14)) ] || fail "ZPS_SKIP_ZEROS=1 pushed more than 14% of the dense bytes"
[ $((pulled[1] * 100)) -le $((dense * 23)) ] || fail "ZPS_SKIP_ZEROS=1 pulled more than 23% of the dense bytes"
echo "ok: a 90%-zero tensor crossed in $((100 * pushed[1] / dense))% (pushed) and $((100 * pulled[1] / dense))% (pulled) of the dense bytes"
echo "skip zeros test: all checks passed"
