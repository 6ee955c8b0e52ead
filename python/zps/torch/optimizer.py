"""DistributedOptimizer: wraps a torch.optim optimizer so that each gradient is summed over the workers
(and averaged) while backward is still running.

A hook on each parameter's gradient accumulator notes when backward has produced that gradient. Small
gradients travel in buckets (as DDP's and Horovod's fusion do): a bucket's push_pull starts once all of
its gradients are ready, so a model of many small tensors pays for a few messages instead of one each.
A gradient of bucket_bytes or more travels alone, straight from its own tensor. step() waits for all of
them, then steps. The wrapper is a dynamic subclass of the optimizer's own class, so isinstance checks
and schedulers keep working.
"""
import contextlib
import os
import warnings

import torch

from zps import _capi
from zps.torch import coordinator
from zps.torch._runtime import runtime
from zps.torch.compression import Compression
from zps.torch.deferred_updates import DeferredUpdates
from zps.torch.ops import Adasum, Average, Sum, start_push_pull, synchronize
from zps.torch.process_sets import group_of

# Gradients smaller than this share buckets of at most this many bytes (ZPS_TORCH_BUCKET_BYTES); the
# default, the limit and the variable are the C library's setting torch_bucket_bytes.
DEFAULT_BUCKET_BYTES = int(_capi.setting_default("torch_bucket_bytes"))
BUCKET_BYTES_LIMIT = _capi.setting_range("torch_bucket_bytes")[1]
BUCKET_ENV = _capi.setting_variable("torch_bucket_bytes")


def bucket_bytes_setting(value):
    """bucket_bytes as given, else ZPS_TORCH_BUCKET_BYTES, else the default; a bad value raises ValueError."""
    where = "bucket_bytes"
    if value is None:
        text = os.environ.get(BUCKET_ENV, "").strip()
        if not text:
            return DEFAULT_BUCKET_BYTES
        where = BUCKET_ENV
        try:
            value = int(text, 10)
        except ValueError:
            raise ValueError("zps.torch.DistributedOptimizer: %s=%r is not an integer (bytes; 0 turns buckets off)"
                             % (BUCKET_ENV, text)) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("zps.torch.DistributedOptimizer: bucket_bytes must be an int, got %r" % (value,))
    if not 0 <= value <= BUCKET_BYTES_LIMIT:
        raise ValueError("zps.torch.DistributedOptimizer: %s=%d is out of range (0 to %d bytes; 0 turns buckets off)"
                         % (where, value, BUCKET_BYTES_LIMIT))
    return value


class _Unit:
    """What one push_pull sums each step: one gradient, or a bucket of small ones copied into `flat`."""

    __slots__ = ("name", "params", "offsets", "flat", "ready")

    def __init__(self, name, params, flat=None, offsets=None):
        self.name = name
        self.params = params
        self.flat = flat  # None for a gradient that travels alone
        self.offsets = offsets  # per param: (start, numel) in flat
        self.ready = 0  # params whose gradient this step is complete

    def tensor(self):
        """The tensor to push: the flat bucket, filled from the gradients, or the lone gradient itself."""
        if self.flat is None:
            p = self.params[0]
            if not p.grad.is_contiguous():
                p.grad = p.grad.contiguous()
            return p.grad
        for p, (start, n) in zip(self.params, self.offsets):
            self.flat[start:start + n].copy_(p.grad.reshape(-1))
        return self.flat

    def scatter(self):
        """Copies a bucket's sum back into its gradients."""
        if self.flat is None:
            return
        for p, (start, n) in zip(self.params, self.offsets):
            p.grad.copy_(self.flat[start:start + n].view_as(p.grad))


def _plan_units(named, bucket_bytes, owner=None):
    """Groups (name, param) into units. Walks backward's usual order (the last parameter first), filling
    one open bucket per dtype and device; a parameter of bucket_bytes or more, or any with buckets off,
    is a unit of its own and closes the open buckets. With owner (id(param) -> its module), a bucket
    holds one module's parameters: the next module's close it. Returns the units ordered by their first
    parameter: the order of declaration."""
    position = {id(p): i for i, (_, p) in enumerate(named)}
    units, open_buckets, open_bytes = [], {}, {}
    last_owner = None

    def close(key):
        members = open_buckets.pop(key, None)
        open_bytes.pop(key, None)
        if members:
            units.append(members)

    for name, p in reversed(named):
        if owner is not None:
            if owner.get(id(p)) != last_owner:
                for key in list(open_buckets):
                    close(key)
            last_owner = owner.get(id(p))
        nbytes = p.numel() * p.element_size()
        if nbytes == 0 or nbytes >= bucket_bytes:
            # Buckets hold neighbours only: one that went on past this gradient would wait for the
            # gradients behind it in backward, and its early ones would lose their overlap.
            for key in list(open_buckets):
                close(key)
            units.append([(name, p)])
            continue
        key = (p.dtype, p.device)
        if open_bytes.get(key, 0) + nbytes > bucket_bytes:
            close(key)
        open_buckets.setdefault(key, []).append((name, p))
        open_bytes[key] = open_bytes.get(key, 0) + nbytes
    for key in list(open_buckets):
        close(key)
    units.sort(key=lambda members: min(position[id(p)] for _, p in members))
    planned = []
    for members in units:
        members.sort(key=lambda m: position[id(m[1])])
        params = [p for _, p in members]
        if len(members) == 1:
            planned.append(_Unit("grad." + members[0][0], params))
            continue
        offsets, start = [], 0
        for p in params:
            offsets.append((start, p.numel()))
            start += p.numel()
        flat = torch.zeros(start, dtype=params[0].dtype, device=params[0].device)
        name = "grad.bucket(%s..%s)" % (members[0][0], members[-1][0])
        planned.append(_Unit(name, params, flat, offsets))
    return planned


