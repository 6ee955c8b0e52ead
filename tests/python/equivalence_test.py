"""DistributedOptimizer, broadcast_parameters and broadcast_optimizer_state, as the workers of one job
(2 workers): workers start from different weights and optimizer settings; after the broadcasts they hold
rank 0's exactly; then 2 workers training on batch b end with the weights of one process training on
batch 2b (max relative difference <= 1e-5, printed), and every worker holds bit-identical weights; the same
with backward_passes_per_step=2, and with gradients in buckets of float32 and float64 beside lone ones
and an unused parameter. A gradient computed twice in one step and a bad ZPS_TORCH_BUCKET_BYTES raise."""
import copy
import os

import torch

import zps.torch as bps

STEPS, B, DIN, DHID, DOUT = 12, 16, 20, 32, 3


def check(cond, what):
    if not cond:
        raise AssertionError("worker %d: FAILED %s" % (bps.rank(), what))
    print("worker %d: %s: OK" % (bps.rank(), what), flush=True)


def same_as_root(tensors, tag):
    """True when each tensor here equals rank 0's bit for bit."""
    ok = True
    for i, t in enumerate(tensors):
        root = bps.broadcast(t.detach(), 0, name="%s.%d" % (tag, i))
        ok = ok and torch.equal(root.view(torch.uint8), t.detach().contiguous().view(torch.uint8))
    return ok


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(DIN, DHID), torch.nn.Tanh(), torch.nn.Linear(DHID, DOUT))


bps.init()
rank, n = bps.rank(), bps.size()
torch.manual_seed(100 + rank)  # different initial weights on every worker
model = make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 if rank == 0 else 0.7, momentum=0.9)
# One local step on rank-dependent data, so that the momentum buffers differ too.
torch.nn.functional.mse_loss(model(torch.randn(4, DIN)), torch.randn(4, DOUT)).backward()
optimizer.step()
optimizer.zero_grad()
check(not same_as_root(list(model.parameters()), "before") or rank == 0, "workers start with different weights")

bps.broadcast_parameters(model.state_dict(), root_rank=0)
check(same_as_root(list(model.state_dict().values()), "params"), "broadcast_parameters: rank 0's weights on every worker")
bps.broadcast_optimizer_state(optimizer, root_rank=0)
buffers = [optimizer.state[p]["momentum_buffer"] for p in model.parameters()]
check(optimizer.param_groups[0]["lr"] == 0.05 and same_as_root(buffers, "momentum"),
      "broadcast_optimizer_state: rank 0's lr (0.05) and momentum buffers on every worker")

# The reference: one process on the whole batch of 2b, from the same weights and optimizer state.
reference = copy.deepcopy(model)
ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
ref_optimizer.load_state_dict(optimizer.state_dict())

try:
    bps.DistributedOptimizer(optimizer, named_parameters=[("w", p) for p in model.parameters()])
    raise AssertionError("duplicate names were accepted")
except ValueError as e:
    check("duplicate parameter names ['w']" in str(e), "duplicate names in named_parameters raise (%s)" % e)

optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
check(isinstance(optimizer, torch.optim.SGD), "DistributedOptimizer is an instance of the wrapped class")

data = torch.Generator().manual_seed(7)
X = torch.randn(STEPS, n * B, DIN, generator=data)
Y = torch.randn(STEPS, n * B, DOUT, generator=data)
for step in range(STEPS):
    clip = step % 3 == 2  # some steps clip gradients: synchronize() first, then clip, then step()
    optimizer.zero_grad()
    mine = slice(rank * B, (rank + 1) * B)
    torch.nn.functional.mse_loss(model(X[step, mine]), Y[step, mine]).backward()
    if clip:
        optimizer.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()

    ref_optimizer.zero_grad()
    torch.nn.functional.mse_loss(reference(X[step]), Y[step]).backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    ref_optimizer.step()

worst = 0.0
for p, q in zip(model.parameters(), reference.parameters()):
    rel = ((p.detach() - q.detach()).abs() / q.detach().abs().clamp_min(1e-3)).max().item()
    worst = max(worst, rel)
print("worker %d: max relative weight difference to 1 process on batch %d after %d steps: %.3g" % (rank, n * B, STEPS, worst))
check(worst <= 1e-5, "2 workers on batch %d match 1 process on batch %d (<= 1e-5)" % (B, n * B))
check(same_as_root(list(model.parameters()), "final"), "every worker holds bit-identical weights")

# backward_passes_per_step=2: two backward passes of B samples each, then one sum over the workers. The
# gradients accumulate (a sum of two means), so the reference is one process on 2 x 2B samples with
# twice the mean loss.
model2 = make_model()
bps.broadcast_parameters(model2.state_dict(), root_rank=0)
reference2 = copy.deepcopy(model2)
ref2_optimizer = torch.optim.SGD(reference2.parameters(), lr=0.05)
optimizer2 = bps.DistributedOptimizer(torch.optim.SGD(model2.parameters(), lr=0.05),
                                      named_parameters=[("bp2." + k, p) for k, p in model2.named_parameters()],
                                      backward_passes_per_step=2)
