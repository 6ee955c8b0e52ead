"""Compares the weights that tests/torch/ddp_job.py wrote under two backends: every rank holds the same
weights as rank 0 of its backend, and zps's equal Gloo's within REL (relative, per tensor, in norm).
Usage: ddp_compare.py OUT WORKERS [REL]. Prints each tensor's difference; exits 1 beyond the bound."""
import sys

import torch

out, workers = sys.argv[1], int(sys.argv[2])
rel = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
load = lambda backend, rank: torch.load("%s/%s-%d.pt" % (out, backend, rank))  # noqa: E731
failed = False
for backend in ("zps", "gloo"):
    first = load(backend, 0)
    for rank in range(1, workers):
        for name, value in load(backend, rank).items():
            if not torch.equal(value, first[name]):
                print("FAILED: %s: rank %d's %s differs from rank 0's" % (backend, rank, name))
                failed = True
zps, gloo = load("zps", 0), load("gloo", 0)
for name, want in gloo.items():
    diff = ((zps[name] - want).norm() / want.norm()).item()
    ok = diff <= rel
    failed |= not ok
    print("%s: %s relative difference %.3g (bound %g)" % ("ok" if ok else "FAILED", name, diff, rel))
sys.exit(1 if failed else 0)
