#!/usr/bin/env python3
"""examples/torch/train_dlrm.py's training with EmbeddingBags.prefetch switched on and off every --block
steps in one job, so that both see the same load on a shared machine (runs minutes apart do not):

    zps launch --servers 2 --workers 2 -- python3 tools/bench/dlrm_prefetch_ab.py --scale 0.01 --steps 400

The same model, data and arguments as train_dlrm.py (its flags; --prefetch is what this switches).
Worker 0 prints each block's steps per second and the median over the blocks of each kind, the
median of the ratio of each prefetched block to the plain blocks beside it, and the milliseconds per
step each forward waited for its rows (a pull, or the prefetch's answer). The first block of each kind
(rows being created) is left out of the medians.
"""
import os
import statistics
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
import zps.torch as bps  # noqa: E402
from dlrm_data import CATEGORICAL, NUMERIC, load  # noqa: E402
from dlrm_model import DLRM, batches  # noqa: E402
import train_dlrm  # noqa: E402


def main():
    argv = sys.argv[1:]
    block = 20
    if "--block" in argv:
        i = argv.index("--block")
        block = int(argv[i + 1])
        del argv[i:i + 2]
    args = train_dlrm.parse_args(argv)
    bps.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    rank, size = bps.rank(), bps.size()
    train_set, _, _ = load(args.data, args.seed, args.scale, args.zipf, args.steps * size * args.batch_size, 1)
    tables = bps.EmbeddingBags(CATEGORICAL, args.embedding_dim, name="dlrm", optimizer="adagrad", lr=args.table_lr,
                               initial_accumulator=args.table_accumulator, eps=1e-8)
    model = DLRM(tables, NUMERIC, CATEGORICAL, args.embedding_dim)
    optimizer = bps.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=args.lr),
                                         named_parameters=model.named_parameters())
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    # The time each step's forward waits for its rows (a pull, or the prefetch's answer): what a
    # prefetch can save, seen apart from the MLPs' arithmetic, whose time swings with the machine's load.
    row_wait = [0.0]
    lookup = tables.table._lookup

    def timed_lookup(keys):
        t0 = time.perf_counter()
        try:
            return lookup(keys)
        finally:
            row_wait[0] += time.perf_counter() - t0
    tables.table._lookup = timed_lookup
    waits = {0: [], 1: []}
    batch = batches(train_set, rank, size, args.batch_size)
    loss_fn = nn.BCEWithLogitsLoss()
    rates = {0: [], 1: []}
    upcoming = batch(0)
    bps.barrier()
    start = time.perf_counter()
    for step in range(args.steps):
        prefetching = (step // block) % 2  # blocks 0, 2, 4, ... plain; 1, 3, 5, ... prefetched
        dense, ids, labels = upcoming
        optimizer.zero_grad()
        loss = loss_fn(model(dense, ids), labels)
        if step + 1 < args.steps:
            upcoming = batch(step + 1)
            # The last step of a prefetched block prefetches nothing: the next block's first step pulls.
            if prefetching and (step + 1) % block != 0:
                tables.prefetch(upcoming[1])
        loss.backward()
        optimizer.step()
        if (step + 1) % block == 0:
            now = time.perf_counter()
            rates[prefetching].append(block / (now - start))
            waits[prefetching].append(1000 * row_wait[0] / block)
            start, row_wait[0] = now, 0.0
    if rank == 0:
        plain, prefetched = rates[0][1:], rates[1][1:]
        print("steps/s per block, plain: %s" % " ".join("%.2f" % r for r in rates[0]), flush=True)
        print("steps/s per block, prefetch: %s" % " ".join("%.2f" % r for r in rates[1]), flush=True)
        # Each prefetched block against the mean of the plain blocks before and after it.
        ratios = [p / ((rates[0][i] + rates[0][i + 1]) / 2)
                  for i, p in enumerate(rates[1]) if i + 1 < len(rates[0])][1:]
        print("median steps/s: plain %.2f, prefetch %.2f (%d blocks each of %d steps); prefetch / neighbours: "
              "median %.3f over %d blocks" % (statistics.median(plain), statistics.median(prefetched), len(plain),
                                               block, statistics.median(ratios), len(ratios)), flush=True)
        print("ms per step waiting for rows, plain: %s" % " ".join("%.2f" % w for w in waits[0]), flush=True)
        print("ms per step waiting for rows, prefetch: %s" % " ".join("%.2f" % w for w in waits[1]), flush=True)
        print("median ms per step waiting for rows: plain %.2f, prefetch %.2f"
              % (statistics.median(waits[0][1:]), statistics.median(waits[1][1:])), flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
