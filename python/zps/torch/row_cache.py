"""RowCache: a worker's copy of the table rows it pulled lately, served for up to `max_age` steps.

Skewed traffic (Zipf ids, as click logs have) makes a step pull the same hot rows as the steps before
it. zps.torch.Embedding (and EmbeddingBags) given row_cache_steps=k > 0 keeps each pulled row here
and serves it, without asking the servers, until it is k steps old; then the next lookup pulls it
again. Gradients are not held back: every step still pushes the gradient of every row it used, and
the servers apply them as before. The cached copy is served as pulled, without this worker's own
updates (the servers' optimizer, with its state, owns the rows; a local replay of it would still miss
the other workers' gradients).

Staleness, exactly: the clock is the table's pushes (one per training step). A row pulled when the
clock read s (in sync mode: with every worker's rounds 1..s applied) is served while the clock reads
t <= s + k, so a row used at step t lacks at most the k rounds s+1..t: it is at most k steps old.
k = 0 caches nothing (every lookup pulls, as without a cache).

Memory: at most `capacity` rows, allocated up front: capacity x dim floats, plus 24 bytes per row (its
key and two step stamps) and a dict entry per row held. When new rows need room, the least recently used go first, so a stream of ever-new ids keeps
the cache at `capacity` rows whatever its length.
"""
import torch


class RowCache:
    """Up to `capacity` rows of `dim` floats keyed by int64 key, each served while at most `max_age`
    steps old (`advance()` moves the clock one step)."""

    def __init__(self, dim, max_age, capacity):
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

    @property
    def rows_held(self):
        """Rows cached now (not len(): an empty cache stays truthy)."""
        return len(self.slot_of)

    def advance(self):
        """One step done (the table pushed its gradients): every cached row is one step older."""
        self.step += 1

    def clear(self):
        """Forgets every row (the next lookups pull them all)."""
        self.slot_of.clear()
        self.keys.fill_(-1)
        self.used_at.fill_(-1)

    def _fresh(self, keys, step):
        """(slots of `keys`, -1 where not cached; which of them a lookup at clock `step` serves)."""
        slots = torch.tensor([self.slot_of.get(k, -1) for k in keys.tolist()], dtype=torch.int64)
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
