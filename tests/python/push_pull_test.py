"""zps.torch basics as the workers of one job (tests/python/CMakeLists.txt: 2 servers, 2 workers):
exact sums for every dtype, in place and not, average and op=Sum, async/poll/synchronize, broadcast,
broadcast_object, Embedding rows updated by the servers' sgd, and bad use raising clear exceptions.
Every check prints a line; the first failed check raises (the job then ends non-zero)."""
import sys

import torch

import zps.torch as bps


def check(cond, what):
    if not cond:
        raise AssertionError("worker %s: FAILED %s" % (RANK, what))
    print("worker %s: %s: OK" % (RANK, what), flush=True)


def expect_raises(kind, needle, fn, what):
    try:
        fn()
    except kind as e:
        check(needle in str(e), "%s raises %s naming '%s' (%s)" % (what, kind.__name__, needle, e))
        return
    raise AssertionError("worker %s: FAILED %s did not raise %s" % (RANK, what, kind.__name__))


RANK = "?"
expect_raises(bps.ZpsNotInitialized, "call zps.torch.init() first", lambda: bps.push_pull(torch.ones(2)),
              "push_pull before init")
expect_raises(bps.ZpsNotInitialized, "init()", bps.rank, "rank before init")

bps.init()
RANK, N = bps.rank(), bps.size()
check(N == 2 and bps.local_size() == 1 and bps.local_rank() == 0, "size 2, local rank 0 of 1")
total = N * (N + 1) // 2  # sum over workers of (rank + 1)

# Every dtype, values exact in each (small integers times rank + 1).
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8):
    base = torch.arange(1000) % 13
    x = (base * (RANK + 1)).to(dtype)
    out = bps.push_pull(x, average=False, name="sum." + str(dtype))
    check(out.dtype == dtype and torch.equal(out, (base * total).to(dtype)) and torch.equal(x, (base * (RANK + 1)).to(dtype)),
          "push_pull of 1000 x %s: exact sum, input untouched" % dtype)
    y = x.clone()
    bps.push_pull_inplace(y, average=False, name="sum." + str(dtype))
    check(torch.equal(y, (base * total).to(dtype)), "push_pull_inplace of %s: exact sum in place" % dtype)

big = torch.full((3_000_000,), float(RANK + 1))  # 12 MB: several partitions over both servers
check(torch.equal(bps.push_pull(big, name="big"), torch.full((3_000_000,), total / N)), "push_pull of 12 MB: average exact")
check(torch.equal(bps.allreduce(torch.full((7,), float(RANK + 1)), op=bps.Sum, name="hvd"), torch.full((7,), float(total))),
      "allreduce op=Sum")
check(torch.equal(bps.allreduce(torch.full((7,), float(RANK + 1)), name="hvd"), torch.full((7,), total / N)),
      "allreduce averages by default")
z = torch.full((7,), float(RANK + 1))
bps.allreduce_(z, average=False, name="hvd")
check(torch.equal(z, torch.full((7,), float(total))), "allreduce_ (in place, average=False)")
check(torch.equal(bps.push_pull(torch.tensor([3, -7]) * (RANK + 1), name="ints"), torch.tensor([4, -10])),
      "average of int64 truncates toward zero")

# fp16 compression: float32 pushes travel as halves (half the network bytes); small integers stay exact.
before = bps.traffic()
x = torch.arange(4096, dtype=torch.float32) % 100 * (RANK + 1)
out = bps.push_pull(x, average=False, name="fp16", compression=bps.Compression.fp16)
after = bps.traffic()
pushed = after["network_bytes_pushed"] - before["network_bytes_pushed"]
# Plus the agreement before the call: one int64 row of 32 per worker (docs/pytorch.md).
check(torch.equal(out, torch.arange(4096, dtype=torch.float32) % 100 * total) and pushed == 4096 * 2 + N * 256,
      "Compression.fp16: exact sum, %d network bytes pushed for 16384 tensor bytes" % pushed)

# Async: several in flight on different names, polled, then synchronized out of order.
hs = [bps.push_pull_async(torch.full((100,), float(i + RANK)), average=False, name="async.%d" % i) for i in range(4)]
seen_done = sum(bps.poll(h) for h in hs)
results = [bps.synchronize(h) for h in reversed(hs)][::-1]
check(all(torch.equal(r, torch.full((100,), float(2 * i + 1))) for i, r in enumerate(results)),
      "4 async push_pulls synchronized in reverse order (%d already done at poll)" % seen_done)
h = bps.allreduce_async(torch.ones(3), op=bps.Sum, name="poll")
while not bps.poll(h):
    pass
check(torch.equal(bps.synchronize(h), torch.full((3,), 2.0)), "poll turns true, synchronize returns the sum")
expect_raises(ValueError, "unknown or already synchronized", lambda: bps.synchronize(h), "synchronize twice")
# Unnamed calls of one shape share a tensor; each call is its next round.
a = bps.push_pull(torch.ones(5), average=False)
b = bps.push_pull(torch.ones(5) * 2, average=False)
check(torch.equal(a, torch.full((5,), 2.0)) and torch.equal(b, torch.full((5,), 4.0)), "unnamed push_pulls, rounds in order")

