"""allreduce (Horovod) and push_pull (BytePS) over the servers' sum, their async handles, grouped
variants and autograd, and what every operation shares: names, handles, the coordinator's agreement.
broadcast is in broadcast.py, allgather, reducescatter and alltoall in gather_scatter.py; the
Min/Max/Product reductions go through zps.torch.collectives.

Every call goes through the coordinator (coordinator.py): the workers first agree on what the call is,
then its tensor is summed. The n-th call of a name on every worker is summed together. A call without a
name uses a name made of its kind, dtype and shape (and a slot number while an earlier unnamed call of
that shape is still in flight), so unnamed calls must come in the same order on every worker, as in
Horovod. Two calls of one name in flight at once are refused.
"""
import itertools
import threading
import time

import torch

from zps.errors import ZpsTimeout
from zps.torch import coordinator
from zps.torch._runtime import DTYPES, runtime
from zps.torch.compression import Compression
from zps.torch.process_sets import (ProcessSet, add_process_set, global_process_set, group_of,  # noqa: F401
                                    remove_process_set)

# Reductions (Horovod's names; BytePS's push_pull takes average=True/False).
Average = "Average"
Sum = "Sum"
Adasum = "Adasum"
Min = "Min"
Max = "Max"
Product = "Product"
_REDUCE_CODES = {Average: 1, Sum: 2, Min: 3, Max: 4, Product: 5, Adasum: 6}

# dtypes the servers do not sum natively travel as int32 (exact for their range) and are cast back.
_WIDENED = {torch.int8: torch.int32, torch.int16: torch.int32, torch.bool: torch.int32}

_handles = {}
_handles_lock = threading.Lock()
_next_handle = itertools.count(1)
_in_flight = set()  # (kind, name, process set's key space) of the operations not yet synchronized
# Operations whose wait failed: a push is sent from its tensor without a copy, and the transport may still
# read it after the cancellation, so they are kept alive for the rest of the process.
_abandoned = []


class _Buffers:
    """What an operation pushes from and pulls into; replaced by private copies if its caller gives up
    before it started (see _Pending.abandon), so that a caller's tensor is never touched after its wait."""

    __slots__ = ("source", "output")

    def __init__(self, source, output):
        self.source = source
        self.output = output


class _Pending:
    """An operation between its start and synchronize(): the coordinator's op (or a direct zps handle),
    its buffers, and finish() turning the summed buffer into the caller's result."""

    def __init__(self, key, op=None, zps_handle=None, buffers=None, finish=None):
        self.key = key  # (kind, name, key space) while in flight, else None
        self.op = op
        self.group = None  # the group whose coordinator runs op
        self.zps_handle = zps_handle
        self.buffers = buffers
        self.finish = finish
        self.begun = False  # its data push was issued (the coordinator took its buffers)
        self.lock = threading.Lock()

    def take_buffers(self):
        """On the coordinator thread, just before the push: the buffers to use from now on."""
        with self.lock:
            self.begun = True
            return self.buffers

    def abandon(self):
        """The caller's wait ended before the push was issued: push a copy instead, so that the rounds stay
        in step on every worker and the caller's tensors are never read or written again."""
        with self.lock:
            if self.begun:
                return False
            b = self.buffers
            if b is not None:
                source = b.source.clone()
                self.buffers = _Buffers(source, source if b.output is b.source else torch.empty_like(b.output))
            return True


class _Group:
    """A grouped operation: one handle for several."""

    def __init__(self, handles, finish=None):
        self.handles = handles
        self.finish = finish


def _describe(tensor, name):
    return "tensor '%s'" % name if name else "a tensor of shape %s" % list(tensor.shape)


