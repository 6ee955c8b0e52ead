#!/usr/bin/env bash
# The DLRM example (examples/torch/train_dlrm.py) and its synthetic data (dlrm_data.py):
#   data   the generator is a function of its seed: two processes given the same seed write the same
#          bytes, a row is the same whatever range it is generated in, and another seed differs
#   bags   zps.torch.EmbeddingBags checked exactly (embedding_bags_job.py, 1 worker + 2 servers)
#   train  2 workers + 2 servers train the synthetic DLRM at a small scale; both workers print the same
#          test AUC, at least the Bayes AUC - MARGIN and well above chance
#   row_cache_exact, row_cache_stale, row_cache_bound, row_cache_write_back
#          the worker-side row cache (row_cache_job.py, 2 workers + 2 servers): k = 0 is bit for bit no
#          cache; k = 3 pulls exactly the rows its rule says and serves no row older than 3 steps; a
#          stream of new ids keeps it at its row bound; write-back serves the pulled row moved by
#          this worker's gradients (as every worker's), pushes exactly the held rows its rule says,
#          and ends with the servers' rows bit for bit those without cache
#   prefetch_exact, prefetch_async, prefetch_deadline
#          EmbeddingBags.prefetch (prefetch_job.py, 2 workers + 2 servers): sync rows bit for bit those
#          without prefetch, async rows at most one step stale, a held prefetch fails at
#          ZPS_REQUEST_TIMEOUT; and prefetch_exact also trains DLRM 40 steps with --prefetch 0 and 1:
#          the held-out scores are the same bits
#   stream_data    drifting ids (train_dlrm.py --drift-rows): the dense fields and labels are those of
#          fixed ids, an id changes exactly when its (field, rank)'s generation does, ids are below
#          2^40, the held-out rows use the ids of the end of training, a function of the seed
#   stream_budget  tools/bench/dlrm-stream.sh's smoke run: with ZPS_TABLE_MEMORY_BYTES the servers
#          evict, hold their budget and count created - evicted = held
# Usage: dlrm_test.sh <build dir> <source dir> data|bags|train|row_cache_*|prefetch_*|stream_*. Skipped (77)
# when /usr/bin/python3 cannot import torch.
set -uo pipefail
BUILD=$1 SRC=$2 WHAT=$3
ZPS=$BUILD/bin/zps
PY=/usr/bin/python3
if ! why=$("$PY" -c "import torch" 2>&1); then
  echo "SKIPPED: $PY cannot import torch (install python3-torch): ${why##*$'\n'}"
  exit 77
fi
export PYTHONPATH=$SRC/examples/torch:$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OUT=$T/out
fail() {
  echo "FAILED: $1"
  # Each node's own error first (a tail alone can be all of the node that reported a peer's exit).
  grep -E "^\[[a-z]+ [0-9]+\] (zps\.errors\.|FAILED|[A-Za-z]*Error)" "$OUT" 2>/dev/null | head -8
  tail -40 "$OUT" 2>/dev/null
  exit 1
}
ok() { echo "ok: $1"; }

case "$WHAT" in
  data)
    # digest SEED FIRST COUNT: sha256 of rows [FIRST, FIRST + COUNT) of the training stream.
    digest() {
      "$PY" -c "
import hashlib, sys
from dlrm_data import Synthetic
h = hashlib.sha256()
for a in Synthetic(int(sys.argv[1]), scale=0.01).rows(int(sys.argv[2]), int(sys.argv[3])):
    h.update(a.tobytes())
print(h.hexdigest())" "$@" 2>"$OUT" || fail "the generator failed"
    }
    a=$(digest 7 0 70000) b=$(digest 7 0 70000) c=$(digest 8 0 70000)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "seed 7 gave $a, then $b"
    ok "seed 7 gives the same rows in two processes ($a)"
    [ "$a" != "$c" ] || fail "seeds 7 and 8 gave the same rows"
    ok "seed 8 gives other rows ($c)"
    "$PY" -c "