class _DistributedMixin:
    def _zps_setup(self, named_parameters, compression, backward_passes_per_step, op, bucket_bytes,
                   gradient_predivide_factor, sparse_as_dense, process_set, join_steps, overlap_forward):
        runtime("DistributedOptimizer")
        # Over a process set, its members sum their gradients; the other workers step on their own (as
        # in Horovod).
        rt = group_of(process_set, "DistributedOptimizer") if process_set is None or process_set.included() else None
        if op == Adasum:
            raise NotImplementedError("zps.torch.DistributedOptimizer: op=Adasum is not implemented (zps sums on its "
                                      "servers; Adasum's pairwise combination is not built); use Average or Sum")
        if op not in (Average, Sum):
            raise ValueError("zps.torch.DistributedOptimizer: op must be Average or Sum, got %r" % (op,))
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("zps.torch.DistributedOptimizer: gradient_predivide_factor needs op=Average")
        if not gradient_predivide_factor > 0:
            raise ValueError("zps.torch.DistributedOptimizer: gradient_predivide_factor must be > 0, got %r" %
                             (gradient_predivide_factor,))
        if backward_passes_per_step < 1:
            raise ValueError("zps.torch.DistributedOptimizer: backward_passes_per_step must be >= 1")
        if overlap_forward is not None and not isinstance(overlap_forward, torch.nn.Module):
            raise TypeError("zps.torch.DistributedOptimizer: overlap_forward must be the torch.nn.Module whose "
                            "forward uses the parameters, got %s" % type(overlap_forward).__name__)
        if overlap_forward is not None and join_steps:
            raise ValueError("zps.torch.DistributedOptimizer: overlap_forward and join_steps cannot be combined "
                             "(a joined worker's steps are agreed when step() waits for the sums)")
        bucket_bytes = bucket_bytes_setting(bucket_bytes)
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
        seen, trained = set(), []
        for name, p in named:
            if p.requires_grad and id(p) not in seen and rt is not None:
                seen.add(id(p))
                trained.append((name, p))
        # With a predivide factor f, gradients are divided by f before the sum and by size / f after it
        # (as Horovod does, to keep fp16 sums in range); the result is still the average.
        self._zps_predivide = float(gradient_predivide_factor)
        self._zps_divisor = rt.size / self._zps_predivide if op == Average and rt is not None else 1
        self._zps_sparse_as_dense = sparse_as_dense
        self._zps_sparse = set()  # params whose gradient came sparse this step
        self._zps_skip_synchronize = False
        self._zps_ids = []
        self._zps_compression = compression
        self._zps_passes = backward_passes_per_step
        owner = None
        if overlap_forward is not None:
            # A bucket spanning two modules would hold the first one's forward until the second's sums
            # are back: with overlap_forward a bucket holds one module's parameters.
            owner = {}
            for module in overlap_forward.modules():
                for p in module.parameters(recurse=False):
                    owner.setdefault(id(p), id(module))
        self._zps_units = _plan_units(trained, bucket_bytes, owner)
        self._zps_unit_of = {}
        self._zps_names = {id(p): "grad." + name for name, p in trained}
        self._parameter_names = {p: name for name, p in named}  # Horovod's attribute, read by some scripts
        self._zps_counts = {}
        self._zps_done = set()  # params whose gradient this step is complete
        self._zps_handles = {}  # unit index -> handle of its push_pull in flight
        self._zps_hooks = []
        self._zps_synchronized = False
        compressor = "fp16" if compression is Compression.fp16 else None
        sums = []
        for index, unit in enumerate(self._zps_units):
            # Declared now, first layers first, so that every worker declares the same sequence (and,
            # with ZPS_PRIORITY=1, the first layer's sum is sent first).
            pushed = unit.flat if unit.flat is not None else unit.params[0]
            self._zps_ids.append(rt.declare(unit.name, pushed, compressor if pushed.dtype == torch.float32 else None)
                                 if pushed.numel() > 0 else None)
            if self._zps_ids[-1] is not None:
                sums.append((self._zps_ids[-1], pushed.numel(), pushed.dtype))
            for p in unit.params:
                self._zps_unit_of[id(p)] = index
                self._zps_counts[id(p)] = 0
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._zps_make_hook(p))
                self._zps_hooks.append(acc)  # keeps the accumulator (and its hook) alive
        # With join_steps, over every worker, each step is agreed once, started with the step's first sum
        # so that it overlaps backward and the sums: that is how a worker that called join() learns of the
        # step and pushes zeros for its sums. Off by default: the agreement is one more round trip per
        # step, as many as the sums themselves for a model whose gradients fit one bucket.
        self._zps_group = rt
        self._zps_join_name = None
        self._zps_step_agreement = None
        over_every_worker = rt is not None and rt is runtime("DistributedOptimizer") and rt.size > 1 and sums
        if over_every_worker and not join_steps:
            rt.optimizers_without_join_steps += 1
        if over_every_worker and join_steps:
            self._zps_join_name = "zps.optimizer.%d" % len(rt.optimizers)
            rt.optimizers[self._zps_join_name] = sums
        self._zps_deferred = None
        if overlap_forward is not None and any(i is not None and rt.worker.priority(i) is not None
                                               for i in self._zps_ids):
            # Only with priority scheduling (ZPS_PRIORITY's auto: on when the job spans hosts) do the
            # first layers' sums come back first; without, every sum is sent at once, the CPUs are the
            # limit, and waiting for one unit at a time costs more than it overlaps.
            self._zps_deferred = DeferredUpdates(self, overlap_forward, self._zps_units, self._zps_unit_of,
                                                 self._zps_names)

    def _zps_make_hook(self, p):
        def hook(*_):
            if p.grad is None or self._zps_synchronized:
                return
            if self._zps_deferred is not None:
                self._zps_deferred.check_applied(p)
            if p.grad.is_sparse:
                # Summed dense (the servers add whole tensors, so sparse_as_dense changes nothing) and given
                # back sparse after the sum, for optimizers that take only sparse gradients (SparseAdam).
                p.grad = p.grad.to_dense()
                self._zps_sparse.add(id(p))
            if id(p) in self._zps_done:
                raise RuntimeError("zps.torch.DistributedOptimizer: gradient of '%s' computed again before step(); "
                                   "call step() or synchronize() between backward passes, or raise "
                                   "backward_passes_per_step" % self._zps_names[id(p)])
            self._zps_counts[id(p)] += 1
            if self._zps_counts[id(p)] == self._zps_passes:
                self._zps_mark_done(p)
        return hook

    def _zps_mark_done(self, p):
        self._zps_counts[id(p)] = 0
        self._zps_done.add(id(p))
        index = self._zps_unit_of[id(p)]
        unit = self._zps_units[index]
        unit.ready += 1
        if unit.ready == len(unit.params):
            self._zps_start(index)

    def _zps_start(self, index):
        if self._zps_deferred is not None:
            self._zps_deferred.apply(index)  # its buffers are the last step's sum until then
        unit = self._zps_units[index]
        unit.ready = 0
        pushed = unit.tensor()
        if pushed.numel() == 0:
            return
        self._zps_agree_step()
        if self._zps_predivide != 1.0:
            pushed.div_(self._zps_predivide)
        self._zps_handles[index] = start_push_pull(pushed, pushed, self._zps_divisor, self._zps_ids[index], unit.name)

    def _zps_agree_step(self):
        if self._zps_join_name is not None and self._zps_step_agreement is None:
            self._zps_step_agreement = self._zps_group.coordinator.submit(
                coordinator.Op("optimizer", self._zps_join_name, None, (len(self._zps_units),), 0, lambda agreed: None))

    def _zps_start_rest(self):
        """Ends the step's pushes: every gradient that no hook pushed (an unused parameter, or fewer
        backward passes) is pushed as it is, zeros when there is none, so that every worker's rounds stay
        in step. Returns the sums in flight (unit index -> handle)."""
        if self._zps_deferred is not None:
            self._zps_deferred.apply_all()
        for unit in self._zps_units:
            for p in unit.params:
                if id(p) in self._zps_done:
                    continue
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                self._zps_mark_done(p)
        handles, self._zps_handles = self._zps_handles, {}
        self._zps_agree_step()
        self._zps_done.clear()
        return handles

    def _zps_finish_unit(self, index, handle):
        """Waits for one unit's sum and gives it to its gradients (sparse again where they came sparse)."""
        synchronize(handle)
        unit = self._zps_units[index]
        unit.scatter()
        if self._zps_sparse:
            for p in unit.params:
                if id(p) in self._zps_sparse:
                    p.grad = p.grad.to_sparse()
                    self._zps_sparse.discard(id(p))

    def synchronize(self):
        """Waits for every gradient's sum (e.g. before clipping gradients); step() then does not wait again."""
        handles = self._zps_start_rest()
        step, self._zps_step_agreement = self._zps_step_agreement, None
        for index, h in handles.items():
            self._zps_finish_unit(index, h)
        if step is not None:
            self._zps_group.coordinator.wait_started(step, None)
        self._zps_synchronized = True

    def finish_step(self):
        """Applies every update that step() left to the next forward (overlap_forward): call it before
        reading the parameters other than through the model's forward or state_dict(). A no-op otherwise."""
        if self._zps_deferred is not None:
            self._zps_deferred.apply_all()

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not wait for the gradients again: for scripts that call
        synchronize() themselves (e.g. to clip gradients) before step()."""
        self._zps_skip_synchronize = True
        try:
            yield
        finally:
            self._zps_skip_synchronize = False

    def step(self, closure=None):
        if self._zps_synchronized and not self._zps_skip_synchronize:
            warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                          "optimizer.synchronize(). This can cause training slowdown. You may want to consider using "
                          "optimizer.skip_synchronize() context if you use optimizer.synchronize() in your code.")
        deferred = self._zps_deferred
        if deferred is not None and closure is None and not self._zps_synchronized and not self._zps_skip_synchronize:
            # overlap_forward: the sums are waited for, and their parameters stepped, by the next forward.
            deferred.defer(self._zps_start_rest())
            rest = deferred.others()
            if rest:
                with deferred.only(rest):
                    super(self.__class__, self).step()
            return None
        if not self._zps_synchronized and not self._zps_skip_synchronize:
            self.synchronize()
        self._zps_synchronized = False
        return super(self.__class__, self).step(closure)

    def _zps_base_step(self, closure=None):
        """The wrapped optimizer's own step, without summing gradients (broadcast_optimizer_state)."""
        return super(self.__class__, self).step(closure)

    def _zps_base_zero_grad(self, *args, **kwargs):
        return super(self.__class__, self).zero_grad(*args, **kwargs)

    def zero_grad(self, *args, **kwargs):
        if self._zps_handles:
            raise RuntimeError("zps.torch.DistributedOptimizer: zero_grad() while gradients are being summed; "
                               "call step() or synchronize() first")
        deferred = self._zps_deferred
        if deferred is None or not deferred.any_pending():
            return super(self.__class__, self).zero_grad(*args, **kwargs)
        # The pending sums are still being written into their gradients: those are zeroed after their update.
        with deferred.only(deferred.others()):
            super(self.__class__, self).zero_grad(*args, **kwargs)
        deferred.zero_grad_later(args, kwargs)
        return None

    def state_dict(self, *args, **kwargs):
        self.finish_step()
        return super(self.__class__, self).state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        self.finish_step()
        return super(self.__class__, self).load_state_dict(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average, bucket_bytes=None, gradient_predivide_factor=1.0, sparse_as_dense=False,
                         num_groups=0, groups=None, process_set=None, join_steps=False, overlap_forward=None):
    """An optimizer that sums (op=Average: averages) every gradient over the workers before each step.
    bucket_bytes (a zps extension; default ZPS_TORCH_BUCKET_BYTES, else 1 MiB): gradients smaller than
    this travel together in buckets of at most this many bytes; 0 sends every gradient alone.
    join_steps (a zps extension): workers with uneven data call join() and the others step on; each
    step is then agreed with the other workers (one more round trip per step).
    overlap_forward (a zps extension): the model (a torch.nn.Module) whose forward uses the parameters;
    step() then returns once the sums are under way, and each parameter is updated, bit for bit as by a
    plain step, when the next forward reaches its module (zps/torch/deferred_updates.py): the next
    forward's first layers overlap the last layers' sums. The wrapped optimizer must step each
    parameter from its own gradient and state (every torch.optim optimizer but LBFGS does).
    gradient_predivide_factor: divide by it before the sum and by size / it after. sparse_as_dense: turn
    sparse gradients dense. num_groups and groups (Horovod's explicit fusion groups) are accepted and
    ignored: buckets group the gradients."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               {k: v for k, v in _DistributedMixin.__dict__.items() if not k.startswith("__")})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._zps_setup(named_parameters, compression, backward_passes_per_step, op, bucket_bytes,
                       gradient_predivide_factor, sparse_as_dense, process_set, join_steps, overlap_forward)
    return wrapped
