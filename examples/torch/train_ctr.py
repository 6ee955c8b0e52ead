#!/usr/bin/env python3
"""A click-through-rate model with zps.torch: embeddings on the servers, a dense MLP on the workers.

    zps launch --servers 2 --workers 2 -- python3 examples/torch/train_ctr.py
    zps launch --servers 2 --workers 2 -- python3 examples/torch/train_ctr.py --data criteo:train.txt

The 26 categorical fields of a Criteo-format row look up rows of one zps.torch.Embedding, a table
kept on the servers: forward pulls the batch's unique rows, backward pushes their gradients, and the
servers apply Adagrad to them. Its rows are never in a worker's memory, so the table can outgrow any
one machine. The 13 numeric fields and the embeddings feed an MLP trained data-parallel through
DistributedOptimizer. Each worker prints its loss per epoch and the test AUC at the end.

--data synthetic (the default) generates Criteo-like rows in memory; criteo:PATH reads Criteo's TSV
("label<TAB>I1..I13<TAB>C1..C26", empty fields missing). The train/test split is the one `zps train
--data criteo:PATH --split random --seed S` makes, so the two report AUC on the same test rows.
"""
import argparse
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import zps.torch as bps

NUMERIC, CATEGORICAL = 13, 26
MASK64 = (1 << 64) - 1


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="synthetic", help="synthetic or criteo:PATH")
    parser.add_argument("--rows", type=int, default=100000, help="rows of the synthetic data")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256, help="rows per worker per step")
    parser.add_argument("--lr", type=float, default=0.05, help="dense learning rate (SGD with momentum)")
    parser.add_argument("--table-lr", type=float, default=0.3, help="Adagrad learning rate of the embedding rows")
    parser.add_argument("--embedding-dim", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


# --- data -------------------------------------------------------------------------------------------

def synthetic_rows(rows, seed):
    """Criteo-like rows: (labels, counts [rows, 13], categorical values [rows, 26] as int64). Clicks
    follow a logistic function of the counts' logs and per-value effects, about 20% of rows."""
    rng = np.random.RandomState(seed)
    mu, sigma, w = 0.5 + 2.5 * rng.rand(NUMERIC), 0.5 + rng.rand(NUMERIC), 0.3 * rng.randn(NUMERIC)
    counts = np.floor(np.exp(mu + sigma * rng.randn(rows, NUMERIC)))
    logit = -1.3 + ((np.log1p(counts) - mu) * w).sum(axis=1)
    values = np.empty((rows, CATEGORICAL), dtype=np.int64)
    for f in range(CATEGORICAL):
        vocab = int(round(3 * (100 / 3) ** (f / (CATEGORICAL - 1))))
        effect = 0.4 / (1 + 0.5 * np.log10(vocab)) * rng.randn(vocab)
        v = np.minimum(vocab - 1, (rng.rand(rows) ** 2.5 * vocab).astype(np.int64))
        # A long tail of values seen about once, with no signal, as in click logs.
        tail = rng.rand(rows) < 0.05 + 0.1 * f / (CATEGORICAL - 1)
        logit += np.where(tail, 0, effect[v])
        v[tail] = vocab + rng.randint(0, 1 << 30, size=tail.sum())
        values[:, f] = v
    labels = (rng.rand(rows) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return labels, counts, values


def read_criteo(path):
    """Criteo's TSV as (labels, numeric values with NaN for an empty field, categorical values hashed
    to int64)."""
    labels, numeric, values = [], [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 1 + NUMERIC + CATEGORICAL or fields[0].strip() not in ("0", "1"):
                sys.exit(f"{path}:{number}: expected a 0/1 label and {NUMERIC + CATEGORICAL} tab-separated fields")
            labels.append(float(fields[0]))
            numeric.append([float(x) if x.strip() else np.nan for x in fields[1:1 + NUMERIC]])
            values.append([zlib.crc32(x.strip().encode()) for x in fields[1 + NUMERIC:]])
    return np.array(labels, np.float32), np.array(numeric, np.float64), np.array(values, np.int64)


def zps_split(rows, seed, test_fraction=0.2):
    """The rows `zps train --split random --seed S` holds out for testing and trains on (its
    seeded Fisher-Yates permutation, so both programs evaluate the same rows)."""
    def splitmix(x):
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
        return x ^ (x >> 31)

    state = splitmix(splitmix(splitmix(seed) ^ ((0x5917 + 0x632BE59BD9B4E019) & MASK64)))
    order = list(range(rows))
    for i in range(rows, 1, -1):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        j = ((z ^ (z >> 31)) * i) >> 64
        order[i - 1], order[j] = order[j], order[i - 1]
    n_test = min(int(round(rows * test_fraction)), rows - 1)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def load(args):
    if args.data == "synthetic":
        labels, numeric, values = synthetic_rows(args.rows, args.seed)
    elif args.data.startswith("criteo:"):
        labels, numeric, values = read_criteo(args.data[len("criteo:"):])
    else:
        sys.exit(f"unknown --data '{args.data}' (synthetic or criteo:PATH)")
    # Counts span orders of magnitude: their signed log, standardised with the train split's statistics.
    numeric = np.sign(numeric) * np.log1p(np.abs(numeric))
    train, test = zps_split(len(labels), args.seed)
    mean, std = np.nanmean(numeric[train], axis=0), np.nanstd(numeric[train], axis=0)
    std[~(std > 0)] = 1
    mean[np.isnan(mean)] = 0
    # A missing value becomes the train mean (0 once standardised), as in zps train.
    numeric = np.nan_to_num((numeric - mean) / std, nan=0.0).astype(np.float32)
    # One table for all fields: the field's number in the high bits keeps equal values of two fields apart.
    ids = (np.arange(CATEGORICAL, dtype=np.int64) << 40) | (values & ((1 << 40) - 1))

    def part(rows):
        return torch.from_numpy(numeric[rows]), torch.from_numpy(ids[rows]), torch.from_numpy(labels[rows])
    return part(train), part(test)


def roc_auc(scores, labels):
    """Area under the ROC curve (ties count one half), from the ranks of the scores."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    start = 0
    for end in np.append(np.flatnonzero(np.diff(sorted_scores)) + 1, len(scores)):
        ranks[order[start:end]] = (start + end + 1) / 2
        start = end
    positives = labels.sum()
    negatives = len(labels) - positives
    return (ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives)


# --- model ------------------------------------------------------------------------------------------

class CtrModel(nn.Module):
    def __init__(self, embedding_dim, hidden, table_lr):
        super().__init__()
        # Rows live on the servers (Adagrad there); not among parameters(), so the optimizer skips them.
        self.embedding = bps.Embedding(embedding_dim, name="ctr_embedding", optimizer="adagrad", lr=table_lr)
        self.mlp = nn.Sequential(nn.Linear(CATEGORICAL * embedding_dim + NUMERIC, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        # He for the ReLU layer, Glorot for the output, zero biases: the embedding rows start tiny, and
        # PyTorch's default (smaller) weights would shrink their first gradients, slowing them under
        # Adagrad. The same start as `zps train --model ctr`.
        nn.init.kaiming_normal_(self.mlp[0].weight, nonlinearity="relu")
        nn.init.xavier_normal_(self.mlp[2].weight)
        for layer in (self.mlp[0], self.mlp[2]):
            nn.init.zeros_(layer.bias)

    def forward(self, numeric, ids):
        rows = self.embedding(ids).flatten(start_dim=1)
        return self.mlp(torch.cat([rows, numeric], dim=1)).squeeze(1)


def main():
    args = parse_args()
    bps.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # workers on one machine share its cores

    (x_train, ids_train, y_train), (x_test, ids_test, y_test) = load(args)
    model = CtrModel(args.embedding_dim, args.hidden, args.table_lr)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * bps.size(), momentum=0.9)
    optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    bps.broadcast_parameters(model.state_dict(), root_rank=0)

    # Every worker takes the same number of steps (the embedding's rounds must line up): the global
    # batch is size() x batch-size rows of a shuffled epoch, and each worker takes its slice.
    global_batch = args.batch_size * bps.size()
    steps = len(y_train) // global_batch
    generator = torch.Generator().manual_seed(args.seed)
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(y_train), generator=generator)
        total = 0.0
        for step in range(steps):
            first = step * global_batch + bps.rank() * args.batch_size
            rows = order[first:first + args.batch_size]
            optimizer.zero_grad()
            loss = F.binary_cross_entropy_with_logits(model(x_train[rows], ids_train[rows]), y_train[rows])
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"Training. Epoch {epoch}, log loss: {total / max(steps, 1):.6f}, Worker: {bps.rank()}", flush=True)

    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(x_test[i:i + 4096], ids_test[i:i + 4096]) for i in range(0, len(y_test), 4096)])
    auc = roc_auc(scores.numpy(), y_test.numpy())
    print(f"Test AUC: {auc:.4f} ({len(y_test)} rows), Worker: {bps.rank()}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
