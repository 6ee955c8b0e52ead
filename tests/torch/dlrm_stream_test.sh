#!/usr/bin/env bash
# The DLRM example on a stream of ever-new ids (train_dlrm.py --drift-rows, dlrm_data.drifting_ids):
#   data    drifting ids: the dense fields and labels are those of fixed ids, an id changes exactly when its
#           (field, rank)'s generation does, ids are below 2^40, the held-out rows use the ids of the end
#           of training, and the generator is a function of the seed
#   budget  tools/bench/dlrm-stream.sh's smoke run (2 workers + 2 servers, a few dozen steps): with
#           ZPS_TABLE_MEMORY_BYTES the servers evict, hold their budget and count created - evicted = held
# Usage: dlrm_stream_test.sh <build dir> <source dir> data|budget. Skipped (77) when /usr/bin/python3
# cannot import torch.
set -uo pipefail
BUILD=$1 SRC=$2 WHAT=$3
PY=/usr/bin/python3
if ! why=$("$PY" -c "import torch" 2>&1); then
  echo "SKIPPED: $PY cannot import torch (install python3-torch): ${why##*$'\n'}"
  exit 77
fi
export PYTHONPATH=$SRC/examples/torch:$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OUT=$T/out
fail() { echo "FAILED: $1"; tail -40 "$OUT" 2>/dev/null; exit 1; }

case "$WHAT" in
  data)
    "$PY" - >"$OUT" 2>&1 <<'PY' || fail "the drifting generator"
import numpy as np
from dlrm_data import Synthetic, _hash
D, N = 3000, 70000
fixed, drift = Synthetic(7, scale=0.01), Synthetic(7, scale=0.01, drift_rows=D, held_out_at=N - 1)
a, b = fixed.rows(0, N), drift.rows(0, N)
assert (a[0] == b[0]).all() and (a[2] == b[2]).all() and (a[3] == b[3]).all(), "drift changed more than the ids"
ids = b[1]
assert ids.min() >= 0 and ids.max() < 2**40, "ids outside [0, 2^40)"
# The ranks behind the ids: fixed ids are a bijection of ranks in each field.
rank_of = [{} for _ in range(26)]
t = fixed.teacher
for f, c in enumerate(t.cards):
    for r in range(min(c, 64)):
        rank_of[f][(r * t.steps[f] + t.offsets[f]) % c] = r
checked = 0
for f in (0, 2, 9):
    rows = [i for i in range(N) if a[1][i, f] in rank_of[f] and rank_of[f][a[1][i, f]] < 4]
    for i, j in zip(rows[:-1], rows[1:]):
        ri, rj = rank_of[f][a[1][i, f]], rank_of[f][a[1][j, f]]
        if ri != rj:
            continue
        phase = int(_hash(7, 0x5EED, f, ri) % np.uint64(D))
        same_generation = (i + phase) // D == (j + phase) // D
        assert (ids[i, f] == ids[j, f]) == same_generation, "field %d rank %d rows %d, %d" % (f, ri, i, j)
        checked += 1
assert checked > 1000, "too few pairs checked: %d" % checked
test_fixed, test_drift = fixed.rows(0, 5000, stream=1), drift.rows(0, 5000, stream=1)
ranks = np.array([[rank_of[f].get(v, -1) for f, v in enumerate(row)] for row in test_fixed[1][:200]])
for f in (0, 2, 9):
    known = ranks[:, f] >= 0
    phase = (_hash(7, 0x5EED, f, ranks[known][:, f]) % np.uint64(D)).astype(np.int64)
    gen = (N - 1 + phase) // D
    want = (_hash(7, 0x1D5, f, ranks[known][:, f], gen) >> np.uint64(24)).astype(np.int64)
    assert (test_drift[1][:200][known][:, f] == want).all(), "held-out ids of field %d are not those of row %d" % (f, N - 1)
again = Synthetic(7, scale=0.01, drift_rows=D, held_out_at=N - 1).rows(60000, 10000)
assert all((x[60000:] == y).all() for x, y in zip(b, again)), "a range differs generated alone"
other = Synthetic(8, scale=0.01, drift_rows=D).rows(0, 1000)[1]
assert (other != ids[:1000]).any(), "seeds 7 and 8 gave the same ids"
print("pairs checked", checked)
PY
    echo "ok: drifting ids change exactly at their generation, fields and labels as fixed ids, held-out ids of the end ($(cat "$OUT"))"
    ;;
  budget)
    SEEDS=1 STEPS=30 WARMUP=2 DRIFT=5000 BUDGETS=1048576 TEST_ROWS=2000 OUT_DIR=$T/bench BUILD_DIR=$BUILD \
      timeout 300 "$SRC/tools/bench/dlrm-stream.sh" >"$OUT" 2>&1
    code=$?
    [ $code -eq 77 ] && { cat "$OUT"; exit 77; }
    [ $code -eq 0 ] || fail "dlrm-stream.sh exited $code"
    grep -q "rows evicted, created - evicted = held: met" "$OUT" || fail "the budget goal line is not met"
    grep "^goal:" "$OUT"
    echo "ok: under a 1 MiB budget per server the servers evicted, held the budget and counted every row"
    ;;
  *) echo "usage: $0 <build dir> <source dir> data|budget" >&2; exit 2 ;;
esac
