#!/usr/bin/env python3
"""Where an overlap iteration's forward pass waits: reads the trace files of a `zps bench --model` run
(`TRACE=1 MODEL=resnet50 tools/bench/cluster.sh` writes them) and, per schedule (fifo, priority), takes
the last traced iteration and prints:

  keys        per key (partition), how much later the last worker's push came in at its server than
              the first worker's (median, 90th percentile): a round is summed, and its replies sent,
              only when the last one is in
  apart       the 5 layers with the widest such key, when each worker's push of it came in (ms from
              the iteration's first push in): the workers sent it in a different order
  into        per server, when each worker's last push came in (ms from the iteration's first push in)
              and the rate of that worker's pushes into it until then (MB/s): the workers share each
              server's link, and one that gets less than its share is late with all its keys there
  waits       the layers the forward pass waited for on WORKER (default 0), rebuilt from the trace:
              the forward starts when the backward pass issued its last push and spends COMPUTE_MS / 3
              over the layers by their bytes, as tools/bench/overlap.h does; per layer the wait, how
              long its round took from this worker's push to complete (last push in at the server),
              and from completion to this worker's reply
  rates       per 500 ms of the iteration, the bytes of this worker's pushes acknowledged and of its
              replies received (MB/s): replies behind pushes are rounds waiting for other workers

    overlap_trace.py TRACE_DIR COMPUTE_MS [WORKER]

COMPUTE_MS is the bench's simulated compute per iteration (its overlap table prints it). All processes
run on one machine, so the workers' and servers' trace clocks are one clock.
"""
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_trace import KEY_PARTITION_BITS, load  # noqa: E402  (the same trace files)

WINDOW_US = 500_000


def tensor_of(event):
    return event["args"]["key"] >> KEY_PARTITION_BITS


def schedule_tensors(workers, schedule):
    """Tensor ids of one schedule's model copy, in declaration (= forward) order."""
    return sorted({tensor_of(e) for e in workers if f"/{schedule}/" in e["args"].get("tensor", "")})


def round_pushes(servers, tensors, rnd):
    """The servers' events of the pushes of round `rnd` of these tensors."""
    return [e for e in servers
            if e["args"]["round"] == rnd and e["args"]["op"] in ("push", "push_pull") and tensor_of(e) in tensors]


def push_arrivals(servers, tensors, rnd):
    """key -> worker -> when the server had taken that worker's push in (us)."""
    arrivals = defaultdict(dict)
    for e in round_pushes(servers, tensors, rnd):
        arrivals[e["args"]["key"]][e["args"]["worker"]] = e["ts"] + e["dur"]
    return arrivals


def spread(worker_times):
    return (max(worker_times.values()) - min(worker_times.values())) / 1e3


def print_apart(arrivals, ids):
    """How far apart the workers' pushes of a key came in, and the layers pushed furthest apart."""
    spreads = sorted(spread(m) for m in arrivals.values() if len(m) > 1)
    if not spreads:
        return
    print(f"  keys: last worker's push in after the first's: median {statistics.median(spreads):.0f} ms, "
          f"p90 {spreads[int(len(spreads) * 0.9)]:.0f} ms ({len(spreads)} keys)")
    first_in = min(min(m.values()) for m in arrivals.values())
    layer_of = {tensor: layer for layer, tensor in enumerate(ids)}
    widest = {}  # layer -> its key's arrivals with the widest spread
    for key, m in arrivals.items():
        layer = layer_of[key >> KEY_PARTITION_BITS]
        if len(m) > 1 and (layer not in widest or spread(m) > spread(widest[layer])):
            widest[layer] = m
    for layer in sorted(sorted(widest, key=lambda layer: -spread(widest[layer]))[:5]):
        m = widest[layer]
        print(f"  apart: layer {layer}: workers' pushes in at {[round((m[w] - first_in) / 1e3) for w in sorted(m)]} ms")


def print_links(servers, tensors, rnd):
    """Per server, each worker's last push in and the rate of its pushes into that server until then."""
    pushes = round_pushes(servers, tensors, rnd)
    if not pushes:
        return
    taken = defaultdict(lambda: defaultdict(int))  # server -> worker -> bytes
    last = defaultdict(dict)  # server -> worker -> when its last push was in (us)
    for e in pushes:
        a = e["args"]
        taken[a["server"]][a["worker"]] += a["bytes"]
        last[a["server"]][a["worker"]] = max(last[a["server"]].get(a["worker"], 0), e["ts"] + e["dur"])
    first_in = min(e["ts"] + e["dur"] for e in pushes)
    for server in sorted(last):
        ends = last[server]
        rates = [taken[server][w] / max(ends[w] - first_in, 1) for w in sorted(ends)]  # bytes/us = MB/s
        print(f"  into server {server}: last push in at {[round((ends[w] - first_in) / 1e3) for w in sorted(ends)]} ms, "
              f"MB/s {[round(r, 1) for r in rates]}")


