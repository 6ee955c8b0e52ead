"""ctypes binding of the zps C API (include/zps/c_api.h, libzps_c.so).

One module-level library object; `Worker` wraps one zps_worker. Every C call that fails raises a
ZpsError subclass carrying the C status code and the library's message. ctypes releases the GIL for
the duration of each call, so a wait blocks only the calling Python thread.
"""
import ctypes
import os

from zps.errors import ZpsError, error_for_code

_LIBRARY_NAME = "libzps_c.so"
_ENV_VAR = "ZPS_LIBRARY"

_lib = None


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    yield "next to the package", os.path.join(here, _LIBRARY_NAME)
    path = os.environ.get(_ENV_VAR)
    if path:
        if os.path.isdir(path):
            path = os.path.join(path, _LIBRARY_NAME)
        yield _ENV_VAR, path


def _declare_signatures(lib):
    c_int, c_u64, c_i64, c_double, c_char_p, c_void_p = (
        ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p)
    p_int = ctypes.POINTER(ctypes.c_int)
    p_u64 = ctypes.POINTER(ctypes.c_uint64)
    sigs = {
        "zps_last_error": ([], c_char_p),
        "zps_status_name": ([c_int], c_char_p),
        "zps_version": ([], c_char_p),
        "zps_dtype_name": ([c_int], c_char_p),
        "zps_max_process_sets": ([], c_int),
        "zps_setting_default": ([c_char_p, ctypes.POINTER(c_char_p)], c_int),
        "zps_setting_variable": ([c_char_p, ctypes.POINTER(c_char_p)], c_int),
        "zps_setting_range": ([c_char_p, ctypes.POINTER(c_i64), ctypes.POINTER(c_i64)], c_int),
        "zps_setting_integer": ([c_char_p, ctypes.POINTER(c_i64)], c_int),
        "zps_worker_create": ([ctypes.POINTER(c_void_p)], c_int),
        "zps_worker_finish": ([c_void_p, c_int, c_char_p, p_int], c_int),
        "zps_worker_destroy": ([c_void_p], None),
        "zps_worker_rank": ([c_void_p, p_int], c_int),
        "zps_worker_num_workers": ([c_void_p, p_int], c_int),
        "zps_worker_num_servers": ([c_void_p, p_int], c_int),
        "zps_worker_local_rank": ([c_void_p, p_int], c_int),
        "zps_worker_local_size": ([c_void_p, p_int], c_int),
        "zps_declare": ([c_void_p, c_char_p, c_u64, c_int, c_char_p, c_double, p_int], c_int),
        "zps_declare_prioritized": ([c_void_p, c_char_p, c_u64, c_int, c_char_p, c_double, c_i64, p_int], c_int),
        "zps_tensor_priority": ([c_void_p, c_int, p_int, ctypes.POINTER(c_i64)], c_int),
        "zps_declare_async": ([c_void_p, c_char_p, c_u64, c_int, p_int], c_int),
        "zps_declare_in_set": ([c_void_p, c_char_p, c_u64, c_int, ctypes.c_uint32, c_int, p_int], c_int),
        "zps_table_options_default": ([ctypes.POINTER(TableOptions)], None),
        "zps_declare_table": ([c_void_p, c_char_p, ctypes.POINTER(TableOptions), p_int], c_int),
        "zps_push": ([c_void_p, c_int, c_void_p, p_u64], c_int),
        "zps_pull": ([c_void_p, c_int, c_void_p, p_u64], c_int),
        "zps_push_pull": ([c_void_p, c_int, c_void_p, c_void_p, p_u64], c_int),
        "zps_pull_rows": ([c_void_p, c_int, c_void_p, c_u64, c_void_p, p_u64], c_int),
        "zps_pull_rows_ahead": ([c_void_p, c_int, c_void_p, c_u64, c_void_p, ctypes.c_uint32, p_u64], c_int),
        "zps_push_rows": ([c_void_p, c_int, c_void_p, c_u64, c_void_p, p_u64], c_int),
        "zps_wait": ([c_void_p, c_u64, c_i64], c_int),
        "zps_poll": ([c_void_p, c_u64, p_int], c_int),
        "zps_traffic": ([c_void_p, ctypes.POINTER(TrafficCounters)], c_int),
        "zps_barrier": ([c_void_p], c_int),
        "zps_report_progress": ([c_void_p, c_u64, c_double, c_double, c_u64, c_u64], c_int),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res


class TableOptions(ctypes.Structure):
    """zps_table_options of c_api.h (field order and types must match it)."""
    _fields_ = [
        ("dim", ctypes.c_uint32),
        ("optimizer", ctypes.c_char_p),
        ("lr", ctypes.c_float),
        ("momentum", ctypes.c_float),
        ("beta1", ctypes.c_float),
        ("beta2", ctypes.c_float),
        ("eps", ctypes.c_float),
        ("initial_accumulator", ctypes.c_float),
        ("init_scale", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("async_", ctypes.c_int),
        ("restore_step", ctypes.c_uint64),
    ]


class TrafficCounters(ctypes.Structure):
    """zps_traffic_counters of c_api.h."""
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("tensor_bytes_pushed", "network_bytes_pushed", "tensor_bytes_pulled", "network_bytes_pulled")]


def library():
    """The loaded libzps_c.so: next to this package first, then $ZPS_LIBRARY (a file or a folder)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for where, path in _candidates():
        if not os.path.exists(path):
            tried.append("%s (%s): no such file" % (path, where))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
            continue
        _declare_signatures(lib)
        _lib = lib
        return lib
    if os.environ.get(_ENV_VAR) is None:
        tried.append("$%s is not set" % _ENV_VAR)
    raise ImportError("zps: cannot load %s; tried: %s. Build zps (tools/build.sh) and set PYTHONPATH=<build>/python, "
                      "or set %s to the library's path." % (_LIBRARY_NAME, "; ".join(tried), _ENV_VAR))


def status_codes():
    """{"OK": 0, "INVALID_ARGUMENT": 1, ...}: the C API's status codes, as the library numbers them."""
    lib = library()
    codes = {}
    code = 0
    while True:
        name = lib.zps_status_name(code).decode()
        if name == "UNKNOWN":
            return codes
        codes[name] = code
        code += 1


def max_process_sets():
    """The most process sets a job can have (their key spaces are 1..this), as the library says."""
    return library().zps_max_process_sets()


def dtype_codes():
    """{"float32": 0, "float16": 1, ...}: the C API's dtype codes (ZPS_FLOAT32...), as the library numbers them."""
    lib = library()
    codes = {}
    code = 0
    while True:
        name = lib.zps_dtype_name(code)
        if name is None:
            return codes
        codes[name.decode()] = code
        code += 1


def _setting_text(fn, name):
    text = ctypes.c_char_p()
    check(fn(name.encode(), ctypes.byref(text)))
    return text.value.decode()


def setting_default(name):
    """A setting's default as users write it (docs/configuration.md), e.g. "1048576"; "" when it has none."""
    return _setting_text(library().zps_setting_default, name)


def setting_variable(name):
    """The environment variable that sets the setting `name`, e.g. "ZPS_TORCH_BUCKET_BYTES"."""
    return _setting_text(library().zps_setting_variable, name)


def setting_range(name):
    """(min, max) of a whole-number setting."""
    low, high = ctypes.c_int64(), ctypes.c_int64()
    check(library().zps_setting_range(name.encode(), ctypes.byref(low), ctypes.byref(high)))
    return low.value, high.value


def setting_integer(name):
    """A whole-number setting read from the environment as zps reads its own: the variable, else the default.
    A bad value raises ZpsInvalidArgument naming the variable and what to set it to."""
    value = ctypes.c_int64()
    check(library().zps_setting_integer(name.encode(), ctypes.byref(value)))
    return value.value


def check(code, what=None):
    """Raises the ZpsError for a non-zero C status code, with the library's message."""
    if code == 0:
        return
    lib = library()
    message = lib.zps_last_error().decode("utf-8", "replace")
    if what:
        message = "%s: %s" % (what, message)
    raise error_for_code(code, lib.zps_status_name(code).decode(), message)


class Worker:
    """One zps_worker: joins the job on creation; finish() ends it. Thread-safe, as the C API is."""

    def __init__(self):
        lib = library()
        handle = ctypes.c_void_p()
        check(lib.zps_worker_create(ctypes.byref(handle)), "zps: joining the job")
        self._lib = lib
        self._w = handle

    def _int(self, fn):
        out = ctypes.c_int()
        check(fn(self._w, ctypes.byref(out)))
        return out.value

    def rank(self):
        return self._int(self._lib.zps_worker_rank)

    def size(self):
        return self._int(self._lib.zps_worker_num_workers)

    def num_servers(self):
        return self._int(self._lib.zps_worker_num_servers)

    def local_rank(self):
        return self._int(self._lib.zps_worker_local_rank)

    def local_size(self):
        return self._int(self._lib.zps_worker_local_size)

    def declare(self, name, nbytes, dtype, compressor=None, compress_ratio=0.0, priority=None):
        """priority: None, or the tensor's priority in zps's order (lower is sent sooner)."""
        out = ctypes.c_int()
        comp = compressor.encode() if compressor is not None else None
        if priority is None:
            check(self._lib.zps_declare(self._w, name.encode(), nbytes, dtype, comp, compress_ratio, ctypes.byref(out)))
        else:
            check(self._lib.zps_declare_prioritized(self._w, name.encode(), nbytes, dtype, comp, compress_ratio,
                                                    int(priority), ctypes.byref(out)))
        return out.value

    def declare_in_set(self, name, nbytes, dtype, key_space, contributors):
        """A process set's tensor: declared and pushed by its `contributors` members only, its keys in the
        set's `key_space` (1..max_process_sets())."""
        out = ctypes.c_int()
        check(self._lib.zps_declare_in_set(self._w, name.encode(), nbytes, dtype, key_space, contributors,
                                           ctypes.byref(out)))
        return out.value

    def priority(self, tensor_id):
        """The priority the tensor's push-pulls are scheduled by (zps's order), or None when not scheduled."""
        scheduled, priority = ctypes.c_int(), ctypes.c_int64()
        check(self._lib.zps_tensor_priority(self._w, tensor_id, ctypes.byref(scheduled), ctypes.byref(priority)))
        return priority.value if scheduled.value else None

    def declare_table(self, name, dim, optimizer, lr, init_scale=None, seed=None, async_=None, **extra):
        opts = TableOptions()
        self._lib.zps_table_options_default(ctypes.byref(opts))
        opts.dim = dim
        opts.optimizer = optimizer.encode()
        opts.lr = lr
        if init_scale is not None:
            opts.init_scale = init_scale
        if seed is not None:
            opts.seed = seed
        if async_ is not None:
            opts.async_ = 1 if async_ else 0
        for key, value in extra.items():
            if not hasattr(opts, key):
                raise TypeError("unknown table option '%s'" % key)
            setattr(opts, key, value)
        out = ctypes.c_int()
        check(self._lib.zps_declare_table(self._w, name.encode(), ctypes.byref(opts), ctypes.byref(out)))
        return out.value

    def _start(self, fn, *args):
        handle = ctypes.c_uint64()
        check(fn(self._w, *args, ctypes.byref(handle)))
        return handle.value

    def push_pull(self, tensor_id, data_ptr, out_ptr):
        return self._start(self._lib.zps_push_pull, tensor_id, data_ptr, out_ptr)

    def push(self, tensor_id, data_ptr):
        return self._start(self._lib.zps_push, tensor_id, data_ptr)

    def pull(self, tensor_id, out_ptr):
        return self._start(self._lib.zps_pull, tensor_id, out_ptr)

    def pull_rows(self, table_id, keys_ptr, n, out_ptr):
        return self._start(self._lib.zps_pull_rows, table_id, keys_ptr, n, out_ptr)

    def pull_rows_ahead(self, table_id, keys_ptr, n, out_ptr, ahead):
        """pull_rows for the rows as they will be after this worker's next `ahead` (0 or 1) push_rows."""
        return self._start(self._lib.zps_pull_rows_ahead, table_id, keys_ptr, n, out_ptr, ahead)

    def push_rows(self, table_id, keys_ptr, n, grads_ptr):
        return self._start(self._lib.zps_push_rows, table_id, keys_ptr, n, grads_ptr)

    def wait(self, handle, timeout_ms=-1, what=None):
        check(self._lib.zps_wait(self._w, handle, int(timeout_ms)), what)

    def poll(self, handle):
        done = ctypes.c_int()
        check(self._lib.zps_poll(self._w, handle, ctypes.byref(done)))
        return bool(done.value)

    def traffic(self):
        """A dict of the bytes pushed and pulled: tensor bytes, and the network bytes they took."""
        t = TrafficCounters()
        check(self._lib.zps_traffic(self._w, ctypes.byref(t)))
        return {name: getattr(t, name) for name, _ in TrafficCounters._fields_}

    def barrier(self):
        check(self._lib.zps_barrier(self._w), "zps: barrier")

    def report_progress(self, step, loss, samples_per_sec, epoch=0, epochs=0):
        check(self._lib.zps_report_progress(self._w, step, loss, samples_per_sec, epoch, epochs))

    def finish(self, error_message=None, code=None):
        """Ends the job: OK, or failed with `error_message` (relayed to every node). Returns the exit code."""
        exit_code = ctypes.c_int(1)
        codes = status_codes()
        status = codes["OK"] if error_message is None else (code or codes["INTERNAL"])
        msg = error_message.encode("utf-8", "replace") if error_message is not None else None
        check(self._lib.zps_worker_finish(self._w, status, msg, ctypes.byref(exit_code)), "zps: finishing")
        return exit_code.value

    def destroy(self):
        if self._w:
            self._lib.zps_worker_destroy(self._w)
            self._w = None
