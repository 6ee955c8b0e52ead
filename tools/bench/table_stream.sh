#!/usr/bin/env bash
# A stream of new table ids through a real job (1 scheduler, 2 servers, 1 worker on loopback) under a
# table budget: runs tools/bench/table_stream.py and checks, from each server's exit line, that the
# rows it held fit its budget, that every id pushed was created once and that the evictions add up.
#   tools/bench/table_stream.sh [IDS [BUDGET_BYTES [FORMAT]]]     (defaults: 2000000, 33554432, float32)
# Prints the servers' lines and one summary line; exits 1 when a check fails. docs/tables.md reports it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BUILD_DIR:-$ROOT/build}/bin/zps
IDS=${1:-2000000}
BUDGET=${2:-33554432}
FORMAT=${3:-float32}
DIM=16
# Adam: 2 state floats per value; values 4 bytes (float32) or 2; 96 bytes of bookkeeping a row.
VALUE_BYTES=4
[ "$FORMAT" = float32 ] || VALUE_BYTES=2
ROW_BYTES=$((DIM * VALUE_BYTES + 2 * DIM * 4 + 96))
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
start=$SECONDS
ZPS_TABLE_MEMORY_BYTES=$BUDGET ZPS_TABLE_ROW_FORMAT=$FORMAT "$BIN" launch --servers 2 --workers 1 --timeout 1200 -- \
  python3 "$ROOT/tools/bench/table_stream.py" --ids "$IDS" --dim $DIM --optimizer adam >"$OUT" 2>&1 || {
  tail -30 "$OUT"
  echo "table_stream: the job failed" >&2
  exit 1
}
grep -E "param tables:|table_stream:" "$OUT"
python3 - "$OUT" "$IDS" "$BUDGET" "$ROW_BYTES" "$FORMAT" $((SECONDS - start)) <<'PY'
import re, sys
out, ids, budget, row_bytes, fmt, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
held = created = evicted = 0
peaks = []
for m in re.finditer(r"param tables: (\d+) rows held.*?(\d+) rows created, (\d+) evicted; peak resident memory (\d+) bytes",
                     open(out, errors="replace").read()):
    h, c, e, peak = map(int, m.groups())
    ok = h * row_bytes <= budget
    print("server: %d rows held (%d bytes charged, budget %d: %s), %d created, %d evicted, peak RSS %.1f MiB"
          % (h, h * row_bytes, budget, "holds" if ok else "EXCEEDED", c, e, peak / 2**20))
    if not ok:
        sys.exit(1)
    held, created, evicted = held + h, created + c, evicted + e
    peaks.append(peak)
if len(peaks) != 2:
    sys.exit("table_stream: expected the exit lines of 2 servers, found %d" % len(peaks))
print("table_stream: %d ids (%s rows, budget %d bytes per server): %d rows held, %d created, %d evicted, "
      "created - evicted = held: %s; %s s" % (ids, fmt, budget, held, created, evicted,
                                               created - evicted == held, seconds))
sys.exit(0 if created == ids and created - evicted == held else 1)
PY
