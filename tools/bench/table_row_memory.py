#!/usr/bin/env python3
"""Bytes a server holds per embedding row, measured: one worker creates ROWS rows (dim DIM, float32) in a
table with the server optimizer OPTIMIZER and reads the server's resident memory before (after the
table's first row) and after.

    for o in sgd momentum adagrad adam; do
      zps launch --servers 1 --workers 1 -- python3 tools/bench/table_row_memory.py $o [ROWS] [DIM]
    done

The server is this worker's sibling under zps launch (the process with DMLC_ROLE=server). Prints one
line: resident bytes per row, and the bytes per row the server charges to its memory
budget ((1 + state floats) x dim x 4 + 48).
"""
import os
import sys

import torch

import zps.torch as bps


def server_pid():
    parent = os.getppid()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"DMLC_ROLE=server" in env:
            return int(pid)
    sys.exit("table_row_memory.py: no server among this worker's siblings; run it under zps launch --servers 1")


def resident_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    state_floats = {"sgd": 0, "momentum": 1, "adagrad": 1, "adam": 2}
    if not 2 <= len(sys.argv) <= 4 or sys.argv[1] not in state_floats:
        print("usage: table_row_memory.py sgd|momentum|adagrad|adam [ROWS] [DIM]", file=sys.stderr)
        sys.exit(2)
    optimizer = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 3 << 20
    dim = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    bps.init()
    pid = server_pid()
    table = bps.Embedding(dim, name="memory", optimizer=optimizer, lr=0.1)
    with torch.no_grad():
        table(torch.tensor([rows]))
        before = resident_bytes(pid)
        for first in range(0, rows, 1 << 18):
            table(torch.arange(first, min(first + (1 << 18), rows)))
    after = resident_bytes(pid)
    print(f"{optimizer} dim {dim}: {(after - before) / rows:.1f} resident bytes per row ({rows} rows), "
          f"{(1 + state_floats[optimizer]) * dim * 4 + 48} charged to the budget", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
