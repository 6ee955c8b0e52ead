#!/usr/bin/env python3
"""Data-parallel training of an MLP on the digits dataset (8x8 images, 10 classes) with zps.torch.

A BytePS script with its import changed: every worker trains on its own shard of each epoch, the
gradients are summed on the zps servers (DistributedOptimizer), and every worker ends with the same
weights. Run it on one machine with

    zps launch --servers 2 --workers 2 -- python3 examples/torch/train_digits.py

Each worker prints `Training. Epoch N, loss: L, Worker: R` per epoch, then its test accuracy. The
data is digits.csv (1797 rows of 64 pixel values and the digit) from tools/fetch-datasets.sh, looked
up in --data-dir, $ZPS_DATA_DIR, then data/ at the repository root.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import zps.torch as bps


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None, help="folder of digits.csv")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="rows per worker per step")
    parser.add_argument("--lr", type=float, default=0.005, help="learning rate of one worker (scaled by the worker count)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--label-smoothing", type=float, default=0.1,
                        help="share of each target spread over the other classes (keeps the weights from "
                             "fitting the training rows exactly)")
    parser.add_argument("--seed", type=int, default=1, help="the train/test split and the initial weights")
    parser.add_argument("--fp16", action="store_true", help="send gradients as float16 (Compression.fp16)")
    return parser.parse_args()


def find_digits(data_dir):
    script_dir = os.path.dirname(os.path.abspath(__file__))
    for folder in (data_dir, os.environ.get("ZPS_DATA_DIR"), os.path.join(script_dir, "..", "..", "data"), "data"):
        if folder and os.path.isfile(os.path.join(folder, "digits.csv")):
            return os.path.join(folder, "digits.csv")
    sys.exit("train_digits.py: digits.csv not found in --data-dir, $ZPS_DATA_DIR or data/; "
             "run tools/fetch-datasets.sh DIR to fetch it")


def load_split(path, seed, test_fraction=0.2):
    """The same train/test split on every worker (a seeded permutation), standardised with the
    train split's mean and deviation."""
    table = np.loadtxt(path, delimiter=",", dtype=np.float32)
    x, y = table[:, :-1], table[:, -1].astype(np.int64)
    order = np.random.RandomState(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    std[std == 0] = 1
    x = (x - mean) / std
    return (torch.from_numpy(x[train]), torch.from_numpy(y[train])), (torch.from_numpy(x[test]), torch.from_numpy(y[test]))


class Net(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.out(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main():
    args = parse_args()
    bps.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one core per worker: workers on one machine share its cores

    (x_train, y_train), (x_test, y_test) = load_split(find_digits(args.data_dir), args.seed)
    train_set = TensorDataset(x_train, y_train)
    # Each worker sees its own 1/size() of every epoch.
    sampler = DistributedSampler(train_set, num_replicas=bps.size(), rank=bps.rank(), shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = Net(args.hidden)
    # The global batch is size() times larger, so is the learning rate.
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * bps.size())
    compression = bps.Compression.fp16 if args.fp16 else bps.Compression.none
    optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), compression=compression)
    # The learning rate falls to 0 along a cosine over the epochs: the last epochs settle instead of
    # jumping between minima, so the accuracy no longer depends on which one the last step hit (one
    # seed or CPU's rounding against another's).
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    # Every worker starts from rank 0's weights and optimizer state.
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)

    for epoch in range(1, args.epochs + 1):
        model.train()
        sampler.set_epoch(epoch)
        total, rows = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y, label_smoothing=args.label_smoothing)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(x)
            rows += len(x)
        schedule.step()
        print(f"Training. Epoch {epoch}, loss: {total / max(rows, 1):.6f}, Worker: {bps.rank()}", flush=True)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    print(f"Test accuracy: {accuracy:.4f} ({len(x_test)} rows), Worker: {bps.rank()}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
