#!/usr/bin/env python3
"""The plain-PyTorch references of examples/torch/train_dlrm.py, for tools/bench/dlrm-compare.sh: the same
model (dlrm_model.py), data (dlrm_data.py), optimizers and global batch, with the tables in the process as
torch.nn.EmbeddingBag(sparse=True) per field.

  --system single   one process, every core (PyTorch's default threads), the global batch per step
  --system ddp      torch.distributed over Gloo (RANK, WORLD_SIZE, MASTER_ADDR/PORT as torchrun sets
                    them), one thread per process: the whole model in DistributedDataParallel, so the
                    dense gradients are allreduced and each replica's tables get the sparse gradients
                    allreduced (DDP handles sparse gradients over Gloo), as a user of PyTorch would

The training arguments are train_dlrm.py's (--workers says how many rows a global batch has for
--system single). Rank 0 prints one JSON line: samples/s after --warmup steps, AUC on the held-out rows,
and the Bayes AUC.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
from dlrm_data import CATEGORICAL, NUMERIC, cardinalities, load  # noqa: E402
from dlrm_model import DLRM, TorchTables, batches, scores, train  # noqa: E402
from train_ctr import roc_auc  # noqa: E402
import train_dlrm  # noqa: E402


def table(path):
    """Prints dlrm-compare.sh's table from its results (one JSON object per run and round)."""
    runs = [json.loads(line) for line in open(path) if line.strip()]
    by_round = {}
    for r in runs:
        by_round.setdefault(r["round"], {})[r["label"]] = r
    labels = sorted({r["label"] for r in runs}, key=["single", "ddp", "zps", "zps-full"].index)
    print("%-9s %6s %10s %8s %8s %12s %12s" % ("system", "rounds", "samples/s", "AUC", "Bayes", "vs single", "vs ddp"))
    for label in labels:
        mine = [r for r in runs if r["label"] == label]
        ratios = {}
        for ref in ("single", "ddp"):
            pairs = [rs[label]["samples_per_s"] / rs[ref]["samples_per_s"] for rs in by_round.values()
                     if label in rs and ref in rs]
            ratios[ref] = "%.2fx" % np.median(pairs) if pairs else "-"
        bayes = mine[0].get("bayes_auc")
        print("%-9s %6d %10.0f %8.4f %8s %12s %12s" % (
            label, len(mine), np.median([r["samples_per_s"] for r in mine]), np.median([r["auc"] for r in mine]),
            "%.4f" % bayes if bayes is not None else "-", ratios["single"], ratios["ddp"]))
    return 0 if runs else 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        sys.exit(table(sys.argv[2]))
    system_args = argparse.ArgumentParser(add_help=False)
    system_args.add_argument("--system", choices=("single", "ddp"), required=True)
    system_args.add_argument("--workers", type=int, default=2, help="--system single: workers of the zps run")
    mine, rest = system_args.parse_known_args()
    args = train_dlrm.parse_args(rest)
    torch.manual_seed(args.seed)
    if mine.system == "ddp":
        torch.distributed.init_process_group("gloo")
        rank, size = torch.distributed.get_rank(), torch.distributed.get_world_size()
        torch.set_num_threads(1)
        batch_size, ranks = args.batch_size, size
    else:
        rank, size = 0, 1
        batch_size, ranks = args.batch_size * mine.workers, mine.workers
    train_set, test_set, bayes_auc = load(args.data, args.seed, args.scale, args.zipf,
                                          args.steps * ranks * args.batch_size, args.test_rows)

    model = DLRM(TorchTables(cardinalities(args.scale), args.embedding_dim), NUMERIC, CATEGORICAL, args.embedding_dim)
    tables = list(model.tables.parameters())
    dense = [p for name, p in model.named_parameters() if not name.startswith("tables.")]
    if args.table_optimizer == "sgd":
        table_optimizer = torch.optim.SGD(tables, lr=args.table_lr)
    else:
        table_optimizer = torch.optim.Adagrad(tables, lr=args.table_lr, initial_accumulator_value=args.table_accumulator,
                                              eps=1e-8)
    optimizers = [torch.optim.Adam(dense, lr=args.lr), table_optimizer]
    if mine.system == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
        torch.distributed.barrier()
    seconds = train(model, optimizers, batches(train_set, rank, size, batch_size), args.steps, args.warmup)
    samples_per_s = (args.steps - args.warmup) * ranks * args.batch_size / seconds

    dense_test, ids_test, labels = test_set
    if rank == 0:
        auc = roc_auc(scores(model.module if mine.system == "ddp" else model, dense_test, ids_test), labels)
        print(json.dumps({"system": mine.system, "samples_per_s": samples_per_s, "auc": auc, "bayes_auc": bayes_auc,
                          "steps": args.steps, "workers": ranks, "batch_size": args.batch_size,
                          "scale": args.scale, "table_optimizer": args.table_optimizer,
                          "threads": torch.get_num_threads()}), flush=True)
    if mine.system == "ddp":
        torch.distributed.barrier()


if __name__ == "__main__":
    main()
