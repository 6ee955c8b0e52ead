"""The process's zps state for zps.torch: the Worker, the servers' tensors it declared, the coordinator
(coordinator.py), and the hooks that end the job when the script ends (atexit) or raises (sys.excepthook).

Declarations: zps needs every worker to declare the same tensors in the same order. Tensors are declared
on the coordinator thread only, after the workers agreed on the call that needs them, so the order is the
same everywhere. DistributedOptimizer declares all its gradients up front, in named_parameters order.
"""
import atexit
import os
import sys
import threading
import traceback

import torch

from zps._capi import Worker, dtype_codes
from zps.errors import ZpsError

# torch dtype -> C API dtype code, as the library numbers them (the servers sum every one natively).
DTYPES = {getattr(torch, name): code for name, code in dtype_codes().items()}


class ZpsNotInitialized(ZpsError):
    """A zps.torch call before init() or after shutdown()."""

    def __init__(self, message):
        super().__init__(message, status="FAILED_PRECONDITION")


class Declared:
    """A tensor name this worker declared: its id and what it was declared as."""

    __slots__ = ("tensor_id", "shape", "dtype", "compressor")

    def __init__(self, tensor_id, shape, dtype, compressor):
        self.tensor_id = tensor_id
        self.shape = shape
        self.dtype = dtype
        self.compressor = compressor


class Group:
    """The workers a collective operation runs over, with what zps.torch needs of them: this process's
    rank and their size, the coordinator that orders their operations, and the servers' tensors they
    declared. Runtime is the group of every worker; zps.torch.process_sets.SetGroup that of a process
    set. Any thread may call it."""

    def _init_group(self, rank, size):
        self.rank = rank
        self.size = size
        self.lock = threading.Lock()  # guards `declared` (by declared name); held during a declaration
        self.declared = {}

    def _declare_on_servers(self, declared_name, nbytes, dtype, compressor, priority):
        raise NotImplementedError

    def tensor_id(self, declared_name, tensor, compressor=None, priority=None):
        """The id of the servers' tensor `declared_name`, declaring it (like `tensor`) on first use. Called on
        the coordinator thread only (or before it runs anything), so that every worker declares in the same
        order: what the workers agreed on, in the order they agreed on it."""
        with self.lock:
            d = self.declared.get(declared_name)
            if d is not None:
                return d.tensor_id
            nbytes = tensor.numel() * tensor.element_size()
            try:
                tid = self._declare_on_servers(declared_name, nbytes, DTYPES[tensor.dtype], compressor, priority)
            except ZpsError as e:
                raise type(e)("zps.torch: tensor '%s': %s" % (declared_name, e), e.code, e.status) from None
            self.declared[declared_name] = Declared(tid, tuple(tensor.shape), tensor.dtype, compressor)
            return tid

    def declare(self, name, tensor, compressor=None, priority=None):
        """The tensor id for `name` used like `tensor`, agreed with the other workers (a disagreement raises
        on every worker, naming each one's shape). priority (zps's order, lower sooner) applies at the
        declaration, the first use of the name with this shape."""
        from zps.torch import coordinator

        if threading.current_thread() is self.coordinator.thread:
            # Inside an operation the workers already agreed on (zps.torch.collectives declaring its
            # tensors): declared in that operation's place, the same on every worker.
            return self.tensor_id(coordinator.declared_name(name, tensor, 0), tensor, compressor, priority)

        def start(agreed):
            return self.tensor_id(coordinator.declared_name(name, tensor, agreed.generation), tensor, compressor,
                                  priority)

        op = self.coordinator.run(coordinator.Op("declare", name, tensor.dtype, tensor.shape, 0, start))
        return op.zps_handle

    def in_order(self, name, like, declare):
        """Runs declare() (a table's declaration) on the coordinator thread, in its place among the other
        declarations, once the workers agreed on it (its name, and `like`'s shape and dtype)."""
        from zps.torch import coordinator

        op = self.coordinator.run(coordinator.Op("declare", name, like.dtype, like.shape, 0, lambda agreed: declare()))
        return op.zps_handle


