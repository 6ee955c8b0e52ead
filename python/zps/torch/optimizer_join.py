"""What join() does for DistributedOptimizer: a joined worker pushes zeros into the optimizer's sums so
that the workers still stepping are not kept waiting, at no cost to the steps themselves.

Why not agree on each step (as the other operations agree before they start): that is one more round
trip through the servers on every step of every job, joined or not, and steps are what the optimizer
exists to make fast. Instead a joined worker pushes its zeros ahead: a round of every sum of the
optimizer, then, once that round completed (the others stepped), the next one. The servers hold a
round until every worker pushed it, so the stepping workers see sums of their gradients and zeros.

How it ends: when every worker has joined (the coordinator's join agreement says so), each stops
pushing new rounds, and the workers exchange how many rounds of each optimizer they pushed. Every
worker pushes zero rounds up to the largest count, so every round any worker pushed completes, and the
sums' round counters agree again for the steps after join(). A joined worker stops before it reports
its count, and the others push their top-up rounds only after the exchange, so no worker pushes a round
past that count.
"""
import threading

import torch


class OptimizerRounds:
    """One DistributedOptimizer of every worker: its sums, and how many rounds of them this worker pushed
    (a step pushes each sum once, so one count serves them all)."""

    def __init__(self, sums):
        self.sums = sums  # (tensor id, elements, dtype) per sum, in declaration order
        self.lock = threading.Lock()
        self.pushed = 0
        self.stopped = False

    def stepped(self):
        with self.lock:
            self.pushed += 1


class _ZeroRounds:
    """A thread that pushes rounds of zeros into one optimizer's sums until stopped."""

    def __init__(self, rt, rounds):
        self.rt, self.rounds = rt, rounds
        self.error = None
        self.zeros = [torch.zeros(n, dtype=dtype) for _, n, dtype in rounds.sums]
        self.sink = [torch.empty(n, dtype=dtype) for _, n, dtype in rounds.sums]
        self.thread = threading.Thread(target=self._run, name="zps-join-zeros", daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while True:
                with self.rounds.lock:
                    if self.rounds.stopped:
                        return
                    handles = _push_zero_round(self.rt, self.rounds.sums, self.zeros, self.sink)
                    self.rounds.pushed += 1
                for h in handles:
                    self.rt.worker.wait(h, -1, "zps.torch.join: zeros for a DistributedOptimizer step")
        except BaseException as e:  # join() raises it
            self.error = e


def _push_zero_round(rt, sums, zeros, sink):
    """Starts one round of every sum, pushing zeros (the sums land in `sink`, which nobody reads)."""
    return [rt.worker.push_pull(tid, z.data_ptr(), out.data_ptr()) for (tid, _, _), z, out in zip(sums, zeros, sink)]


def start(rt):
    """join() began on this worker: zeros for every optimizer's rounds from now on."""
    return [_ZeroRounds(rt, rounds) for rounds in rt.optimizers.values()]


def finish(rt, loops, exchange_counts):
    """Every worker joined: stop, agree on each optimizer's round count, push zero rounds up to it and
    wait until every round this worker pushed completed. exchange_counts(list of int) returns every
    worker's list."""
    optimizers = list(rt.optimizers.values())
    for rounds in optimizers:
        with rounds.lock:
            rounds.stopped = True
    counts = [rounds.pushed for rounds in optimizers]
    everyone = exchange_counts(counts)
    # A worker below the largest count has no round in flight (it pushes the next round only after the
    # last one completed, and then its count is the largest), so its rounds go one at a time.
    for i, rounds in enumerate(optimizers):
        target = max(row[i] for row in everyone)
        zeros = [torch.zeros(n, dtype=dtype) for _, n, dtype in rounds.sums]
        sink = [torch.empty(n, dtype=dtype) for _, n, dtype in rounds.sums]
        for _ in range(target - counts[i]):
            for h in _push_zero_round(rt, rounds.sums, zeros, sink):
                rt.worker.wait(h, -1, "zps.torch.join: the last zero rounds of a DistributedOptimizer")
        rounds.pushed = target
    for loop in loops:
        loop.thread.join()
        if loop.error is not None:
            raise loop.error
    for rounds in optimizers:
        rounds.stopped = False


def abandon(rt):
    """join() failed: the zero rounds stop (a round in flight ends with its own deadline)."""
    for rounds in rt.optimizers.values():
        with rounds.lock:
            rounds.stopped = True
