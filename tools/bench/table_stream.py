"""A stream of ever-new table ids through real servers: each step pulls a batch of ids never seen
before (64-bit hashes of a counter: hashed features, no vocabulary) and pushes a gradient for them,
so a table grows without end unless ZPS_TABLE_MEMORY_BYTES evicts (docs/tables.md).

    ZPS_TABLE_MEMORY_BYTES=33554432 build/bin/zps launch --servers 2 --workers 1 -- \\
        python3 tools/bench/table_stream.py --ids 2000000

Prints ids per second; each server logs at exit `param tables: R rows held, ..., C rows created,
E evicted` and exports zps_server_table_rows{table="stream"} and its created/evicted counters.
tools/bench/table_stream.sh runs it and checks the servers' counts against the budget.
"""
import argparse
import ctypes
import os
import sys
import time

import numpy as np

import zps

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
from dlrm_data import splitmix64  # noqa: E402


def hashed_ids(start, n):
    """splitmix64 of start .. start + n - 1: distinct 64-bit ids spread over the whole range."""
    return splitmix64(np.arange(start, start + n, dtype=np.uint64))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ids", type=int, default=1000000, help="distinct ids to push in all")
    p.add_argument("--batch", type=int, default=8192, help="ids per step")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--optimizer", default="adam", choices=["sgd", "momentum", "adam", "adagrad"])
    args = p.parse_args()
    if args.ids <= 0 or args.batch <= 0 or args.dim <= 0:
        print("table_stream: --ids, --batch and --dim must be positive", file=sys.stderr)
        return 2
    w = zps.Worker()
    table = w.declare_table("stream", args.dim, args.optimizer, 0.01, init_scale=0.05, seed=1)
    rows = np.empty((args.batch, args.dim), dtype=np.float32)
    grads = np.full((args.batch, args.dim), 0.001, dtype=np.float32)
    start = time.monotonic()
    pushed = 0
    step = 0
    while pushed < args.ids:
        n = min(args.batch, args.ids - pushed)
        keys = hashed_ids(w.rank() * (1 << 40) + pushed, n)
        keys_ptr = keys.ctypes.data_as(ctypes.c_void_p)
        w.wait(w.pull_rows(table, keys_ptr, n, rows.ctypes.data_as(ctypes.c_void_p)), 60000, "pull")
        w.wait(w.push_rows(table, keys_ptr, n, grads.ctypes.data_as(ctypes.c_void_p)), 60000, "push")
        pushed += n
        step += 1
        if step % 50 == 0:
            w.report_progress(step, 0.0, pushed / (time.monotonic() - start))
    seconds = time.monotonic() - start
    print("table_stream: worker %d pushed %d new ids in %.1f s: %.0f ids/s (dim %d, %s)" %
          (w.rank(), pushed, seconds, pushed / seconds, args.dim, args.optimizer), flush=True)
    code = w.finish()
    w.destroy()
    return code


if __name__ == "__main__":
    sys.exit(main())
