"""zps.torch.EmbeddingBags' worker-side row cache (row_cache.py) checked exactly, in a job of 2 workers and
2 servers (tests/torch/dlrm_test.sh row_cache_*). One check per run, named by the argument:
  exact  row_cache_steps=0 gives, step after step of training, the same bits as no cache, and pulls
         the same bytes
  stale  row_cache_steps=3: each step pulls exactly the rows a model of the rule says (counted by the
         worker's byte counter), every row served is bit for bit the servers' row of at most 3 steps
         before, and hot rows are indeed served stale (the cache is used)
  bound  row_cache_rows=64 and a stream of new ids: the cache never holds more than 64 rows, the hot
         ids stay cached (only the new ids are pulled), and the evictions are counted exactly
  write_back  row_cache_steps=3 with row_cache_write_back on an sgd table: a served row is the servers'
         row as last pulled less lr x 2 workers x this worker's gradients since (bit for bit), each
         step pushes exactly the held rows that turn stale at the next step, and after push_held() the servers'
         rows are bit for bit those of a table without cache trained on the same gradients
Prints "row cache ok" when all hold.
"""
import sys

import torch

import job_checks
import zps.torch as bps
from job_checks import check, raises
from server_counters import own_port, scrape

DIM, TABLES, LR = 4, 2, 0.5


def pulled_bytes():
    """This worker's own count of the bytes it pulled (rows included; read from its metrics endpoint,
    counted before a pull's wait returns)."""
    return int(scrape(own_port(), ["zps_worker_pulled_bytes_total"])["zps_worker_pulled_bytes_total"])


def batch(step, rank, new_per_step=6, hot=3, returning=True):
    """ids [bags, TABLES]: `hot` ids every step, (when `returning`) ids that come back every other and
    every fifth step, and `new_per_step` new ids."""
    column = list(range(hot))
    if returning:
        column += [100 + step % 2] + ([200] if step % 5 == 0 else [])
    column = torch.tensor(column + [1000 + (step * 2 + rank) * new_per_step + i for i in range(new_per_step)])
    return torch.stack([column, column + 7 * (1 + rank)], dim=1)


def loss_weights(step, bags):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.rand(bags, TABLES, DIM, generator=g)


def exact(rank):
    plain = bps.EmbeddingBags(TABLES, DIM, name="plain", optimizer="sgd", lr=LR, init_scale=0.5, seed=3)
    k0 = bps.EmbeddingBags(TABLES, DIM, name="k0", optimizer="sgd", lr=LR, init_scale=0.5, seed=3,
                           row_cache_steps=0, row_cache_rows=10)
    check("row_cache_steps=0 keeps no cache", k0.row_cache, None)
    for step in range(6):
        ids = batch(step, rank)
        w = loss_weights(step, ids.shape[0])
        before = pulled_bytes()
        out_plain = plain(ids)
        middle = pulled_bytes()
        out_k0 = k0(ids)
        after = pulled_bytes()
        check("step %d: k=0 and no cache give the same bits" % step, out_k0, out_plain)
        distinct = torch.unique(ids[:, 0]).numel() + torch.unique(ids[:, 1]).numel()
        check("step %d: no cache pulls its %d rows" % (step, distinct), middle - before, distinct * DIM * 4)
        check("step %d: k=0 pulls them too" % step, after - middle, distinct * DIM * 4)
        (out_plain * w).sum().backward()
        (out_k0 * w).sum().backward()
    check("k=0 and no cache pulled the same rows", k0.pulled_rows, plain.pulled_rows)


def stale(rank):
    k = 3
    bags = bps.EmbeddingBags(TABLES, DIM, name="stale", optimizer="sgd", lr=LR, init_scale=0.5, seed=5,
                             row_cache_steps=k, row_cache_rows=1000)
    pulled_at = {}  # key -> step it was last pulled: the rule's model
    truth = []  # step -> {key: the servers' row at that step}
    stale_served = 0
    for step in range(12):
        ids = batch(step, rank)
        keys = torch.unique((ids | bags.table_base).reshape(-1))
        expected = [key for key in keys.tolist() if key not in pulled_at or step - pulled_at[key] > k]
        for key in expected:
            pulled_at[key] = step
        before = pulled_bytes()
        out = bags(ids)
        check("step %d: pulled bytes are those of the %d rows missing or older than %d steps" %
              (step, len(expected), k), pulled_bytes() - before, len(expected) * DIM * 4)
        with torch.no_grad():
            fresh = bags.table._pull(keys)  # the servers' rows now, past the cache
        truth.append({key: fresh[i] for i, key in enumerate(keys.tolist())})
        for b in range(ids.shape[0]):
            for t in range(TABLES):
                key = int(ids[b, t]) | (t << 40)
                age = step - pulled_at[key]
                if not 0 <= age <= k or not torch.equal(out[b, t], truth[pulled_at[key]][key]):
                    check("step %d: key %d is the servers' row of step %d (age %d <= %d)" %
                          (step, key, pulled_at[key], age, k), out[b, t], truth[pulled_at[key]][key])
                if not torch.equal(out[b, t], truth[step][key]):
                    stale_served += 1
        (out * loss_weights(step, ids.shape[0])).sum().backward()
    check("every row served was the servers' row of at most %d steps before" % k, True, True)
    check("some rows were served stale (the cache was used)", stale_served > 0, True)
    cache = bags.row_cache
    check("hits + misses = rows looked up", cache.hits + cache.misses,
          sum(torch.unique(batch(s, rank)[:, 0]).numel() + torch.unique(batch(s, rank)[:, 1]).numel()
              for s in range(12)))


