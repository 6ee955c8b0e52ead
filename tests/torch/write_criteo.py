"""Writes ROWS rows of examples/torch/train_ctr.py's synthetic data as a Criteo-format file (label, 13
integer counts, 26 categorical values as hex strings, tab-separated), so that `zps train --data
criteo:PATH` and train_ctr.py read the same rows.   Usage: write_criteo.py PATH ROWS [SEED]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
from train_ctr import synthetic_rows  # noqa: E402

path, rows = sys.argv[1], int(sys.argv[2])
labels, counts, values = synthetic_rows(rows, int(sys.argv[3]) if len(sys.argv) > 3 else 1)
with open(path, "w") as f:
    for label, count, value in zip(labels, counts.astype(int), values):
        f.write("%d\t%s\t%s\n" % (label, "\t".join(map(str, count)), "\t".join("%x" % v for v in value)))
print("write_criteo.py: %d rows, %.1f%% clicks, in %s" % (rows, 100 * labels.mean(), path))
