"""The exceptions of the zps package. Every error of the C library arrives as a ZpsError subclass whose
`code` is the C status code (include/zps/c_api.h) and whose message is the library's, which names what
failed (the tensor, the server, the worker that ended the job)."""


class ZpsError(RuntimeError):
    """A zps operation failed. `code` is the C status code, `status` its name (e.g. "ABORTED")."""

    def __init__(self, message, code=None, status="INTERNAL"):
        super().__init__(message)
        self._code = code
        self.status = status

    @property
    def code(self):
        """The C status code of `status`, as the library numbers it (asked when not given)."""
        if self._code is None:
            from zps._capi import status_codes  # here, since _capi raises these errors
            self._code = status_codes()[self.status]
        return self._code


class ZpsInvalidArgument(ZpsError, ValueError):
    """A bad value: an unknown tensor, a wrong size, a shape that differs from another worker's."""


class ZpsTimeout(ZpsError, TimeoutError):
    """A wait reached its deadline; the message says what it waited for."""


class ZpsJobAborted(ZpsError):
    """The job ended while this worker waited: another worker failed (the message says which) or a signal."""


# By the status's name, which zps_status_name gives for the code.
_BY_STATUS = {"INVALID_ARGUMENT": ZpsInvalidArgument, "DEADLINE_EXCEEDED": ZpsTimeout, "ABORTED": ZpsJobAborted}


def error_for_code(code, status, message):
    return _BY_STATUS.get(status, ZpsError)(message, code, status)
