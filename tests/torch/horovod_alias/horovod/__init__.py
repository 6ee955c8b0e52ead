"""A `horovod` package for running Horovod's own PyTorch tests against zps.torch (tests only; not shipped).
`horovod.torch` is zps.torch; the rest of `horovod` (runner.util.threads, which the suite's helpers import)
comes from the suite's folder, named by $HOROVOD_SUITE_DIR."""
import os

_suite = os.environ.get("HOROVOD_SUITE_DIR")
if _suite:
    __path__.append(os.path.join(_suite, "horovod"))
