#!/usr/bin/env python3
"""DLRM on zps: 26 embedding tables held by the servers, the MLPs trained data-parallel on the workers.

    zps launch --servers 2 --workers 2 -- python3 examples/torch/train_dlrm.py
    zps launch --servers 2 --workers 2 -- python3 examples/torch/train_dlrm.py --scale 0.01 --steps 200
    zps launch --servers 2 --workers 2 -- python3 examples/torch/train_dlrm.py --data criteo:train.txt

The model (dlrm_model.py): 13 dense fields through a bottom MLP 512-256-64-16, 26 categorical fields
with the Criteo Kaggle cardinalities (33.8 M rows in all; --scale shrinks the large ones for quick
runs) looked up in zps.torch.EmbeddingBags (dim 16), the dot products of every pair of the 27 vectors,
and a top MLP 512-256-1. The tables' rows live on the servers, created on first touch and updated there
by Adagrad (or sgd: --table-optimizer); a step pulls the batch's distinct rows of all 26 tables in one
message per server and pushes their gradients in one. The MLPs train with Adam through DistributedOptimizer,
which leaves each layer's update to the next forward (overlap_forward; --overlap-forward 0 waits in
step()) where the job spans hosts: the same weights, the bottom MLP's forward overlapping the top's sums.

Every worker takes --batch-size rows per step (the global batch is workers x batch size) for --steps
steps, in order, over --data: synthetic (dlrm_data.py: Zipf ids, a known teacher) or criteo:PATH
(Criteo's TSV). Then each worker prints the AUC on held-out rows (and, for synthetic data, the Bayes AUC
of the same rows) and the samples per second of the job (after --warmup steps).

--row-cache-steps K > 0 serves each pulled row from the worker's cache for up to K steps (at most
--row-cache-rows rows; zps/torch/row_cache.py); gradients are still pushed every step, unless
--row-cache-write-back 1 (sgd tables): then this worker's gradients move the cache's copies and the cache
holds them until a row is refreshed or evicted, and pushes what it still holds after the last step
(before the held-out rows are scored). Worker 0 prints
the embedding bytes per training sample: from the workers' own row counts, and, when ZPS_METRICS_PORT
is set, from the servers' byte counters (their pushed and pulled bytes during training less the MLP
gradients' exact share).

Each step starts the pull of the next step's rows right after its own lookup (EmbeddingBags.prefetch;
--prefetch 0 pulls them in each forward instead): the servers answer it once every worker's gradients
of the step are applied, so it travels during the MLPs' backward and the dense gradients' sums; the
rows are the same bits (with async tables, at most one step older).
"""
import argparse
import hashlib
import json
import os

import numpy as np
import torch

