"""RowCache: a worker's copy of the table rows it pulled lately, served for up to `max_age` steps.

Skewed traffic (Zipf ids, as click logs have) makes a step pull the same hot rows as the steps before
it. zps.torch.Embedding (and EmbeddingBags) given row_cache_steps=k > 0 keeps each pulled row here
and serves it, without asking the servers, until it is k steps old; then the next lookup pulls it
again. By default gradients are not held back: every step still pushes the gradient of every row it
used, and the servers apply them as before; the cached copy is served as pulled, without this worker's
own updates (the servers' optimizer, with its state, owns the rows). Write-back (below, sgd tables
only) holds them instead.

Staleness, exactly: the clock is the table's pushes (one per training step). A row pulled when the
clock read s (in sync mode: with every worker's rounds 1..s applied) is served while the clock reads
t <= s + k, so a row used at step t lacks at most the k rounds s+1..t: it is at most k steps old.
k = 0 caches nothing (every lookup pulls, as without a cache).

Write-back (write_back_lr = an sgd table's learning rate; Embedding's row_cache_write_back): this
worker's gradient of a cached row moves its copy at once and is added to the row's held sum instead of
being pushed. The copy moves by lr x workers x gradient: the step the servers' sgd would take if every
worker had sent the same gradient. Workers draw their batches from the same data, so for the hot rows,
which every worker uses, the others' gradients are like this one's; an estimate, replaced by the
servers' row at each refresh (moved by this worker's share alone, the copy lags the servers' row, and
on DLRM that cost 0.0015 AUC where the estimate costs none: docs/recommendation.md). A held sum is
pushed in the push before the step at which its row turns stale (so the pull that refreshes the row
sees it applied), or in the next push after its row is evicted (a row evicted and used again before
that push is pulled without it), or by take_all_held() (Embedding.push_held) at the end. The servers'
row lacks at most the last k steps of each worker's updates, so a served row lacks at most the other
workers' updates of the 2k steps before, and has the estimate in their place. Every gradient reaches
the servers exactly once, and sgd applies a sum as it applies its terms: after push_held the servers'
rows are those of training without the cache on the same gradients (up to the order of float
additions). Only sgd: Adagrad or Adam would apply a held sum as one step, not as the steps it sums. A
hot row then moves both ways once every k + 1 steps instead of every step.

Memory: at most `capacity` rows, allocated up front: capacity x dim floats, plus 24 bytes per row (its
key and two step stamps) and a dict entry per row held; write-back doubles the floats (the held sums).
When new rows need room, the least recently used go first, so a stream of ever-new ids keeps
the cache at `capacity` rows whatever its length.
"""
import torch


