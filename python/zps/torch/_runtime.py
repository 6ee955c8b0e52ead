"""The process's zps state for zps.torch: the Worker, the declared tensors by name, the handles in flight,
and the hooks that end the job when the script ends (atexit) or raises (sys.excepthook).

Names and declarations: zps needs every worker to declare the same tensors in the same order. A name is
declared on its first use, so workers that first use their names in the same order (the usual case: the
same script) just work; a worker that declares another name, shape or dtype in the same place makes the
servers refuse it with a message naming both, that worker raises, and the job ends naming it on every
worker. DistributedOptimizer declares all its gradients up front, in named_parameters order.
"""
import atexit
import os
import sys
import threading
import traceback

import torch

from zps._capi import Worker
from zps.errors import ZpsError

# torch dtype -> C API dtype (the servers sum every one of these natively).
DTYPES = {
    torch.float32: 0,
    torch.float16: 1,
    torch.bfloat16: 2,
    torch.float64: 3,
    torch.int32: 4,
    torch.int64: 5,
    torch.uint8: 6,
}


class ZpsNotInitialized(ZpsError):
    """A zps.torch call before init() or after shutdown()."""

    def __init__(self, message):
        super().__init__(message, 7, "FAILED_PRECONDITION")


class Declared:
    """A tensor name this worker declared: its id and what it was declared as."""

    __slots__ = ("tensor_id", "shape", "dtype", "compressor")

    def __init__(self, tensor_id, shape, dtype, compressor):
        self.tensor_id = tensor_id
        self.shape = shape
        self.dtype = dtype
        self.compressor = compressor


class Runtime:
    """Owned by this module (one per process, from init() to shutdown()); any thread may call it."""

    def __init__(self):
        self.worker = Worker()
        self.local_rank = self.worker.local_rank()
        self.local_size = self.worker.local_size()
        # As in BytePS, rank and size count processes: a node of zps worker rank r runs local ranks
        # r x local_size ... (r + 1) x local_size - 1, and every sum is over all processes.
        self.rank = self.worker.rank() * self.local_size + self.local_rank
        self.size = self.worker.size() * self.local_size
        self.lock = threading.Lock()  # guards `declared`; held during a declaration's round trip
        self.finish_lock = threading.Lock()  # apart, so that a failing script can end the job meanwhile
        self.declared = {}
        self.finished = False

    def declare(self, name, tensor, compressor=None, priority=None):
        """The tensor id of `name`, declaring it on first use; a different shape or dtype is an error.
        priority (zps's order, lower sooner) applies at the declaration, the name's first use."""
        shape = tuple(tensor.shape)
        with self.lock:
            d = self.declared.get(name)
            if d is None:
                nbytes = tensor.numel() * tensor.element_size()
                # The servers compare names, element counts and dtypes; the shape in the declared name
                # makes them refuse the same count in another shape too ([2, 3] against [3, 2]).
                declared_name = "%s%s" % (name, list(shape))
                try:
                    tid = self.worker.declare(declared_name, nbytes, DTYPES[tensor.dtype], compressor, priority=priority)
                except ZpsError as e:
                    raise type(e)("zps.torch: tensor '%s': %s" % (name, e), e.code, e.status) from None
                d = Declared(tid, shape, tensor.dtype, compressor)
                self.declared[name] = d
            elif d.shape != shape or d.dtype != tensor.dtype:
                raise ValueError("zps.torch: tensor '%s' was first used with shape %s and dtype %s on this worker, "
                                 "now with shape %s and dtype %s; give each tensor its own name" %
                                 (name, list(d.shape), d.dtype, list(shape), tensor.dtype))
            return d.tensor_id

    def finish(self, error=None):
        """Ends the job once (OK or failed with `error`); returns the exit code zps decided."""
        with self.finish_lock:
            if self.finished:
                return 0
            self.finished = True
        # Destroyed after finishing, so that its threads stop before the interpreter's exit tears down
        # the libraries they use. Calls that other threads start afterwards raise ZpsNotInitialized.
        try:
            return self.worker.finish(error)
        finally:
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
