"""A worker of job_end_test.sh. Modes:
  alone SECONDS: both workers sum once; rank 0 then works alone SECONDS longer (a final evaluation or
    checkpoint) before it finishes, rank 1 finishes at once.
  no_init: exits 0 without joining the job.
  no_init_1: worker 1 exits 0 without joining; worker 0 joins (and waits for it)."""
import os
import sys
import time

mode = sys.argv[1]
worker = int(os.environ["DMLC_WORKER_ID"])
if mode == "no_init" or (mode == "no_init_1" and worker == 1):
    print("worker %d: done without joining" % worker, flush=True)
    sys.exit(0)

import torch  # noqa: E402 (a worker that never joins does not wait for torch's import)

import zps.torch as hvd  # noqa: E402
hvd.init()
rank = hvd.rank()
total = hvd.allreduce(torch.tensor(float(rank + 1)), op=hvd.Sum)
print("worker %d: sum %g" % (rank, float(total)), flush=True)
if mode == "alone" and rank == 0:
    seconds = float(sys.argv[2])
    end = time.monotonic() + seconds
    x = torch.randn(256, 256)
    while time.monotonic() < end:  # busy, as an evaluation would be
        x = torch.tanh(x @ x.t() / 256)
    print("worker 0: worked alone %g s more" % seconds, flush=True)
hvd.shutdown()
print("worker %d: finished" % rank, flush=True)
