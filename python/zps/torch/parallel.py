"""DistributedDataParallel: BytePS's module wrapper (`byteps.torch.parallel.DistributedDataParallel`) on zps,
so a BytePS DDP script changes only its import lines.

The wrapped module averages every gradient over the workers during backward: a hook on each parameter's
gradient accumulator notes when backward has produced that gradient, and the gradients travel in the
same buckets as DistributedOptimizer's (small ones together, large ones alone, started as soon as
complete). At the end of backward (a callback queued on autograd's engine) the wrapper waits for every
sum and writes the averages back into `.grad`, so any plain optimizer steps on averaged gradients and
`optimizer.step()` needs no wrapper. Parameters that the forward pass did not use are summed as zeros,
so every worker's rounds stay in step. Buffers (BatchNorm's running statistics) are copied from rank 0
before each forward, one broadcast per dtype, as BytePS's and torch's DDP do.
"""
import contextlib

import torch

from zps.torch._runtime import runtime
from zps.torch.broadcast import broadcast_, broadcast_parameters
from zps.torch.compression import Compression
from zps.torch.ops import start_push_pull, synchronize as wait_for
from zps.torch.optimizer import _plan_units, bucket_bytes_setting


class DistributedDataParallel(torch.nn.Module):
    """`DistributedDataParallel(module, device_ids=None, broadcast_buffers=True, compression=Compression.none,
    bucket_bytes=None)`. device_ids is accepted as BytePS's (one device; tensors on a GPU are staged
    through host memory). bucket_bytes as DistributedOptimizer's (default ZPS_TORCH_BUCKET_BYTES, else
    1 MiB). The module's state is broadcast from rank 0 when it is wrapped."""

    def __init__(self, module, device_ids=None, broadcast_buffers=True, compression=Compression.none,
                 bucket_bytes=None):
        super().__init__()
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError("zps.torch.parallel.DistributedDataParallel: device_ids holds one device (one process "
                             "per device), got %r" % (device_ids,))
        rt = runtime("DistributedDataParallel")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self._require_backward_grad_sync = True
        self._divisor = rt.size
        trained = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        self._units = _plan_units(trained, bucket_bytes_setting(bucket_bytes))
        self._unit_of = {}
        self._handles = {}  # unit index -> handle of its sum in flight
        self._callback_queued = False
        compressor = "fp16" if compression is Compression.fp16 else None
        self._ids = []
        self._grad_accs = []
        for index, unit in enumerate(self._units):
            unit.name = "ddp." + unit.name
            pushed = unit.flat if unit.flat is not None else unit.params[0]
            self._ids.append(rt.declare(unit.name, pushed, compressor if pushed.dtype == torch.float32 else None)
                             if pushed.numel() > 0 else None)
            for p in unit.params:
                self._unit_of[id(p)] = index
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._make_hook(p))
                self._grad_accs.append(acc)  # keeps the accumulator (and its hook) alive
        self._done = set()  # params whose gradient this backward produced
        broadcast_parameters(module.state_dict(), root_rank=0)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside this block only accumulate gradients locally; the first backward after
        it sums the accumulated gradients."""
        previous = self._require_backward_grad_sync
        self._require_backward_grad_sync = False
        try:
            yield
        finally:
            self._require_backward_grad_sync = previous

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers:
            self._sync_buffers()
        return self.module(*inputs, **kwargs)

    def _sync_buffers(self):
        """Every buffer takes rank 0's value: one flat broadcast per dtype, not one per buffer."""
        by_dtype = {}
        for name, b in self.module.named_buffers():
            if b is not None and b.numel() > 0:
                by_dtype.setdefault(b.dtype, []).append(b)
        with torch.no_grad():
            for dtype, buffers in by_dtype.items():
                flat = torch.cat([b.detach().reshape(-1).cpu() for b in buffers])
                broadcast_(flat, 0, name="ddp.buffers.%s" % str(dtype).replace("torch.", ""))
                start = 0
                for b in buffers:
                    n = b.numel()
                    b.copy_(flat[start:start + n].view_as(b))
                    start += n

    def _make_hook(self, p):
        def hook(*_):
            if not self._require_backward_grad_sync or p.grad is None:
                return
            if not self._callback_queued:
                self._callback_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            if p.grad.is_sparse:
                p.grad = p.grad.to_dense()
            self._mark_done(p)
        return hook

    def _mark_done(self, p):
        if id(p) in self._done:
            return
        self._done.add(id(p))
        index = self._unit_of[id(p)]
        unit = self._units[index]
        unit.ready += 1
        if unit.ready == len(unit.params):
            unit.ready = 0
            pushed = unit.tensor()
            if pushed.numel() > 0:
                self._handles[index] = start_push_pull(pushed, pushed, self._divisor, self._ids[index], unit.name)

    def _end_of_backward(self):
        self._callback_queued = False
        self.synchronize()

    def synchronize(self):
        """Waits for every gradient's average and writes it into `.grad`; a parameter this backward did not
        reach is summed as zeros. Runs by itself at the end of each backward."""
        for unit in self._units:
            for p in unit.params:
                if id(p) not in self._done:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    self._mark_done(p)
        handles, self._handles = self._handles, {}
        for index, h in handles.items():
            wait_for(h)
            self._units[index].scatter()
        self._done.clear()
