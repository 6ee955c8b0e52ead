"""DLRM (Naumov et al., 2019) as the DLRM example and its PyTorch reference run it: a bottom MLP for the 13
dense fields, one embedding row per categorical field, the pairwise dot products of all 27 vectors, and a
top MLP to the click logit.

The embedding tables are a module given to the model: zps.torch.EmbeddingBags (rows on the servers) in
train_dlrm.py, TorchTables (torch.nn.EmbeddingBag per field, sparse gradients) in the plain-PyTorch
reference. Either maps ids [batch, 26] to [batch, 26, dim].
"""
import time

import numpy as np
import torch
import torch.nn as nn

BOTTOM = (512, 256, 64)  # then the embedding dimension
TOP = (512, 256)  # then 1


def mlp(sizes, last_relu):
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(n_in, n_out)
        # DLRM's initialisation: normal weights scaled by fan-in and fan-out, normal biases.
        nn.init.normal_(linear.weight, 0.0, (2.0 / (n_in + n_out)) ** 0.5)
        nn.init.normal_(linear.bias, 0.0, (1.0 / n_out) ** 0.5)
        layers.append(linear)
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, tables, num_dense, num_tables, dim):
        super().__init__()
        self.tables = tables
        self.bottom = mlp((num_dense,) + BOTTOM + (dim,), last_relu=True)
        vectors = num_tables + 1
        self.pairs = vectors * (vectors - 1) // 2
        rows, cols = torch.tril_indices(vectors, vectors, offset=-1)
        self.register_buffer("pair_rows", rows, persistent=False)
        self.register_buffer("pair_cols", cols, persistent=False)
        self.top = mlp((dim + self.pairs,) + TOP + (1,), last_relu=False)

    def forward(self, dense, ids):
        x = self.bottom(dense)
        vectors = torch.cat([x.unsqueeze(1), self.tables(ids)], dim=1)  # [batch, 27, dim]
        dots = torch.bmm(vectors, vectors.transpose(1, 2))[:, self.pair_rows, self.pair_cols]
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)


class TorchTables(nn.Module):
    """One torch.nn.EmbeddingBag(sparse=True) per field, rows uniform in [-init_scale, init_scale] (the
    servers' initialiser), for the plain-PyTorch reference."""

    def __init__(self, cards, dim, init_scale=0.01):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(c, dim, mode="sum", sparse=True) for c in cards)
        for bag in self.bags:
            nn.init.uniform_(bag.weight, -init_scale, init_scale)

    def forward(self, ids):
        return torch.stack([bag(ids[:, t:t + 1]) for t, bag in enumerate(self.bags)], dim=1)


def train(model, optimizers, batch, steps, warmup, prefetch=None):
    """Runs `steps` steps of batch(step) -> (dense, ids, labels); returns the seconds the steps after the
    first `warmup` took (the first steps create rows and fill caches). prefetch, when given, is the
    tables module (EmbeddingBags): each step's forward starts the pull of the next step's rows right
    after its own lookup (EmbeddingBags.prefetch), so that the pull, and the work of starting it, overlap
    the rest of the step, and any wait of the forward for the last step's sums (overlap_forward)."""
    loss_fn = nn.BCEWithLogitsLoss()
    start = None
    upcoming = batch(0)
    following = None  # the next step's batch, while this step's forward runs

    def after_lookup(tables, inputs, output):
        if following is not None:
            tables.prefetch(following[1])
    hook = prefetch.register_forward_hook(after_lookup) if prefetch is not None else None
    try:
        for step in range(steps):
            if step == warmup:
                start = time.perf_counter()
            dense, ids, labels = upcoming
            following = batch(step + 1) if step + 1 < steps else None
            for opt in optimizers:
                opt.zero_grad()
            loss = loss_fn(model(dense, ids), labels)
            upcoming, following = following, None
            loss.backward()
            for opt in optimizers:
                opt.step()
        for opt in optimizers:
            if hasattr(opt, "finish_step"):
                opt.finish_step()  # DistributedOptimizer(overlap_forward=...): the last step's updates
    finally:
        if hook is not None:
            hook.remove()
    return time.perf_counter() - start if start is not None else float("nan")


def scores(model, dense, ids, chunk=4096):
    """The model's logits for held-out rows (numpy arrays), without gradients."""
    model.eval()
    with torch.no_grad():
        out = [model(torch.from_numpy(dense[i:i + chunk]), torch.from_numpy(ids[i:i + chunk]))
               for i in range(0, len(dense), chunk)]
    model.train()
    return torch.cat(out).numpy() if out else np.zeros(0, np.float32)


def batches(train_set, rank, size, batch_size):
    """batch(step): worker `rank`'s slice of global batch `step` (size x batch_size rows, in order,
    wrapping around the training rows)."""
    dense, ids, labels = train_set

    def batch(step):
        rows = (step * size * batch_size + rank * batch_size + np.arange(batch_size)) % len(labels)
        return torch.from_numpy(dense[rows]), torch.from_numpy(ids[rows]), torch.from_numpy(labels[rows])
    return batch
