"""Data for the DLRM example: a synthetic generator shaped like Criteo's Kaggle click logs, and Criteo's
TSV files themselves.

A batch is (dense [n, 13] float32, ids [n, 26] int64, labels [n] float32): 13 numeric fields as
log(1 + count), and one id per categorical field, in [0, cardinality of the field).

The synthetic rows draw each field's id from a Zipf law (exponent 1.1 by default) over the field's
Criteo Kaggle cardinality (times --scale), and the click from a fixed teacher model, so the best AUC any
model can reach (the Bayes AUC: the teacher's own probabilities ranked against the labels) is known. The
teacher's logit is a bias, a linear function of the dense fields, an effect per id and a dot product
of small vectors for a few pairs of fields (what DLRM's interaction layer can express). Only each
field's most frequent ids carry signal, as in click logs, whose long tail of rare values says little; so
a model that sees enough rows can come close to the Bayes AUC.

With drift_rows = D > 0 the ids are a stream, as hashed features of new ads and users are: the id of
each (field, rank) is replaced by a fresh 40-bit hashed id every D rows, at a phase of its own, so new
ids keep arriving and an id stops being seen about D rows after it appeared; the teacher's effects stay
with the rank, so the model must learn each new id again. The held-out rows are drawn as of the end of
training (their ids are the ones the last training rows use). D = 0 gives the rows above.

Everything is a function of the seed:
the same seed gives the same rows in every process (numpy's exp and power, which may differ in their
last bit between CPUs, could move a rare row).
"""
import math
import sys

import numpy as np

NUMERIC, CATEGORICAL = 13, 26
# Rows per categorical field of Criteo's Kaggle display-advertising data (C1..C26), about 33.8 M in all.
CRITEO_KAGGLE_CARDINALITIES = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
                               27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
# The teacher gives signal to each field's HEAD most frequent ids; the rest is noise-free tail.
HEAD = 16
SMALLEST = 1000
PAIR_DIM = 2
CHUNK = 1 << 16  # rows generated per seeded chunk, so that a row's values do not depend on the count asked for
HASHED_ID_BITS = 40  # zps.torch.EmbeddingBags takes ids in [0, 2^40)


def cardinalities(scale=1.0):
    """The Kaggle cardinalities times scale, for quick runs; no table shrinks below SMALLEST rows (nor
    grows), so the small fields keep their shape."""
    if not 0 < scale <= 1:
        raise ValueError("scale must be in (0, 1]")
    return tuple(min(c, max(SMALLEST, int(math.ceil(c * scale)))) for c in CRITEO_KAGGLE_CARDINALITIES)


class Teacher:
    """The fixed model that makes the synthetic clicks (a function of the seed)."""

    def __init__(self, cards, seed):
        rng = np.random.RandomState([seed, 0x7EAC])
        self.cards = cards
        self.bias = -1.5
        self.dense_mu = 0.5 + 2.0 * rng.rand(NUMERIC)
        self.dense_sigma = 0.5 + rng.rand(NUMERIC)
        self.dense_weight = 0.2 * rng.randn(NUMERIC)
        self.heads = [min(c, HEAD) for c in cards]
        self.effects = [0.4 * rng.randn(h) for h in self.heads]
        self.vectors = [0.5 * rng.randn(h, PAIR_DIM) for h in self.heads]
        # Six pairs of distinct fields whose head ids interact.
        self.pairs = []
        while len(self.pairs) < 6:
            f, g = sorted(rng.choice(CATEGORICAL, 2, replace=False))
            if (f, g) not in self.pairs:
                self.pairs.append((f, g))
        # Rank r of field f is id (r * step + offset) mod cardinality: frequent ids are spread over the
        # table, as hashed values are, not packed at its start.
        self.steps, self.offsets = [], []
        for c in cards:
            step = int(rng.randint(1, 1 << 30)) | 1
            while math.gcd(step, c) != 1:
                step += 2
            self.steps.append(step % c if c > 1 else 0)
            self.offsets.append(int(rng.randint(0, c)))

    def logits(self, dense_log, ranks):
        """The teacher's logit per row, from the dense fields (log(1 + count)) and each field's rank."""
        z = self.bias + ((dense_log - self.dense_mu) / self.dense_sigma) @ self.dense_weight
        head = [np.minimum(ranks[:, f], self.heads[f] - 1) for f in range(CATEGORICAL)]
        in_head = [ranks[:, f] < self.heads[f] for f in range(CATEGORICAL)]
        for f in range(CATEGORICAL):
            z = z + np.where(in_head[f], self.effects[f][head[f]], 0.0)
        for f, g in self.pairs:
            dot = (self.vectors[f][head[f]] * self.vectors[g][head[g]]).sum(axis=1)
            z = z + np.where(in_head[f] & in_head[g], dot, 0.0)
        return z

    def ids(self, ranks):
        out = np.empty_like(ranks)
        for f, c in enumerate(self.cards):
            out[:, f] = (ranks[:, f] * self.steps[f] + self.offsets[f]) % c
        return out


