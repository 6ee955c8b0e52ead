"""push_pull (BytePS) and allreduce (Horovod) over the servers' sum, async handles, and broadcast.

Every call of a name is the next round of that tensor: the n-th push_pull of 'x' on every worker are
summed together. A call without a name uses one tensor per dtype and shape ("zps.noname.<dtype>.<shape>"),
so unnamed calls must come in the same order on every worker, as in Horovod.
"""
import itertools
import threading

import torch

from zps.torch._runtime import DTYPES, runtime
from zps.torch.compression import Compression

Average = "Average"
Sum = "Sum"

_handles = {}
_handles_lock = threading.Lock()
_next_handle = itertools.count(1)
# Tensors of operations whose wait failed: a push is sent from its tensor without a copy, and the transport
# may still read it after the cancellation, so they are kept alive for the rest of the process.
_abandoned = []


class _Op:
    """A push_pull in flight; holds its tensors so they live until synchronize()."""

    __slots__ = ("zps_handle", "source", "output", "divisor", "name", "device_output")

    def __init__(self, zps_handle, source, output, divisor, name, device_output=None):
        self.zps_handle = zps_handle
        self.source = source
        self.output = output
        self.divisor = divisor
        self.name = name
        self.device_output = device_output  # a tensor on a device, written from `output` by synchronize


def _describe(tensor, name):
    return "tensor '%s'" % name if name else "a tensor of shape %s" % list(tensor.shape)