class RowCache:
    """Up to `capacity` rows of `dim` floats keyed by int64 key, each served while at most `max_age`
    steps old (`advance()` moves the clock one step)."""

    def __init__(self, dim, max_age, capacity, write_back_lr=None, workers=1):
        if int(max_age) < 1:
            raise ValueError("zps.torch RowCache: max_age must be >= 1 step (0 means no cache), not %r" % (max_age,))
        if int(capacity) < 1:
            raise ValueError("zps.torch RowCache: capacity must be >= 1 row, not %r" % (capacity,))
        self.dim, self.max_age, self.capacity = int(dim), int(max_age), int(capacity)
        self.step = 0
        self.slot_of = {}  # key -> slot
        self.keys = torch.full((self.capacity,), -1, dtype=torch.int64)
        self.rows = torch.zeros(self.capacity, self.dim, dtype=torch.float32)
        self.pulled_at = torch.zeros(self.capacity, dtype=torch.int64)
        # Last step a slot was used; free slots hold -1, so they are taken before any row is evicted.
        self.used_at = torch.full((self.capacity,), -1, dtype=torch.int64)
        self.hits = self.misses = self.evictions = 0
        # Write-back (an sgd table's learning rate, or None): this worker's gradients of a cached row move
        # its copy at once, as if each of the job's `workers` had sent the same, and are held, summed,
        # until the row is refreshed or evicted.
        self.write_back = write_back_lr is not None
        self.local_step = float(write_back_lr) * int(workers) if self.write_back else None
        if self.write_back:
            self.held = torch.zeros(self.capacity, self.dim, dtype=torch.float32)
            self.holding = torch.zeros(self.capacity, dtype=torch.bool)
            self._released = []  # (keys, gradients) of evicted rows, for the next push

    @property
    def rows_held(self):
        """Rows cached now (not len(): an empty cache stays truthy)."""
        return len(self.slot_of)

    def advance(self):
        """One step done (the table pushed its gradients): every cached row is one step older."""
        self.step += 1

    def clear(self):
        """Forgets every row (the next lookups pull them all). With write-back, the held gradients must
        have been pushed first (take_all_held)."""
        if self.write_back and (bool(self.holding.any()) or self._released):
            raise RuntimeError("zps.torch RowCache: clear() with gradients still held (push take_all_held() first)")
        self.slot_of.clear()
        self.keys.fill_(-1)
        self.used_at.fill_(-1)

    def _slots(self, keys):
        return torch.tensor([self.slot_of.get(k, -1) for k in keys.tolist()], dtype=torch.int64)

    def _fresh(self, keys, step):
        """(slots of `keys`, -1 where not cached; which of them a lookup at clock `step` serves)."""
        slots = self._slots(keys)
        cached = slots >= 0
        fresh = cached.clone()
        fresh[cached] = step - self.pulled_at[slots[cached]] <= self.max_age
        return slots, fresh

    def would_pull(self, keys, steps_ahead=0):
        """Which of `keys` a lookup would pull if it came `steps_ahead` steps from now with no lookup in
        between (a bool mask): what a prefetch for that lookup pulls."""
        return ~self._fresh(keys, self.step + int(steps_ahead))[1]

    def lookup(self, keys, pull):
        """The rows of `keys` (distinct int64 keys on the CPU), [len(keys), dim]: the cached ones that are
        at most max_age steps old, the rest from pull(missing_keys), which are then cached."""
        slots, fresh = self._fresh(keys, self.step)
        out = torch.empty(keys.numel(), self.dim, dtype=torch.float32)
        hit_slots = slots[fresh]
        out[fresh] = self.rows[hit_slots]
        self.used_at[hit_slots] = self.step
        missing = ~fresh
        missing_keys = keys[missing]
        pulled = pull(missing_keys)
        out[missing] = pulled
        self.hits += int(hit_slots.numel())
        self.misses += int(missing_keys.numel())
        self._store(missing_keys, pulled, slots[missing])
        return out

    def hold(self, keys, grads):
        """Write-back: takes this step's gradients of `keys` (as pushed: scaled, distinct keys) and
        returns (keys, gradients) to push now. A cached row's gradient moves its copy (row -= lr x
        workers x gradient: the servers' sgd step if every worker sent the same) and is added to the
        row's held sum; what is pushed is the rows not cached, the held sums of rows that turn stale at
        the next step (so the pull that refreshes them sees them applied) and those of rows evicted
        since."""
        slots = self._slots(keys)
        cached = slots >= 0
        held_slots, held_grads = slots[cached], grads[cached]
        self.rows.index_add_(0, held_slots, held_grads, alpha=-self.local_step)
        self.held.index_add_(0, held_slots, held_grads)
        self.holding[held_slots] = True
        due = self.holding & (self.step + 1 - self.pulled_at > self.max_age)
        return self._let_go(due, keys[~cached], grads[~cached])

    def take_all_held(self):
        """Write-back: (keys, gradients) of every held sum, now no longer held (for a last push)."""
        return self._let_go(self.holding, keys=torch.zeros(0, dtype=torch.int64),
                            grads=torch.zeros(0, self.dim, dtype=torch.float32))

    def _let_go(self, due, keys, grads):
        """(keys, gradients) to push: `keys` and `grads`, the held sums of the slots `due` (a mask) and
        those of the rows evicted since the last push, merged per key; the sums are no longer held."""
        slots = due.nonzero().reshape(-1)
        out = _merge(torch.cat([keys, self.keys[slots]] + [k for k, _ in self._released]),
                     torch.cat([grads, self.held[slots]] + [g for _, g in self._released]))
        self.held[slots] = 0
        self.holding[slots] = False
        self._released = []
        return out

    def _store(self, keys, rows, slots):
        """Caches rows just pulled: a stale cached key keeps its slot; new keys take free slots, then
        the least recently used (never a row this step used, unless a step uses more than capacity)."""
        stale = slots >= 0
        new = ~stale
        room = self.capacity - int(stale.sum())
        if int(new.sum()) > room:  # a step with more new rows than fit: only the first ones are cached
            new[new.nonzero().reshape(-1)[room:]] = False
        new_keys = keys[new]
        # Refreshed slots keep their key: out of reach of the choice of slots for the new keys.
        self.used_at[slots[stale]] = self.step + 1
        taken = torch.topk(self.used_at, new_keys.numel(), largest=False).indices
        if self.write_back:  # evicted rows' held gradients go with the next push
            leaving = taken[self.holding[taken]]
            if leaving.numel():
                self._released.append((self.keys[leaving].clone(), self.held[leaving].clone()))
                self.held[leaving] = 0
                self.holding[leaving] = False
        for old in self.keys[taken].tolist():
            if old >= 0:
                del self.slot_of[old]
                self.evictions += 1
        for slot, key in zip(taken.tolist(), new_keys.tolist()):
            self.slot_of[key] = slot
        self.keys[taken] = new_keys
        targets = torch.cat([slots[stale], taken])
        self.rows[targets] = torch.cat([rows[stale], rows[new]])
        self.pulled_at[targets] = self.step
        self.used_at[targets] = self.step
        if self.write_back:  # a refreshed row still holding gradients: its copy has them
            again = targets[self.holding[targets]]
            self.rows.index_add_(0, again, self.held[again], alpha=-self.local_step)


def _merge(keys, grads):
    """(distinct keys, their gradients summed): a key may come both as evicted and as used again."""
    distinct, inverse = torch.unique(keys, return_inverse=True)
    if distinct.numel() == keys.numel():
        return keys, grads
    return distinct, torch.zeros(distinct.numel(), grads.shape[1], dtype=grads.dtype).index_add_(0, inverse, grads)
