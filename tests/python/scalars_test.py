"""0-dim tensors through every zps.torch path, with a real model (tests/python/CMakeLists.txt: 1 server,
2 workers): a torchvision ResNet-18 whose state_dict (BatchNorm's num_batches_tracked are 0-dim int64)
differs on every worker is broadcast from rank 0 and then equals rank 0's exactly; broadcast of
torch.tensor(epoch), allreduce of 0-dim floats and ints, and the optimizer state of that model.
Every check prints a line; the first failed check raises (the job then ends non-zero)."""
import torch
import torchvision

import zps.torch as bps


def check(cond, what):
    if not cond:
        raise AssertionError("worker %d: FAILED %s" % (RANK, what))
    print("worker %d: %s: OK" % (RANK, what), flush=True)


def resnet18(seed, batches_tracked):
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(num_classes=10)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.num_batches_tracked.fill_(batches_tracked)
            module.running_mean.uniform_()
    return model


bps.init()
RANK, N = bps.rank(), bps.size()

model = resnet18(seed=RANK, batches_tracked=5 + RANK)
expected = resnet18(seed=0, batches_tracked=5).state_dict()
state = model.state_dict()
scalars = [k for k, v in state.items() if v.dim() == 0]
check(len(scalars) == 20 and all(state[k].dtype == torch.int64 for k in scalars),
      "ResNet-18's state_dict holds 20 0-dim int64 tensors (num_batches_tracked)")
bps.broadcast_parameters(state, root_rank=0)
after = model.state_dict()
differing = [k for k in expected if not torch.equal(after[k], expected[k])]
check(not differing, "broadcast_parameters(model.state_dict()) of %d tensors: every one equals rank 0's%s" %
      (len(expected), "" if not differing else " (differ: %s)" % differing[:5]))
check(int(after["bn1.num_batches_tracked"]) == 5, "num_batches_tracked is rank 0's 5")

# Named parameters too (no 0-dim among them, but the same path as Horovod's examples).
model2 = resnet18(seed=10 + RANK, batches_tracked=0)
bps.broadcast_parameters(model2.named_parameters(), root_rank=1)
reference = dict(resnet18(seed=11, batches_tracked=0).named_parameters())
check(all(torch.equal(p, reference[n]) for n, p in model2.named_parameters()),
      "broadcast_parameters(named_parameters(), root_rank=1): rank 1's weights everywhere")

epoch = bps.broadcast(torch.tensor(7 if RANK == 0 else 100 + RANK), 0, name="resume_from_epoch")
check(epoch.dim() == 0 and int(epoch) == 7, "broadcast(torch.tensor(epoch), 0) is 0-dim and rank 0's 7")
flag = torch.tensor(RANK == 1)
bps.broadcast_(flag, 1)
check(flag.dim() == 0 and bool(flag) is True, "broadcast_ of a 0-dim bool in place from rank 1")

total = N * (N + 1) / 2
loss = bps.allreduce(torch.tensor(float(RANK + 1)), name="loss")
check(loss.dim() == 0 and float(loss) == total / N, "allreduce of a 0-dim float averages: %s" % float(loss))
count = bps.allreduce(torch.tensor(RANK + 1), op=bps.Sum)
check(count.dim() == 0 and count.dtype == torch.int64 and int(count) == total, "unnamed allreduce of a 0-dim int64 sums")
acc = torch.tensor(2.0 * (RANK + 1), dtype=torch.float64)
bps.allreduce_(acc, op=bps.Sum, name="acc")
check(float(acc) == 2 * total, "allreduce_ of a 0-dim float64 in place")
h = bps.push_pull_async(torch.tensor(1.5), average=False, name="async_scalar")
check(float(bps.synchronize(h)) == 1.5 * N, "push_pull_async of a 0-dim")

# The optimizer state of that model after a step (momentum buffers; Adam's 'step' is a 0-dim tensor).
optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (RANK + 1))
model(torch.randn(2, 3, 32, 32)).sum().backward()
optimizer.step()
bps.broadcast_optimizer_state(optimizer, root_rank=0)
check(optimizer.param_groups[0]["lr"] == 0.01, "broadcast_optimizer_state: rank 0's lr")
bps.shutdown()
print("worker %d: all checks passed" % RANK, flush=True)