def check_tensor(tensor, what, name=None, widen=True):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("zps.torch.%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.dtype not in DTYPES and not (widen and tensor.dtype in _WIDENED):
        raise TypeError("zps.torch.%s: %s has dtype %s; supported: %s" % (
            what, _describe(tensor, name), tensor.dtype,
            ", ".join(str(d).replace("torch.", "") for d in list(DTYPES) + list(_WIDENED))))
    if tensor.is_sparse:
        raise TypeError("zps.torch.%s: %s is sparse; pass tensor.to_dense() (or sparse_as_dense=True), or use "
                        "zps.torch.Embedding for sparse rows" % (what, _describe(tensor, name)))
    if not tensor.is_contiguous():
        raise ValueError("zps.torch.%s: %s is not contiguous; pass tensor.contiguous()" % (what, _describe(tensor, name)))


def _default_name(prefix, tensor, first_dim_free=False):
    """An unnamed call's name: its kind, dtype and shape (without the first dimension for allgather and
    alltoall, where it differs between workers)."""
    shape = tensor.shape[1:] if first_dim_free else tensor.shape
    return "zps.%s.%s.%s" % (prefix, str(tensor.dtype).replace("torch.", ""), "x".join(map(str, shape)) or "scalar")


def _reduce_op(average, op):
    if op is not None and average is not None:
        raise ValueError("zps.torch: pass either average or op, not both")
    if op is None:
        return Average if (average is None or average) else Sum
    if op not in _REDUCE_CODES:
        raise ValueError("zps.torch: op must be one of Average, Sum, Min, Max, Product, got %r" % (op,))
    if op == Adasum:
        raise NotImplementedError("zps.torch: op=Adasum is not implemented (zps sums on its servers; Adasum's "
                                  "pairwise combination is not built); use Average or Sum")
    return op


def _zps_priority(priority):
    """BytePS's priority (larger is sent sooner; None: not scheduled) in zps's order (lower is sooner)."""
    if priority is None:
        return None
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError("zps.torch: priority must be an int or None, got %r" % (priority,))
    if not -(1 << 62) <= priority <= (1 << 62):
        raise ValueError("zps.torch: priority %d is out of range (|priority| <= 2**62)" % priority)
    return -priority


def _reserve(kind, name, tensor, prefix, group, first_dim_free=False):
    """The operation's name, marked in flight in its group: a named call whose name is in flight is
    refused; an unnamed one takes the next free slot of its default name."""
    space = getattr(group, "key_space", 0)
    with _handles_lock:
        if name is not None:
            if (kind, name, space) in _in_flight:
                raise ValueError("zps.torch.%s: an operation named '%s' is already in flight; synchronize it first or "
                                 "give this one another name" % (kind, name))
        else:
            base = _default_name(prefix, tensor, first_dim_free)
            name = base
            for slot in itertools.count(1):
                if (kind, name, space) not in _in_flight:
                    break
                name = "%s.%d" % (base, slot)
        _in_flight.add((kind, name, space))
        return name


def _release(key):
    if key is not None:
        with _handles_lock:
            _in_flight.discard(key)


def _register(pending):
    h = next(_next_handle)
    with _handles_lock:
        _handles[h] = pending
    return h


def _submit(group, kind, name, tensor, extra, extra_name, start, pending):
    op = coordinator.Op(kind, name, tensor.dtype, tensor.shape, extra, start, extra_name)
    pending.op = op
    pending.group = group
    try:
        group.coordinator.submit(op)
    except BaseException:
        _release(pending.key)
        raise
    return _register(pending)


def _scale(tensor, factor):
    """tensor x factor as Horovod computes it: integers in float64, halves in float32, cast back."""
    if factor == 1.0:
        return tensor
    if tensor.is_floating_point() and tensor.dtype not in (torch.float16, torch.bfloat16):
        return tensor * factor
    wide = torch.float32 if tensor.is_floating_point() else torch.float64
    return (tensor.to(wide) * factor).to(tensor.dtype)


def _start_sum(group, pending, name, agreed, compressor=None, priority=None):
    """On the coordinator thread: declares (first use) and starts the push_pull of pending's buffers."""
    b = pending.take_buffers()
    tid = group.tensor_id(coordinator.declared_name(name, b.source, agreed.generation), b.source, compressor, priority)
    return group.worker.push_pull(tid, b.source.data_ptr(), b.output.data_ptr())


def _allreduce_async(tensor, inplace, op, name, what, compression=Compression.none, prescale_factor=1.0,
                     postscale_factor=1.0, priority=None, kind="allreduce", process_set=None):
    group = group_of(process_set, what)
    check_tensor(tensor, what, name)
    if op in (Min, Max, Product):
        return _collective_async(what, "allreduce", tensor, name, _REDUCE_CODES[op], "reduction",
                                 lambda c, t, n, g: c.allreduce_op(t, op, n, g),
                                 lambda result: tensor.copy_(result) if inplace else result, process_set)
    custom = compression not in (Compression.none, Compression.fp16) and hasattr(compression, "compress")
    original = tensor
    ctx = None
    if custom:
        tensor, ctx = compression.compress(tensor)
        tensor = tensor.contiguous()
    device = tensor.device if tensor.device.type != "cpu" else None
    # The library takes host memory: a device tensor is summed through a host copy.
    wire = tensor.detach().to("cpu") if device is not None else tensor.detach()
    if wire.dtype in _WIDENED:
        wire = wire.to(_WIDENED[wire.dtype])
    wire = _scale(wire, prescale_factor)
    copied = wire.data_ptr() != tensor.data_ptr()
    output = wire if (inplace or copied) else torch.empty_like(wire)
    divisor = group.size if op == Average else 1
    native_fp16 = compression is Compression.fp16 and wire.dtype == torch.float32
    compressor = "fp16" if native_fp16 else None
    name = _reserve(kind, name, wire, "noname", group)
    pending = _Pending((kind, name, getattr(group, "key_space", 0)), buffers=_Buffers(wire, output))

    def finish():
        out = pending.buffers.output
        if divisor != 1:
            if out.is_floating_point():
                out.div_(divisor)
            else:
                out.copy_(torch.div(out, divisor, rounding_mode="trunc"))
        out = _scale(out, postscale_factor)
        if custom:
            out = compression.decompress(out, ctx)
        if out.dtype != original.dtype:
            out = out.to(original.dtype)
        if inplace and out.data_ptr() != original.data_ptr():
            with torch.no_grad():
                original.copy_(out)
            return original
        if device is not None:
            return out.to(device)
        return out

    pending.finish = finish
    if wire.numel() == 0:
        _release(pending.key)
        pending.key = None
        return _register(pending)
    return _submit(group, kind, name, wire, _REDUCE_CODES[op], "reduction",
                   lambda agreed: _start_sum(group, pending, name, agreed, compressor, _zps_priority(priority)),
                   pending)


def _collective_async(what, kind, tensor, name, extra, extra_name, call, finish, process_set):
    """An operation of zps.torch.collectives, run on the coordinator thread once the workers agreed."""
    group = group_of(process_set, what)
    try:
        from zps.torch import collectives
    except ImportError as e:
        raise NotImplementedError("zps.torch.%s needs zps.torch.collectives, which this build lacks (%s)" %
                                  (what, e)) from None
    name = _reserve(kind, name, tensor, kind, group, first_dim_free=kind in ("allgather", "alltoall"))
    pending = _Pending((kind, name, getattr(group, "key_space", 0)))

    def start(agreed):
        pending.take_buffers()
        pending.result = call(collectives, tensor, "%s#%d" % (name, agreed.generation), group)
        return None

    pending.finish = lambda: finish(pending.result)
    return _submit(group, kind, name, tensor, extra, extra_name, start, pending)


def start_push_pull(tensor, output, divisor, tensor_id, name):
    """DistributedOptimizer's per-step sum of an agreed, declared tensor: straight to the servers, without
    the coordinator's agreement round. synchronize(handle) divides by `divisor`."""
    rt = runtime("DistributedOptimizer")
    pending = _Pending(None, buffers=_Buffers(tensor, output))
    pending.name = name

    def finish():
        if divisor != 1:
            output.div_(divisor)
        return output

    pending.finish = finish
    pending.begun = True
    pending.zps_handle = rt.worker.push_pull(tensor_id, tensor.data_ptr(), output.data_ptr())
    return _register(pending)


def poll(handle):
    """True when the operation has ended (synchronize then returns at once)."""
    with _handles_lock:
        p = _handles.get(handle)
    if p is None:
        raise ValueError("zps.torch.poll: unknown or already synchronized handle %r" % (handle,))
    if isinstance(p, _Group):
        return all(poll(h) for h in p.handles)
    if p.op is not None:
        if not p.op.started.is_set():
            return False
        if p.op.error is not None:
            return True
        zps_handle = p.op.zps_handle
    else:
        zps_handle = p.zps_handle
    return zps_handle is None or runtime("poll").worker.poll(zps_handle)


def synchronize(handle, timeout=None):
    """Waits for an operation (at most `timeout` seconds; None: ZPS_REQUEST_TIMEOUT) and returns its result.
    A failed wait fails this call only: the name's next call works (on a fresh tensor)."""
    with _handles_lock:
        p = _handles.pop(handle, None)
    if p is None:
        raise ValueError("zps.torch.synchronize: unknown or already synchronized handle %r" % (handle,))
    if isinstance(p, _Group):
        results = [synchronize(h, timeout) for h in p.handles]
        return p.finish(results) if p.finish else results
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    try:
        zps_handle = p.zps_handle
        if p.op is not None:
            runtime("synchronize")
            if not p.group.coordinator.wait_started(p.op, timeout):
                if p.abandon():
                    raise ZpsTimeout("zps.torch: %s of '%s' did not start within %.3g s (the other workers had not "
                                     "called it yet); it was cancelled, its tensors are left as they were" %
                                     (p.op.kind, p.op.name, timeout), 2, "DEADLINE_EXCEEDED")
                p.group.coordinator.wait_started(p.op, None)
            zps_handle = p.op.zps_handle
        if zps_handle is not None:
            rt = runtime("synchronize")
            left_ms = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            what = "zps.torch: %s of '%s'" % ((p.op.kind, p.op.name) if p.op else ("push_pull", p.name))
            try:
                rt.worker.wait(zps_handle, left_ms, what)
            except BaseException:
                _abandoned.append(p)
                if p.op is not None:
                    p.group.coordinator.failed(p.op.name)
                raise
        return p.finish()
    finally:
        _release(p.key)


# ---- autograd ----

class _AllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.prescale_factor, ctx.postscale_factor = op, prescale_factor, postscale_factor
        ctx.process_set = process_set
        return synchronize(_allreduce_async(tensor, False, op, name, "allreduce", Compression.none, prescale_factor,
                                            postscale_factor, process_set=process_set))

    @staticmethod
    def backward(ctx, grad):
        # The gradient of a sum over workers is the sum of the gradients (average: the average).
        g = synchronize(_allreduce_async(grad.contiguous(), False, ctx.op, None, "allreduce (backward)",
                                         Compression.none, ctx.prescale_factor, ctx.postscale_factor,
                                         process_set=ctx.process_set))
        return g, None, None, None, None, None


def _differentiable(tensor):
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled()


# ---- Horovod's names: average=None and op=None mean Average; process_set (process_sets.py) None is every
# worker ----

def allreduce_async(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    return _allreduce_async(tensor, False, _reduce_op(average, op), name, "allreduce_async", compression,
                            prescale_factor, postscale_factor, process_set=process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None):
    return _allreduce_async(tensor, True, _reduce_op(average, op), name, "allreduce_async_", Compression.none,
                            prescale_factor, postscale_factor, process_set=process_set)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """The sum (op=Sum), average (the default), min, max or product of `tensor` over all workers (or the
    process set's), as a new tensor. Differentiable: the gradient is the same reduction of the gradients."""
    op = _reduce_op(average, op)
    if _differentiable(tensor) and op in (Average, Sum) and compression is Compression.none:
        return _AllreduceFunction.apply(tensor, op, name, prescale_factor, postscale_factor, process_set)
    return synchronize(_allreduce_async(tensor, False, op, name, "allreduce", compression, prescale_factor,
                                        postscale_factor, process_set=process_set))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    return synchronize(_allreduce_async(tensor, True, _reduce_op(average, op), name, "allreduce_", Compression.none,
                                        prescale_factor, postscale_factor, process_set=process_set))


def grouped_allreduce_async(tensors, average=None, name=None, compression=Compression.none, op=None,
                            prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    op = _reduce_op(average, op)
    return _register(_Group([_allreduce_async(t, False, op, None if name is None else "%s.%d" % (name, i),
                                              "grouped_allreduce_async", compression, prescale_factor,
                                              postscale_factor, process_set=process_set)
                             for i, t in enumerate(tensors)]))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                             process_set=None):
    op = _reduce_op(average, op)
    return _register(_Group([_allreduce_async(t, True, op, None if name is None else "%s.%d" % (name, i),
                                              "grouped_allreduce_async_", Compression.none, prescale_factor,
                                              postscale_factor, process_set=process_set)
                             for i, t in enumerate(tensors)]))


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None):
    """allreduce of each tensor of a list; differentiable as allreduce is."""
    op = _reduce_op(average, op)
    if any(_differentiable(t) for t in tensors) and op in (Average, Sum) and compression is Compression.none:
        return [_AllreduceFunction.apply(t, op, None if name is None else "%s.%d" % (name, i), prescale_factor,
                                         postscale_factor, process_set) for i, t in enumerate(tensors)]
    return synchronize(grouped_allreduce_async(tensors, None, name, compression, op, prescale_factor,
                                               postscale_factor, process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=None):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


# ---- BytePS's names; version is accepted and ignored. priority (an int, larger is sent sooner, as in
# BytePS: give the first layer the largest) schedules the named tensor's push-pulls by it
# (docs/performance.md#priority-scheduling); it is taken at the name's first use with a shape. None (the
# default): not scheduled, unless ZPS_PRIORITY=1. ----

def push_pull_async(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    """Starts the sum over workers into a new tensor; synchronize(handle) returns it."""
    return _allreduce_async(tensor, False, _reduce_op(average, None), name, "push_pull_async", compression,
                            priority=priority)


def push_pull_async_inplace(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    return _allreduce_async(tensor, True, _reduce_op(average, None), name, "push_pull_async_inplace", compression,
                            priority=priority)


def push_pull(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    """The sum of `tensor` over all workers (divided by size() when average) as a new tensor."""
    return synchronize(push_pull_async(tensor, average, name, version, priority, compression))


def push_pull_inplace(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    return synchronize(push_pull_async_inplace(tensor, average, name, version, priority, compression))


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=None):
    """Starts the reduction of a sparse tensor; returns a function that waits and returns the result
    (sparse), as Horovod's does. It travels dense: its values are summed where every worker has them."""
    if not tensor.is_sparse:
        raise ValueError("zps.torch.sparse_allreduce_async: expected a sparse tensor")
    handle = allreduce_async(tensor.coalesce().to_dense(), name=name, op=op, process_set=process_set)
    return lambda: synchronize(handle).to_sparse()
