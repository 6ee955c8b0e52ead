"""horovod.torch as zps.torch (tests only)."""
from zps.torch import *  # noqa: F401,F403
from zps.torch import (Adasum, Average, Compression, DistributedOptimizer, HorovodInternalError, Max, Min,  # noqa
                       Product, Sum, SyncBatchNorm, ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled,
                       global_process_set, init, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                       nccl_built, rank, rocm_built, shutdown, size, start_timeline, stop_timeline)
