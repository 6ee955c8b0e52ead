"""torch.distributed backend "zps": `import zps.torch.distributed` registers it, and then

    torch.distributed.init_process_group("zps")

under `zps launch` (or the DMLC environment) joins the zps job and gives a process group on which
DistributedDataParallel trains and all_reduce, broadcast, all_gather, reduce_scatter, all_to_all,
barrier, reduce, gather and scatter work as with Gloo.

Sum all-reduces (what DistributedDataParallel sends, one bucket at a time) start on the calling thread
and return at once; a thread of this module waits for the servers' sums in the order they started and
completes their futures, so the backward pass goes on while buckets travel. Every other operation
first waits for those in flight, then runs to its end on the calling thread (zps.torch.collectives)
and returns a completed Work.

Only the group of every worker is backed (a new_group of fewer ranks raises), on CPU tensors.
"""
import itertools
import os
import queue
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

from zps import _capi
from zps.errors import ZpsError
from zps.torch import _runtime
from zps.torch import collectives
from zps.torch._runtime import DTYPES

BACKEND = "zps"
# Sum all-reduces of one dtype and size take these many server tensors in turn, so that that many can
# be in flight at once (DistributedDataParallel's buckets often share a size).
_SLOTS_PER_SIZE = 4

# Process groups in creation order (the same on every process): each keeps its own server tensors.
_group_ids = itertools.count()

_REDUCE_OPS = [(dist.ReduceOp.SUM, collectives.Sum), (dist.ReduceOp.AVG, collectives.Average),
               (dist.ReduceOp.MIN, collectives.Min), (dist.ReduceOp.MAX, collectives.Max),
               (dist.ReduceOp.PRODUCT, collectives.Product)]


def _reduce_op(opts, what):
    if opts is None:
        return collectives.Sum
    for torch_op, op in _REDUCE_OPS:
        if opts.reduceOp == torch_op:
            return op
    raise ValueError("zps backend: %s with %s is not supported; use SUM, AVG, MIN, MAX or PRODUCT" %
                     (what, opts.reduceOp.op))


def _completed(result):
    future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError("zps backend: %s takes one tensor per process, got %d" % (what, len(tensors)))
    return _cpu(tensors, what)[0]


def _cpu(tensors, what):
    for t in tensors:
        if t.device.type != "cpu":
            raise ValueError("zps backend: %s of a %s tensor; the zps backend takes CPU tensors" % (what, t.device))
    return tensors


class _Completer:
    """A thread that waits for started sums in order and completes their futures with their tensors."""

    def __init__(self, worker, on_failure):
        self._worker = worker
        self._on_failure = on_failure  # called with the server tensor's key of a sum whose wait failed
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="zps-process-group", daemon=True)
        self._thread.start()

    def submit(self, handle, key, tensors, buffer, future, what):
        self._queue.put((handle, key, tensors, buffer, future, what))

    def _run(self):
        while True:
            handle, key, tensors, buffer, future, what = self._queue.get()
            try:
                self._worker.wait(handle, -1, what)
            except BaseException as e:  # the caller's wait raises it
                collectives._abandoned.append(buffer)
                self._on_failure(key)
                future.set_exception(e)
                continue
            future.set_result(tensors)


