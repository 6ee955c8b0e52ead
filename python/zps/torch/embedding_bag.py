"""zps.torch.EmbeddingBags: several embedding tables on the servers, looked up in one round trip.

A recommendation model has one table per categorical field (DLRM: 26). Looked up one by one, each table
costs a pull and a push per server per step. EmbeddingBags keeps all of them in one server table of
the same row size and optimizer, table t's id i being the key (t << 40) | i, so a batch pulls the
distinct rows of every table in one message per server, and pushes their gradients in one message per
server. Rows are created on first touch, so a table has no size to declare; ids are any value in
[0, 2^40).

Each table pools its bags like torch.nn.EmbeddingBag (offsets, mode "sum", "mean" or "max"), and the
output is [bags, num_tables, embedding_dim]. Synchronous like zps.torch.Embedding: every worker calls
forward and backward once per step, and a forward sees every worker's gradients of the steps before it,
unless row_cache_steps=k > 0: then a row may be served from this worker's cache of recently pulled rows
(at most row_cache_rows of them), and lack at most the gradients of the k steps before (row_cache.py);
with row_cache_write_back=True (sgd tables) the cache also holds this worker's gradients of a cached row,
applied to its copy, until the row is refreshed (push_held() pushes the rest).

prefetch(next_ids) after a step's forward starts the pull of the next step's rows, which then travels
while this step's backward, gradient sums and optimizer run; the next forward takes its rows from it.
Sync tables: exactly the rows a pull after this step would get. Async: at most one step stale.
"""
import torch
import torch.nn.functional as F

from zps.torch.embedding import Embedding

ID_BITS = 40
MAX_TABLES = 1 << (63 - ID_BITS)  # keys stay below 2^63, valid int64 values


