"""Process sets with exact expected values, run by each worker of a `zps launch` job of 2 or 3 workers (or
of 2 nodes of 2 local ranks: 4 processes, ranks 0 and 1 on one node):
allreduce, allgather and broadcast over a set, two disjoint sets at once, a set's operations beside the
global set's, a set's barrier, removal, and the errors a user can make. Prints one line per passed check
and exits 1 on the first mismatch, naming it."""
import sys
import time

import torch

import job_checks
import zps.torch as hvd
from job_checks import check, raises

hvd.init()
rank, size = hvd.rank(), hvd.size()
job_checks.rank = rank

if size not in (2, 3, 4):
    print("FAILED: this job expects 2, 3 or 4 workers, got %d" % size, flush=True)
    sys.exit(1)

# Sets: "low" = ranks 0 and 1 (every rank of a 2-worker job: the global set), "high" = the last rank
# alone, "ends" = ranks 0 and size - 1 (with 3 workers or more).
low = hvd.add_process_set([0, 1])
high = hvd.add_process_set([size - 1])
ends = hvd.add_process_set(hvd.ProcessSet([0, size - 1])) if size >= 3 else None
last = size - 1
check("process_set_id numbers sets in order", (low.process_set_id, high.process_set_id), (1, 2))
check("ProcessSet.rank", high.rank(), 0 if rank == size - 1 else -1)
check("ProcessSet.size", low.size(), 2)
check("global_process_set.size", hvd.global_process_set.size(), size)

# allreduce over a set: the sum of its members' values only.
for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.int8):
    mine = torch.full((5, 3), rank + 1, dtype=dtype)
    if low.included():
        check("allreduce Sum over ranks 0 and 1, %s" % dtype, hvd.allreduce(mine, op=hvd.Sum, process_set=low),
              torch.full((5, 3), 3, dtype=dtype))
    if high.included():
        check("allreduce Sum over rank %d alone, %s" % (size - 1, dtype),
              hvd.allreduce(mine, op=hvd.Sum, process_set=high), torch.full((5, 3), size, dtype=dtype))
if low.included():
    check("allreduce Average over ranks 0 and 1", hvd.allreduce(torch.tensor([rank * 2.0, 1.0]), process_set=low),
          torch.tensor([1.0, 1.0]))
    check("allreduce Max over ranks 0 and 1", hvd.allreduce(torch.tensor([rank, -rank]), op=hvd.Max, process_set=low),
          torch.tensor([1, 0]))
    check("allreduce 0-dim over ranks 0 and 1", hvd.allreduce(torch.tensor(rank + 0.5), op=hvd.Sum, process_set=low),
          torch.tensor(2.0))

# Two sets at once, then the global set: each sum is its own members' only.
if ends is not None:
    if ends.included():
        check("allreduce over ranks 0 and %d" % last,
              hvd.allreduce(torch.tensor([rank + 10]), op=hvd.Sum, process_set=ends), torch.tensor([20 + last]))
    if low.included():
        check("allreduce over ranks 0 and 1 after", hvd.allreduce(torch.tensor([rank + 10]), op=hvd.Sum,
                                                                  process_set=low), torch.tensor([21]))
check("allreduce over every worker between sets", hvd.allreduce(torch.tensor([rank + 1]), op=hvd.Sum),
      torch.tensor([size * (size + 1) // 2]))

# Async calls of one set in flight together, synchronized in reverse order.
if low.included():
    handles = [hvd.allreduce_async(torch.full((4,), float(i + rank)), op=hvd.Sum, name="async.%d" % i,
                                   process_set=low) for i in range(3)]
    for i in reversed(range(3)):
        check("allreduce_async %d over ranks 0 and 1" % i, hvd.synchronize(handles[i]),
              torch.full((4,), float(2 * i + 1)))

# allgather over a set: each member's rows (a different count per member), in set rank order.
if low.included():
    mine = torch.full((rank + 1, 2), rank, dtype=torch.int64)
    check("allgather over ranks 0 and 1", hvd.allgather(mine, process_set=low),
          torch.tensor([[0, 0], [1, 1], [1, 1]]))
if ends is not None and ends.included():
    check("allgather over ranks 0 and %d" % last, hvd.allgather(torch.tensor([float(rank)]), process_set=ends),
          torch.tensor([0.0, float(last)]))
if high.included():
    check("allgather over one rank", hvd.allgather(torch.tensor([7, rank]), process_set=high),
          torch.tensor([7, rank]))

# broadcast over a set: root_rank is a rank of the job.
if ends is not None and ends.included():
    got = hvd.broadcast(torch.full((3, 2), float(rank)), root_rank=last, process_set=ends)
    check("broadcast from rank %d over ranks 0 and %d" % (last, last), got, torch.full((3, 2), float(last)))
    t = torch.full((2,), rank, dtype=torch.int16)
    hvd.broadcast_(t, root_rank=0, process_set=ends)
    check("broadcast_ int16 from rank 0 over ranks 0 and %d" % last, t, torch.zeros(2, dtype=torch.int16))
if low.included():
    check("broadcast from rank 1 over ranks 0 and 1",
          hvd.broadcast(torch.tensor([rank, 5 * rank]), root_rank=1, process_set=low), torch.tensor([1, 5]))
    check("broadcast_object over ranks 0 and 1",
          hvd.broadcast_object({"from": rank}, root_rank=1, process_set=low), {"from": 1})
    raises("broadcast from a rank outside the set",
           lambda: hvd.broadcast(torch.zeros(1), root_rank=2 if size >= 3 else 5, process_set=low), ["root_rank"])

# A set's barrier waits for its members only: rank 0 arrives 1 s late, so rank 1 waits about 1 s, while
# the ranks above 1 (not in the set) do not wait for it.
start = time.monotonic()
if low.included():
    if rank == 0:
        time.sleep(1.0)
    hvd.barrier(process_set=low)
    waited = time.monotonic() - start
    check("a set's barrier returned on rank %d once rank 0 came" % rank, waited >= 0.9, True)
hvd.barrier()

# Errors: a non-member's call, a set that was never added, an add that the workers disagree on.
if not high.included():
    raises("allreduce on a set without this rank", lambda: hvd.allreduce(torch.zeros(1), process_set=high),
           ["is not in", "members"])
raises("a set that was never added", lambda: hvd.allreduce(torch.zeros(1), process_set=hvd.ProcessSet([0])),
       ["add_process_set first"])
check("adding the ranks of a set again gives that set", hvd.add_process_set([0, 1]).process_set_id,
      low.process_set_id)
raises("workers adding different sets", lambda: hvd.add_process_set([0] if rank == 0 else [1]),
       ["disagree", "add_process_set"], Exception)

# Removal: a removed set is refused; its ranks can form a new set (with a new number).
high_id = high.process_set_id
check("remove_process_set", hvd.remove_process_set(high), True)
raises("a removed set", lambda: hvd.allreduce(torch.zeros(1), process_set=high), ["add_process_set"])
again = hvd.add_process_set([size - 1])
check("a set added again gets a new number", again.process_set_id > high_id, True)
if again.included():
    check("allreduce on the set added again", hvd.allreduce(torch.tensor([3.0]), op=hvd.Sum, process_set=again),
          torch.tensor([3.0]))
hvd.remove_process_set(again)
hvd.remove_process_set(low)
if ends is not None:
    hvd.remove_process_set(ends)
check("allreduce over every worker at the end", hvd.allreduce(torch.tensor([1]), op=hvd.Sum), torch.tensor([size]))
print("process_sets: %d checks passed on worker %d of %d" % (job_checks.passed, rank, size), flush=True)
hvd.shutdown()
