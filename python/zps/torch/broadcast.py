"""broadcast (Horovod's, with its async, in-place and autograd forms), and what rides on it:
broadcast_parameters, broadcast_optimizer_state and broadcast_object, root_rank's values on every worker.

The root pushes its bytes, the others zeros; the servers' byte sum (mod 256) is the root's bytes, for
any dtype. Objects are serialised with torch.save (pickle, tensors stored compactly) into a uint8 tensor
whose capacity is a power of two, so that repeated calls reuse a few declared tensors.
"""
import io

import torch

from zps.torch import coordinator
from zps.torch._runtime import runtime
from zps.torch.ops import (Average, _allreduce_async, _Buffers, _describe, _differentiable, _Pending, _register,
                           _release, _reserve, _submit, synchronize)
from zps.torch.process_sets import group_of


class _BroadcastFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(_broadcast_async(tensor, False, root_rank, name, "broadcast", process_set))

    @staticmethod
    def backward(ctx, grad):
        # Only the root's tensor reached the outputs: its gradient is the average of every worker's.
        g = synchronize(_allreduce_async(grad.contiguous(), False, Average, None, "broadcast (backward)",
                                         process_set=ctx.process_set))
        if runtime("broadcast").rank != ctx.root_rank:
            g = torch.zeros_like(g)
        return g, None, None, None


def _bytes_view(tensor):
    """The bytes of a contiguous tensor as a flat uint8 view of the same memory. Flattened first, because
    torch cannot view a 0-dim tensor (BatchNorm's num_batches_tracked, torch.tensor(epoch)) as bytes."""
    flat = tensor.reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


def _broadcast_async(tensor, inplace, root_rank, name, what, process_set=None):
    """root_rank is a rank of the job (Horovod's convention), one of the process set's."""
    rt = runtime(what)
    group = group_of(process_set, what)
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("zps.torch.%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if isinstance(root_rank, bool) or not isinstance(root_rank, int) or root_rank not in group.members:
        raise ValueError("zps.torch.%s: root_rank %r is not a rank of %s (%s)" %
                         (what, root_rank, "the job" if group is rt else "the process set", list(group.members)))
    if not tensor.is_contiguous():
        raise ValueError("zps.torch.%s: %s is not contiguous; pass tensor.contiguous()" % (what, _describe(tensor, name)))
    target = tensor.detach() if inplace else tensor.detach().clone()
    host = target.to("cpu") if target.device.type != "cpu" else target
    data = _bytes_view(host)
    name = _reserve("broadcast", name, tensor, "broadcast", group)
    pending = _Pending(("broadcast", name, getattr(group, "key_space", 0)), buffers=_Buffers(data, data))

    def finish():
        if host is not target:
            target.copy_(host)
        return tensor if inplace else target

    pending.finish = finish
    if data.numel() == 0:
        _release(pending.key)
        pending.key = None
        return _register(pending)

    def start(agreed):
        b = pending.take_buffers()
        if rt.rank != root_rank:
            b.source.zero_()
        tid = group.tensor_id(coordinator.declared_name("zps.broadcast." + name, b.source, agreed.generation), b.source)
        return group.worker.push_pull(tid, b.source.data_ptr(), b.output.data_ptr())

    return _submit(group, "broadcast", name, tensor, root_rank, "root rank", start, pending)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Starts sending root_rank's `tensor` to every worker; synchronize(handle) returns it as a new tensor."""
    return _broadcast_async(tensor, False, root_rank, name, "broadcast_async", process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts overwriting `tensor` on every worker with root_rank's (any dtype: its bytes travel)."""
    return _broadcast_async(tensor, True, root_rank, name, "broadcast_async_", process_set)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    synchronize(broadcast_async_(tensor, root_rank, name, process_set))
    return tensor


def broadcast(tensor, root_rank, name=None, process_set=None):
    """root_rank's `tensor` as a new tensor on every worker. Differentiable: the root's gradient is the
    average of every worker's, the others' zero."""
    if _differentiable(tensor):
        return _BroadcastFunction.apply(tensor, root_rank, name, process_set)
    return synchronize(_broadcast_async(tensor, False, root_rank, name, "broadcast", process_set))


def _named(params, what):
    if isinstance(params, dict):
        items = list(params.items())
    else:
        items = list(params)
        if items and isinstance(items[0], torch.Tensor):
            items = [("%d" % i, t) for i, t in enumerate(items)]
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError("zps.torch.%s: duplicate parameter names %s" % (what, dup))
    return items


def broadcast_parameters(params, root_rank):
    """Overwrites every worker's parameters with root_rank's, in place. `params` is a state_dict(),
    named_parameters() or a list of tensors; every worker must pass the same names in the same order."""
    runtime("broadcast_parameters")
    handles = []
    with torch.no_grad():
        for name, p in _named(params, "broadcast_parameters"):
            if p is None:
                continue
            if not isinstance(p, torch.Tensor):
                raise TypeError("zps.torch.broadcast_parameters: '%s' is a %s, not a tensor" % (name, type(p).__name__))
            target = p.data if isinstance(p, torch.nn.Parameter) else p
            if target.numel() == 0:
                continue
            handles.append(broadcast_async_(target, root_rank, "param." + name))
        for h in handles:
            synchronize(h)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """root_rank's `obj` (anything torch.save can write) on every worker (of the process set)."""
    rt = runtime("broadcast_object")
    name = "object." + (name or "noname")
    payload = None
    length = torch.zeros(1, dtype=torch.int64)
    if rt.rank == root_rank:
        buf = io.BytesIO()
        torch.save(obj, buf)
        payload = buf.getvalue()
        length[0] = len(payload)
    broadcast_(length, root_rank, name + ".length", process_set)
    n = int(length[0])
    capacity = max(1024, 1 << (n - 1).bit_length())
    data = torch.zeros(capacity, dtype=torch.uint8)
    if rt.rank == root_rank:
        data[:n] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    broadcast_(data, root_rank, "%s.%d" % (name, capacity), process_set)
    if rt.rank == root_rank:
        return obj
    return torch.load(io.BytesIO(data[:n].numpy().tobytes()))


def allgather_object(obj, name=None, process_set=None):
    """Every worker's `obj` (anything torch.save can write), as a list indexed by rank (in the process
    set): one broadcast_object from each rank in turn."""
    rt = runtime("allgather_object")
    name = name or "allgather_object"
    members = group_of(process_set, "allgather_object").members
    return [broadcast_object(obj if r == rt.rank else None, r, "%s.%d" % (name, r), process_set) for r in members]


def _initialise_state(optimizer):
    """Gives an optimizer that never stepped its state (momentum buffers, Adam's moments): one step with
    zero gradients, the parameters kept as they were. Parameters without a gradient get zeros, as in
    Horovod, so that every worker's state has the same entries."""
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    saved = [p.detach().clone() for p in params]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    step = getattr(optimizer, "_zps_base_step", None) or optimizer.step
    step()
    with torch.no_grad():
        for p, before in zip(params, saved):
            p.copy_(before)


def broadcast_optimizer_state(optimizer, root_rank):
    """Overwrites every worker's optimizer state and options (lr, momentum, ...) with root_rank's. An
    optimizer that has not stepped yet gets its state first, so that the root's is complete."""
    rt = runtime("broadcast_optimizer_state")
    if len(optimizer.state_dict()["state"]) == 0:
        _initialise_state(optimizer)
    state = broadcast_object(optimizer.state_dict(), root_rank, "optimizer_state")
    if rt.rank != root_rank:
        optimizer.load_state_dict(state)
