#!/usr/bin/env bash
# Dashboard in a real browser: runs `zps launch --servers 1 --workers 2 -- train` with the scheduler's
# ZPS_METRICS_PORT, loads http://127.0.0.1:PORT/ in Debian's headless chromium, checks the node table
# (one server and two worker rows, each with zps train's epoch) and a loss chart with points, and saves a
# screenshot.
# Usage: dashboard_test.sh ZPS_BIN DATA_DIR OUT_DIR. Exit 77 (SKIPPED) when chromium is missing.
set -euo pipefail
ZPS_BIN=$1 DATA_DIR=$2 OUT_DIR=$3
CHROMIUM=$(command -v chromium || true)
if [ -z "$CHROMIUM" ]; then
  echo "SKIPPED: chromium is not installed (apt-get install chromium)"
  exit 77
fi
mkdir -p "$OUT_DIR"
work=$(mktemp -d)
launch_pid=""
cleanup() {
  if [ -n "$launch_pid" ]; then kill "$launch_pid" 2>/dev/null || true; wait "$launch_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 "$(dirname "$0")/../../tools/free_ports.py" 4) || exit 1
# zps launch gives the scheduler this port and the others port+1.. (port+3), all four free now and below
# the ephemeral range, where another process's outgoing connection cannot take one. The job's token is set here
# (launch would make a random one) so that the page and zps status can present it.
export ZPS_AUTH_TOKEN=dashboard-test-token
# A node whose heartbeat is two intervals old shows as late, not alive: at 0.5 s the idle server's row
# was late once on a loaded 2-core machine while chromium started, so the interval is 1 s (late at 2 s).
ZPS_METRICS_PORT=$port ZPS_HEARTBEAT_INTERVAL=1 ZPS_DATA_DIR="$DATA_DIR" \
  "$ZPS_BIN" launch --servers 1 --workers 2 --timeout 120 -- train --data digits --epochs 3000 \
  >"$work/launch.log" 2>&1 &
launch_pid=$!

# The page needs the job running with loss points from both workers.
for _ in $(seq 1 150); do
  if "$ZPS_BIN" status --metrics_port "$port" --host 127.0.0.1 >/dev/null 2>&1; then break; fi
  sleep 0.2
done
sleep 4

browse() {
  timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$work/profile-$1" \
    --window-size=1280,1000 --virtual-time-budget=5000 "${@:2}" "http://127.0.0.1:$port/?token=$ZPS_AUTH_TOKEN" 2>"$work/chromium-$1.log"
}
browse dom --dump-dom >"$work/dom.html"
browse shot --screenshot="$OUT_DIR/dashboard.png" >/dev/null || true

fail=0
grep -q '<tr class="alive"><td class="l">server</td>' "$work/dom.html" || { echo "FAIL: no live server row"; fail=1; }
rows=$(grep -o '<tr class="alive"><td class="l">worker</td>' "$work/dom.html" | wc -l)
[ "$rows" -eq 2 ] || { echo "FAIL: $rows live worker rows, expected 2"; fail=1; }
epochs=$(grep -o '<td>[0-9]*/3000</td>' "$work/dom.html" | wc -l)
[ "$epochs" -eq 2 ] || { echo "FAIL: $epochs worker rows show an epoch of 3000, expected 2"; fail=1; }
points=$(grep -o 'id="loss"[^>]*data-points="[0-9]*"' "$work/dom.html" | grep -o '[0-9]*"$' | tr -d '"' || true)
[ "${points:-0}" -gt 0 ] || { echo "FAIL: the loss chart has no points"; fail=1; }
[ -s "$OUT_DIR/dashboard.png" ] || { echo "FAIL: no screenshot"; fail=1; }
if [ $fail -ne 0 ]; then
  echo "--- DOM"; head -c 4000 "$work/dom.html"; echo; echo "--- launch log"; tail -20 "$work/launch.log"
  exit 1
fi
echo "dashboard: server row, $rows worker rows ($epochs with their epoch), loss chart with $points points"
echo "screenshot: $OUT_DIR/dashboard.png"