def splitmix64(x):
    """SplitMix64's finaliser on uint64 values (wrapping around, as the C original does)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _hash(*parts):
    """A uint64 hash of integer arrays (broadcast together) and ints."""
    h = np.zeros(np.broadcast(*[np.asarray(p) for p in parts]).shape, dtype=np.uint64)
    for p in parts:
        h = splitmix64(h ^ np.asarray(p).astype(np.uint64))
    return h


def drifting_ids(seed, ranks, times, drift_rows):
    """The ids of `ranks` [n, fields] for rows at `times` [n] (row positions in the stream): (field, rank)
    has generation (time + phase) // drift_rows, with a phase in [0, drift_rows) of its own, and one hashed
    id per generation."""
    fields = np.arange(ranks.shape[1], dtype=np.int64)[None, :]
    phase = (_hash(seed, 0x5EED, fields, ranks) % np.uint64(drift_rows)).astype(np.int64)
    generation = (np.asarray(times, dtype=np.int64)[:, None] + phase) // drift_rows
    ids = _hash(seed, 0x1D5, fields, ranks, generation) >> np.uint64(64 - HASHED_ID_BITS)
    return ids.astype(np.int64)


def zipf_ranks(rng, n, cardinality, exponent):
    """n ranks in [0, cardinality) with P(rank k) about proportional to (k + 1)^-exponent: the inverse CDF
    of the continuous power law on [1, cardinality + 1), rounded down."""
    u = rng.rand(n)
    if abs(exponent - 1.0) < 1e-9:
        x = np.exp(u * math.log(cardinality + 1.0))
    else:
        a = 1.0 - exponent
        top = (cardinality + 1.0) ** a
        x = (1.0 + u * (top - 1.0)) ** (1.0 / a)
    return np.minimum(np.floor(x).astype(np.int64) - 1, cardinality - 1).clip(min=0)


class Synthetic:
    """Rows of the synthetic data set `seed`: row i is the same whatever range it is generated in."""

    def __init__(self, seed=1, scale=1.0, exponent=1.1, drift_rows=0, held_out_at=0):
        if not exponent > 0:
            raise ValueError("the Zipf exponent must be > 0")
        if drift_rows < 0 or held_out_at < 0:
            raise ValueError("drift_rows and held_out_at must be >= 0")
        self.seed, self.exponent = int(seed), float(exponent)
        self.drift_rows, self.held_out_at = int(drift_rows), int(held_out_at)
        self.cards = cardinalities(scale)
        self.teacher = Teacher(self.cards, self.seed)

    def _chunk(self, stream, index):
        rng = np.random.RandomState([self.seed, stream, index])
        t = self.teacher
        counts = np.floor(np.exp(t.dense_mu + t.dense_sigma * rng.randn(CHUNK, NUMERIC)))
        dense = np.log1p(counts)
        ranks = np.stack([zipf_ranks(rng, CHUNK, c, self.exponent) for c in self.cards], axis=1)
        logits = t.logits(dense, ranks)
        labels = (rng.rand(CHUNK) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
        if self.drift_rows == 0:
            ids = t.ids(ranks)
        else:
            # Training rows drift with their position; held-out rows are all drawn at held_out_at.
            times = index * CHUNK + np.arange(CHUNK) if stream == 0 else np.full(CHUNK, self.held_out_at)
            ids = drifting_ids(self.seed, ranks, times, self.drift_rows)
        return dense.astype(np.float32), ids, labels, logits

    def rows(self, first, count, stream=0):
        """(dense, ids, labels, teacher logits) of rows [first, first + count) of stream 0 (training) or
        1 (held out)."""
        parts = []
        for index in range(first // CHUNK, (first + count + CHUNK - 1) // CHUNK):
            lo, hi = max(first - index * CHUNK, 0), min(first + count - index * CHUNK, CHUNK)
            parts.append([a[lo:hi] for a in self._chunk(stream, index)])
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))


def read_criteo(path, cards):
    """Criteo's TSV ("label<TAB>I1..I13<TAB>C1..C26") as (dense, ids, labels): counts as log(1 + max(x, 0))
    with an empty field as 0, categorical values hashed as train_ctr.py hashes them, modulo the field's
    cardinality (as DLRM's --max-ind-range does)."""
    from train_ctr import read_criteo as read_tsv
    labels, numeric, values = read_tsv(path)
    dense = np.log1p(np.nan_to_num(numeric, nan=0.0).clip(min=0)).astype(np.float32)
    ids = values % np.array(cards, dtype=np.int64)
    return dense, ids, labels


def load(data, seed, scale, exponent, train_rows, test_rows, drift_rows=0):
    """(train, test, bayes_auc_or_None): train and test are (dense, ids, labels) numpy arrays. data is
    'synthetic' or 'criteo:PATH' (split as `zps train --split random --seed S` splits it). drift_rows > 0
    (synthetic only): ids drift, the held-out rows as of the end of training."""
    from train_ctr import roc_auc, zps_split
    if drift_rows and data != "synthetic":
        sys.exit("drifting ids are a property of the synthetic data only")
    if data == "synthetic":
        gen = Synthetic(seed, scale, exponent, drift_rows, held_out_at=max(train_rows - 1, 0))
        train = gen.rows(0, train_rows, stream=0)[:3]
        dense, ids, labels, logits = gen.rows(0, test_rows, stream=1)
        return train, (dense, ids, labels), roc_auc(logits, labels)
    if data.startswith("criteo:"):
        dense, ids, labels = read_criteo(data[len("criteo:"):], cardinalities(scale))
        train, test = zps_split(len(labels), seed)
        return (dense[train], ids[train], labels[train]), (dense[test], ids[test], labels[test]), None
    sys.exit(f"unknown data '{data}' (synthetic or criteo:PATH)")