import zps.torch as bps
from dlrm_data import CATEGORICAL, NUMERIC, load
from dlrm_model import DLRM, batches, scores, train
from server_counters import server_bytes
from train_ctr import roc_auc


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="synthetic", help="synthetic or criteo:PATH")
    p.add_argument("--scale", type=float, default=1.0,
                   help="tables times this many rows (no table below 1000 rows); 1: Criteo Kaggle's")
    p.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the synthetic ids")
    p.add_argument("--drift-rows", type=int, default=0,
                   help="synthetic ids as a stream: each id is replaced by a new hashed id every this many rows "
                        "(0: fixed ids); the held-out rows are drawn as of the end of training")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the samples/s")
    p.add_argument("--batch-size", type=int, default=512, help="rows per worker per step")
    p.add_argument("--test-rows", type=int, default=100000, help="held-out synthetic rows")
    p.add_argument("--embedding-dim", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate for the MLPs")
    p.add_argument("--table-lr", type=float, default=None,
                   help="the tables' learning rate (default: 0.2 with adagrad, 16 with sgd)")
    p.add_argument("--table-optimizer", choices=("adagrad", "sgd"), default="adagrad")
    p.add_argument("--table-accumulator", type=float, default=1e-6,
                   help="Adagrad's starting accumulator (small: a row's first steps are about --table-lr)")
    p.add_argument("--row-cache-steps", type=int, default=0,
                   help="serve a pulled row from the worker's cache for up to this many steps (0: no cache)")
    p.add_argument("--row-cache-write-back", type=int, choices=(0, 1), default=0,
                   help="1: the cache applies this worker's gradients to its rows and holds them until a row is "
                        "refreshed (needs --table-optimizer sgd)")
    p.add_argument("--row-cache-rows", type=int, default=100000, help="rows the worker's cache holds at most")
    p.add_argument("--prefetch", type=int, choices=(0, 1), default=1,
                   help="1 (the default): pull the next step's rows while this step computes "
                        "(EmbeddingBags.prefetch; the same rows in sync mode); 0: pull them in each forward")
    p.add_argument("--overlap-forward", type=int, choices=(0, 1), default=1,
                   help="1 (the default): step() leaves each MLP layer's update to the next forward "
                        "(DistributedOptimizer's overlap_forward; the same weights), so the first layers' "
                        "forward overlaps the last layers' sums; 0: step() waits for every sum")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = p.parse_args(argv)
    if args.steps <= args.warmup or args.batch_size <= 0 or args.test_rows <= 0:
        p.error("need --steps > --warmup >= 0, --batch-size > 0 and --test-rows > 0")
    if not 0 < args.scale <= 1:
        p.error("--scale must be in (0, 1]")
    if args.drift_rows < 0 or (args.drift_rows and args.data != "synthetic"):
        p.error("--drift-rows must be >= 0, and is for --data synthetic only")
    if args.row_cache_steps < 0 or args.row_cache_rows < 1:
        p.error("need --row-cache-steps >= 0 and --row-cache-rows >= 1")
    if args.row_cache_write_back and (args.table_optimizer != "sgd" or args.row_cache_steps == 0):
        p.error("--row-cache-write-back 1 needs --table-optimizer sgd and --row-cache-steps > 0")
    if args.table_lr is None:
        args.table_lr = 0.2 if args.table_optimizer == "adagrad" else 16.0
    return args


def embedding_traffic(args, tables, model, size, servers_before, servers_after):
    """Embedding bytes per training sample (a dict): pulled and pushed, from every worker's row counts,
    and, when the servers' counters were read in a job on one host, from those less the MLP gradients'
    share (each worker pushes and pulls every dense gradient once a step, zeros included)."""
    samples = args.steps * size * args.batch_size
    row_bytes = args.embedding_dim * 4
    pulled, pushed = (sum(bps.allgather_object(n)) * row_bytes for n in (tables.pulled_rows, tables.pushed_rows))
    out = {"workers_pulled": pulled / samples, "workers_pushed": pushed / samples}
    # The dense share is known only where the sums travel dense: a job on one host (ZPS_SKIP_ZEROS's
    # auto leaves the zeros of the sums out across hosts, and then the servers' counts hold less).
    zeros_sent = os.environ.get("ZPS_SKIP_ZEROS", "auto") in ("0", "auto") and \
        os.environ.get("DMLC_PS_ROOT_URI", "127.0.0.1") in ("127.0.0.1", "localhost")
    if servers_before is not None and servers_after is not None and zeros_sent:
        dense = args.steps * size * 4 * sum(p.numel() for p in model.parameters())
        out["servers_pulled"] = (servers_after[1] - servers_before[1] - dense) / samples
        out["servers_pushed"] = (servers_after[0] - servers_before[0] - dense) / samples
    return out


def main():
    args = parse_args()
    bps.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # the workers and servers of one machine share its cores
    rank, size = bps.rank(), bps.size()
    train_set, test_set, bayes_auc = load(args.data, args.seed, args.scale, args.zipf,
                                          args.steps * size * args.batch_size, args.test_rows, args.drift_rows)

    adagrad = {"initial_accumulator": args.table_accumulator, "eps": 1e-8}
    tables = bps.EmbeddingBags(CATEGORICAL, args.embedding_dim, name="dlrm", optimizer=args.table_optimizer,
                               lr=args.table_lr, **(adagrad if args.table_optimizer == "adagrad" else {}),
                               row_cache_steps=args.row_cache_steps, row_cache_rows=args.row_cache_rows,
                               row_cache_write_back=bool(args.row_cache_write_back))
    model = DLRM(tables, NUMERIC, CATEGORICAL, args.embedding_dim)
    optimizer = bps.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=args.lr),
                                         named_parameters=model.named_parameters(),
                                         overlap_forward=model if args.overlap_forward else None)
    bps.broadcast_parameters(model.state_dict(), root_rank=0)

    # The servers' counters are read with every worker between two barriers, so they count the
    # training steps only.
    bps.barrier()
    servers_before = server_bytes(rank) if rank == 0 else None
    bps.barrier()
    seconds = train(model, [optimizer], batches(train_set, rank, size, args.batch_size), args.steps, args.warmup,
                    prefetch=tables if args.prefetch else None)
    samples_per_s = (args.steps - args.warmup) * size * args.batch_size / seconds
    tables.wait_push()  # the last backward's push, before the servers' counters are read
    bps.barrier()
    servers_after = server_bytes(rank) if rank == 0 else None
    bps.barrier()
    traffic = embedding_traffic(args, tables, model, size, servers_before, servers_after)
    tables.push_held()  # a write-back cache's last gradients (every worker, as a step)
    if tables.row_cache is not None:
        tables.row_cache.clear()  # the held-out rows are scored with the servers' rows

    # Each worker scores its share of the held-out rows; every worker then ranks all of them.
    dense, ids, labels = test_set
    share = np.array_split(np.arange(len(labels)), size)[rank]
    mine = scores(model, dense[share], ids[share])
    every_score = np.concatenate(bps.allgather_object(mine))
    auc = roc_auc(every_score, labels)
    bayes = f", Bayes AUC: {bayes_auc:.4f}" if bayes_auc is not None else ""
    print(f"Test AUC: {auc:.4f} ({len(labels)} rows){bayes}, Worker: {rank}", flush=True)
    print(f"Samples/s: {samples_per_s:.0f} ({size} workers x {args.batch_size} rows, {args.steps} steps), "
          f"Worker: {rank}", flush=True)
    if rank == 0:
        print("Embedding bytes/sample: " + ", ".join("%s %.1f" % kv for kv in traffic.items()), flush=True)
    if args.json and rank == 0:
        print(json.dumps({"system": "zps", "samples_per_s": samples_per_s, "auc": auc, "bayes_auc": bayes_auc,
                          "steps": args.steps, "workers": size, "batch_size": args.batch_size, "scale": args.scale,
                          "row_cache_steps": args.row_cache_steps, "row_cache_rows": args.row_cache_rows,
                          "table_optimizer": args.table_optimizer, "table_lr": args.table_lr,
                          "row_cache_write_back": args.row_cache_write_back,
                          "prefetch": args.prefetch, "overlap_forward": args.overlap_forward,
                          "drift_rows": args.drift_rows,
                          # The held-out scores' bits: two runs that trained the same weights agree.
                          "scores_sha256": hashlib.sha256(every_score.astype(np.float32).tobytes()).hexdigest(),
                          "embedding_bytes_per_sample": traffic}), flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
