"""zps.torch.Embedding: an embedding table whose rows live on the servers (parameter-server mode).

The name follows torch.nn.Embedding, which it replaces in a model: same call (ids in, ids.shape + (dim,)
out), but no dense weight in the process and no bound on the ids (any int64 key; a row is created on
first touch). forward pulls the batch's unique rows; backward pushes their gradients, and the servers
apply the table's optimizer (sgd, momentum, adam or adagrad). So the table is not among
model.parameters() and DistributedOptimizer leaves it alone.

Synchronous by default: the n-th backward of every worker is one round, applied once with the gradients
of all workers summed (divided by size() when average=True, as DistributedOptimizer averages dense
gradients); a forward after a worker's n-th backward sees the rows as of round n. Every worker must call
forward and backward once per step (an empty batch is fine).

row_cache_steps=k > 0 serves each pulled row from this worker's copy for up to k steps before it is
pulled again (at most row_cache_rows rows, least recently used evicted; see row_cache.py): a row
used at step t then lacks at most the updates of the k rounds before t. k = 0 (the default) pulls
every row every step. Gradients are pushed every step either way, unless row_cache_write_back=True
(optimizer="sgd" only): then this worker's gradients move the cache's copies at once (taken as every
worker's) and the cache holds their sum until the row is refreshed or evicted (row_cache.py), so a hot
row moves both ways once every k + 1 steps; push_held() pushes what is still held (every worker, once,
as a step) before the servers' rows are read.

prefetch_rows(keys) starts the pull of the next lookup's rows now, so that it travels while this step
computes (see EmbeddingBags.prefetch). Called after a forward whose backward is still to come, it asks
for the rows as they will be after that backward's push: in sync mode the servers hold it until every
worker's round of that push is applied, so the rows are bit for bit those of a pull issued after it;
in async mode it is served at once and lacks at most this worker's next push (and whatever other
workers push meanwhile, as any async pull): at most one step stale. With a row cache only the rows the
next lookup would not serve from the cache are prefetched.

Backward starts the push of the rows' gradients and goes on (to the layers below the table, whose
gradients are then pushed sooner); the push is waited for by the next lookup, prefetch, push or
shutdown(), so a failed push is raised there, and a lookup still sees the rows after it.
"""
import torch

from zps.torch._runtime import runtime
from zps.torch.row_cache import RowCache


class _PullRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, keys, anchor):
        ctx.module = module
        ctx.keys = keys
        rows = module._lookup(keys)
        module._push_pending = True  # backward pushes: a prefetch now is for the rows after that push
        return rows

    @staticmethod
    def backward(ctx, grad_rows):
        ctx.module._push(ctx.keys, grad_rows)
        return None, None, None


