"""A worker script that fails on purpose (run by failures_test.sh): prints what each worker saw.
  shape: worker 0 push_pulls 'w' of shape [2, 3], worker 1 of shape [3, 2]: both must fail naming 'w'.
  raise: worker 1's script raises; worker 0's push_pull must end naming worker 1 and its exception."""
import atexit
import os
import sys
import time

import torch

import zps.torch as bps

mode = sys.argv[1]
rank = int(os.environ["DMLC_WORKER_ID"])
# zps launch stops the other workers once one exits non-zero: linger so that they report first.
atexit.register(time.sleep, 3)
try:
    bps.init()  # worker 1 may fail before worker 0 has joined: then init raises
    if mode == "shape":
        bps.push_pull(torch.ones((2, 3) if rank == 0 else (3, 2)), name="w")
    elif mode == "raise":
        if rank == 1:
            raise RuntimeError("boom in the training loop")
        bps.push_pull(torch.ones(4), name="w")
    print("worker %d: no error" % rank, flush=True)
except bps.ZpsError as e:
    print("worker %d: raised %s: %s" % (rank, type(e).__name__, e), flush=True)
    raise
