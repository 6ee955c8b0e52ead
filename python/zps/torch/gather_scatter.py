"""allgather, reducescatter and alltoall (Horovod's), with their grouped variants and autograd: the
workers agree on each call through the coordinator as for allreduce (ops.py), and zps.torch.collectives
gathers and scatters the tensors over the servers.
"""
import torch

from zps.torch.ops import (_REDUCE_CODES, Average, Sum, _allreduce_async, _collective_async, _differentiable, _Group,
                           _register, _scale, check_tensor, synchronize)
from zps.torch.process_sets import group_of


class _AllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        rows = synchronize(allgather_async(torch.tensor([tensor.shape[0]]), None, process_set))
        ctx.start = int(rows[:group_of(process_set, "allgather").rank].sum())
        ctx.rows = tensor.shape[0]
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        # Every worker's output held this worker's rows: their gradient is the average over workers of
        # the gradient of those rows (Horovod's convention).
        g = synchronize(_allreduce_async(grad.contiguous(), False, Average, None, "allgather (backward)",
                                         process_set=ctx.process_set))
        return g[ctx.start:ctx.start + ctx.rows], None, None


class _ReducescatterFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.process_set = op, process_set
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad):
        # Every worker's part, gathered; scaled as Horovod's reducescatter gradient is (x size for Sum).
        g = synchronize(allgather_async(grad.contiguous(), None, ctx.process_set))
        size = group_of(ctx.process_set, "reducescatter").size
        return (g * size if ctx.op == Sum else g), None, None, None, None, None


class _AlltoallFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        # Even parts as explicit splits, so that the rows received from each worker are known: the
        # backward sends their gradients back by them.
        ctx.process_set = process_set
        size = group_of(process_set, "alltoall").size
        given = splits is not None
        if not given:
            if tensor.dim() == 0 or tensor.shape[0] % size:
                raise ValueError("zps.torch.alltoall: the first dimension (%s) must divide evenly by size() %d when "
                                 "no splits are given" % (list(tensor.shape)[:1], size))
            splits = torch.full((size,), tensor.shape[0] // size, dtype=torch.int32)
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        if not given:
            return out
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, *_):
        # The gradients go back to where their rows came from.
        g, _ = synchronize(alltoall_async(grad.contiguous(), ctx.received, None, ctx.process_set))
        return g, None, None, None


def allgather_async(tensor, name=None, process_set=None):
    check_tensor(tensor, "allgather", name)
    if tensor.dim() == 0:
        raise ValueError("zps.torch.allgather: a 0-dim tensor has no first dimension to concatenate on; "
                         "pass tensor.reshape(1)")
    return _collective_async("allgather", "allgather", tensor, name, 0, None,
                             lambda c, t, n, g: c.allgather(t, n, g), lambda result: result, process_set)


def allgather(tensor, name=None, process_set=None):
    """Every worker's `tensor` concatenated on the first dimension (which may differ between workers).
    Differentiable."""
    if _differentiable(tensor):
        return _AllgatherFunction.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=None):
    return _register(_Group([allgather_async(t, None if name is None else "%s.%d" % (name, i), process_set)
                             for i, t in enumerate(tensors)]))


def grouped_allgather(tensors, name=None, process_set=None):
    if any(_differentiable(t) for t in tensors):
        return [allgather(t, None if name is None else "%s.%d" % (name, i), process_set) for i, t in enumerate(tensors)]
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def reducescatter_async(tensor, name=None, op=Average, process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    check_tensor(tensor, "reducescatter", name)
    if op not in (Average, Sum):
        raise NotImplementedError("zps.torch.reducescatter: op must be Average or Sum, got %r" % (op,))
    if tensor.dim() == 0:
        raise ValueError("zps.torch.reducescatter: a 0-dim tensor cannot be scattered; pass tensor.reshape(1)")
    size = group_of(process_set, "reducescatter").size
    scaled = _scale(tensor, prescale_factor)

    def finish(result):
        if op == Average:
            result = result / size if result.is_floating_point() else torch.div(result, size, rounding_mode="trunc")
        return _scale(result, postscale_factor)

    return _collective_async("reducescatter", "reducescatter", scaled, name, _REDUCE_CODES[op], "reduction",
                             lambda c, t, n, g: c.reducescatter(t, Sum, n, g), finish, process_set)


def reducescatter(tensor, name=None, op=Average, process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """The reduction over workers of `tensor`, split on its first dimension: worker r gets part r.
    Differentiable."""
    if _differentiable(tensor):
        return _ReducescatterFunction.apply(tensor, name, op, prescale_factor, postscale_factor, process_set)
    return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=None, prescale_factor=1.0,
                                postscale_factor=1.0):
    return _register(_Group([reducescatter_async(t, None if name is None else "%s.%d" % (name, i), op, process_set,
                                                 prescale_factor, postscale_factor) for i, t in enumerate(tensors)]))


def grouped_reducescatter(tensors, name=None, op=Average, process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    if any(_differentiable(t) for t in tensors):
        return [reducescatter(t, None if name is None else "%s.%d" % (name, i), op, process_set, prescale_factor,
                              postscale_factor) for i, t in enumerate(tensors)]
    return synchronize(grouped_reducescatter_async(tensors, name, op, process_set, prescale_factor, postscale_factor))


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    check_tensor(tensor, "alltoall", name)
    rt = group_of(process_set, "alltoall")
    if splits is not None:
        if not isinstance(splits, torch.Tensor):
            splits = torch.tensor(splits)
        if splits.dtype not in (torch.int32, torch.int64):
            raise ValueError("zps.torch.alltoall: splits must be integers, got %s" % splits.dtype)
        if splits.numel() != rt.size or int(splits.sum()) != tensor.shape[0] or bool((splits < 0).any()):
            raise ValueError("zps.torch.alltoall: splits %s must give %d non-negative counts summing to the first "
                             "dimension %d" % (splits.tolist(), rt.size, tensor.shape[0]))
    elif tensor.dim() == 0 or tensor.shape[0] % rt.size:
        raise ValueError("zps.torch.alltoall: the first dimension (%s) must divide evenly by size() %d when no "
                         "splits are given" % (list(tensor.shape)[:1], rt.size))
    return _collective_async("alltoall", "alltoall", tensor, name, 0, None,
                             lambda c, t, n, g: c.alltoall(t, splits, n, g), lambda result: result, process_set)


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Sends part i of `tensor` (split on its first dimension by `splits`, else evenly) to worker i; returns
    what the workers sent this one, concatenated (and the received splits, as Horovod does when it is a
    tuple from zps.torch.collectives). Differentiable."""
    if _differentiable(tensor):
        return _AlltoallFunction.apply(tensor, splits, name, process_set)
    return synchronize(alltoall_async(tensor, splits, name, process_set))
