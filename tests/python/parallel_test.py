"""zps.torch.parallel.DistributedDataParallel (BytePS's module wrapper) as the workers of one job
(tests/python/CMakeLists.txt: 1 server, 2 and 3 workers). Each worker trains on its own batch; after
backward every `.grad` must equal the average of all workers' local gradients, which each worker
computes itself from every worker's batch with an unwrapped copy of the model (float64, so the only
difference is the order of the servers' sum). Also: no_sync() accumulates locally and the next backward
sums the accumulation; a parameter the forward pass skipped gets a zero gradient summed over the
workers; buffers take rank 0's values before each forward; the module starts from rank 0's weights;
100 SGD steps reach the same weights on every worker. Every check prints a line; the first failed check
raises (the job then ends non-zero)."""
import copy

import torch

import zps.torch as bps
from zps.torch.parallel import DistributedDataParallel as DDP


def check(cond, what):
    if not cond:
        raise AssertionError("worker %d: FAILED %s" % (RANK, what))
    print("worker %d: %s: OK" % (RANK, what), flush=True)


class Net(torch.nn.Module):
    """Two layers, a BatchNorm (buffers of float64 and int64), and a branch only some steps take."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 40)
        self.bn = torch.nn.BatchNorm1d(40)
        self.b = torch.nn.Linear(40, 3)
        self.side = torch.nn.Linear(6, 3)

    def forward(self, x, use_side=False):
        y = self.b(torch.relu(self.bn(self.a(x))))
        return y + self.side(x) if use_side else y


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 6, generator=g, dtype=torch.float64), torch.randint(0, 3, (8,), generator=g)


def local_grads(model, rank, step, use_side=False):
    """The gradient of one worker's loss on its batch, computed here without the wrapper."""
    m = copy.deepcopy(model)
    m.zero_grad()
    x, y = batch(rank, step)
    torch.nn.functional.cross_entropy(m(x, use_side), y).backward()
    return {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for n, p in m.named_parameters()}


def expected_average(model, step, use_side=False, passes=1):
    total = None
    for r in range(N):
        for k in range(passes):
            g = local_grads(model, r, step + k, use_side)
            total = g if total is None else {n: total[n] + g[n] for n in total}
    return {n: t / N for n, t in total.items()}


def close(grads, want, what):
    worst = max(float((g - want[n]).abs().max() / (want[n].abs().max() + 1e-12)) for n, g in grads.items())
    check(worst < 1e-9, "%s (worst relative error %.1e)" % (what, worst))


bps.init()
RANK, N = bps.rank(), bps.size()
torch.manual_seed(RANK)  # different starting weights per worker: the wrapper must broadcast rank 0's
model = Net().double()
ddp = DDP(model, device_ids=[0])
w = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
ws = bps.allgather(w.reshape(1, -1))
check(all(torch.equal(ws[r], ws[0]) for r in range(N)), "every worker starts from rank 0's weights")

# One step: the gradients are the average of every worker's.
reference = copy.deepcopy(model)  # the weights every gradient is taken at (BN in train mode: batch stats)
x, y = batch(RANK, 0)
model.zero_grad()
torch.nn.functional.cross_entropy(ddp(x), y).backward()
want = expected_average(reference, 0)
close({n: p.grad for n, p in model.named_parameters()}, want, "one backward: every gradient is the workers' average")
check(bool((model.side.weight.grad == 0).all()), "the skipped branch's gradient is zero on every worker")

# no_sync: two local backward passes accumulate, the third (outside) sums all three.
model.zero_grad()
reference = copy.deepcopy(model)
with ddp.no_sync():
    for k in (1, 2):
        x, y = batch(RANK, k)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
mine = local_grads(reference, RANK, 1)
mine = {n: mine[n] + g for n, g in local_grads(reference, RANK, 2).items()}
close({n: p.grad for n, p in model.named_parameters()}, mine, "inside no_sync every gradient is this worker's own sum")
x, y = batch(RANK, 3)
torch.nn.functional.cross_entropy(ddp(x, use_side=True), y).backward()
want = expected_average(reference, 1, passes=2)
side = expected_average(reference, 3, use_side=True)
close({n: p.grad for n, p in model.named_parameters()}, {n: want[n] + side[n] for n in want},
      "the first backward after no_sync averages the accumulated gradients over the workers")

# Buffers: rank 0's running statistics reach every worker before the forward.
with torch.no_grad():
    model.bn.running_mean.fill_(float(RANK + 1))
    model.bn.num_batches_tracked.fill_(10 * (RANK + 1))
model.eval()
ddp(torch.zeros(2, 6, dtype=torch.float64))
check(torch.equal(model.bn.running_mean, torch.ones(40, dtype=torch.float64)) and
      int(model.bn.num_batches_tracked) == 10, "buffers take rank 0's values before the forward")
model.train()

# Training: 100 SGD steps, the same weights on every worker.
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(100):
    x, y = batch(RANK, 100 + step)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(ddp(x), y)
    loss.backward()
    opt.step()
w = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
ws = bps.allgather(w.reshape(1, -1))
check(all(torch.equal(ws[r], ws[0]) for r in range(N)), "after 100 steps every worker holds the same weights")
print("parallel: every check passed on worker %d of %d" % (RANK, N), flush=True)
