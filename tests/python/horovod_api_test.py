"""zps.torch's Horovod API and its name rules as the workers of one job (tests/python/CMakeLists.txt: 1
server, 2 and 3 workers), with exact values: disagreements raised on every worker within 5 s naming each
rank's view, names reused with another shape, in-flight duplicates refused, a call that timed out before
the others came failing alone, prescale/postscale, autograd, grouped ops, join, broadcast_async, the
Compression objects, DistributedOptimizer's predivide factor, skip_synchronize and its warning,
broadcast_optimizer_state of a fresh optimizer, and SyncBatchNorm against BatchNorm on the whole batch.
Every check prints a line; the first failed check raises (the job then ends non-zero)."""
import time
import warnings

import torch

import zps.torch as hvd


def check(cond, what):
    if not cond:
        raise AssertionError("worker %d: FAILED %s" % (RANK, what))
    print("worker %d: %s: OK" % (RANK, what), flush=True)


def raises_on_every_worker(fn, needles, what):
    """fn() must raise here within 5 s, its message holding every needle."""
    start = time.monotonic()
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        took = time.monotonic() - start
        missing = [n for n in needles if n not in str(e)]
        check(not missing and took < 5, "%s raised in %.2f s: %s%s" % (what, took, str(e)[:300],
                                                                         " (missing %s)" % missing if missing else ""))
        return
    raise AssertionError("worker %d: FAILED %s did not raise" % (RANK, what))


hvd.init()
RANK, N = hvd.rank(), hvd.size()
ranks = list(range(N))
total = N * (N + 1) // 2  # sum over workers of (rank + 1)

# ---- disagreements: every worker raises at once, naming every rank's shape / dtype / root ----
shape = [4 + RANK, 3]
raises_on_every_worker(lambda: hvd.allreduce(torch.ones(shape), name="w"),
                       ["rank %d: allreduce of 'w' with shape %s" % (r, [4 + r, 3]) for r in ranks], "shape disagreement")
raises_on_every_worker(lambda: hvd.allreduce(torch.ones(6, dtype=torch.float32 if RANK == 0 else torch.int32), name="d"),
                       ["float32", "int32"], "dtype disagreement")
raises_on_every_worker(lambda: hvd.allreduce(torch.ones([2, 3] if RANK == 0 else [3, 2]), name="same_count"),
                       ["[2, 3]", "[3, 2]"], "same element count, another shape")
raises_on_every_worker(lambda: hvd.broadcast(torch.ones(3), RANK, name="roots"),
                       ["root rank %d" % r for r in ranks], "broadcast roots disagree")
check(torch.equal(hvd.allreduce(torch.full((4, 3), float(RANK + 1)), op=hvd.Sum, name="w"), torch.full((4, 3), float(total))),
      "after the disagreement, 'w' sums exactly")

# ---- names ----
check(torch.equal(hvd.allreduce(torch.full((7,), float(RANK + 1)), op=hvd.Sum, name="w"), torch.full((7,), float(total))),
      "'w' reused with another shape once its previous call ended")
h = hvd.allreduce_async(torch.ones(5), name="dup")
try:
    hvd.allreduce_async(torch.ones(5), name="dup")
    raise AssertionError("worker %d: FAILED a second 'dup' in flight was accepted" % RANK)
except ValueError as e:
    check("already in flight" in str(e), "a second in-flight 'dup' is refused (%s)" % e)
check(torch.equal(hvd.synchronize(h), torch.ones(5)), "the first 'dup' completes")
hs = [hvd.allreduce_async(torch.full((3,), float(i)), op=hvd.Sum) for i in range(3)]
check([hvd.synchronize(x).tolist() for x in hs] == [[float(i * N)] * 3 for i in range(3)],
      "three unnamed calls of one shape in flight at once")

# A call whose wait ends before the other workers came fails alone; its tensor is never written; the
# name's next call works on every worker.
x = torch.full((1000,), float(RANK + 1))
if RANK == 0:
    h = hvd.allreduce_async_(x, op=hvd.Sum, name="late")
    try:
        hvd.synchronize(h, timeout=0.5)
        raise AssertionError("worker 0: FAILED synchronize returned before worker 1 came")
    except hvd.ZpsTimeout as e:
        check("did not start" in str(e), "worker 0's synchronize(timeout=0.5) raised ZpsTimeout (%s)" % str(e)[:120])
    x.fill_(-7.0)
else:
    time.sleep(1.5)
    check(torch.equal(hvd.allreduce_(x, op=hvd.Sum, name="late"), torch.full((1000,), float(total))),
          "the late worker's call gets the exact sum (worker 0's values as they were when it gave up)")
hvd.barrier()
check(RANK != 0 or torch.equal(x, torch.full((1000,), -7.0)), "worker 0's tensor was not written after its wait ended")
check(torch.equal(hvd.allreduce(torch.full((1000,), float(RANK + 1)), op=hvd.Sum, name="late"),
                  torch.full((1000,), float(total))), "the next call of 'late' works on every worker")

# ---- reductions ----
t = torch.arange(6, dtype=torch.float64) * (RANK + 1)
check(torch.equal(hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0),
                  torch.arange(6, dtype=torch.float64) * total * 2.0), "prescale 0.5, postscale 4: exact")
check(torch.equal(hvd.allreduce(torch.tensor([7, -7], dtype=torch.int32) * (RANK + 1), op=hvd.Sum, prescale_factor=2.0),
                  torch.tensor([14 * total, -14 * total], dtype=torch.int32)), "int32 prescale in float64, exact")
