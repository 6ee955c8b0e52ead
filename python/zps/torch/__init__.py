"""zps.torch: the PyTorch API of BytePS (`byteps.torch`) and Horovod (`horovod.torch`) on zps.

    import zps.torch as bps
    bps.init()
    optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)

Workers run the script with the DMLC environment (`zps launch ... -- python3 train.py` sets it).
"""
from zps._capi import library
from zps.errors import ZpsError, ZpsInvalidArgument, ZpsJobAborted, ZpsTimeout
from zps.torch import _runtime
from zps.torch._runtime import ZpsNotInitialized
from zps.torch.broadcast import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from zps.torch.compression import Compression
from zps.torch.embedding import Embedding
from zps.torch.ops import (Average, Sum, allreduce, allreduce_, allreduce_async, allreduce_async_, broadcast,
                           broadcast_, broadcast_async_, poll, push_pull, push_pull_async, push_pull_async_inplace,
                           push_pull_inplace, synchronize)
from zps.torch.optimizer import DistributedOptimizer

library()  # a missing libzps_c.so fails the import, saying where it looked


def init():
    """Joins the job described by the DMLC environment (blocks until every node registered)."""
    _runtime.start()


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


def barrier():
    """Waits until every worker reached this barrier."""
    _runtime.runtime("barrier").worker.barrier()


def traffic():
    """Bytes pushed and pulled by this process: tensor bytes and the network bytes they took (a dict)."""
    return _runtime.runtime("traffic").worker.traffic()


def report_progress(step, loss, samples_per_sec=0.0, epoch=0, epochs=0):
    """Shows the training's progress in zps status, the dashboard and /metrics."""
    _runtime.runtime("report_progress").worker.report_progress(step, float(loss), float(samples_per_sec), epoch, epochs)
