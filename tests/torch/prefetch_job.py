"""EmbeddingBags.prefetch checked exactly, in a job of 2 workers and 2 servers (tests/torch/dlrm_test.sh
prefetch_*). One check per run, named by the argument:
  exact     sync tables: step after step, the rows served from the prefetch of the step before are bit
            for bit those of the same module without prefetch (one id per bag, pooled bags with
            offsets, and with a row cache of 2 steps, pulling the same rows), and misuse is refused
  async     async tables, each worker its own rows, SGD with lr 0.5 and gradient 1: a row served at
            step s from a prefetch holds s - 1 or s of this worker's pushes (at most one step stale)
  deadline  ZPS_REQUEST_TIMEOUT=T: worker 1 holds back its push of round 1, so worker 0's prefetch,
            held by the servers until round 1 is applied, fails after T seconds (not sooner, not
            much later) naming the prefetch; the table serves again once worker 1 pushes
Prints "prefetch ok" when all hold.
"""
import os
import sys
import time

import torch

import job_checks
import zps.torch as bps
from job_checks import check, raises
from zps.errors import ZpsTimeout

DIM, TABLES, LR = 4, 2, 0.5


def batch(step, rank):
    """ids [bags, TABLES]: hot ids every step, some every other step, and new ones."""
    column = [0, 1, 2, 100 + step % 2] + [1000 + (step * 2 + rank) * 5 + i for i in range(5)]
    column = torch.tensor(column)
    return torch.stack([column, column + 7 * (1 + rank)], dim=1)


def pooled(step, rank):
    """The same ids as lists per table, in bags of 3 (offsets)."""
    ids = batch(step, rank)
    return [ids[:, t].contiguous() for t in range(TABLES)], [torch.tensor([0, 3, 6])] * TABLES


def loss_weights(step, bags):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.rand(bags, TABLES, DIM, generator=g)


def exact(rank):
    def pair(name, **options):
        return [bps.EmbeddingBags(TABLES, DIM, name="%s_%s" % (name, which), optimizer="adagrad", lr=LR,
                                  init_scale=0.5, seed=3, **options) for which in ("plain", "prefetched")]
    pairs = {"ids": pair("ids"), "pooled": pair("pooled"), "cached": pair("cached", row_cache_steps=2)}
    steps = 8
    for step in range(steps):
        for kind, (plain, prefetched) in pairs.items():
            inputs = pooled(step, rank) if kind == "pooled" else (batch(step, rank),)
            out_plain, out_prefetched = plain(*inputs), prefetched(*inputs)
            check("step %d, %s: the prefetched rows are those pulled after the step before" % (step, kind),
                  out_prefetched, out_plain)
            if step + 1 < steps:
                prefetched.prefetch(*(pooled(step + 1, rank) if kind == "pooled" else (batch(step + 1, rank),)))
            w = loss_weights(step, out_plain.shape[0])
            (out_plain * w).sum().backward()
            (out_prefetched * w).sum().backward()
    for kind, (plain, prefetched) in pairs.items():
        check("%s: the same rows pulled with and without prefetch" % kind, prefetched.pulled_rows, plain.pulled_rows)
        keys = torch.unique(torch.cat([batch(s, r) for s in range(steps) for r in range(2)]).reshape(-1))
        with torch.no_grad():
            final = [bags(keys.reshape(-1, 1).expand(-1, TABLES).contiguous()) for bags in (plain, prefetched)]
        check("%s: every row the same after %d steps" % (kind, steps), final[1], final[0])
    cached = pairs["cached"][1].row_cache
    check("the row cache served rows with prefetch too", cached.hits > 0, True)
    bags = pairs["ids"][1]
    bags.prefetch(batch(0, rank))
    raises("prefetch twice", lambda: bags.prefetch(batch(0, rank)), ["prefetch_rows called twice"], RuntimeError)
    raises("a forward with other ids", lambda: bags(batch(1, rank)), ["keys are not the", "keys prefetched"])
    raises("prefetch of ids out of range", lambda: bags.prefetch(torch.full((2, TABLES), -1)), ["must be in [0, 2^40)"])


def async_bound(rank):
    bags = bps.EmbeddingBags(TABLES, DIM, name="async", optimizer="sgd", lr=LR, init_scale=0.0, average=False,
                             async_=True)
    ids = torch.tensor([[10 + rank, 20 + rank]])  # this worker's rows only
    stale = 0
    steps = 12
    for step in range(steps):
        out = bags(ids)
        pushes = [int(round(float(v) / -LR)) for v in out.reshape(-1)]
        lacking = step - pushes[0]
        if any(p != pushes[0] for p in pushes) or not (0 <= lacking <= (1 if step > 0 else 0)):
            check("step %d: the rows hold %d or %d of this worker's pushes" % (step, step - 1, step),
                  pushes, [step] * len(pushes))
        stale += lacking
        if step + 1 < steps:
            bags.prefetch(ids)
        out.sum().backward()
    check("every step's rows lacked at most one step (%d of %d steps lacked one)" % (stale, steps - 1), True, True)
    with torch.no_grad():
        check("after the steps every push is applied", bags(ids), torch.full((1, TABLES, DIM), -LR * steps))


def deadline(rank):
    timeout = float(os.environ["ZPS_REQUEST_TIMEOUT"])
    bags = bps.EmbeddingBags(TABLES, DIM, name="deadline", optimizer="sgd", lr=LR, init_scale=0.5, seed=9)
    ids = batch(0, rank)
    out = bags(ids)
    bps.barrier()
    start = time.monotonic()
    if rank == 0:
        bags.prefetch(ids)
        out.sum().backward()  # round 1 from worker 0; worker 1's comes after 3 x timeout
        raises("the forward served by a prefetch whose round does not come", lambda: bags(ids),
               ["prefetched", "replies missing after"], ZpsTimeout)
        waited = time.monotonic() - start
        check("the prefetch failed after the timeout (%.1f s, timeout %.1f s)" % (waited, timeout),
              timeout * 0.9 <= waited <= timeout * 2.5, True)
    else:
        time.sleep(max(0.0, start + 3 * timeout - time.monotonic()))
        out.sum().backward()
    time.sleep(max(0.0, start + 3.5 * timeout - time.monotonic()))
    bps.barrier()
    with torch.no_grad():
        again = bags(ids)
    check("the table serves round 1's rows after the failed prefetch", torch.equal(again, out.detach()), False)


def main():
    bps.init()
    job_checks.rank = bps.rank()
    {"exact": exact, "async": async_bound, "deadline": deadline}[sys.argv[1]](bps.rank())
    print("prefetch ok", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