class Embedding(torch.nn.Module):
    """Rows of `embedding_dim` float32 values kept in server table `name` (the same on every worker)."""

    def __init__(self, embedding_dim, name, optimizer="adagrad", lr=0.05, init_scale=0.01, seed=1, average=True,
                 async_=None, row_cache_steps=0, row_cache_rows=100000, row_cache_write_back=False,
                 **optimizer_options):
        super().__init__()
        rt = runtime("Embedding")
        if not isinstance(name, str) or not name:
            raise ValueError("zps.torch.Embedding: name must be a non-empty string (the table's name on the servers)")
        if int(row_cache_steps) < 0 or int(row_cache_rows) < 1:
            raise ValueError("zps.torch.Embedding '%s': row_cache_steps must be >= 0 and row_cache_rows >= 1" % name)
        self.embedding_dim = int(embedding_dim)
        self.name = name
        self.scale = 1.0 / rt.size if average else 1.0
        self._table = rt.in_order(
            "table." + name, torch.zeros(self.embedding_dim),
            lambda: rt.worker.declare_table(name, self.embedding_dim, optimizer, float(lr), init_scale=init_scale,
                                            seed=seed, async_=async_, **optimizer_options))
        # Not a Parameter: only makes autograd call backward, whatever requires grad in the model.
        self._anchor = torch.zeros(0, requires_grad=True)
        if row_cache_write_back and (optimizer != "sgd" or optimizer_options or not row_cache_steps):
            raise ValueError("zps.torch.Embedding '%s': row_cache_write_back needs row_cache_steps > 0 and "
                             "optimizer='sgd' without options (a held sum of gradients, pushed once, does on "
                             "the servers what the steps would only for plain sgd)" % name)
        self.row_cache = (RowCache(self.embedding_dim, row_cache_steps, row_cache_rows,
                                   write_back_lr=float(lr) if row_cache_write_back else None, workers=rt.size)
                          if row_cache_steps else None)
        # Rows this module moved: pulled from the servers (the cache's hits are not), and pushed.
        self.pulled_rows = self.pushed_rows = 0
        self.pushes = 0  # backward passes so far (the table's rounds pushed by this worker)
        self._push_pending = False  # a forward with grad whose backward has not pushed yet
        self._prefetch = None  # the pull prefetch_rows started, for the next lookup
        self._push_in_flight = None  # (handle, keys, grads) of the push backward started

    def extra_repr(self):
        return "embedding_dim=%d, name='%s' (rows on the servers)" % (self.embedding_dim, self.name)

    def forward(self, ids):
        if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
            raise TypeError("zps.torch.Embedding '%s': ids must be an int64 or int32 tensor" % self.name)
        keys, inverse = torch.unique(ids.reshape(-1).to(torch.int64).cpu(), return_inverse=True)
        out = self.rows(keys).index_select(0, inverse).reshape(*ids.shape, self.embedding_dim)
        return out.to(ids.device) if ids.device.type != "cpu" else out

    def rows(self, keys):
        """The rows of `keys` (distinct int64 keys on the CPU), [len(keys), embedding_dim]; when grad is
        enabled, backward pushes their gradient (once per call: keys must not repeat)."""
        if torch.is_grad_enabled():
            return _PullRows.apply(self, keys, self._anchor)
        return self._lookup(keys)

    def prefetch_rows(self, keys):
        """Starts pulling the rows of `keys` (distinct int64 keys on the CPU) for the next lookup, which
        must ask for the same keys; rows as the next lookup would pull them (see the module's doc)."""
        if self._prefetch is not None:
            raise RuntimeError("zps.torch.Embedding '%s': prefetch_rows called twice before a lookup took the "
                               "first prefetch" % self.name)
        keys = keys.to(torch.int64).contiguous()
        self.wait_push()  # a prefetch "after no push" must not overtake a push in flight
        ahead = 1 if self._push_pending else 0
        pull_keys = keys
        if self.row_cache is not None:
            pull_keys = keys[self.row_cache.would_pull(keys, steps_ahead=ahead)].contiguous()
        self._prefetch = _Prefetch(self, keys, pull_keys, ahead)

    def _lookup(self, keys):
        pull = self._pull
        if self._prefetch is not None:
            pull = self._take_prefetch(keys)  # answered once the round of the push in flight is applied
        self.wait_push()
        return self.row_cache.lookup(keys, pull) if self.row_cache is not None else pull(keys)

    def _take_prefetch(self, keys):
        """The pull function that serves this lookup from the prefetch (after checking that it is
        this lookup's)."""
        p = self._prefetch
        if self.pushes != p.for_pushes:
            raise RuntimeError("zps.torch.Embedding '%s': rows were prefetched for the lookup after %d pushes, but "
                               "this lookup comes after %d (call prefetch after a step's forward and let its "
                               "backward run before the next forward)" % (self.name, p.for_pushes, self.pushes))
        self._prefetch = None
        rows = p.wait()
        if not torch.equal(keys, p.keys):
            raise ValueError("zps.torch.Embedding '%s': this lookup's %d keys are not the %d keys prefetched (the "
                             "forward after prefetch must look up the ids given to prefetch)"
                             % (self.name, keys.numel(), p.keys.numel()))

        def prefetched(missing_keys):
            if not torch.equal(missing_keys, p.pull_keys):
                raise RuntimeError("zps.torch.Embedding '%s': the row cache misses other rows than it did at "
                                   "prefetch time" % self.name)
            return rows
        return prefetched

    def _pull(self, keys):
        rt = runtime("Embedding.forward")
        out = torch.empty(keys.numel(), self.embedding_dim, dtype=torch.float32)
        keys = keys.contiguous()
        h = rt.worker.pull_rows(self._table, keys.data_ptr(), keys.numel(), out.data_ptr())
        rt.worker.wait(h, -1, "zps.torch.Embedding '%s': pulling %d rows" % (self.name, keys.numel()))
        self.pulled_rows += keys.numel()
        return out

    def _push(self, keys, grad_rows):
        grads = grad_rows.detach().to(device="cpu", dtype=torch.float32)
        if self.scale != 1.0:
            grads = grads * self.scale
        if self.row_cache is not None and self.row_cache.write_back:
            keys, grads = self.row_cache.hold(keys, grads)
        self._push_now(keys, grads)

    def push_held(self):
        """With row_cache_write_back: pushes every gradient the cache holds, as one step's push (in sync
        mode every worker must call it at the same point, as a step); without, a no-op."""
        if self.row_cache is None or not self.row_cache.write_back:
            return
        self._push_now(*self.row_cache.take_all_held())

    def _push_now(self, keys, grads):
        self.wait_push()
        rt = runtime("Embedding.backward")
        keys, grads = keys.contiguous(), grads.contiguous()
        h = rt.worker.push_rows(self._table, keys.data_ptr(), keys.numel(), grads.data_ptr())
        self._push_in_flight = (h, keys, grads)  # the buffers live until the push is answered
        _pushing.add(self)
        self.pushed_rows += keys.numel()
        self.pushes += 1
        self._push_pending = False
        if self.row_cache is not None:
            self.row_cache.advance()


    def wait_push(self):
        """Waits for the push backward started (a no-op when none is in flight); raises if it failed."""
        push, self._push_in_flight = self._push_in_flight, None
        _pushing.discard(self)
        if push is not None:
            runtime("Embedding.backward").worker.wait(
                push[0], -1, "zps.torch.Embedding '%s': pushing %d rows" % (self.name, push[1].numel()))