# Broadcast: any dtype, root's bytes exactly (including -0.0, NaN and infinities).
special = torch.tensor([-0.0, float("nan"), float("inf"), 1e-40, RANK + 0.5])
got = bps.broadcast(special, root_rank=1, name="special")
check(got.view(torch.int32).tolist() == torch.tensor([-0.0, float("nan"), float("inf"), 1e-40, 1.5]).view(torch.int32).tolist(),
      "broadcast from rank 1 copies the bytes exactly")
flags = torch.tensor([RANK == 0, True, False])
bps.broadcast_(flags, 0, name="flags")
check(flags.tolist() == [True, True, False], "broadcast_ of a bool tensor in place")
steps = torch.tensor(7 + RANK)  # 0-dim int64, as BatchNorm's num_batches_tracked
bps.broadcast_(steps, 0, name="steps")
check(steps.dim() == 0 and steps.item() == 7, "broadcast_ of a 0-dim int64 tensor in place")
obj = bps.broadcast_object({"rank": RANK, "t": torch.arange(3) * RANK, "s": "x" * 5000}, root_rank=1)
check(obj["rank"] == 1 and obj["t"].tolist() == [0, 1, 2] and len(obj["s"]) == 5000, "broadcast_object from rank 1")

# Embedding: rows on the servers, sgd applied there to the average of both workers' gradients.
emb = bps.Embedding(4, name="emb", optimizer="sgd", lr=0.5)
ids = torch.tensor([[3, 17], [3, 1000000007]])
before = emb(ids)
check(before.shape == (2, 2, 4) and torch.equal(before[0, 0], before[1, 0]), "Embedding forward: ids.shape + (dim,), repeated ids equal")
weights = torch.arange(16, dtype=torch.float32).reshape(2, 2, 4) * (RANK + 1)
(before * weights).sum().backward()
after = emb(ids).detach()
# Gradient of each unique row: the sum of its weights; averaged over workers: x (1 + 2) / 2.
grad = {3: (weights[0, 0] + weights[1, 0]) / (RANK + 1), 17: weights[0, 1] / (RANK + 1), 1000000007: weights[1, 1] / (RANK + 1)}
ok = True
for (i, j), key in {(0, 0): 3, (0, 1): 17, (1, 1): 1000000007}.items():
    expect = before[i, j].detach() - 0.5 * (grad[key] * total / N)
    ok = ok and torch.equal(after[i, j], expect)
check(ok, "Embedding backward: the servers' sgd applied the average gradient exactly")

# priority= (BytePS's order: larger is sent sooner) schedules the tensor by its negation in zps's order;
# without it the tensor is not scheduled. Several layers' push-pulls in flight at once, exact sums.
from zps.torch._runtime import runtime  # noqa: E402

layers = [torch.full((300_000 // (i + 1),), float((RANK + 1) * (i + 1))) for i in range(6)]
handles = [bps.push_pull_async(t, average=False, name="prio.%d" % i, priority=-i) for i, t in enumerate(layers)]
sums = [bps.synchronize(h) for h in reversed(handles)][::-1]
check(all(torch.equal(s, torch.full_like(t, float(total * (i + 1)))) for i, (s, t) in enumerate(zip(sums, layers))),
      "push_pull_async with priority: exact sums of 6 layers in flight at once")
rt = runtime("test")


def declared_id(name):  # the servers' tensor of `name` (declared as name[shape]:dtype#generation)
    return next(d.tensor_id for k, d in rt.declared.items() if k.startswith(name + "["))


check([rt.worker.priority(declared_id("prio.%d" % i)) for i in range(6)] == list(range(6)),
      "priority=-i reaches the C API as zps priority i")
check(rt.worker.priority(declared_id("big")) is None, "a tensor without priority= is not scheduled")
expect_raises(TypeError, "priority must be an int", lambda: bps.push_pull(torch.ones(2), name="p", priority=1.5),
              "priority=1.5")

# Bad use.
expect_raises(ValueError, "not contiguous", lambda: bps.push_pull(torch.ones(4, 4).t(), name="nc"), "non-contiguous tensor")
expect_raises(TypeError, "complex64", lambda: bps.push_pull(torch.ones(3, dtype=torch.complex64)), "complex64 tensor")
for dtype in (torch.int8, torch.int16):  # summed as int32 on the servers, cast back
    check(torch.equal(bps.push_pull(torch.tensor([-3, 5, 7], dtype=dtype) * (RANK + 1), average=False),
                      torch.tensor([-3, 5, 7], dtype=dtype) * total), "push_pull of %s: exact sum" % dtype)
expect_raises(TypeError, "expected a torch.Tensor", lambda: bps.push_pull([1.0, 2.0]), "a list")
check(torch.equal(bps.push_pull(torch.ones(8), name="hvd", average=False), torch.full((8,), float(N))),
      "the same name with another shape, once its previous call ended")
expect_raises(ValueError, "root_rank 5", lambda: bps.broadcast(torch.ones(2), 5), "broadcast from rank 5")
bps.shutdown()
expect_raises(bps.ZpsNotInitialized, "init()", lambda: bps.push_pull(torch.ones(2)), "push_pull after shutdown")
print("worker %d: all checks passed" % RANK)
