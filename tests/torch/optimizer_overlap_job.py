"""DistributedOptimizer(overlap_forward=model) against the plain optimizer, run by each worker of a
`zps launch` job (any number of workers): two copies of one model, Adam with a learning rate that
changes every step, per-worker data. Every step's loss and, after the steps, every weight and the
optimizer's state are the same bits; buckets hold one module's parameters. With ZPS_PRIORITY=1 (priority
scheduling, as on a job that spans hosts) the updates are deferred: after step() the parameters hold
their old values until the forward (or finish_step()) applies them, gradients zeroed while updates
are pending are zero after them, and a forward that used a parameter before its update is refused
with a clear message; without it (one host) step() updates at once. Prints one line per passed check
and exits 1 on the first mismatch, naming it."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import job_checks
import zps.torch as bps
from job_checks import check, raises

bps.init()
rank, size = bps.rank(), bps.size()
job_checks.rank = rank
STEPS = 6
DEFERRING = os.environ.get("ZPS_PRIORITY") == "1"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        self.scale = nn.Parameter(torch.ones(8))  # the root module's own parameter
        self.last = nn.Linear(8, 1)
        self.unused = nn.Linear(2, 2)  # never in the forward: its sums are zeros

    def forward(self, x):
        return self.last(self.first(x) * self.scale).squeeze(1)


def build(overlap):
    torch.manual_seed(7)
    model = Net()
    opt = bps.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters(),
                                   overlap_forward=model if overlap else None)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return model, opt, sched


def batch(step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(16, 4, generator=g), torch.randn(16, generator=g)


plain, plain_opt, plain_sched = build(False)
model, opt, sched = build(True)
check("without overlap_forward, small gradients share one bucket", [u.name for u in plain_opt._zps_units],
      ["grad.bucket(scale..unused.bias)"])
check("with overlap_forward, a bucket holds one module's parameters", [u.name for u in opt._zps_units],
      ["grad.scale", "grad.bucket(first.0.weight..first.0.bias)", "grad.bucket(first.2.weight..first.2.bias)",
       "grad.bucket(last.weight..last.bias)", "grad.bucket(unused.weight..unused.bias)"])
check("overlap_forward defers the updates exactly when the sums are scheduled by priority",
      opt._zps_deferred is not None, DEFERRING)

for step in range(STEPS):
    x, y = batch(step)
    losses = []
    for m, o, s in ((plain, plain_opt, plain_sched), (model, opt, sched)):
        o.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        o.step()
        s.step()
        losses.append(loss.detach())
    check("step %d: the loss with overlap_forward is the plain optimizer's" % step, losses[1], losses[0])
    if step == 0:
        # Deferred, the update of step 0 is pending: the weights are the initial ones until the next forward.
        torch.manual_seed(7)
        initial = Net()
        check("the plain step changed a weight", torch.equal(plain.first[0].weight, initial.first[0].weight), False)
        if DEFERRING:
            check("after step(), a parameter holds its old value", model.first[0].weight.detach(),
                  initial.first[0].weight.detach())
        else:
            check("not deferred, step() updated it", model.first[0].weight.detach(), plain.first[0].weight.detach())

if DEFERRING:
    # Gradients zeroed while updates are pending are zero once the forward applied them.
    opt.zero_grad()
    check("a pending parameter keeps its summed gradient after zero_grad()", torch.count_nonzero(
        model.last.weight.grad).item() > 0, True)
    model(batch(0)[0])
    check("the forward applied the update and then zeroed the gradient", model.last.weight.grad,
          torch.zeros_like(model.last.weight))
    check("a parameter outside the forward is still pending", opt._zps_deferred.pending_params() ==
          {id(model.unused.weight), id(model.unused.bias)}, True)
opt.finish_step()
plain_opt.zero_grad()
for (name, want), (_, got) in zip(plain.state_dict().items(), model.state_dict().items()):
    check("after %d steps, %s is the plain optimizer's" % (STEPS, name), got, want)
want_state, got_state = plain_opt.state_dict()["state"], opt.state_dict()["state"]
for index in want_state:
    for key in want_state[index]:
        check("optimizer state %s of parameter %d" % (key, index), got_state[index][key], want_state[index][key])

# model.state_dict() applies pending updates itself.
x, y = batch(STEPS)
for m, o in ((plain, plain_opt), (model, opt)):
    o.zero_grad()
    F.mse_loss(m(x), y).backward()
    o.step()
check("state_dict() right after step() holds the updated weights", model.state_dict()["last.weight"],
      plain.state_dict()["last.weight"])

# Refused: join_steps with overlap_forward, an overlap_forward that is not a module, and a forward that
# uses a parameter outside its module (so before its update): backward names it.
raises("overlap_forward with join_steps", lambda: bps.DistributedOptimizer(
    torch.optim.SGD(plain.parameters(), lr=0.1), named_parameters=plain.named_parameters(), overlap_forward=plain,
    join_steps=True), ["overlap_forward and join_steps"])
raises("overlap_forward given a list", lambda: bps.DistributedOptimizer(
    torch.optim.SGD(plain.parameters(), lr=0.1), named_parameters=plain.named_parameters(),
    overlap_forward=list(plain.parameters())), ["overlap_forward must be the torch.nn.Module"], TypeError)


class Borrower(nn.Module):
    """Uses its child's weight without calling the child: the child's forward never applies its update."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 1, bias=False)

    def forward(self, x):
        return F.linear(x, self.inner.weight).sum()


if not DEFERRING:
    print("optimizer_overlap: %d checks passed on worker %d of %d" % (job_checks.passed, rank, size), flush=True)
    bps.shutdown()
    raise SystemExit(0)

borrower = Borrower()
borrower_opt = bps.DistributedOptimizer(torch.optim.SGD(borrower.parameters(), lr=0.1),
                                        named_parameters=borrower.named_parameters(), overlap_forward=borrower)
borrower_opt.zero_grad()
borrower(batch(0)[0]).backward()
borrower_opt.step()
borrower_opt.zero_grad()
raises("a forward that used a parameter before its update", lambda: borrower(batch(1)[0]).backward(),
       ["'grad.inner.weight' reached backward before its update", "finish_step()"], RuntimeError)
borrower_opt.finish_step()
print("optimizer_overlap: %d checks passed on worker %d of %d" % (job_checks.passed, rank, size), flush=True)
bps.shutdown()
