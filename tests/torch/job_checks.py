"""The checks of the tests/torch/*_job.py scripts: each passed check prints a line and counts; the first
mismatch prints what differs on which worker and exits 1. Set `rank` before the first check."""
import sys

import torch

rank = None
passed = 0


def check(what, got, want):
    """got equals want: tensors of the same dtype, shape and values (NaN never equal), or equal objects."""
    global passed
    same = (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and got.dtype == want.dtype
            and got.shape == want.shape and torch.equal(got, want)) or (
                not isinstance(got, torch.Tensor) and got == want)
    if not same:
        print("FAILED on worker %d: %s: got %r, want %r" % (rank, what, got, want), flush=True)
        sys.exit(1)
    passed += 1
    print("ok: %s" % what, flush=True)


def raises(what, fn, words, kind=ValueError):
    """fn() raises `kind` with a message holding every one of `words`."""
    global passed
    try:
        fn()
    except kind as e:
        missing = [w for w in words if w not in str(e)]
        if missing:
            print("FAILED on worker %d: %s: message lacks %s: %s" % (rank, what, missing, e), flush=True)
            sys.exit(1)
        passed += 1
        print("ok: %s raises: %s" % (what, e), flush=True)
        return
    print("FAILED on worker %d: %s did not raise" % (rank, what), flush=True)
    sys.exit(1)


def require_two_nodes_of_two(hvd):
    """The job is 2 worker nodes of 2 local ranks each (4 processes); exits 1 saying what it got otherwise."""
    if hvd.size() != 4 or hvd.local_size() != 2:
        print("FAILED: this job expects 2 nodes of 2 local ranks, got size %d, local size %d" %
              (hvd.size(), hvd.local_size()), flush=True)
        sys.exit(1)