def check_tensor(tensor, what, name=None):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("zps.torch.%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.dtype not in DTYPES:
        raise TypeError("zps.torch.%s: %s has dtype %s; supported: %s" % (
            what, _describe(tensor, name), tensor.dtype, ", ".join(str(d).replace("torch.", "") for d in DTYPES)))
    if not tensor.is_contiguous():
        raise ValueError("zps.torch.%s: %s is not contiguous; pass tensor.contiguous()" % (what, _describe(tensor, name)))
    if tensor.is_sparse:
        raise TypeError("zps.torch.%s: %s is sparse; zps.torch.Embedding handles sparse rows" % (what, _describe(tensor, name)))


def _default_name(prefix, tensor):
    return "zps.%s.%s.%s" % (prefix, str(tensor.dtype).replace("torch.", ""), "x".join(map(str, tensor.shape)) or "scalar")


def _divisor(average, op, size):
    if op is not None and average is not None:
        raise ValueError("zps.torch: pass either average or op, not both")
    if op is not None:
        if op not in (Average, Sum):
            raise ValueError("zps.torch: op must be zps.torch.Average or zps.torch.Sum, got %r" % (op,))
        return size if op == Average else 1
    return size if (average is None or average) else 1


def _zps_priority(priority):
    """BytePS's priority (larger is sent sooner; None: not scheduled) in zps's order (lower is sooner)."""
    if priority is None:
        return None
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError("zps.torch: priority must be an int or None, got %r" % (priority,))
    if not -(1 << 62) <= priority <= (1 << 62):
        raise ValueError("zps.torch: priority %d is out of range (|priority| <= 2**62)" % priority)
    return -priority


def start_push_pull(tensor, output, divisor, name, what, compression=Compression.none, priority=None):
    """Starts the sum of `tensor` over workers into `output` (may be `tensor`); returns a handle.
    priority: as BytePS's (larger is sent sooner); None leaves the tensor unscheduled."""
    rt = runtime(what)
    check_tensor(tensor, what, name)
    if name is None:
        name = _default_name("noname", tensor)
    compressor = "fp16" if compression is Compression.fp16 and tensor.dtype == torch.float32 else None
    device_output = None
    if tensor.numel() == 0:
        zps_handle = None
    else:
        tid = rt.declare(name, tensor, compressor, _zps_priority(priority))
        if tensor.device.type != "cpu":
            # The library takes host memory (a build without CUDA cannot read a device pointer): the
            # sum goes through a host copy, and synchronize() copies the result back to the device.
            device_output, tensor = output, tensor.detach().to("cpu")
            output = tensor
        zps_handle = rt.worker.push_pull(tid, tensor.data_ptr(), output.data_ptr())
    h = next(_next_handle)
    with _handles_lock:
        _handles[h] = _Op(zps_handle, tensor, output, divisor, name, device_output)
    return h


def poll(handle):
    """True when the operation has ended (synchronize then returns at once)."""
    with _handles_lock:
        op = _handles.get(handle)
    if op is None:
        raise ValueError("zps.torch.poll: unknown or already synchronized handle %r" % (handle,))
    if op.zps_handle is None:
        return True
    return runtime("poll").worker.poll(op.zps_handle)


def synchronize(handle, timeout=None):
    """Waits for an operation (at most `timeout` seconds; None: ZPS_REQUEST_TIMEOUT) and returns its result."""
    with _handles_lock:
        op = _handles.pop(handle, None)
    if op is None:
        raise ValueError("zps.torch.synchronize: unknown or already synchronized handle %r" % (handle,))
    if op.zps_handle is not None:
        rt = runtime("synchronize")
        timeout_ms = -1 if timeout is None else max(0, int(timeout * 1000))
        try:
            rt.worker.wait(op.zps_handle, timeout_ms, "zps.torch: push_pull of '%s'" % op.name)
        except BaseException:
            _abandoned.append(op)
            raise
    out = op.output
    if op.divisor != 1:
        if out.is_floating_point():
            out.div_(op.divisor)
        else:
            out.copy_(torch.div(out, op.divisor, rounding_mode="trunc"))
    if op.device_output is not None:
        op.device_output.copy_(out)
        return op.device_output
    return out


def _start(tensor, inplace, divisor_of, name, what, compression=Compression.none, priority=None):
    output = tensor if inplace or not isinstance(tensor, torch.Tensor) else torch.empty_like(tensor)
    return start_push_pull(tensor, output, divisor_of(_size(what)), name, what, compression, priority)


# BytePS names; version is accepted and ignored. priority (an int, larger is sent sooner, as in BytePS:
# give the first layer the largest) schedules the named tensor's push-pulls by it
# (docs/performance.md#priority-scheduling); it is taken at the name's first use. None (the default):
# not scheduled, unless ZPS_PRIORITY=1.
def push_pull_async(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    """Starts the sum over workers into a new tensor; synchronize(handle) returns it."""
    return _start(tensor, False, lambda n: _divisor(average, None, n), name, "push_pull_async", compression, priority)


def push_pull_async_inplace(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    return _start(tensor, True, lambda n: _divisor(average, None, n), name, "push_pull_async_inplace", compression,
                  priority)


def push_pull(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    """The sum of `tensor` over all workers (divided by size() when average) as a new tensor."""
    return synchronize(_start(tensor, False, lambda n: _divisor(average, None, n), name, "push_pull", compression,
                              priority))


def push_pull_inplace(tensor, average=True, name=None, version=0, priority=None, compression=Compression.none):
    return synchronize(_start(tensor, True, lambda n: _divisor(average, None, n), name, "push_pull_inplace",
                              compression, priority))


# Horovod names: average=None and op=None mean Average.
def allreduce_async(tensor, average=None, name=None, compression=Compression.none, op=None):
    return _start(tensor, False, lambda n: _divisor(average, op, n), name, "allreduce_async", compression)


def allreduce_async_(tensor, average=None, name=None, op=None):
    return _start(tensor, True, lambda n: _divisor(average, op, n), name, "allreduce_async_")


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None):
    return synchronize(_start(tensor, False, lambda n: _divisor(average, op, n), name, "allreduce", compression))


def allreduce_(tensor, average=None, name=None, op=None):
    return synchronize(_start(tensor, True, lambda n: _divisor(average, op, n), name, "allreduce_"))


def _size(what):
    return runtime(what).size


def _bytes_view(tensor):
    return tensor.view(torch.uint8) if tensor.dtype != torch.uint8 else tensor


def broadcast_async_(tensor, root_rank, name=None):
    """Starts overwriting `tensor` on every worker with root_rank's (any dtype: its bytes travel)."""
    rt = runtime("broadcast")
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("zps.torch.broadcast: expected a torch.Tensor, got %s" % type(tensor).__name__)
    if not 0 <= root_rank < rt.size:
        raise ValueError("zps.torch.broadcast: root_rank %d is not a worker rank (0..%d)" % (root_rank, rt.size - 1))
    if not tensor.is_contiguous():
        raise ValueError("zps.torch.broadcast: %s is not contiguous; pass tensor.contiguous()" % _describe(tensor, name))
    # The root sends its bytes, the others zeros; the servers' byte sum (mod 256) is the root's bytes.
    # Flattened first (a view: the tensor is contiguous), as a 0-dim tensor (BatchNorm's
    # num_batches_tracked) has no dimension to view as bytes.
    data = _bytes_view(tensor.detach().reshape(-1))
    if name is None:
        name = _default_name("broadcast", tensor)
    if rt.rank != root_rank:
        data.zero_()
    return start_push_pull(data, data, 1, "zps.broadcast." + name, "broadcast")


def broadcast_(tensor, root_rank, name=None):
    synchronize(broadcast_async_(tensor, root_rank, name))
    return tensor


def broadcast(tensor, root_rank, name=None):
    """root_rank's `tensor` as a new tensor on every worker."""
    out = tensor.detach().clone() if isinstance(tensor, torch.Tensor) else tensor
    return broadcast_(out, root_rank, name)
