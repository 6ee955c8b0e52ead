"""ZPS_SKIP_ZEROS as the workers of one job (skip_zeros_test.sh: 2 servers, 2 workers, run once with the
setting on and once off): sums of tensors that are mostly +0.0 arrive with exactly the bits of a dense
float32 sum in rank order (a -0.0 plus a left-out +0.0 gives +0.0, -0.0 plus -0.0 stays -0.0, NaN,
infinity and denormals travel as values), and the servers' byte counters show what crossed the wire.
Prints "sums <sha256>" (equal with the setting on and off), "bytes pushed P pulled Q dense D" and
"skip zeros ok"."""
import hashlib
import os
import sys

import torch

import zps.torch as bps

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
from server_counters import server_bytes  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError("worker %d: FAILED %s" % (bps.rank(), what))
    print("ok: %s" % what, flush=True)


def worker_tensor(rank, n, zero_share, seed):
    """Rank `rank`'s float32 tensor of n elements, about zero_share of them +0.0 (drawn by seed and rank)."""
    g = torch.Generator().manual_seed(seed * 100 + rank)
    x = torch.randn(n, generator=g)
    x[torch.rand(n, generator=g) < zero_share] = 0.0
    return x


def bits(t):
    return t.contiguous().view(torch.int32)


bps.init()
rank, size = bps.rank(), bps.size()
assert size == 2, "skip_zeros_job.py runs with 2 workers"

# The edge cases, element by element: (worker 0, worker 1) and the dense float32 sum.
tiny = torch.finfo(torch.float32).tiny / 4  # a denormal
edges = [(-0.0, 0.0), (-0.0, -0.0), (0.0, -0.0), (0.0, 0.0), (float("nan"), 0.0), (float("inf"), 0.0),
         (tiny, 0.0), (1.5, -1.5), (0.0, 2.0)]
n_edges = len(edges) * 1000  # enough zeros that the encoding pays, with the edge cases among them
every = [torch.zeros(n_edges), torch.zeros(n_edges)]
for i, pair in enumerate(edges):
    for r in (0, 1):
        every[r][i * 1000] = pair[r]
mine = every[rank].clone()
got = bps.push_pull(mine, average=False, name="edges")
want = every[0] + every[1]
check(torch.equal(bits(got), bits(want)), "edge cases (-0.0, NaN, inf, denormals) sum to the dense bits")
check(bits(got)[0].item() == 0 and bits(got)[1000].item() == bits(torch.tensor(-0.0)).item(),
      "-0.0 + +0.0 = +0.0 and -0.0 + -0.0 = -0.0")

# Tensors of many partitions at several shares of zeros, in place and not, averaged and summed.
digest = hashlib.sha256(bits(got).numpy().tobytes())
n = 1 << 20
for seed, share in enumerate((0.0, 0.3, 0.9, 1.0)):
    x = [worker_tensor(r, n, share, seed) for r in range(size)]
    got = bps.push_pull(x[rank].clone(), average=False, name="share.%d" % seed)
    check(torch.equal(bits(got), bits(x[0] + x[1])), "%d elements, %.0f%% zeros: the dense sum's bits" % (n, 100 * share))
    t = x[rank].clone()
    bps.push_pull_inplace(t, average=True, name="share.avg.%d" % seed)
    check(torch.equal(bits(t), bits((x[0] + x[1]) / 2)), "in place, averaged: the same bits")
    digest.update(bits(got).numpy().tobytes())
    digest.update(bits(t).numpy().tobytes())
print("sums %s" % digest.hexdigest(), flush=True)

# What crosses the wire: 10 rounds of a 90%-zero tensor (4 MiB), read from the servers' counters.
x = worker_tensor(rank, n, 0.9, 7)
bps.barrier()
before = server_bytes(rank) if rank == 0 else None
bps.barrier()
for step in range(10):
    bps.push_pull(x, average=False, name="wire")
bps.barrier()
after = server_bytes(rank) if rank == 0 else None
if rank == 0:
    dense = 10 * size * n * 4
    print("bytes pushed %d pulled %d dense %d" % (after[0] - before[0], after[1] - before[1], dense), flush=True)
bps.barrier()
print("skip zeros ok", flush=True)
bps.shutdown()
