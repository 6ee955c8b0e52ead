"""zps.torch: the PyTorch API of BytePS (`byteps.torch`) and Horovod (`horovod.torch`) on zps.

    import zps.torch as bps
    bps.init()
    optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)

Workers run the script with the DMLC environment (`zps launch ... -- python3 train.py` sets it).
"""
import torch

from zps._capi import library
from zps.errors import ZpsError, ZpsInvalidArgument, ZpsJobAborted, ZpsTimeout
from zps.torch import _runtime
from zps.torch._runtime import ZpsNotInitialized
from zps.torch.broadcast import (allgather_object, broadcast, broadcast_, broadcast_async, broadcast_async_,
                                 broadcast_object, broadcast_optimizer_state, broadcast_parameters)
from zps.torch.compression import Compression, Compressor
from zps.torch.embedding import Embedding
from zps.torch.embedding_bag import EmbeddingBags
from zps.torch.gather_scatter import (allgather, allgather_async, alltoall, alltoall_async, grouped_allgather,
                                     grouped_allgather_async, grouped_reducescatter, grouped_reducescatter_async,
                                     reducescatter, reducescatter_async)
from zps.torch.ops import (Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set, allreduce, allreduce_,
                           allreduce_async, allreduce_async_, global_process_set, grouped_allreduce, grouped_allreduce_,
                           grouped_allreduce_async, grouped_allreduce_async_, poll, push_pull, push_pull_async,
                           push_pull_async_inplace, push_pull_inplace, remove_process_set, sparse_allreduce_async,
                           synchronize)
from zps.torch.join import join
from zps.torch.optimizer import DistributedOptimizer
from zps.torch.sync_batch_norm import SyncBatchNorm

# Horovod's name for an error of a collective operation that the job cannot recover from.
HorovodInternalError = ZpsError

library()  # a missing libzps_c.so fails the import, saying where it looked


def init(comm=None, process_sets=None):
    """Joins the job described by the DMLC environment (blocks until every node registered). comm
    (Horovod's MPI communicator) is accepted and ignored. process_sets: ProcessSets (or lists of ranks)
    to add at once, as add_process_set does; every worker passes the same."""
    _runtime.start()
    if process_sets is not None and process_sets != "dynamic":
        for ps in process_sets:
            add_process_set(ps)


def shutdown():
    """Leaves the job: waits until every worker finished. Raises ZpsError when the job failed elsewhere."""
    _runtime.stop()


def is_initialized():
    rt = _runtime._runtime
    return rt is not None and not rt.finished


def rank():
    return _runtime.runtime("rank").rank


def size():
    return _runtime.runtime("size").size


def local_rank():
    return _runtime.runtime("local_rank").local_rank


def local_size():
    return _runtime.runtime("local_size").local_size


def declare(name):
    """Accepted for BytePS scripts; zps declares a name on its first use."""


def barrier(process_set=None):
    """Waits until every worker (of the process set) reached this barrier."""
    if process_set is None or process_set is global_process_set:
        _runtime.runtime("barrier").worker.barrier()
        return
    # A set's members only: a one-element sum over them, which completes when the last one arrives.
    allreduce(torch.zeros(1, dtype=torch.int32), op=Sum, name="zps.barrier", process_set=process_set)


def traffic():
    """Bytes pushed and pulled by this process: tensor bytes and the network bytes they took (a dict)."""
    return _runtime.runtime("traffic").worker.traffic()


def report_progress(step, loss, samples_per_sec=0.0, epoch=0, epochs=0):
    """Shows the training's progress in zps status, the dashboard and /metrics."""
    _runtime.runtime("report_progress").worker.report_progress(step, float(loss), float(samples_per_sec), epoch, epochs)


def is_homogeneous():
    """True: every node runs the same number of local ranks (zps launches them so)."""
    return True


def cross_rank():
    """This node's rank among the nodes."""
    return _runtime.runtime("cross_rank").worker.rank()


def cross_size():
    return _runtime.runtime("cross_size").worker.size()


# Horovod's build queries: zps.torch runs on zps's servers, not on MPI, Gloo, NCCL, DDL or oneCCL.
def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    return False


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Accepted for Horovod scripts; zps traces with ZPS_TRACE (docs/observability.md) instead."""


def stop_timeline():
    """Accepted for Horovod scripts (see start_timeline)."""