class EmbeddingBags(torch.nn.Module):
    """num_tables tables of `embedding_dim` float32 rows, kept in server table `name` (the same on every
    worker). Optimizer arguments are zps.torch.Embedding's (the servers apply them to every table)."""

    def __init__(self, num_tables, embedding_dim, name, mode="sum", optimizer="adagrad", lr=0.05, init_scale=0.01,
                 seed=1, average=True, async_=None, row_cache_steps=0, row_cache_rows=100000, row_cache_write_back=False,
                 **optimizer_options):
        super().__init__()
        if not 0 < int(num_tables) <= MAX_TABLES:
            raise ValueError("zps.torch.EmbeddingBags: num_tables must be in [1, %d]" % MAX_TABLES)
        if mode not in ("sum", "mean", "max"):
            raise ValueError("zps.torch.EmbeddingBags: mode must be 'sum', 'mean' or 'max', not %r" % (mode,))
        self.num_tables = int(num_tables)
        self.mode = mode
        self.embedding_dim = int(embedding_dim)
        self.table = Embedding(embedding_dim, name, optimizer=optimizer, lr=lr, init_scale=init_scale, seed=seed,
                               average=average, async_=async_, row_cache_steps=row_cache_steps,
                               row_cache_rows=row_cache_rows, row_cache_write_back=row_cache_write_back,
                               **optimizer_options)
        self.table_base = torch.arange(self.num_tables, dtype=torch.int64) << ID_BITS
        self._prefetched = None  # (keys, their distinct keys, inverse) of the last prefetch

    @property
    def row_cache(self):
        """The worker's cache of recently pulled rows (row_cache.RowCache), or None (row_cache_steps=0)."""
        return self.table.row_cache

    def push_held(self):
        """Pushes the gradients a write-back row cache holds (Embedding.push_held): one step's push."""
        self.table.push_held()

    def wait_push(self):
        """Waits for the gradients' push the last backward started (Embedding.wait_push)."""
        self.table.wait_push()

    @property
    def pulled_rows(self):
        """Rows this worker pulled from the servers so far (rows served from the cache not counted)."""
        return self.table.pulled_rows

    @property
    def pushed_rows(self):
        """Rows whose gradients this worker pushed so far."""
        return self.table.pushed_rows

    def extra_repr(self):
        return "num_tables=%d, embedding_dim=%d, mode='%s'" % (self.num_tables, self.embedding_dim, self.mode)

    def forward(self, ids, offsets=None):
        """ids [bags, num_tables] (one id per table and bag, as Criteo's fields): out[b, t] is table t's
        row ids[b, t]. Or, as torch.nn.EmbeddingBag per table, ids and offsets are lists of num_tables
        1-D tensors (table t's ids, and where each of its bags starts; every table has the same number
        of bags): out[b, t] pools table t's rows of bag b."""
        keys, starts = self._keys(ids, offsets)
        unique, inverse = self._distinct(keys)
        rows = self.table.rows(unique)
        if offsets is None:
            out = rows.index_select(0, inverse).reshape(ids.shape[0], self.num_tables, self.embedding_dim)
            device = ids.device
        else:
            # Table-major bags: bag t x bags + b pools table t's bag b.
            pooled = F.embedding_bag(inverse, rows, starts, mode=self.mode)
            out = pooled.reshape(self.num_tables, offsets[0].numel(), self.embedding_dim).transpose(0, 1)
            device = ids[0].device
        return out.to(device) if device.type != "cpu" else out

    def prefetch(self, ids, offsets=None):
        """Starts pulling the rows the next forward(ids, offsets) needs, so that they travel while this
        step computes. Call it after this step's forward (before its backward) with the next step's
        batch; the next forward must be given the same ids. In sync mode the rows are bit for bit those
        the next forward would pull without it (the servers hold the pull until every worker's gradients
        of this step are applied); with async tables they may lack this worker's gradients of this step
        (at most one step stale). With a row cache, only the rows it will not serve are pulled."""
        keys, _ = self._keys(ids, offsets)
        unique, inverse = torch.unique(keys, return_inverse=True)
        self.table.prefetch_rows(unique)
        self._prefetched = (keys, unique, inverse)

    def _distinct(self, keys):
        """torch.unique(keys, return_inverse=True), taken from the prefetch when it had these keys."""
        prefetched, self._prefetched = self._prefetched, None
        if prefetched is not None and torch.equal(prefetched[0], keys):
            return prefetched[1], prefetched[2]
        return torch.unique(keys, return_inverse=True)

    def _keys(self, ids, offsets):
        """The server keys of every id, table-major for lists (and, with offsets, where each bag starts
        among them; None without)."""
        if offsets is None:
            if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] != self.num_tables:
                raise ValueError("zps.torch.EmbeddingBags: ids must be [bags, %d] without offsets" % self.num_tables)
            self._check_ids(ids)
            return (ids.to(torch.int64).cpu() | self.table_base).reshape(-1), None
        if len(ids) != self.num_tables or len(offsets) != self.num_tables:
            raise ValueError("zps.torch.EmbeddingBags: ids and offsets must be lists of %d tensors" % self.num_tables)
        bags = offsets[0].numel()
        keys, starts, base = [], [], 0
        for t, (table_ids, table_offsets) in enumerate(zip(ids, offsets)):
            if table_ids.dim() != 1 or table_offsets.dim() != 1 or table_offsets.numel() != bags:
                raise ValueError("zps.torch.EmbeddingBags: table %d: ids and offsets must be 1-D, with %d bags as "
                                 "table 0" % (t, bags))
            self._check_ids(table_ids)
            keys.append(table_ids.to(torch.int64).cpu() | (t << ID_BITS))
            starts.append(table_offsets.to(torch.int64).cpu() + base)
            base += table_ids.numel()
        return torch.cat(keys), torch.cat(starts)

    def _check_ids(self, ids):
        if ids.dtype not in (torch.int64, torch.int32):
            raise TypeError("zps.torch.EmbeddingBags '%s': ids must be int64 or int32" % self.table.name)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= 1 << ID_BITS):
            raise ValueError("zps.torch.EmbeddingBags '%s': ids must be in [0, 2^%d)" % (self.table.name, ID_BITS))
