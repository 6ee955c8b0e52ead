"""Collective operations on zps's servers: allgather, reducescatter, alltoall, allreduce with any op,
broadcast and barrier, each a blocking call that returns its result.

The servers can do one thing to a tensor: sum what every worker pushed in a round and return the sum.
Everything here is built on that sum:

- Moving bytes (allgather, alltoall, broadcast) sums uint8 views of a buffer in which each worker
  fills only its own slot and leaves the others zero. A byte plus zeros is that byte (the servers sum
  uint8 modulo 256), so every dtype arrives bit for bit, -0.0 and NaN payloads included.
- Reducing (allreduce_op, reducescatter) with Sum or Average is the servers' sum in the tensor's own
  dtype; Min, Max and Product are an allgather followed by the reduction on every worker.

docs/pytorch.md ("Collectives on the servers") lists what each call costs in bytes per worker.

Names: the n-th call of a name on every worker are one operation, as for push_pull. A call without a
name uses one name per operation, so unnamed calls must come in the same order on every worker. Each
distinct byte size of a name is a tensor on the servers, declared on its first use and kept for the job.
"""
import torch

from zps.torch._runtime import DTYPES, runtime

Sum = "Sum"
Average = "Average"
Min = "Min"
Max = "Max"
Product = "Product"
OPS = (Sum, Average, Min, Max, Product)

_MAX_DIMS = 8  # a tensor's shape travels in the size exchange as this many int64 slots
# Buffers of operations whose wait failed: the transport may still read them after the wait returned,
# so they are kept alive for the rest of the process.
_abandoned = []