class Runtime(Group):
    """Owned by this module (one per process, from init() to shutdown()): the group of every worker."""

    def __init__(self):
        self.worker = Worker()
        self.local_rank = self.worker.local_rank()
        self.local_size = self.worker.local_size()
        # As in BytePS, rank and size count processes: a node of zps worker rank r runs local ranks
        # r x local_size ... (r + 1) x local_size - 1, and every sum is over all processes.
        self._init_group(self.worker.rank() * self.local_size + self.local_rank, self.worker.size() * self.local_size)
        self.members = range(self.size)  # the global ranks of the group's ranks 0, 1, ...
        self.finish_lock = threading.Lock()  # apart, so that a failing script can end the job meanwhile
        self.finished = False
        self.process_sets = None  # zps.torch.process_sets.Registry, made by its first use
        # DistributedOptimizers by name, in the order they were built (the same on every worker): for
        # each of its sums, (tensor id, elements, dtype), which a joined worker pushes zeros into.
        self.optimizers = {}
        # DistributedOptimizers of every worker built without join_steps: join() warns that their steps
        # will wait for this worker's gradients.
        self.optimizers_without_join_steps = 0
        from zps.torch.coordinator import Coordinator
        self.coordinator = Coordinator(self)

    def _declare_on_servers(self, declared_name, nbytes, dtype, compressor, priority):
        return self.worker.declare(declared_name, nbytes, dtype, compressor, priority=priority)

    def finish(self, error=None):
        """Ends the job once (OK or failed with `error`); returns the exit code zps decided. Ending OK, it
        first waits for the tables' pushes still in flight, so that the last backward's push is answered
        (or its failure raised) before the job ends."""
        if error is None:
            from zps.torch.embedding import wait_pushes
            wait_pushes()
        with self.finish_lock:
            if self.finished:
                return 0
            self.finished = True
        # Destroyed after finishing, so that its threads stop before the interpreter's exit tears down
        # the libraries they use. Calls that other threads start afterwards raise ZpsNotInitialized.
        self.coordinator.stop()
        if self.process_sets is not None:
            self.process_sets.stop()
        try:
            return self.worker.finish(error)
        finally:
            # The job has ended, so a wait the coordinator may be in returns: let it leave the worker
            # before the worker is freed.
            if threading.current_thread() is not self.coordinator.thread:
                self.coordinator.thread.join(timeout=10)
            self.worker.destroy()


_runtime = None
_hooks_installed = False


def runtime(what):
    rt = _runtime
    if rt is None or rt.finished:
        raise ZpsNotInitialized("zps.torch.%s: zps is not initialised; call zps.torch.init() first" % what)
    return rt


def start():
    global _runtime
    if _runtime is not None and not _runtime.finished:
        return _runtime
    _runtime = Runtime()
    _install_hooks()
    return _runtime


def stop():
    """shutdown(): ends the job and raises when it did not complete (another worker failed)."""
    rt = _runtime
    if rt is None or rt.finished:
        return
    code = rt.finish()
    if code != 0:
        raise ZpsError("zps.torch.shutdown: the job ended with exit code %d (the line above says why)" % code)


def _install_hooks():
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        # Print the traceback first: finishing can take a moment while the scheduler ends the job.
        previous(kind, value, tb)
        rt = _runtime
        if rt is not None and not rt.finished:
            last = traceback.format_exception_only(kind, value)[-1].strip()
            try:
                rt.finish("worker %d's script raised %s" % (rt.rank, last))
            except Exception as e:  # the exception being reported matters more
                print("zps.torch: could not report the failure to the scheduler: %s" % e, file=sys.stderr)

    sys.excepthook = excepthook

    def at_exit():
        # A script that ends without shutdown() completes its part of the job here. When the job
        # failed elsewhere, the process exits non-zero so that launchers see it.
        rt = _runtime
        if rt is None or rt.finished:
            return
        try:
            code = rt.finish()
        except Exception as e:
            print("zps.torch: finishing at exit: %s" % e, file=sys.stderr)
            code = 1
        if code != 0:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    atexit.register(at_exit)