from dlrm_data import Synthetic
whole, part = Synthetic(7, scale=0.01).rows(0, 70000), Synthetic(7, scale=0.01).rows(65000, 5000)
assert all((w[65000:] == p).all() for w, p in zip(whole, part)), 'rows 65000.. differ when generated alone'
assert len(whole[0]) == 70000 and whole[1].shape == (70000, 26), 'wrong shapes'
" >"$OUT" 2>&1 || fail "a range of rows differs from the same rows generated in a longer range"
    ok "rows 65000..69999 are the same generated alone or with rows 0..64999"
    ;;
  bags)
    timeout 300 "$ZPS" launch --servers 2 --workers 1 --progress 0 -- python3 "$SRC/tests/torch/embedding_bags_job.py" \
      >"$OUT" 2>&1 || fail "zps launch ... embedding_bags_job.py exited $?"
    grep -q "^\[worker 0\] bags ok$" "$OUT" || fail "embedding_bags_job.py did not print 'bags ok'"
    ok "EmbeddingBags: lookups, sum and mean pooling, tables apart, one exact SGD step, ids out of range refused"
    ;;
  train)
    MARGIN=0.03
    timeout 600 "$ZPS" launch --servers 2 --workers 2 --progress 0 -- python3 "$SRC/examples/torch/train_dlrm.py" \
      --scale 0.01 --steps 300 --warmup 5 --test-rows 20000 --seed "${DLRM_SEED:-1}" >"$OUT" 2>&1 ||
      fail "zps launch ... train_dlrm.py exited $?"
    mapfile -t auc < <(sed -n 's/^\[worker [01]\] Test AUC: \([0-9.]*\) .*/\1/p' "$OUT")
    bayes=$(sed -n 's/^\[worker 0\] Test AUC: .*, Bayes AUC: \([0-9.]*\), .*/\1/p' "$OUT")
    echo "test AUC: ${auc[*]:-none}, Bayes AUC: ${bayes:-none}"
    [ ${#auc[@]} -eq 2 ] && [ -n "$bayes" ] || fail "expected a test AUC from each worker and the Bayes AUC"
    [ "${auc[0]}" = "${auc[1]}" ] || fail "the workers' AUCs differ: ${auc[0]} and ${auc[1]}"
    "$PY" -c "import sys; sys.exit(0 if float('${auc[0]}') >= max(float('$bayes') - $MARGIN, 0.7) else 1)" ||
      fail "test AUC ${auc[0]} < Bayes AUC $bayes - $MARGIN (or < 0.7)"
    ok "test AUC ${auc[0]} >= Bayes AUC $bayes - $MARGIN and >= 0.7"
    ;;
  row_cache_*)
    part=${WHAT#row_cache_}
    # The job reads each worker's byte counters from its metrics endpoint: zps launch gives the
    # scheduler this port and the servers and workers the next ones (port+1 .. port+4), all five free
    # and below the ephemeral range (a node that cannot listen on its port refuses to start).
    port=$("$PY" "$SRC/tools/free_ports.py" 5) || fail "no 5 free ports in a row for ZPS_METRICS_PORT"
    ZPS_METRICS_PORT=$port timeout 300 "$ZPS" launch --servers 2 --workers 2 --progress 0 -- \
      python3 "$SRC/tests/torch/row_cache_job.py" "$part" >"$OUT" 2>&1 || fail "row_cache_job.py $part exited $?"
    [ "$(grep -c "^\[worker [01]\] row cache ok$" "$OUT")" = 2 ] ||
      fail "row_cache_job.py $part: not both workers printed 'row cache ok'"
    ok "row cache, $part: $(grep -c "^\[worker 0\] ok:" "$OUT") checks passed on worker 0 (and on worker 1)"
    ;;
  prefetch_*)
    part=${WHAT#prefetch_}
    wait_s=${ZPS_REQUEST_TIMEOUT:-300}
    [ "$part" = deadline ] && wait_s=2  # the held prefetch must fail after this many seconds
    ZPS_REQUEST_TIMEOUT=$wait_s timeout 300 "$ZPS" launch --servers 2 --workers 2 \
      --progress 0 -- python3 "$SRC/tests/torch/prefetch_job.py" "$part" >"$OUT" 2>&1 ||
      fail "prefetch_job.py $part exited $?"
    [ "$(grep -c "^\[worker [01]\] prefetch ok$" "$OUT")" = 2 ] ||
      fail "prefetch_job.py $part: not both workers printed 'prefetch ok'"
    ok "prefetch, $part: $(grep -c "^\[worker 0\] ok:" "$OUT") checks passed on worker 0"
    [ "$part" = exact ] || exit 0
    for p in 0 1; do
      timeout 300 "$ZPS" launch --servers 2 --workers 2 --progress 0 -- python3 "$SRC/examples/torch/train_dlrm.py" \
        --scale 0.01 --steps 40 --warmup 2 --test-rows 4000 --prefetch $p --json >"$OUT" 2>&1 ||
        fail "zps launch ... train_dlrm.py --prefetch $p exited $?"
      sums[$p]=$(sed -n 's/^\[worker 0\] {.*"scores_sha256": "\([0-9a-f]*\)".*/\1/p' "$OUT")
      [ -n "${sums[$p]}" ] || fail "train_dlrm.py --prefetch $p printed no scores_sha256"
    done
    [ "${sums[0]}" = "${sums[1]}" ] || fail "DLRM's held-out scores differ: ${sums[0]} without prefetch, ${sums[1]} with"
    ok "DLRM after 40 steps: the held-out scores are the same bits with and without prefetch (${sums[0]:0:16})"
    ;;
  stream_data)
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
  stream_budget)
    SEEDS=1 STEPS=30 WARMUP=2 DRIFT=5000 BUDGETS=1048576 TEST_ROWS=2000 OUT_DIR=$T/bench BUILD_DIR=$BUILD \
      timeout 300 "$SRC/tools/bench/dlrm-stream.sh" >"$OUT" 2>&1
    code=$?
    [ $code -eq 77 ] && { cat "$OUT"; exit 77; }
    [ $code -eq 0 ] || fail "dlrm-stream.sh exited $code"
    grep -q "rows evicted, created - evicted = held: met" "$OUT" || fail "the budget goal line is not met"
    grep "^goal:" "$OUT"
    echo "ok: under a 1 MiB budget per server the servers evicted, held the budget and counted every row"
    ;;
  *)
    echo "usage: $0 <build dir> <source dir> data|bags|train|row_cache_*|prefetch_*|stream_*"
    exit 2
    ;;
esac