class ProcessGroupZps(dist.ProcessGroup):
    """The process group of every zps worker; torch's rank is zps.torch.rank()."""

    def __init__(self, rank, world_size):
        super().__init__(rank, world_size)
        self._rt = _runtime.start()
        self._prefix = "zps.pg%d" % next(_group_ids)
        self._lock = threading.Lock()  # orders starts and guards the tables below
        self._calls_of_size = {}  # (dtype, numel) -> number of sum all-reduces of that size so far
        self._last_of_key = {}  # server tensor -> future of its latest sum
        self._in_flight = []  # futures of started sums, oldest first
        # server tensor key -> its tensor id. Declared (agreed with the other workers: one round trip
        # through the servers) at the key's first sum only; DDP's per-step sums then cost one push_pull.
        # Its own lock, never held while waiting: the completer thread drops a failed key while a caller
        # may hold self._lock waiting for that very sum's future.
        self._ids = {}
        self._ids_lock = threading.Lock()
        self._completer = _Completer(self._rt.worker, self._forget)

    def getBackendName(self):
        return BACKEND

    # -- sums in flight --------------------------------------------------------------------------

    def _start_sum(self, t):
        flat = t.view(-1)
        with self._lock:
            size = (t.dtype, flat.numel())
            n = self._calls_of_size.get(size, 0)
            self._calls_of_size[size] = n + 1
            key = "%s.allreduce.%s.%d.%d" % (self._prefix, str(t.dtype).replace("torch.", ""), flat.numel(),
                                             n % _SLOTS_PER_SIZE)
            previous = self._last_of_key.get(key)
            if previous is not None and not previous.done():
                _wait_quietly(previous)  # one round of a server tensor in flight at a time
            with self._ids_lock:
                tid = self._ids.get(key)
            if tid is None:
                tid = self._rt.declare(key, flat)
                with self._ids_lock:
                    self._ids[key] = tid
            handle = self._rt.worker.push_pull(tid, flat.data_ptr(), flat.data_ptr())
            future = Future()
            self._last_of_key[key] = future
            self._in_flight = [f for f in self._in_flight if not f.done()]
            self._in_flight.append(future)
        self._completer.submit(handle, key, [t], flat, future, "zps backend: all_reduce of %s" % key)
        return _create_work_from_future(future)

    def _forget(self, key):
        """A sum of `key` failed (its server tensor may be half summed): its next sum declares a fresh one."""
        with self._ids_lock:
            self._ids.pop(key, None)
        self._rt.coordinator.failed(key)

    def _drain(self):
        """Waits for every sum in flight, so that a blocking operation runs after them, as in order."""
        with self._lock:
            pending, self._in_flight = self._in_flight, []
        for future in pending:
            _wait_quietly(future)

    def _blocking(self, fn, result):
        self._drain()
        fn()
        return _completed(result)

    # -- operations ------------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        t = _one(tensors, "all_reduce")
        op = _reduce_op(opts, "all_reduce")
        if op == collectives.Sum and t.dtype in DTYPES and t.is_contiguous() and t.numel() > 0:
            return self._start_sum(t)
        return self._blocking(lambda: _copy(t, collectives.allreduce_op(t, op, name="pg")), tensors)

    def broadcast(self, tensors, opts):
        t = _one(tensors, "broadcast")
        return self._blocking(lambda: _copy(t, collectives.broadcast(t, opts.rootRank, name="pg")), tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "all_gather")
        outputs = output_tensors[0]

        def run():
            rows = _gather_rows(t)
            if len(outputs) != len(rows):
                raise ValueError("zps backend: all_gather into %d tensors; there are %d processes" %
                                 (len(outputs), len(rows)))
            for out, row in zip(outputs, rows):
                _copy(out, row)

        return self._blocking(run, output_tensors)

    def _allgather_base(self, output, input, opts=None):
        _cpu([output, input], "all_gather_into_tensor")
        return self._blocking(lambda: _copy(output, _gather_rows(input)), [output])

    def reduce(self, tensors, opts):
        t = _one(tensors, "reduce")
        op = _reduce_op(opts, "reduce")

        def run():
            result = collectives.allreduce_op(t, op, name="pg.reduce")
            if self.rank() == opts.rootRank:
                _copy(t, result)

        return self._blocking(run, tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        inputs = _cpu(input_tensors[0], "reduce_scatter")
        op = _reduce_op(opts, "reduce_scatter")
        if len(inputs) != self.size():
            raise ValueError("zps backend: reduce_scatter of %d tensors; there are %d processes" %
                             (len(inputs), self.size()))
        stacked = lambda: torch.stack([x.reshape(-1) for x in inputs])  # noqa: E731
        return self._blocking(lambda: _copy(out, collectives.reducescatter(stacked(), op, name="pg")), output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _reduce_op(opts, "reduce_scatter_tensor")
        _cpu([output, input], "reduce_scatter_tensor")
        return self._blocking(
            lambda: _copy(output, collectives.reducescatter(input.reshape(self.size(), -1), op, name="pg")), [output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        _cpu([output, input], "all_to_all_single")

        def run():
            if input_split_sizes:
                received, splits = collectives.alltoall(input, list(input_split_sizes), name="pg")
                if output_split_sizes and splits.tolist() != list(output_split_sizes):
                    raise ValueError("zps backend: all_to_all_single expected %s rows from the processes, they "
                                     "sent %s" % (list(output_split_sizes), splits.tolist()))
            else:
                received = collectives.alltoall(input, name="pg")
            _copy(output, received)

        return self._blocking(run, [output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        _cpu(list(output_tensors) + list(input_tensors), "all_to_all")

        def run():
            flat = torch.cat([x.reshape(-1) for x in input_tensors])
            received, splits = collectives.alltoall(flat, [x.numel() for x in input_tensors], name="pg.list")
            offset = 0
            for out, n in zip(output_tensors, splits.tolist()):
                if out.numel() != n:
                    raise ValueError("zps backend: all_to_all: an output of %d elements received %d" % (out.numel(), n))
                _copy(out, received[offset:offset + n])
                offset += n

        return self._blocking(run, output_tensors)

    def gather(self, output_tensors, input_tensors, opts):
        t = _one(input_tensors, "gather")

        def run():
            rows = _gather_rows(t)
            if self.rank() == opts.rootRank:
                for out, row in zip(output_tensors[0], rows):
                    _copy(out, row)

        return self._blocking(run, output_tensors[0] if output_tensors else [])

    def scatter(self, output_tensors, input_tensors, opts):
        out = _one(output_tensors, "scatter")

        def run():
            # Every process's part travels to every process: a broadcast of the root's parts.
            parts = torch.zeros([self.size()] + list(out.shape), dtype=out.dtype)
            if self.rank() == opts.rootRank:
                for i, x in enumerate(input_tensors[0]):
                    parts[i].copy_(x)
            collectives.broadcast_(parts, opts.rootRank, name="pg.scatter")
            _copy(out, parts[self.rank()])

        return self._blocking(run, output_tensors)

    def barrier(self, opts=None):
        return self._blocking(collectives.barrier, [])


def _wait_quietly(future):
    # The future's own waiter sees its error; here only the order matters.
    try:
        future.wait()
    except Exception:
        pass


def _copy(out, value):
    with torch.no_grad():
        out.copy_(value.reshape(out.shape))


def _gather_rows(t):
    """Every process's `t` as the rows of one tensor (shapes that differ raise, naming them)."""
    return collectives.allgather(t.reshape(1, -1), name="pg")


def _torch_env_from_dmlc():
    """RANK and WORLD_SIZE for torch's env:// rendezvous from the DMLC environment where they are unset:
    zps's rank is (worker rank) x local size + local rank. MASTER_ADDR and MASTER_PORT (torch's own
    store) come from `zps launch`, or from the user as for any torch.distributed job. The settings are
    read through the C library, as zps reads them (their variables, defaults and ranges)."""
    if os.environ.get(_capi.setting_variable("role")) != "worker":
        return
    try:
        worker = _capi.setting_integer("worker_rank")
        workers = _capi.setting_integer("num_workers")
        local_size = _capi.setting_integer("local_size")
        local_rank = _capi.setting_integer("local_rank")
    except ZpsError:
        return  # torch names what is missing; the backend compares the ranks once zps is joined
    os.environ.setdefault("RANK", str(worker * local_size + local_rank))
    os.environ.setdefault("WORLD_SIZE", str(workers * local_size))


def _create(store, rank, world_size, timeout):
    rt = _runtime.start()
    if world_size != rt.size:
        raise ValueError("zps backend: a group of %d of the job's %d processes; the zps backend backs only the "
                         "group of every process (new_group with all ranks, or the default group)" %
                         (world_size, rt.size))
    if rank != rt.rank:
        raise ValueError("zps backend: torch's rank is %d but zps's is %d; leave RANK unset under zps launch, or "
                         "set it to DMLC_WORKER_ID x local size + local rank" % (rank, rt.rank))
    return ProcessGroupZps(rank, world_size)


_torch_env_from_dmlc()
if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create)
