"""DistributedOptimizer: wraps a torch.optim optimizer so that each gradient is summed over the workers
(and averaged) while backward is still running.

A hook on each parameter's gradient accumulator starts the push_pull of that gradient as soon as backward
has produced it; step() waits for all of them, then steps. The wrapper is a dynamic subclass of the
optimizer's own class, so isinstance checks and schedulers keep working.
"""
import torch

from zps.torch._runtime import runtime
from zps.torch.compression import Compression
from zps.torch.ops import Average, Sum, start_push_pull, synchronize


class _DistributedMixin:
    def _zps_setup(self, named_parameters, compression, backward_passes_per_step, op):
        rt = runtime("DistributedOptimizer")
        if op not in (Average, Sum):
            raise ValueError("zps.torch.DistributedOptimizer: op must be Average or Sum, got %r" % (op,))
        if backward_passes_per_step < 1:
            raise ValueError("zps.torch.DistributedOptimizer: backward_passes_per_step must be >= 1")
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            names = [n for n, _ in named]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError("zps.torch.DistributedOptimizer: duplicate parameter names %s" % dup)
            ids = {id(p) for _, p in named}
            unnamed = [i for i, p in enumerate(all_params) if id(p) not in ids]
            if unnamed:
                raise ValueError("zps.torch.DistributedOptimizer: named_parameters lacks %d of the optimizer's "
                                 "parameters (positions %s)" % (len(unnamed), unnamed[:10]))
            by_id = {id(p): n for n, p in named}
            named = [(by_id[id(p)], p) for p in all_params]
        else:
            named = [("param.%d" % i, p) for i, p in enumerate(all_params)]
        self._zps_divisor = rt.size if op == Average else 1
        self._zps_compression = compression
        self._zps_passes = backward_passes_per_step
        self._zps_names = {}
        self._zps_counts = {}
        self._zps_handles = {}
        self._zps_hooks = []
        self._zps_synchronized = False
        compressor = "fp16" if compression is Compression.fp16 else None
        for name, p in named:
            if not p.requires_grad:
                continue
            if id(p) in self._zps_names:
                continue
            self._zps_names[id(p)] = "grad." + name
            self._zps_counts[id(p)] = 0
            # Declared now, in the optimizer's order, so that every worker declares the same sequence.
            if p.numel() > 0:
                rt.declare("grad." + name, p, compressor if p.dtype == torch.float32 else None)
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._zps_make_hook(p))
            self._zps_hooks.append(acc)  # keeps the accumulator (and its hook) alive

    def _zps_make_hook(self, p):
        def hook(*_):
            if p.grad is None or self._zps_synchronized:
                return
            if id(p) in self._zps_handles:
                raise RuntimeError("zps.torch.DistributedOptimizer: gradient of '%s' computed again before step(); "
                                   "call step() or synchronize() between backward passes, or raise "
                                   "backward_passes_per_step" % self._zps_names[id(p)])
            self._zps_counts[id(p)] += 1
            if self._zps_counts[id(p)] == self._zps_passes:
                self._zps_start(p)
        return hook

    def _zps_start(self, p):
        self._zps_counts[id(p)] = 0
        if p.grad.numel() == 0:
            return
        if not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        self._zps_handles[id(p)] = start_push_pull(p.grad, p.grad, self._zps_divisor, self._zps_names[id(p)],
                                                   "DistributedOptimizer", self._zps_compression)

    def synchronize(self):
        """Waits for every gradient's sum (e.g. before clipping gradients); step() then does not wait again."""
        for group in self.param_groups:
            for p in group["params"]:
                if id(p) not in self._zps_names or id(p) in self._zps_handles:
                    continue
                # No gradient from this backward (an unused parameter): push zeros, so that every
                # worker's rounds of this tensor stay in step.
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                self._zps_start(p)
        handles, self._zps_handles = self._zps_handles, {}
        for h in handles.values():
            synchronize(h)
        self._zps_synchronized = True

    def step(self, closure=None):
        if not self._zps_synchronized:
            self.synchronize()
        self._zps_synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._zps_handles:
            raise RuntimeError("zps.torch.DistributedOptimizer: zero_grad() while gradients are being summed; "
                               "call step() or synchronize() first")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average):
    """An optimizer that sums (op=Average: averages) every gradient over the workers before each step."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               {k: v for k, v in _DistributedMixin.__dict__.items() if not k.startswith("__")})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._zps_setup(named_parameters, compression, backward_passes_per_step, op)
    return wrapped