check(torch.equal(hvd.allreduce(torch.tensor([3, -5], dtype=torch.int8) * (RANK + 1), op=hvd.Sum),
                  torch.tensor([3 * total, -5 * total], dtype=torch.int8)), "int8 sums exactly")

# ---- autograd ----
a = torch.full((3,), float(RANK + 1), requires_grad=True)
(hvd.allreduce(a, op=hvd.Sum) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
check(torch.equal(a.grad, torch.tensor([1.0, 2.0, 3.0]) * N), "gradient of allreduce(Sum): the sum of the gradients")
a.grad = None
hvd.allreduce(a).sum().backward()
check(torch.equal(a.grad, torch.ones(3)), "gradient of allreduce(Average): the average of the gradients")
b = torch.full((2,), float(RANK), requires_grad=True)
out = hvd.broadcast(b, 1, name="bgrad")
check(torch.equal(out.detach(), torch.full((2,), 1.0)), "broadcast from rank 1 with requires_grad")
(out * 3).sum().backward()
check(torch.equal(b.grad, torch.full((2,), 3.0 if RANK == 1 else 0.0)), "gradient of broadcast: the root's only")

# ---- grouped, async broadcast ----
group = hvd.grouped_allreduce([torch.full((2,), float(RANK + 1)), torch.full((3, 1), 2.0 * (RANK + 1))], op=hvd.Sum)
check(torch.equal(group[0], torch.full((2,), float(total))) and torch.equal(group[1], torch.full((3, 1), 2.0 * total)),
      "grouped_allreduce of two tensors")
h = hvd.broadcast_async(torch.full((4,), float(RANK + 10)), root_rank=N - 1)
check(torch.equal(hvd.synchronize(h), torch.full((4,), float(N - 1 + 10))), "broadcast_async from the last rank")

# ---- join: rank 0 has no more data; the others' allreduces go on with zeros in its place ----
if RANK == 0:
    last = hvd.join()
else:
    avg = hvd.allreduce(torch.full((5,), 6.0), name="uneven")
    check(torch.equal(avg, torch.full((5,), 6.0 * (N - 1) / N)), "allreduce while rank 0 joined: rank 0 counts as zeros")
    last = hvd.join()
check(last == N - 1, "join() returns the last rank to join (%d)" % last)

# ---- compression objects ----
c, ctx = hvd.Compression.fp16.compress(torch.full((3,), 1.5, dtype=torch.float64))
check(c.dtype == torch.float16 and hvd.Compression.fp16.decompress(c, ctx).dtype == torch.float64,
      "Compression.fp16.compress/decompress")

# ---- DistributedOptimizer ----
torch.manual_seed(0)
model = torch.nn.Linear(4, 1, bias=False)
with torch.no_grad():
    model.weight.fill_(1.0)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0), named_parameters=model.named_parameters(),
                               gradient_predivide_factor=2.0)
model(torch.full((1, 4), float(RANK + 1))).sum().backward()
opt.step()
check(torch.equal(model.weight.detach(), torch.full((1, 4), 1.0 - total / N)),
      "gradient_predivide_factor 2: the step uses the exact average gradient")
model(torch.ones(1, 4)).sum().backward()
opt.synchronize()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with opt.skip_synchronize():
        opt.step()
    check(not caught, "step() inside skip_synchronize() after synchronize(): no warning")
model(torch.ones(1, 4)).sum().backward()
opt.synchronize()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    opt.step()
    check(len(caught) == 1 and "skip_synchronize" in str(caught[0].message), "step() after synchronize(): one warning")

fresh = torch.optim.SGD(torch.nn.Linear(3, 2).parameters(), lr=0.1, momentum=0.9)
weights_before = [p.detach().clone() for g in fresh.param_groups for p in g["params"]]
hvd.broadcast_optimizer_state(fresh, root_rank=0)
state = fresh.state_dict()["state"]
check(len(state) == 2 and all("momentum_buffer" in s for s in state.values()),
      "broadcast_optimizer_state gives a fresh optimizer its state (momentum buffers)")
check(all(torch.equal(p, w) for p, w in zip([p for g in fresh.param_groups for p in g["params"]], weights_before)),
      "and leaves the parameters as they were")

# ---- SyncBatchNorm: the statistics of every worker's batch together ----
torch.manual_seed(1)
whole = torch.randn(4 * N, 3, 5)  # every worker draws the same whole batch and takes its quarter
mine = whole[4 * RANK:4 * (RANK + 1)].clone().requires_grad_()
sync = hvd.SyncBatchNorm(3)
out = sync(mine)
reference = torch.nn.BatchNorm1d(3)
ref_in = whole.clone().requires_grad_()
ref_out = reference(ref_in)
check(torch.allclose(out, ref_out[4 * RANK:4 * (RANK + 1)], atol=1e-5) and
      torch.allclose(sync.running_var, reference.running_var, atol=1e-5),
      "SyncBatchNorm's output and running variance equal BatchNorm's on the whole batch")
weights = torch.arange(whole.numel(), dtype=torch.float32).reshape(whole.shape) % 7
(out * weights[4 * RANK:4 * (RANK + 1)]).sum().backward()
(ref_out * weights).sum().backward()
check(torch.allclose(mine.grad, ref_in.grad[4 * RANK:4 * (RANK + 1)], atol=1e-4),
      "SyncBatchNorm's input gradient equals BatchNorm's on the whole batch")

hvd.shutdown()
print("worker %d: all checks passed" % RANK, flush=True)