# Modules with a push in flight: shutdown() waits for them (wait_pushes), so that the last backward's
# push is answered, or its failure raised, before the job ends.
_pushing = set()


def wait_pushes():
    for module in list(_pushing):
        module.wait_push()


# Prefetches not waited for yet: the worker writes a reply into its buffer whenever it comes, so the
# buffer must outlive a module dropped with a prefetch in flight.
_in_flight = set()


class _Prefetch:
    """A pull started early: `ahead` (0 or 1) of this worker's pushes before the lookup it serves."""

    def __init__(self, module, keys, pull_keys, ahead):
        self.module, self.keys, self.pull_keys = module, keys, pull_keys
        self.for_pushes = module.pushes + ahead
        rt = runtime("Embedding.prefetch_rows")
        self.out = torch.empty(pull_keys.numel(), module.embedding_dim, dtype=torch.float32)
        self.handle = rt.worker.pull_rows_ahead(module._table, pull_keys.data_ptr(), pull_keys.numel(),
                                                self.out.data_ptr(), ahead)
        module.pulled_rows += pull_keys.numel()
        _in_flight.add(self)

    def wait(self):
        """The rows, once the servers answered (ZPS_REQUEST_TIMEOUT's deadline: a round that never
        comes, as when the backward of the step before is never run, fails here)."""
        _in_flight.discard(self)  # waited: the handle is released (a failed wait cancels the request)
        runtime("Embedding.forward").worker.wait(
            self.handle, -1, "zps.torch.Embedding '%s': prefetched %d rows, held by the servers until every worker's "
            "gradients of the step before are applied" % (self.module.name, self.pull_keys.numel()))
        return self.out