def print_waits(ids, issued, complete, replied, nbytes, start, backward_end, compute_ms):
    """Rebuilds the forward pass: from the backward's last push, layer by layer, each waiting for its reply."""
    total = sum(nbytes[t] for t in ids)
    clock = (backward_end - start) / 1e3
    blocked = 0.0
    print("  waits:  layer  wait(ms)  push->complete(ms)  complete->reply(ms)")
    for i, t in enumerate(ids):
        reply_at = (replied[t] - start) / 1e3
        if reply_at > clock:
            if reply_at - clock >= 5:
                print(f"        {i:6d} {reply_at - clock:9.0f} {(complete[t] - issued[t]) / 1e3:19.0f} "
                      f"{(replied[t] - complete[t]) / 1e3:20.0f}")
            blocked += reply_at - clock
            clock = reply_at
        clock += nbytes[t] / total * compute_ms / 3
    print(f"  rebuilt: forward blocked {blocked:.0f} ms, iteration {clock:.0f} ms")


def print_rates(acks, replies, start):
    end = max(x for x, _ in replies)
    rows = []
    w = start
    while w < end:
        pushed = sum(b for x, b in acks if w <= x < w + WINDOW_US)
        got = sum(b for x, b in replies if w <= x < w + WINDOW_US)
        mb_per_s = 1 / (WINDOW_US / 1e6) / 1e6
        rows.append(f"{(w - start) / 1e3:.0f}: {pushed * mb_per_s:.1f}/{got * mb_per_s:.1f}")
        w += WINDOW_US
    print("  rates (ms: pushes acknowledged / replies received, MB/s): " + ", ".join(rows))


def report(schedule, workers, servers, compute_ms, worker):
    ids = schedule_tensors(workers, schedule)
    if not ids:
        print(f"{schedule}: no traced tensors")
        return
    in_copy = set(ids)
    rnd = max(e["args"]["round"] for e in workers if tensor_of(e) in in_copy)
    issued, replied, nbytes = defaultdict(lambda: float("inf")), defaultdict(int), defaultdict(int)
    acks, replies = [], []  # (when, bytes)
    for e in workers:
        a = e["args"]
        if a["round"] != rnd or a["worker"] != worker or tensor_of(e) not in in_copy:
            continue
        t, end = tensor_of(e), e["ts"] + e["dur"]
        if e["name"] != "pull":
            issued[t] = min(issued[t], e["ts"])
        if "pull" in e["name"]:  # pull, push_pull: the reply carries the sum
            replied[t] = max(replied[t], end)
            nbytes[t] += a["bytes"]
            replies.append((end, a["bytes"]))
        else:
            acks.append((end, a["bytes"]))
    arrivals = push_arrivals(servers, in_copy, rnd)
    complete = defaultdict(int)  # tensor -> its last key's last push in
    for key, m in arrivals.items():
        complete[key >> KEY_PARTITION_BITS] = max(complete[key >> KEY_PARTITION_BITS], max(m.values()))
    start = min(issued[t] for t in ids)
    backward_end = max(issued[t] for t in ids)
    print(f"{schedule}, round {rnd}, worker {worker}: {len(ids)} tensors; backward issued its last push at "
          f"{(backward_end - start) / 1e3:.0f} ms")
    print_apart(arrivals, ids)
    print_links(servers, in_copy, rnd)
    print_waits(ids, issued, complete, replied, nbytes, start, backward_end, compute_ms)
    print_rates(acks, replies, start)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    trace_dir, compute_ms = sys.argv[1], float(sys.argv[2])
    worker = int(sys.argv[3]) if len(sys.argv) == 4 else 0
    workers, servers = load(trace_dir, "worker"), load(trace_dir, "server")
    if not workers or not servers:
        sys.exit(f"overlap_trace.py: no worker or server trace events in {trace_dir}")
    for schedule in ("fifo", "priority"):
        report(schedule, workers, servers, compute_ms, worker)


if __name__ == "__main__":
    main()
