#!/usr/bin/env python3
"""Data-parallel linear regression with zps.torch, on generated data (no files needed).

    zps launch --servers 1 --workers 2 -- python3 examples/torch/train_regression.py

The data is y = X w + b + noise with 16 features of different scales, the same on every worker (a
seeded generator); each worker trains on its shard of every epoch, the gradients are averaged on the
zps servers (DistributedOptimizer), and each worker prints `Training. Epoch N, MSE loss: L, Worker: R`
per epoch, then the test MSE. The noise's variance (0.25) is the best MSE any model can reach.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import zps.torch as bps

NOISE_STD = 0.5


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64, help="rows per worker per step")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate of one worker (scaled by the worker count)")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def make_data(rows, features, seed):
    """Standardised features and targets of a known linear model, split 80/20."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(features, generator=g)
    scale = 0.5 + 2.5 * torch.rand(features, generator=g)
    offset = 4 * torch.randn(features, generator=g)
    z = torch.randn(rows, features, generator=g)
    y = 3 + z @ w + NOISE_STD * torch.randn(rows, generator=g)
    x = offset + scale * z
    n_test = rows // 5
    x_train, x_test = x[n_test:], x[:n_test]
    mean, std = x_train.mean(dim=0), x_train.std(dim=0)
    return ((x_train - mean) / std, y[n_test:]), ((x_test - mean) / std, y[:n_test])


def main():
    args = parse_args()
    bps.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # workers on one machine share its cores

    (x_train, y_train), (x_test, y_test) = make_data(args.rows, args.features, args.seed)
    train_set = TensorDataset(x_train, y_train)
    sampler = DistributedSampler(train_set, num_replicas=bps.size(), rank=bps.rank(), shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = nn.Linear(args.features, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * bps.size(), momentum=0.9)
    optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)

    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        total, rows = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(model(x).squeeze(1), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(x)
            rows += len(x)
        print(f"Training. Epoch {epoch}, MSE loss: {total / max(rows, 1):.6f}, Worker: {bps.rank()}", flush=True)

    with torch.no_grad():
        mse = F.mse_loss(model(x_test).squeeze(1), y_test).item()
    print(f"Test MSE: {mse:.4f} (noise floor {NOISE_STD ** 2:.4f}), Worker: {bps.rank()}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