def bound(rank):
    capacity, hot, new_per_step, steps = 64, 3, 20, 30
    bags = bps.EmbeddingBags(TABLES, DIM, name="bound", optimizer="sgd", lr=LR, init_scale=0.5, seed=7,
                             row_cache_steps=1000, row_cache_rows=capacity)
    cache = bags.row_cache
    rows_bytes = cache.rows.numel() * cache.rows.element_size()
    for step in range(steps):
        ids = batch(step, rank, new_per_step=new_per_step, hot=hot, returning=False)
        before = pulled_bytes()
        out = bags(ids)
        pulled = (pulled_bytes() - before) // (DIM * 4)
        # A step uses fewer rows than half the cache, so the hot ids, used every step, are never the
        # least recently used: after the first step only the new ids are pulled.
        want = TABLES * (hot + new_per_step if step == 0 else new_per_step)
        if pulled != want or cache.rows_held > capacity:
            check("step %d: rows pulled" % step, pulled, want)
            check("step %d: the cache holds at most %d rows" % (step, capacity), cache.rows_held <= capacity, True)
        out.sum().backward()
    check("the cache holds %d rows after %d steps of new ids" % (capacity, steps), cache.rows_held, capacity)
    check("its row storage did not grow", cache.rows.numel() * cache.rows.element_size(), rows_bytes)
    check("rows pulled", cache.misses, TABLES * (hot + new_per_step * steps))
    check("every row pulled and not held was evicted", cache.evictions, cache.misses - capacity)
    hot_keys = [(t << 40) | int(ids[i, t]) for t in range(TABLES) for i in range(hot)]
    check("the hot ids are still cached", all(key in cache.slot_of for key in hot_keys), True)
    raises("row_cache_steps=-1", lambda: bps.EmbeddingBags(1, DIM, name="bad", row_cache_steps=-1),
           ["row_cache_steps must be >= 0"])


def write_back(rank):
    k, lr = 3, 0.5
    # Rows start at 0 and the gradients are multiples of 1/8 (loss weights in quarters, averaged over 2
    # workers), so every sum is exact in float32 whatever its order: the checks compare bits.
    options = dict(optimizer="sgd", lr=lr, init_scale=0.0, seed=9)
    plain = bps.EmbeddingBags(TABLES, DIM, name="wb_plain", **options)
    bags = bps.EmbeddingBags(TABLES, DIM, name="wb", row_cache_steps=k, row_cache_rows=1000,
                             row_cache_write_back=True, **options)
    pulled_at, pulled_row, own = {}, {}, {}  # the rule's model: key -> step pulled, row then, own grads since
    for step in range(12):
        ids = batch(step, rank)
        keys = torch.unique((ids | bags.table_base).reshape(-1)).tolist()
        out = bags(ids)
        with torch.no_grad():
            servers = bags.table._pull(torch.tensor(keys))  # the servers' rows now, past the cache
        for i, key in enumerate(keys):
            if key not in pulled_at or step - pulled_at[key] > k:
                pulled_at[key], pulled_row[key], own[key] = step, servers[i].clone(), torch.zeros(DIM)
        for b in range(ids.shape[0]):
            for t in range(TABLES):
                key = int(ids[b, t]) | (t << 40)
                want = pulled_row[key] - lr * 2 * own[key]  # this worker's gradients, taken as both workers'
                if not torch.equal(out[b, t], want):
                    check("step %d: key %d is the servers' row of step %d less this worker's %s x lr x 2" %
                          (step, key, pulled_at[key], own[key].tolist()), out[b, t], want)
        w = torch.randint(1, 5, (ids.shape[0], TABLES, DIM), generator=torch.Generator().manual_seed(step)) / 4.0
        grads = {}
        for b in range(ids.shape[0]):
            for t in range(TABLES):
                key = int(ids[b, t]) | (t << 40)
                grads[key] = grads.get(key, torch.zeros(DIM)) + w[b, t] / 2  # averaged over 2 workers
        for key, g in grads.items():
            own[key] = own[key] + g
        due = [key for key in own if own[key].any() and step + 1 - pulled_at[key] > k]
        for key in due:
            own[key] = torch.zeros(DIM)
        before = bags.pushed_rows
        (out * w).sum().backward()
        check("step %d: pushed the %d held rows that turn stale" % (step, len(due)), bags.pushed_rows - before,
              len(due))
        (plain(ids) * w).sum().backward()
    raises("clear() with gradients held", bags.row_cache.clear, ["gradients still held"], kind=RuntimeError)
    bags.push_held()
    bags.row_cache.clear()
    every = torch.unique(torch.cat([(batch(s, r) | bags.table_base).reshape(-1) for s in range(12) for r in (0, 1)]))
    with torch.no_grad():
        check("after push_held, the servers' rows are those of the table without cache",
              bags.table._pull(every), plain.table._pull(every))
    raises("write-back with adagrad", lambda: bps.EmbeddingBags(1, DIM, name="bad", optimizer="adagrad",
                                                                row_cache_steps=2, row_cache_write_back=True),
           ["row_cache_write_back needs"])
    raises("write-back without a cache", lambda: bps.EmbeddingBags(1, DIM, name="bad", optimizer="sgd",
                                                                   row_cache_write_back=True),
           ["row_cache_write_back needs"])


def main():
    bps.init()
    job_checks.rank = bps.rank()
    if own_port() <= 0:
        print("FAILED: run with ZPS_METRICS_PORT set (the checks read this worker's byte counters)", flush=True)
        sys.exit(1)
    {"exact": exact, "stale": stale, "bound": bound, "write_back": write_back}[sys.argv[1]](bps.rank())
    print("row cache ok", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