def _check(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("zps.torch.%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.is_sparse:
        raise TypeError("zps.torch.%s: sparse tensors are not supported; pass tensor.to_dense()" % what)
    if tensor.dim() > _MAX_DIMS:
        raise ValueError("zps.torch.%s: a tensor of %d dimensions; at most %d are supported" %
                         (what, tensor.dim(), _MAX_DIMS))


def _host_bytes(tensor):
    """A contiguous flat uint8 view of a host copy of `tensor` (the tensor itself when it can be)."""
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    t = t.contiguous().reshape(-1)  # reshape(-1) first: a 0-dim tensor cannot be viewed as bytes
    return t.view(torch.uint8) if t.dtype != torch.uint8 else t


def _group(what, group):
    """The workers an operation runs over: `group` (a process set's, from ops.py), else every worker."""
    return runtime(what) if group is None else group


def _sum_(buf, key, what, group=None):
    """Sums the contiguous 1-D `buf` over the group's workers in place (the servers' round of `key`)."""
    if buf.numel() == 0:
        return buf
    rt = _group(what, group)
    tid = rt.declare(key, buf)
    handle = rt.worker.push_pull(tid, buf.data_ptr(), buf.data_ptr())
    try:
        rt.worker.wait(handle, -1, "zps.torch.%s of '%s'" % (what, key))
    except BaseException:
        _abandoned.append(buf)
        raise
    return buf


def _name(what, name):
    return "zps.%s.%s" % (what, "noname" if name is None else name)


def _gather_bytes(data, slot_bytes, key, what, group=None):
    """Every worker's `data` bytes (worker r's at slot_bytes[r]) as one uint8 buffer."""
    rt = _group(what, group)
    offsets = [0]
    for n in slot_bytes:
        offsets.append(offsets[-1] + n)
    buf = torch.zeros(offsets[-1], dtype=torch.uint8)
    buf[offsets[rt.rank]:offsets[rt.rank + 1]].copy_(data)
    return _sum_(buf, "%s.%d" % (key, offsets[-1]), what, group), offsets


def _descriptor(tensor):
    """[first dim, dtype, ndim, dims...] as int64 slots; a 0-dim tensor counts as one row."""
    shape = list(tensor.shape) or [1]
    dtype_code = _dtype_code(tensor.dtype)
    return [shape[0], dtype_code, tensor.dim()] + shape[1:] + [-1] * (_MAX_DIMS - len(shape))


# The shape descriptor's own numbering of torch dtypes (its index here), read only by other zps.torch
# processes: it covers dtypes the C API does not sum (bool, int8, complex...), so it is not a copy of
# the C API's dtype codes (those are _runtime.DTYPES, asked of the library).
_ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
               torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128]


def _dtype_code(dtype):
    return _ALL_DTYPES.index(dtype) if dtype in _ALL_DTYPES else 99


def _exchange(values, key, what, group=None):
    """Every worker's list of ints (equal lengths everywhere) as a list of lists, in rank order."""
    rt = _group(what, group)
    width = len(values)
    table = torch.zeros(rt.size * width, dtype=torch.int64)
    table[rt.rank * width:(rt.rank + 1) * width] = torch.tensor(values, dtype=torch.int64)
    _sum_(table, key, what, group)
    return table.view(rt.size, width).tolist()


def _describe(d):
    ndim = d[2]
    shape = ([d[0]] + d[3:3 + ndim - 1]) if ndim > 0 else []
    dtype = _ALL_DTYPES[d[1]] if d[1] < len(_ALL_DTYPES) else "another dtype"
    return "shape %s, %s" % (shape, str(dtype).replace("torch.", ""))


def allgather(tensor, name=None, group=None):
    """Every worker's `tensor` concatenated along the first dimension, in rank order. The first
    dimension may differ between workers; the others and the dtype must agree. A 0-dim tensor counts
    as one row: the result has one element per worker. Any dtype."""
    _check(tensor, "allgather")
    key = _name("allgather", name)
    rt = _group("allgather", group)
    descriptors = _exchange(_descriptor(tensor), key + ".shapes", "allgather", group)
    mine = descriptors[rt.rank]
    for r, d in enumerate(descriptors):
        if d[1:] != mine[1:]:
            raise ValueError("zps.torch.allgather of '%s': worker %d has %s, worker %d has %s; all but the first "
                             "dimension and the dtype must agree" %
                             (key, rt.rank, _describe(mine), r, _describe(d)))
    row_bytes = tensor.element_size() * _prod(tensor.shape[1:])
    rows = [d[0] for d in descriptors]
    buf, _ = _gather_bytes(_host_bytes(tensor), [n * row_bytes for n in rows], key, "allgather", group)
    rest = list(tensor.shape[1:])
    out = buf.view(tensor.dtype).reshape([sum(rows)] + rest)
    return out.to(tensor.device) if tensor.device.type != "cpu" else out


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def _gather_equal(tensor, key, what, group=None):
    """Every worker's `tensor` (same shape and dtype everywhere) stacked: shape [size, *tensor.shape].
    One round; a shape that differs makes the servers refuse the declaration, naming both."""
    rt = _group(what, group)
    data = _host_bytes(tensor)
    buf, _ = _gather_bytes(data, [data.numel()] * rt.size, key, what, group)
    return buf.view(tensor.dtype).reshape([rt.size] + list(tensor.shape))


def _reduce_stacked(stacked, op):
    if op == Min:
        return stacked.amin(dim=0) if stacked.dtype != torch.bool else stacked.all(dim=0)
    if op == Max:
        return stacked.amax(dim=0) if stacked.dtype != torch.bool else stacked.any(dim=0)
    if op == Product:
        if stacked.dtype in (torch.float16, torch.bfloat16):  # CPU prod has no half kernels
            return stacked.float().prod(dim=0).to(stacked.dtype)
        return stacked.prod(dim=0).to(stacked.dtype)
    total = stacked.sum(dim=0).to(stacked.dtype)
    return total if op == Sum else _divide(total, stacked.shape[0])


def _divide(t, n):
    if t.is_floating_point() or t.is_complex():
        return t.div_(n)
    return t.copy_(torch.div(t, n, rounding_mode="trunc"))


def _check_op(op, what):
    if op not in OPS:
        raise ValueError("zps.torch.%s: op must be one of %s, got %r" % (what, ", ".join(OPS), op))


def allreduce_op(tensor, op=Average, name=None, group=None):
    """A new tensor: `tensor` reduced over all workers with op (Sum, Average, Min, Max or Product).
    Sum and Average of a dtype the servers sum are one round of the servers' sum; every other case
    is an allgather and the reduction on each worker. The average of an integer tensor is truncated."""
    _check(tensor, "allreduce_op")
    _check_op(op, "allreduce_op")
    key = "%s.%s.%s" % (_name("allreduce", name), str(tensor.dtype).replace("torch.", ""),
                        "x".join(map(str, tensor.shape)) or "scalar")
    rt = _group("allreduce_op", group)
    if op in (Sum, Average) and tensor.dtype in DTYPES:
        buf = tensor.detach().to("cpu", copy=True).contiguous().reshape(-1)
        _sum_(buf, key, "allreduce_op", group)
        out = buf.reshape(tensor.shape)
        if op == Average:
            _divide(out, rt.size)
    else:
        out = _reduce_stacked(_gather_equal(tensor, key + "." + op, "allreduce_op", group), op)
    return out.to(tensor.device) if tensor.device.type != "cpu" else out


def _split_rows(d0, size):
    """Rows of a first dimension d0 per worker: as even as can be, the first workers one more."""
    return [d0 // size + (1 if r < d0 % size else 0) for r in range(size)]


def reducescatter(tensor, op=Average, name=None, group=None):
    """`tensor` reduced over all workers with op, and this worker's part of it along the first
    dimension: worker r gets rows split as evenly as possible, the first d0 % size workers one more.
    Sum and Average are one round of the servers' sum of the whole tensor."""
    _check(tensor, "reducescatter")
    _check_op(op, "reducescatter")
    if tensor.dim() == 0:
        raise ValueError("zps.torch.reducescatter: a 0-dim tensor has no first dimension to scatter; "
                         "pass tensor.reshape(1) or use allreduce")
    rt = _group("reducescatter", group)
    rows = _split_rows(tensor.shape[0], rt.size)
    start = sum(rows[:rt.rank])
    reduced = allreduce_op(tensor, op, "reducescatter." + ("noname" if name is None else name), group)
    return reduced[start:start + rows[rt.rank]].clone()


def _splits_list(splits, d0, size, what):
    if splits is None:
        if d0 % size:
            raise ValueError("zps.torch.%s: the first dimension (%d) is not a multiple of the number of workers "
                             "(%d); pass splits" % (what, d0, size))
        return [d0 // size] * size
    values = splits.tolist() if isinstance(splits, torch.Tensor) else list(splits)
    if len(values) != size or any(int(v) < 0 for v in values) or sum(int(v) for v in values) != d0:
        raise ValueError("zps.torch.%s: splits %s must hold %d non-negative row counts that add up to the first "
                         "dimension (%d)" % (what, values, size, d0))
    return [int(v) for v in values]


def alltoall(tensor, splits=None, name=None, group=None):
    """Sends rows of `tensor` to every worker: rows splits[0] to worker 0, the next splits[1] to
    worker 1, ... (splits None: equal parts). Returns (received, received_splits) when splits is
    given, else received: the rows every worker sent to this one, in rank order. Any dtype."""
    _check(tensor, "alltoall")
    if tensor.dim() == 0:
        raise ValueError("zps.torch.alltoall: a 0-dim tensor has no rows to send; pass tensor.reshape(1)")
    rt = _group("alltoall", group)
    size, rank = rt.size, rt.rank
    mine = _splits_list(splits, tensor.shape[0], size, "alltoall")
    key = _name("alltoall", name)
    # The whole matrix of row counts (row: sender, column: receiver), with each sender's row shape.
    rest = list(tensor.shape[1:])
    signature = [_dtype_code(tensor.dtype), tensor.dim()] + rest + [-1] * (_MAX_DIMS - 1 - len(rest))
    table = _exchange(mine + signature, key + ".splits", "alltoall", group)
    for r, row in enumerate(table):
        if row[size:] != table[rank][size:]:
            raise ValueError("zps.torch.alltoall of '%s': worker %d sends rows of %s, worker %d of %s; the rows' "
                             "shape and dtype must agree" %
                             (key, rank, _describe([0] + table[rank][size:]), r, _describe([0] + row[size:])))
    row_bytes = tensor.element_size() * _prod(rest)
    # One slot per (sender, receiver) pair, senders in rank order, each sender's slots by receiver.
    slot_bytes = [table[s][d] * row_bytes for s in range(size) for d in range(size)]
    data = _host_bytes(tensor)
    offsets = [0]
    for n in slot_bytes:
        offsets.append(offsets[-1] + n)
    buf = torch.zeros(offsets[-1], dtype=torch.uint8)
    buf[offsets[rank * size]:offsets[(rank + 1) * size]].copy_(data)
    _sum_(buf, "%s.%d" % (key, offsets[-1]), "alltoall", group)
    received = torch.cat([buf[offsets[s * size + rank]:offsets[s * size + rank + 1]] for s in range(size)])
    received_splits = [table[s][rank] for s in range(size)]
    out = received.view(tensor.dtype).reshape([sum(received_splits)] + rest)
    if tensor.device.type != "cpu":
        out = out.to(tensor.device)
    if splits is None:
        return out
    return out, torch.tensor(received_splits, dtype=torch.int32)


def broadcast_(tensor, root_rank, name=None):
    """Overwrites `tensor` (in place, any dtype and shape, 0-dim too) with root_rank's on every worker.
    Workers that name different roots all raise ValueError naming each worker's root."""
    _check(tensor, "broadcast")
    rt = runtime("broadcast")
    if isinstance(root_rank, bool) or not isinstance(root_rank, int) or not 0 <= root_rank < rt.size:
        raise ValueError("zps.torch.broadcast: root_rank %r is not a worker rank (0..%d)" % (root_rank, rt.size - 1))
    data = _host_bytes(tensor)
    n = data.numel()
    # The root's bytes, then one 4-byte slot per worker holding the root it named (plus one, so that
    # an unfilled slot reads 0): the roots are compared in the same round as the data travels.
    buf = torch.zeros(n + 4 * rt.size, dtype=torch.uint8)
    if rt.rank == root_rank:
        buf[:n].copy_(data)
    buf[n + 4 * rt.rank:n + 4 * rt.rank + 4].copy_(torch.tensor([root_rank + 1], dtype=torch.int32).view(torch.uint8))
    key = "%s.%d" % (_name("broadcast", name), buf.numel())
    _sum_(buf, key, "broadcast")
    roots = [v - 1 for v in buf[n:].clone().view(torch.int32).tolist()]
    if any(r != root_rank for r in roots):
        raise ValueError("zps.torch.broadcast of '%s': the workers named different roots (%s); every worker must "
                         "pass the same root_rank" %
                         (key, ", ".join("worker %d: %d" % (w, r) for w, r in enumerate(roots))))
    with torch.no_grad():
        tensor.copy_(buf[:n].view(tensor.dtype).reshape(tensor.shape))
    return tensor


def broadcast(tensor, root_rank, name=None):
    """root_rank's `tensor` as a new tensor on every worker."""
    out = tensor.detach().clone()
    return broadcast_(out, root_rank, name)


def barrier():
    """Waits until every worker reached this barrier."""
    runtime("barrier").worker.barrier()
