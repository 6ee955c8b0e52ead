"""Process sets on worker nodes of several local ranks, with exact expected values: run by each process of a
`zps launch --workers 2 --local-size 2` job (ranks 0, 1 on node 0 and 2, 3 on node 1). The sets are
"node0" = [0, 1] (both local ranks of one node), "across" = [1, 2] (one local rank of each node) and
"three" = [0, 2, 3]: every operation over them (allreduce with every op, grouped, allgather, broadcast,
reducescatter, alltoall, barrier, a DistributedOptimizer), sets running at once on one node, and the global
set's local reduction between them. Prints one line per passed check and exits 1 on the first mismatch,
naming it."""
import time

import torch

import job_checks
import zps.torch as hvd
from job_checks import check

hvd.init()
rank, size = hvd.rank(), hvd.size()
job_checks.rank = rank

job_checks.require_two_nodes_of_two(hvd)
check("local_rank", hvd.local_rank(), rank % 2)

node0 = hvd.add_process_set([0, 1])
across = hvd.add_process_set([1, 2])
three = hvd.add_process_set([0, 2, 3])
sets = {"node0": node0, "across": across, "three": three}


def total(ps, value=lambda r: r + 1):
    return sum(value(r) for r in ps.ranks)


# allreduce Sum over each set, one dtype after another: the sum of its members' values only, whoever
# shares their nodes. The order (node0 before across on rank 1, across before three on rank 2) is the
# same everywhere, so that no process waits on one set while its partner waits on another.
for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.uint8):
    for set_name, ps in sets.items():
        if ps.included():
            got = hvd.allreduce(torch.full((5, 3), rank + 1, dtype=dtype), op=hvd.Sum, process_set=ps)
            check("allreduce Sum over %s %s, %s" % (set_name, ps.ranks, dtype), got,
                  torch.full((5, 3), total(ps), dtype=dtype))

# A tensor larger than a partition (ZPS_PARTITION_BYTES is 4096 here): each member pushes every
# partition itself, where the global set's local reduction splits them between local ranks.
big = torch.arange(10000, dtype=torch.float32) + 1000 * rank
for set_name, ps in sets.items():
    if ps.included():
        want = torch.arange(10000, dtype=torch.float32) * len(ps.ranks) + 1000 * sum(ps.ranks)
        check("allreduce of 40000 bytes over %s" % set_name, hvd.allreduce(big, op=hvd.Sum, process_set=ps), want)
check("allreduce over every process (local reduction) between sets", hvd.allreduce(big, op=hvd.Sum),
      torch.arange(10000, dtype=torch.float32) * 4 + 6000)

# The other reductions.
if across.included():
    check("allreduce Average over across", hvd.allreduce(torch.tensor([rank * 2.0, 1.0]), process_set=across),
          torch.tensor([3.0, 1.0]))
if three.included():
    mine = torch.tensor([rank + 1, -(rank + 1)])
    check("allreduce Min over three", hvd.allreduce(mine, op=hvd.Min, process_set=three), torch.tensor([1, -4]))
    check("allreduce Max over three", hvd.allreduce(mine, op=hvd.Max, process_set=three), torch.tensor([4, -1]))
    check("allreduce Product over three", hvd.allreduce(mine, op=hvd.Product, process_set=three),
          torch.tensor([12, -12]))
    check("allreduce 0-dim over three", hvd.allreduce(torch.tensor(rank + 0.5), op=hvd.Sum, process_set=three),
          torch.tensor(6.5))
    got = hvd.grouped_allreduce([torch.full((2,), float(rank)), torch.full((3,), rank, dtype=torch.int64)],
                                op=hvd.Sum, process_set=three)
    check("grouped_allreduce over three, float", got[0], torch.full((2,), 5.0))
    check("grouped_allreduce over three, int64", got[1], torch.full((3,), 5, dtype=torch.int64))

# Async operations of two sets in flight at once on node 0 (rank 0 in node0 and three, rank 1 in node0
# and across), synchronized in reverse order.
handles = []
for set_name, ps in sets.items():
    if ps.included():
        handles.append((set_name, ps, hvd.allreduce_async(torch.full((4,), float(rank)), op=hvd.Sum,
                                                          name="async." + set_name, process_set=ps)))
