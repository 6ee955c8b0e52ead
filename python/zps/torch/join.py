"""join and realign: agreements of every worker that carry no tensor of their own, through the
coordinator (coordinator.py) that orders every operation."""
import warnings

from zps.torch import coordinator
from zps.torch._runtime import runtime


def realign():
    """Waits until every worker called realign(); an operation another worker starts meanwhile raises
    there, naming the ranks already waiting. For a script (or a test suite) that catches an error which
    some workers raised half way through a sequence of operations: afterwards all are in step again."""
    runtime("realign").coordinator.run(coordinator.Op("realign", "realign", None, (), 0, None))


def join(device=-1):
    """This worker has no more data: it takes part in the other workers' allreduces with zeros until every
    worker called join(). Returns the rank that joined last (the same on every worker)."""
    rt = runtime("join")
    if rt.optimizers_without_join_steps:
        warnings.warn("zps.torch.join: %d DistributedOptimizer(s) were built without join_steps=True: their next "
                      "step on the other workers waits for this worker's gradients (up to ZPS_REQUEST_TIMEOUT); "
                      "build them with join_steps=True when workers have uneven data" %
                      rt.optimizers_without_join_steps)
    op = coordinator.Op("join", "join", None, (), 0, None)
    rt.coordinator.run(op)
    return op.result
