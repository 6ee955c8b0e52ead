#!/usr/bin/env bash
# A 2x2 `zps train` with ZPS_TRACE_ON for steps 5..8, merged with `zps trace merge`, must be valid
# trace-event JSON in which every worker's push_pull of a round has the servers' sum of that worker, key
# and round inside it: the sum ends before the reply arrived (strict: the reply follows the sum), and
# starts no earlier than 2 ms before the worker's event (the worker stamps its start just after handing
# the message to its I/O thread, which may already have delivered it).
# Usage: trace_test.sh ZPS_BIN DATA_DIR. Exit 77 (SKIPPED) when node is missing.
set -euo pipefail
ZPS=$1
DATA=$2
if ! command -v node >/dev/null; then
  echo "SKIPPED: node is not installed (tools/install-deps.sh installs it)"
  exit 77
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
ZPS_TRACE_ON=1 ZPS_TRACE_START_STEP=5 ZPS_TRACE_END_STEP=8 ZPS_TRACE_DIR="$WORK/trace" \
  "$ZPS" launch --servers 2 --workers 2 --timeout 120 -- train --data digits --data_dir "$DATA" --epochs 1 \
  > launch.log 2>&1 || { tail -20 launch.log; exit 1; }
"$ZPS" trace merge "$WORK/all.json" "$WORK"/trace/*.json
node - "$WORK/all.json" <<'JS'
const fs = require('fs');
const trace = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const events = trace.traceEvents.filter((e) => e.ph === 'X');
const pushes = events.filter((e) => e.cat === 'worker' && e.name === 'push_pull');
const sums = events.filter((e) => e.cat === 'server' && e.name === 'sum');
const fail = (m) => { console.error('trace test: ' + m); process.exit(1); };
const rounds = new Set(pushes.map((e) => e.args.round));
if (pushes.length === 0 || sums.length === 0) fail(`no push_pull (${pushes.length}) or sum (${sums.length}) events`);
for (const r of [5, 6, 7, 8]) if (!rounds.has(r)) fail(`round ${r} missing from the worker events`);
for (const r of rounds) if (r < 5 || r > 8) fail(`round ${r} is outside ZPS_TRACE_START_STEP..END_STEP`);
for (const w of [0, 1]) if (!pushes.some((e) => e.args.worker === w)) fail(`no events of worker ${w}`);
let checked = 0;
for (const p of pushes) {
  const s = sums.find((x) => x.args.worker === p.args.worker && x.args.key === p.args.key && x.args.round === p.args.round);
  if (!s) fail(`no server sum for worker ${p.args.worker} key ${p.args.key} round ${p.args.round}`);
  if (s.ts < p.ts - 2000 || s.ts + s.dur > p.ts + p.dur)
    fail(`sum [${s.ts}, ${s.ts + s.dur}] is not inside push_pull [${p.ts}, ${p.ts + p.dur}] (worker ${p.args.worker}, round ${p.args.round})`);
  if (!p.args.tensor || !(p.args.bytes > 0)) fail('a push_pull event lacks its tensor name or size');
  ++checked;
}
console.log(`trace test: ${events.length} events, ${pushes.length} push_pull, ${sums.length} sum; ${checked} pushes each contain their server sum`);
JS
