"""DeferredUpdates: DistributedOptimizer's overlap_forward. step() returns once every sum of the step is
under way, and each parameter's update (its sum waited for, then the wrapped optimizer's step for it)
runs when the next forward reaches the module that holds it, so the next forward's first layers run
while the sums of its last layers are still on the wire.

Why it helps: in sync training the last sums come back only after the slowest worker's last push and
the servers' reply, and step() plus the next forward wait for them. Backward produces the last layers'
gradients first and the first layers' last, and priority scheduling sends the first layers' sums ahead
of the rest, so the forward can start on them while the others travel.

The weights are those of a plain step, bit for bit: every parameter is stepped with the sum and the
hyperparameters (learning rate, ...) its step() saw, before any use of it by a forward. What changes is
when: after step() a parameter holds its old value until the forward of its module, model.state_dict(),
optimizer.state_dict(), optimizer.finish_step() or the next step(). A parameter read another way (its
.data, or a forward of another module that uses it) must be preceded by finish_step(); a backward that
reaches a parameter whose update is still pending raises, since its forward used the old value.
"""
import contextlib


class DeferredUpdates:
    def __init__(self, optimizer, model, units, unit_of, names):
        """optimizer: the DistributedOptimizer; model: the module whose forward applies the updates;
        units: the optimizer's _Units (each wholly inside one module of model, or outside model);
        unit_of: id(param) -> unit index; names: id(param) -> its sum's name."""
        self._opt = optimizer
        self._units = units
        self._unit_of = unit_of
        self._names = names
        self._pending = {}  # unit index -> the handle of its sum in flight
        self._hyper = []  # per param group: its hyperparameters when step() deferred the updates
        self._zero = None  # (args, kwargs) of a zero_grad() called while updates were pending
        self._in_model = set()
        for module in model.modules():
            own = sorted({unit_of[id(p)] for p in module.parameters(recurse=False) if id(p) in unit_of})
            if not own:
                continue
            self._in_model.update(own)
            hook = self._applying(own)
            module.register_forward_pre_hook(hook)
            module._register_state_dict_hook(hook)  # the dict's tensors share the parameters' storage
            module._register_load_state_dict_pre_hook(hook)

    def _applying(self, indices):
        def hook(*_):
            if self._pending:
                for index in indices:
                    self.apply(index)
        return hook

    def any_pending(self):
        return bool(self._pending)

    def pending_params(self):
        return {id(p) for index in self._pending for p in self._units[index].params}

    def others(self):
        """The optimizer's parameters whose update is not pending."""
        pending = self.pending_params()
        return [p for group in self._opt.param_groups for p in group["params"] if id(p) not in pending]

    def defer(self, handles):
        """Takes the step's sums in flight (unit index -> handle) and the groups' hyperparameters now;
        the units outside the model are applied at once."""
        self._hyper = [{k: v for k, v in group.items() if k != "params"} for group in self._opt.param_groups]
        self._zero = None
        self._pending.update(handles)
        for index in list(handles):
            if index not in self._in_model:
                self.apply(index)

    def zero_grad_later(self, args, kwargs):
        """zero_grad(*args, **kwargs) while updates are pending: the pending units' gradients are zeroed
        right after their update."""
        self._zero = (args, kwargs)

    def check_applied(self, p):
        """Raised from backward: p's forward ran before its update from the last step() was applied."""
        if self._unit_of[id(p)] in self._pending:
            raise RuntimeError(
                "zps.torch.DistributedOptimizer: '%s' reached backward before its update from the last step() was "
                "applied, so the forward used its old value: with overlap_forward a parameter is updated when "
                "the forward of the module that holds it starts; call optimizer.finish_step() before using it "
                "elsewhere, or leave overlap_forward off" % self._names[id(p)])

    def apply(self, index):
        """Waits for unit `index`'s sum and steps its parameters (a no-op when it is not pending)."""
        handle = self._pending.pop(index, None)
        if handle is None:
            return
        params = self._units[index].params
        self._opt._zps_finish_unit(index, handle)
        with self.only(params, self._hyper):
            self._opt._zps_base_step()
        if self._zero is not None:
            args, kwargs = self._zero
            with self.only(params):
                self._opt._zps_base_zero_grad(*args, **kwargs)
        if not self._pending:
            self._zero = None

    def apply_all(self):
        for index in sorted(self._pending):
            self.apply(index)

    @contextlib.contextmanager
    def only(self, params, hyper=None):
        """The optimizer's param groups hold `params` alone (and, when given, the saved hyperparameters)
        inside the block: the wrapped optimizer's step() and zero_grad() then touch those alone."""
        chosen = {id(p) for p in params}
        groups = self._opt.param_groups
        saved = [dict(group) for group in groups]
        try:
            for i, group in enumerate(groups):
                members = [p for p in group["params"] if id(p) in chosen]
                if hyper is not None and i < len(hyper):
                    group.update(hyper[i])
                group["params"] = members
            yield
        finally:
            for group, old in zip(groups, saved):
                group.clear()
                group.update(old)
