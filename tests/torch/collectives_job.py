"""Every operation of zps.torch.collectives with exact expected values, run by each worker of a
`zps launch` job (any number of workers). Prints one line per passed check and exits 1 on the first
mismatch, naming it."""
import math

import torch

import job_checks
import zps.torch as zt
from job_checks import check, raises
from zps.torch import collectives as C

zt.init()
rank, size = zt.rank(), zt.size()
job_checks.rank = rank


# allgather: a different first dimension on every worker, several dtypes, bytes exact.
for dtype in (torch.float32, torch.int64, torch.uint8, torch.float16, torch.int8, torch.bool):
    mine = torch.full((rank + 1, 3), rank % 2 if dtype == torch.bool else rank, dtype=dtype)
    want = torch.cat([torch.full((r + 1, 3), r % 2 if dtype == torch.bool else r, dtype=dtype) for r in range(size)])
    check("allgather %s, rows 1..%d" % (dtype, size), C.allgather(mine, name="ag"), want)
check("allgather 0-dim", C.allgather(torch.tensor(rank * 1.5, dtype=torch.float64)),
      torch.tensor([r * 1.5 for r in range(size)], dtype=torch.float64))
mine = torch.arange(2.0).repeat(rank, 1) if rank != 1 else torch.zeros(0, 2)
check("allgather with an empty worker", C.allgather(mine, name="some-empty"),
      torch.cat([torch.arange(2.0).repeat(r, 1) if r != 1 else torch.zeros(0, 2) for r in range(size)]))
special = torch.tensor([-0.0, math.inf, math.nan, rank])
got = C.allgather(special, name="bits")
check("allgather keeps -0.0 and NaN bits", got.view(torch.int32), torch.cat(
    [torch.tensor([-0.0, math.inf, math.nan, r]) for r in range(size)]).view(torch.int32))
raises("allgather with disagreeing row shapes", lambda: C.allgather(torch.zeros(2, 3 if rank == 0 else 4), "bad"),
       ["worker 0 has shape [2, 3], float32", "shape [2, 4], float32", "must agree"])

# allreduce_op with every op; Sum and Average on the servers, the others gathered.
vals = torch.tensor([rank + 1.0, -(rank + 1.0), 0.5 * rank])
fact = math.factorial(size)
expected = {
    C.Sum: torch.tensor([size * (size + 1) / 2, -size * (size + 1) / 2, 0.25 * size * (size - 1)]),
    C.Average: torch.tensor([(size + 1) / 2, -(size + 1) / 2, 0.25 * (size - 1)]),
    C.Min: torch.tensor([1.0, -float(size), 0.0]),
    C.Max: torch.tensor([float(size), -1.0, 0.5 * (size - 1)]),
    C.Product: torch.tensor([float(fact), float((-1) ** size * fact), 0.0]),
}
for op, want in expected.items():
    check("allreduce_op %s" % op, C.allreduce_op(vals, op, name="v"), want)
    check("allreduce_op %s 0-dim" % op, C.allreduce_op(vals[0].clone(), op, name="v0"), want[0].clone())
check("allreduce_op Average of int64 truncates", C.allreduce_op(torch.tensor([rank, -rank]), C.Average),
      torch.tensor([(size * (size - 1) // 2) // size, -((size * (size - 1) // 2) // size)]))
check("allreduce_op Sum of int16 (gathered)", C.allreduce_op(torch.tensor([rank + 1], dtype=torch.int16), C.Sum),
      torch.tensor([size * (size + 1) // 2], dtype=torch.int16))
check("allreduce_op Product of float16", C.allreduce_op(torch.tensor([2.0], dtype=torch.float16), C.Product),
      torch.tensor([2.0 ** size], dtype=torch.float16))
check("allreduce_op Max of int64", C.allreduce_op(torch.tensor([rank * 7 - 3]), C.Max), torch.tensor([(size - 1) * 7 - 3]))

# reducescatter: 2 x size + 1 rows, so the first worker gets one more.
rows = 2 * size + 1
base = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2)
counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
start = sum(counts[:rank])
mine = base * (rank + 1)
part = base[start:start + counts[rank]]
check("reducescatter Sum (uneven rows)", C.reducescatter(mine, C.Sum, name="rs"), part * (size * (size + 1) / 2))
check("reducescatter Average", C.reducescatter(mine, C.Average, name="rs"), part * ((size + 1) / 2))
check("reducescatter Max", C.reducescatter(mine, C.Max, name="rs"), part * size)
check("reducescatter Min of int32", C.reducescatter(mine.to(torch.int32), C.Min), part.to(torch.int32))
raises("reducescatter of a 0-dim tensor", lambda: C.reducescatter(torch.tensor(1.0), C.Sum), ["0-dim"])

# alltoall: worker r sends r + 1 rows of 10 r + d to worker d; gets s + 1 rows of 10 s + r from s.
sent = torch.cat([torch.full((rank + 1, 2), 10 * rank + d, dtype=torch.int64) for d in range(size)])
got, got_splits = C.alltoall(sent, splits=[rank + 1] * size, name="a2a")
check("alltoall with splits", got, torch.cat([torch.full((s + 1, 2), 10 * s + rank, dtype=torch.int64)
                                              for s in range(size)]))
check("alltoall received splits", got_splits, torch.tensor([s + 1 for s in range(size)], dtype=torch.int32))
uneven = [0] * size
uneven[(rank + 1) % size] = 3  # everything to the next worker
got, got_splits = C.alltoall(torch.full((3,), float(rank)), splits=torch.tensor(uneven), name="ring")
check("alltoall to one worker", got, torch.full((3,), float((rank - 1) % size)))
check("alltoall to one worker, splits", got_splits.tolist(), [3 if s == (rank - 1) % size else 0 for s in range(size)])
check("alltoall equal parts", C.alltoall(torch.arange(2.0 * size) + 100 * rank),
      torch.tensor([100.0 * s + 2 * rank + i for s in range(size) for i in range(2)]))

# broadcast: 0-dim, bool, in place; disagreeing roots refused on every worker.
root = size - 1
check("broadcast 0-dim", C.broadcast(torch.tensor(rank + 0.25), root), torch.tensor(root + 0.25))
check("broadcast bool", C.broadcast(torch.tensor([rank == root, True]), root), torch.tensor([True, True]))
t = torch.full((2, 3), rank, dtype=torch.int64)
C.broadcast_(t, 0, name="inplace")
check("broadcast_ in place", t, torch.zeros(2, 3, dtype=torch.int64))
raises("broadcast with disagreeing roots", lambda: C.broadcast(torch.ones(2), 0 if rank == 0 else 1, name="roots"),
       ["worker 0: 0", "worker 1: 1", "same root_rank"])
C.barrier()
check("allgather after the refused calls", C.allgather(torch.tensor([rank]), name="after"), torch.arange(size))
print("collectives: %d checks passed on worker %d of %d" % (job_checks.passed, rank, size), flush=True)
zt.shutdown()