X2 = torch.randn(4, 2 * n * B, DIN, generator=data)
Y2 = torch.randn(4, 2 * n * B, DOUT, generator=data)
for step in range(4):
    optimizer2.zero_grad()
    for micro in range(2):
        mine = slice((2 * rank + micro) * B, (2 * rank + micro + 1) * B)
        torch.nn.functional.mse_loss(model2(X2[step, mine]), Y2[step, mine]).backward()
    optimizer2.step()
    ref2_optimizer.zero_grad()
    (2 * torch.nn.functional.mse_loss(reference2(X2[step]), Y2[step])).backward()
    ref2_optimizer.step()
worst2 = max(((p.detach() - q.detach()).abs() / q.detach().abs().clamp_min(1e-3)).max().item()
             for p, q in zip(model2.parameters(), reference2.parameters()))
print("worker %d: backward_passes_per_step=2: max relative weight difference %.3g" % (rank, worst2))
check(worst2 <= 1e-5 and same_as_root(list(model2.parameters()), "final2"),
      "backward_passes_per_step=2 matches 1 process on batch %d, workers bit-identical" % (2 * n * B))


# Buckets: gradients smaller than bucket_bytes share one push_pull per bucket. With 1024 bytes, a.weight
# (2560 bytes) goes alone, a.bias and the unused parameter (float32) share a bucket, and so do b's
# float64 weight and bias; every weight still matches one process on the whole batch.
class Mixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(DIN, DHID)
        self.c = torch.nn.Module()  # between a and b in named_parameters' order
        self.c.unused = torch.nn.Parameter(torch.ones(5))
        self.b = torch.nn.Linear(DHID, DOUT).double()

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)).double()).float()


model3 = Mixed()
bps.broadcast_parameters(model3.state_dict(), root_rank=0)
reference3 = copy.deepcopy(model3)
ref3_optimizer = torch.optim.SGD(reference3.parameters(), lr=0.05, momentum=0.9)
os.environ["ZPS_TORCH_BUCKET_BYTES"] = "12x"
try:
    bps.DistributedOptimizer(torch.optim.SGD(model3.parameters(), lr=0.05), named_parameters=model3.named_parameters())
    raise AssertionError("ZPS_TORCH_BUCKET_BYTES=12x was accepted")
except ValueError as e:
    check("ZPS_TORCH_BUCKET_BYTES='12x' is not an integer" in str(e), "a bad ZPS_TORCH_BUCKET_BYTES raises (%s)" % e)
os.environ["ZPS_TORCH_BUCKET_BYTES"] = "1024"
optimizer3 = bps.DistributedOptimizer(torch.optim.SGD(model3.parameters(), lr=0.05, momentum=0.9),
                                      named_parameters=model3.named_parameters())
del os.environ["ZPS_TORCH_BUCKET_BYTES"]
plan = [u.name for u in optimizer3._zps_units]
check(plan == ["grad.a.weight", "grad.bucket(a.bias..c.unused)", "grad.bucket(b.weight..b.bias)"],
      "ZPS_TORCH_BUCKET_BYTES=1024: one lone gradient and two buckets %s" % plan)
X3 = torch.randn(6, n * B, DIN, generator=data)
Y3 = torch.randn(6, n * B, DOUT, generator=data)
for step in range(6):
    optimizer3.zero_grad()
    mine = slice(rank * B, (rank + 1) * B)
    torch.nn.functional.mse_loss(model3(X3[step, mine]), Y3[step, mine]).backward()
    optimizer3.step()
    ref3_optimizer.zero_grad()
    torch.nn.functional.mse_loss(reference3(X3[step]), Y3[step]).backward()
    ref3_optimizer.step()
worst3 = max(((p.detach() - q.detach()).abs() / q.detach().abs().clamp_min(1e-3)).max().item()
             for p, q in zip(model3.parameters(), reference3.parameters()))
print("worker %d: buckets: max relative weight difference %.3g" % (rank, worst3))
check(worst3 <= 1e-5 and torch.equal(model3.c.unused.detach(), torch.ones(5)),
      "gradients in buckets match 1 process on batch %d, the unused parameter unchanged" % (n * B))
check(same_as_root(list(model3.parameters()), "final3"), "buckets: every worker holds bit-identical weights")

# A second backward before step(): the first gradient computed again raises, naming it; synchronize()
# then sums what the first backward produced, so the workers' rounds stay in step.
optimizer3.zero_grad()
torch.nn.functional.mse_loss(model3(X3[0, :B]), Y3[0, :B]).backward()
try:
    torch.nn.functional.mse_loss(model3(X3[1, :B]), Y3[1, :B]).backward()
    raise AssertionError("a second backward before step() was accepted")
except RuntimeError as e:
    # b's bias or weight: backward produces them first, in an order autograd does not promise.
    check("gradient of 'grad.b." in str(e) and "computed again before step()" in str(e),
          "a second backward raises (%s)" % str(e).splitlines()[0])
optimizer3.synchronize()
optimizer3.step()
check(same_as_root(list(model3.parameters()), "after_error"), "after the error the workers still agree")
bps.shutdown()
