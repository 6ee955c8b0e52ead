"""The exceptions of the zps package. Every error of the C library arrives as a ZpsError subclass whose
`code` is the C status code (include/zps/c_api.h) and whose message is the library's, which names what
failed (the tensor, the server, the worker that ended the job)."""


class ZpsError(RuntimeError):
    """A zps operation failed. `code` is the C status code, `status` its name (e.g. "ABORTED")."""

    def __init__(self, message, code=9, status="INTERNAL"):
        super().__init__(message)
        self.code = code
        self.status = status


class ZpsInvalidArgument(ZpsError, ValueError):
    """A bad value: an unknown tensor, a wrong size, a shape that differs from another worker's."""


class ZpsTimeout(ZpsError, TimeoutError):
    """A wait reached its deadline; the message says what it waited for."""


class ZpsJobAborted(ZpsError):
    """The job ended while this worker waited: another worker failed (the message says which) or a signal."""


_BY_CODE = {1: ZpsInvalidArgument, 2: ZpsTimeout, 8: ZpsJobAborted}


def error_for_code(code, status, message):
    return _BY_CODE.get(code, ZpsError)(message, code, status)
