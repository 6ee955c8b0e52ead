"""DistributedOptimizer with join() and uneven data, with exact expected weights, run by each worker of a
`zps launch` job (any number of workers): worker r has 2 + r batches; each one that runs out calls
join(), and the others' steps go on with the joined workers' zeros. Prints one line per passed check and
exits 1 on the first mismatch, naming it. Also: op=Adasum is refused."""
import warnings

import torch

import job_checks
import zps.torch as hvd
from job_checks import check, raises

hvd.init()
rank, size = hvd.rank(), hvd.size()
job_checks.rank = rank

# loss = w . x with x = [r + 1, 1] on worker r: every gradient of w is x, and op=Sum adds the workers'
# that still have data, so the weights are exact: after step s, w -= lr x (sum of r + 1 over the
# workers with more than s batches, and their count). A second parameter is never used (its gradient
# travels as zeros) and a bias of another dtype travels in a sum of its own.
model = torch.nn.Linear(2, 1, bias=False)
unused = torch.nn.Parameter(torch.zeros(3))
scale = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
with torch.no_grad():
    model.weight.zero_()
lr = 0.5
params = [("weight", model.weight), ("unused", unused), ("scale", scale)]
optimizer = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=lr), named_parameters=params,
                                     op=hvd.Sum, join_steps=True)
# An optimizer built without join_steps (never stepped here): join() warns that its steps would wait.
spare = torch.nn.Linear(1, 1)
hvd.DistributedOptimizer(torch.optim.SGD(spare.parameters(), lr=lr),
                         named_parameters=[("spare.w", spare.weight), ("spare.b", spare.bias)])
batches = 2 + rank
x = torch.tensor([[rank + 1.0, 1.0]])
for step in range(batches):
    optimizer.zero_grad()
    loss = model(x).sum() + (scale * 2).sum()
    loss.backward()
    optimizer.step()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    last = hvd.join()
check("join() warns of an optimizer built without join_steps",
      any("without join_steps=True" in str(w.message) for w in caught), True)
check("join() returns the rank that joined last", torch.tensor(last), torch.tensor(size - 1))
# The last worker to join stepped every time: its weights are everybody's now.
hvd.broadcast_parameters(dict(params), root_rank=last)
want_w = torch.zeros(1, 2)
want_scale = torch.zeros(1, dtype=torch.float64)
for step in range(2 + size - 1):
    active = [r for r in range(size) if 2 + r > step]
    want_w -= lr * torch.tensor([[float(sum(r + 1 for r in active)), float(len(active))]])
    want_scale -= lr * 2 * len(active)
check("weights after uneven batches and join", model.weight.detach(), want_w)
check("a float64 parameter after join", scale.detach(), want_scale)
check("a parameter no worker used", unused.detach(), torch.zeros(3))
# After everyone joined, the optimizer sums over every worker again.
optimizer.zero_grad()
model(x).sum().backward()
optimizer.step()
check("a step after join sums every worker", model.weight.detach(),
      want_w - lr * torch.tensor([[float(size * (size + 1) // 2), float(size)]]))
# Adasum is not built: refused with a clear message, for the optimizer and for allreduce.
raises("DistributedOptimizer with op=Adasum", lambda: hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=lr), op=hvd.Adasum), ["op=Adasum is not implemented", "Average or Sum"],
    NotImplementedError)
raises("allreduce with op=Adasum", lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum), ["op=Adasum"],
       NotImplementedError)
print("optimizer_join: %d checks passed on worker %d of %d" % (job_checks.passed, rank, size), flush=True)
hvd.shutdown()