for set_name, ps, handle in reversed(handles):
    check("allreduce_async over %s" % set_name, hvd.synchronize(handle), torch.full((4,), float(sum(ps.ranks))))

# allgather: each member's rows (a different count per member), in set rank order.
if across.included():
    check("allgather over across", hvd.allgather(torch.full((rank, 2), rank, dtype=torch.int64), process_set=across),
          torch.tensor([[1, 1], [2, 2], [2, 2]]))
if three.included():
    check("allgather over three", hvd.allgather(torch.tensor([float(rank)]), process_set=three),
          torch.tensor([0.0, 2.0, 3.0]))
    got = hvd.grouped_allgather([torch.tensor([rank]), torch.tensor([[rank, -rank]])], process_set=three)
    check("grouped_allgather over three, first", got[0], torch.tensor([0, 2, 3]))
    check("grouped_allgather over three, second", got[1], torch.tensor([[0, 0], [2, -2], [3, -3]]))
if node0.included():
    check("allgather over node0", hvd.allgather(torch.tensor([rank + 7]), process_set=node0), torch.tensor([7, 8]))

# broadcast: root_rank is a rank of the job.
if three.included():
    check("broadcast from rank 3 over three", hvd.broadcast(torch.full((3, 2), float(rank)), root_rank=3,
                                                            process_set=three), torch.full((3, 2), 3.0))
if node0.included():
    t = torch.full((2,), rank, dtype=torch.int16)
    hvd.broadcast_(t, root_rank=1, process_set=node0)
    check("broadcast_ int16 from rank 1 over node0", t, torch.ones(2, dtype=torch.int16))
if across.included():
    check("broadcast_object from rank 2 over across",
          hvd.broadcast_object({"from": rank}, root_rank=2, process_set=across), {"from": 2})

# reducescatter: member i of the set gets row i of the sum.
if three.included():
    rows = torch.arange(6, dtype=torch.float32).reshape(3, 2) + rank
    me = three.rank()
    check("reducescatter Sum over three", hvd.reducescatter(rows, op=hvd.Sum, process_set=three),
          torch.arange(6, dtype=torch.float32).reshape(3, 2)[me:me + 1] * 3 + 5)

# alltoall: member i sends row d (10 x rank + d) to member d.
if across.included():
    got = hvd.alltoall(torch.tensor([10 * rank, 10 * rank + 1]), process_set=across)
    check("alltoall over across", got, torch.tensor([10, 20]) + across.rank())
if three.included():
    got, splits = hvd.alltoall(torch.full((3 * (three.rank() + 1),), rank), splits=[three.rank() + 1] * 3,
                               process_set=three)
    check("alltoall with splits over three", got,
          torch.cat([torch.full((i + 1,), r) for i, r in enumerate(three.ranks)]))
    check("alltoall received splits over three", splits, torch.tensor([1, 2, 3], dtype=torch.int32))

# A set's barrier waits for its members only: rank 1 arrives 1 s late, so rank 2 waits about 1 s.
start = time.monotonic()
if across.included():
    if rank == 1:
        time.sleep(1.0)
    hvd.barrier(process_set=across)
    check("across's barrier returned on rank %d once rank 1 came" % rank, time.monotonic() - start >= 0.9, True)
hvd.barrier()

# DistributedOptimizer over three: its members sum their gradients (op=Sum: exact), rank 1 steps alone.
model = torch.nn.Linear(2, 1, bias=False)
with torch.no_grad():
    model.weight.zero_()
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0), named_parameters=model.named_parameters(),
                               op=hvd.Sum, process_set=three)
x = torch.tensor([[float(rank + 1), 1.0]])
for step in range(2):
    opt.zero_grad()
    model(x).sum().backward()  # the gradient is x
    opt.step()
want = torch.tensor([[-16.0, -6.0]]) if three.included() else torch.tensor([[-4.0, -2.0]])
check("DistributedOptimizer over three after 2 steps", model.weight.detach(), want)

for ps in sets.values():
    hvd.remove_process_set(ps)
check("allreduce over every process at the end", hvd.allreduce(torch.tensor([rank]), op=hvd.Sum), torch.tensor([6]))
print("process_sets_local: %d checks passed on worker %d of %d" % (job_checks.passed, rank, size), flush=True)
hvd.shutdown()
