"""broadcast_parameters, broadcast_optimizer_state and broadcast_object: root_rank's values on every worker.

All three ride on ops.broadcast_async_ (the root pushes its bytes, the others zeros). Objects are
serialised with torch.save (pickle, tensors stored compactly) into a uint8 tensor whose capacity is a
power of two, so that repeated calls reuse a few declared tensors.
"""
import io

import torch

from zps.torch._runtime import runtime
from zps.torch.ops import broadcast_, broadcast_async_, synchronize
from zps.torch.process_sets import group_of


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
