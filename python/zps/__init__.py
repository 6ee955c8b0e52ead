"""zps: a parameter-server training runtime. This package binds its C API (libzps_c.so) with ctypes;
`zps.torch` offers the PyTorch API that BytePS and Horovod users call (`import zps.torch as bps`)."""
from zps.errors import ZpsError, ZpsInvalidArgument, ZpsJobAborted, ZpsTimeout
from zps._capi import Worker, library


def version():
    """The version of the loaded libzps_c.so."""
    return library().zps_version().decode()


__all__ = ["ZpsError", "ZpsInvalidArgument", "ZpsJobAborted", "ZpsTimeout", "Worker", "library", "version"]
