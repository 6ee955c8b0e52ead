"""One torch.distributed script for both backends: `ddp_job.py zps OUT` and `ddp_job.py gloo OUT` differ
only in the string given to init_process_group. Each process

1. checks every collective of the process group with exact values (the ones Gloo lacks on CPU,
   reduce_scatter and AVG, are checked under zps only; the script says so under gloo);
2. trains a small MLP with DistributedDataParallel for 50 SGD steps (same seeds, each rank its own
   data) and writes its weights to OUT/<backend>-<rank>.pt.

Under zps it runs in `zps launch`; under gloo the test starts the processes itself with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Exits 1 naming the first check that failed."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import zps.torch.distributed  # noqa: F401  registers the "zps" backend

backend, out_dir = sys.argv[1], sys.argv[2]
dist.init_process_group(backend)
rank, size = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(1)


def check(what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        print("FAILED on rank %d: %s: got %r, want %r" % (rank, what, got, want), flush=True)
        sys.exit(1)
    print("ok: %s" % what, flush=True)


def skip(what, why):
    print("skipped under %s: %s (%s)" % (backend, what, why), flush=True)


R = dist.ReduceOp
t = torch.tensor([rank + 1.0, -(rank + 1.0)])
total = size * (size + 1) / 2
for op, want in [(R.SUM, [total, -total]), (R.MIN, [1.0, -float(size)]), (R.MAX, [float(size), -1.0]),
                 (R.PRODUCT, [float(torch.arange(1, size + 1).prod()), float((-1) ** size * torch.arange(1, size + 1).prod())])]:
    x = t.clone()
    dist.all_reduce(x, op=op)
    check("all_reduce %s" % op.op, x, torch.tensor(want))
x = torch.tensor(rank + 1, dtype=torch.int64)
dist.all_reduce(x)
check("all_reduce of a 0-dim int64", x, torch.tensor(int(total)))
xs = []
for i in range(6):
    x = torch.full((5,), float(rank + i))
    xs.append((x, dist.all_reduce(x, async_op=True)))
for i, (x, work) in enumerate(xs):
    work.wait()
    check("async all_reduce %d of 6 of one size" % i, x, torch.full((5,), total - size + size * i))
if backend == "zps":
    x = t.clone()
    dist.all_reduce(x, op=R.AVG)
    check("all_reduce AVG", x, torch.tensor([total / size, -total / size]))
else:
    skip("all_reduce AVG", "Gloo has no AVG")

x = torch.full((2, 3), float(rank))
dist.broadcast(x, src=size - 1)
check("broadcast", x, torch.full((2, 3), float(size - 1)))
x = torch.tensor(rank * 10, dtype=torch.int32)
dist.broadcast(x, src=0)
check("broadcast of a 0-dim int32", x, torch.tensor(0, dtype=torch.int32))

outs = [torch.zeros(2, dtype=torch.int64) for _ in range(size)]
dist.all_gather(outs, torch.tensor([rank, 7 * rank]))
check("all_gather", torch.stack(outs), torch.tensor([[r, 7 * r] for r in range(size)]))
outs = [torch.zeros((), dtype=torch.float64) for _ in range(size)]
dist.all_gather(outs, torch.tensor(rank + 0.5, dtype=torch.float64))
check("all_gather of 0-dim tensors", torch.stack(outs), torch.arange(size, dtype=torch.float64) + 0.5)
objs = [None] * size
dist.all_gather_object(objs, {"rank": rank, "name": "r" * (rank + 1)})
if objs != [{"rank": r, "name": "r" * (r + 1)} for r in range(size)]:
    print("FAILED on rank %d: all_gather_object: %r" % (rank, objs), flush=True)
    sys.exit(1)
print("ok: all_gather_object", flush=True)

if backend == "zps":
    out = torch.zeros(3)
    dist.reduce_scatter(out, [torch.full((3,), float(rank * 100 + d)) for d in range(size)])
    check("reduce_scatter", out, torch.full((3,), 100.0 * (total - size) + size * rank))
    out = torch.zeros(2, dtype=torch.int64)
    dist.reduce_scatter(out, [torch.tensor([rank, d]) for d in range(size)], op=R.MAX)
    check("reduce_scatter MAX", out, torch.tensor([size - 1, rank]))
else:
    skip("reduce_scatter", "Gloo has no reduce_scatter on CPU")

# all_to_all_single: rank r sends r + 1 rows of (10 r + d) to rank d.
inp = torch.cat([torch.full((rank + 1, 2), 10.0 * rank + d) for d in range(size)])
out = torch.zeros(size * (size + 1) // 2, 2)
dist.all_to_all_single(out, inp, output_split_sizes=[s + 1 for s in range(size)],
                       input_split_sizes=[rank + 1] * size)
check("all_to_all_single with splits", out, torch.cat([torch.full((s + 1, 2), 10.0 * s + rank) for s in range(size)]))
out = torch.zeros(size)
dist.all_to_all_single(out, torch.arange(size, dtype=torch.float32) + 100 * rank)
check("all_to_all_single", out, torch.tensor([100.0 * s + rank for s in range(size)]))
if backend == "zps":
    outs = [torch.zeros(s + 1) for s in range(size)]
    dist.all_to_all(outs, [torch.full((rank + 1,), float(rank * 10 + d)) for d in range(size)])
    check("all_to_all", torch.cat(outs), torch.cat([torch.full((s + 1,), float(s * 10 + rank)) for s in range(size)]))
else:
    skip("all_to_all", "Gloo has no all_to_all of tensor lists on CPU")

x = torch.tensor([rank + 1.0])
dist.reduce(x, dst=1)
if rank == 1:
    check("reduce to rank 1", x, torch.tensor([total]))
gathered = [torch.zeros(2) for _ in range(size)] if rank == 0 else None
dist.gather(torch.tensor([rank, -rank], dtype=torch.float32), gathered, dst=0)
if rank == 0:
    check("gather to rank 0", torch.stack(gathered), torch.tensor([[r, -r] for r in range(size)], dtype=torch.float32))
out = torch.zeros(2)
dist.scatter(out, [torch.tensor([s, 2.0 * s]) for s in range(size)] if rank == 0 else None, src=0)
check("scatter from rank 0", out, torch.tensor([rank, 2.0 * rank]))
dist.barrier()
print("ok: barrier", flush=True)

# DistributedDataParallel: one model from seed 0 (DDP broadcasts rank 0's anyway), each rank its data.
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
if rank != 0:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # DDP's first broadcast must undo this
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)  # several buckets of 10 KB
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
gen = torch.Generator().manual_seed(1000 + rank)
for step in range(50):
    x = torch.randn(16, 20, generator=gen)
    y = torch.randint(0, 4, (16,), generator=gen)
    opt.zero_grad()
    loss = nn.functional.cross_entropy(ddp(x), y)
    loss.backward()
    opt.step()
torch.save({k: v.detach().clone() for k, v in model.state_dict().items()},
           os.path.join(out_dir, "%s-%d.pt" % (backend, rank)))
print("ddp: 50 steps done on rank %d of %d, last loss %.6f" % (rank, size, loss.item()), flush=True)
dist.destroy_process_group()
