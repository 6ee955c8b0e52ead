"""barrier() beside operations in flight, and refusals, on worker nodes of several local ranks, with exact
values and times: run by each process of a `zps launch --workers 2 --local-size 2` job (ranks 0, 1 on node 0
and 2, 3 on node 1). A node's local ranks reduce each push-pull together, to its end, in one order; a barrier
is no such operation, so an async allreduce started before barrier() on one rank and after it on the others
(Horovod's duplicate-name test does this) completes on every rank in seconds instead of leaving the node's
local reduction waiting out its deadline. A refused call (a duplicate name in flight, on one rank only; a
shape that disagrees) fails at once and the next operation works. Prints one line per passed check and exits
1 on the first mismatch, naming it."""
import time

import torch

import job_checks
import zps.torch as hvd
from job_checks import check, raises
from zps.errors import ZpsInvalidArgument

hvd.init()
rank, size = hvd.rank(), hvd.size()
job_checks.rank = rank

job_checks.require_two_nodes_of_two(hvd)

# Each step must take seconds: a local reduction out of step would wait ZPS_REQUEST_TIMEOUT (20 s in ctest)
# and then end the node's local group.
SECONDS = 8.0


def timed(what, start):
    took = time.monotonic() - start
    check("%s took %.2f s (under %g s)" % (what, took, SECONDS), took < SECONDS, True)


# Rank 0 starts its allreduce before the barrier, the other ranks after it (Horovod's
# test_horovod_allreduce_duplicate_name_error); the pause lets rank 0's allreduce take its node's local
# reduction before rank 0's barrier, while its node peer (rank 1) is already in the barrier. A second call of
# the name while the first is in flight is refused on the rank that makes it only.
start = time.monotonic()
value = torch.full((17, 17), float(rank + 1))
handle = None
if rank == 0:
    handle = hvd.allreduce_async(value, name="early", op=hvd.Sum)
    time.sleep(0.5)
    raises("a second 'early' in flight on rank 0", lambda: hvd.allreduce_async(value, name="early"),
           ["'early' is already in flight"])
hvd.barrier()
if rank > 0:
    handle = hvd.allreduce_async(value, name="early", op=hvd.Sum)
    raises("a second 'early' in flight on rank %d" % rank, lambda: hvd.allreduce_async(value, name="early"),
           ["'early' is already in flight"])
hvd.barrier()
check("allreduce started before the barrier on rank 0, after it elsewhere", hvd.synchronize(handle),
      torch.full((17, 17), 10.0))
timed("the allreduce across the barriers", start)


# Horovod's test_barrier_with_multiple_collectives, with the nodes in opposite orders: node 0 (ranks 0, 1)
# starts four operations and then calls barrier(), node 1 (ranks 2, 3) calls barrier() first.
def start_four():
    return (hvd.broadcast_async(torch.full((3, 3), float(rank)), root_rank=2),
            hvd.allgather_async(torch.eye(5) * (rank + 1)),
            hvd.allgather_async(torch.zeros(rank + 1, 5)),
            hvd.allreduce_async(torch.eye(5) * (rank + 1), op=hvd.Sum))


start = time.monotonic()
if rank < 2:
    handles = start_four()
    time.sleep(0.5)
hvd.barrier()
if rank >= 2:
    handles = start_four()
bcast, gather1, gather2, summed = handles
check("allreduce in flight over a barrier", hvd.synchronize(summed), torch.eye(5) * 10)
check("broadcast in flight over a barrier", hvd.synchronize(bcast), torch.full((3, 3), 2.0))
check("allgather in flight over a barrier", hvd.synchronize(gather1),
      torch.cat([torch.eye(5) * (r + 1) for r in range(size)]))
check("allgather of first dimensions 1 to 4 in flight over a barrier", hvd.synchronize(gather2),
      torch.zeros(10, 5))
timed("four operations in flight over a barrier", start)

# A shape that disagrees on one local rank (rank 1, whose node peer is rank 0) is refused on every rank,
# naming both shapes; the name's next call works.
start = time.monotonic()
shape = (2, 3) if rank == 1 else (3, 2)
raises("allreduce with rank 1's shape differing", lambda: hvd.allreduce(torch.ones(shape), name="shaped", op=hvd.Sum),
       ["workers disagree", "rank 1", "[2, 3]", "[3, 2]"], ZpsInvalidArgument)
check("the next allreduce of 'shaped'", hvd.allreduce(torch.ones(3, 2) * (rank + 1), name="shaped", op=hvd.Sum),
      torch.full((3, 2), 10.0))
timed("the refused allreduce and the next one", start)

# Barriers with no operation between, after all of the above: the local ranks stay in step.
start = time.monotonic()
for _ in range(5):
    hvd.barrier()
check("allreduce over every process at the end", hvd.allreduce(torch.tensor([rank]), op=hvd.Sum), torch.tensor([6]))
timed("five barriers and an allreduce", start)
print("barrier_local: %d checks passed on worker %d of %d" % (job_checks.passed, rank, size), flush=True)
hvd.shutdown()
