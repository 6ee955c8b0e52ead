"""The Python package states no setting, dtype code or status code of its own: what it uses agrees with
what the C library (libzps_c.so) says, and a value it still holds as a constant fails here when the
library's table changes. Checks the zps package's C API helpers, the errors' codes, and zps.torch's dtype
table and bucket setting, and that no module of the package spells a setting's variable. No job:
nothing here joins one.   Usage: capi_copies_test.py"""
import ast
import os
import re
import sys
import tokenize

import zps
from zps import _capi
from zps.errors import ZpsError, ZpsInvalidArgument

failures = []


def expect(what, got, want):
    if got != want:
        failures.append("%s: %r, the C library says %r" % (what, got, want))


# The C API's own tables: what the library says is what c_api.h promises (the codes never change).
statuses = _capi.status_codes()
expect("c_api.h's status codes", {"OK": 0, "INVALID_ARGUMENT": 1, "DEADLINE_EXCEEDED": 2, "UNAVAILABLE": 3,
                                  "PROTOCOL_ERROR": 4, "NOT_FOUND": 5, "ALREADY_EXISTS": 6,
                                  "FAILED_PRECONDITION": 7, "ABORTED": 8, "INTERNAL": 9}, statuses)
dtypes = _capi.dtype_codes()
expect("c_api.h's dtype codes", {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3, "int32": 4, "int64": 5,
                                 "uint8": 6}, dtypes)
expect("ZpsError's default code", ZpsError("x").code, statuses["INTERNAL"])
# Process sets' key spaces (worker/placement.h): the package asks, and a set past the last is refused.
expect("max_process_sets", _capi.max_process_sets(), 1023)

# Settings by name: default, variable, range, and a read with the library's validation and message.
expect("torch_bucket_bytes default", _capi.setting_default("torch_bucket_bytes"), "1048576")
expect("torch_bucket_bytes variable", _capi.setting_variable("torch_bucket_bytes"), "ZPS_TORCH_BUCKET_BYTES")
expect("local_size range", _capi.setting_range("local_size"), (1, 1024))
os.environ.pop("ZPS_TORCH_BUCKET_BYTES", None)
expect("torch_bucket_bytes unset", _capi.setting_integer("torch_bucket_bytes"), 1 << 20)
os.environ["ZPS_TORCH_BUCKET_BYTES"] = "4096"
expect("torch_bucket_bytes=4096", _capi.setting_integer("torch_bucket_bytes"), 4096)
os.environ["ZPS_TORCH_BUCKET_BYTES"] = "lots"
try:
    _capi.setting_integer("torch_bucket_bytes")
    failures.append("ZPS_TORCH_BUCKET_BYTES=lots was accepted")
except ZpsInvalidArgument as e:
    expect("the bad value's message", str(e),
           "ZPS_TORCH_BUCKET_BYTES='lots' is not a whole number; set it to a whole number in [0, 1073741824]")
    expect("the bad value's code", e.code, statuses["INVALID_ARGUMENT"])
del os.environ["ZPS_TORCH_BUCKET_BYTES"]
for call in (lambda: _capi.setting_default("no_such_setting"), lambda: _capi.setting_range("shm_dir")):
    try:
        call()
        failures.append("a call that must fail did not")
    except ZpsError as e:
        print("refused as it should be: %s (%s)" % (e, e.status))

# No setting's environment variable appears in the package as a string of its own (a copy of the
# setting's name, which goes stale when the table changes): code asks setting_variable or reads the
# setting through the library. The variables are docs/configuration.md's, which a ctest keeps equal to
# the library's table of settings.
def literal(text):
    try:
        return ast.literal_eval(text)
    except ValueError:  # an f-string
        return None


root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(root, "docs", "configuration.md")) as f:
    variables = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", "".join(l for l in f if l.startswith("| `"))))
expect("variables found in docs/configuration.md", "ZPS_TORCH_BUCKET_BYTES" in variables, True)
for folder, _, files in os.walk(os.path.join(root, "python", "zps")):
    for name in sorted(f for f in files if f.endswith(".py")):
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            for token in tokenize.tokenize(f.readline):
                if token.type == tokenize.STRING and literal(token.string) in variables:
                    failures.append("%s:%d restates the variable %s; ask _capi.setting_variable or read the "
                                    "setting through the library" % (os.path.relpath(path, root), token.start[0],
                                                                      token.string))

# zps.torch's dtype codes, status codes and bucket setting, which it asks of the library.
try:
    import torch
except ImportError as e:
    print("SKIPPED: %s cannot import torch (install python3-torch): %s" % (sys.executable, e))
    sys.exit(77)
from zps.torch import _runtime, optimizer

for torch_dtype, code in _runtime.DTYPES.items():
    expect("zps.torch DTYPES[%s]" % torch_dtype, code, dtypes.get(str(torch_dtype).replace("torch.", "")))
expect("zps.torch DTYPES size", len(_runtime.DTYPES), len(dtypes))
expect("zps.torch ZpsNotInitialized code", _runtime.ZpsNotInitialized("x").code, statuses["FAILED_PRECONDITION"])
expect("zps.torch bucket variable", optimizer.BUCKET_ENV, _capi.setting_variable("torch_bucket_bytes"))
expect("zps.torch default bucket", str(optimizer.DEFAULT_BUCKET_BYTES), _capi.setting_default("torch_bucket_bytes"))
expect("zps.torch bucket range", (0, optimizer.BUCKET_BYTES_LIMIT), _capi.setting_range("torch_bucket_bytes"))

# torch's RANK and WORLD_SIZE from the DMLC environment, whose settings zps.torch reads through the library:
# the second variable of a setting counts, and a missing worker rank leaves both unset.
from zps.torch import distributed  # noqa: E402

job = {"DMLC_ROLE": "worker", "VC_TASK_INDEX": "1", "DMLC_NUM_WORKER": "2", "BYTEPS_LOCAL_SIZE": "2",
       "ZPS_LOCAL_RANK": "1"}
for without in (None, "VC_TASK_INDEX"):
    for name in list(job) + ["RANK", "WORLD_SIZE"]:
        os.environ.pop(name, None)
    os.environ.update({k: v for k, v in job.items() if k != without})
    distributed._torch_env_from_dmlc()
    want = (None, None) if without else ("3", "4")
    expect("RANK, WORLD_SIZE without %s" % without, (os.environ.get("RANK"), os.environ.get("WORLD_SIZE")), want)

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("zps %s: the Python package's codes and settings agree with the C library" % zps.version())
