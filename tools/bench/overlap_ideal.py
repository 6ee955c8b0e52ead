#!/usr/bin/env python3
"""The best iteration `zps bench --model resnet50 --compute_ms` can reach when the link is the only
limit and nothing waits in queues: one worker's link sends ready partitions one at a time, in the
order a schedule picks, and a partition's sum is back the moment its push has gone out (no other
worker to wait for). Compute C per iteration as in tools/bench/overlap.h (backward 2/3, forward 1/3,
per layer by parameters); the link needs T for all bytes. Prints iteration / max(C, T) for C = T, per
schedule and partition size:

  fifo      first ready, first sent
  priority  the lowest layer first (what zps's priority scheduling does)
  whole     priority, but a tensor whose first partition has gone out sends the rest before any other
  ageing A  priority, but a partition ready for more than A x C goes first, oldest first

    tools/bench/overlap_ideal.py
"""


def resnet50():
    """ResNet-50's parameter counts in forward order (tools/bench/model_shapes.cc)."""
    t = []
    t += [64 * 3 * 7 * 7, 64, 64]
    inplanes = 64
    for stage, blocks in enumerate([3, 4, 6, 3]):
        planes = 64 << stage
        for b in range(blocks):
            t += [planes * inplanes, planes, planes]
            t += [planes * planes * 9, planes, planes]
            t += [planes * 4 * planes, planes * 4, planes * 4]
            if b == 0:
                t += [planes * 4 * inplanes, planes * 4, planes * 4]
            inplanes = planes * 4
    t += [2048 * 1000, 1000]
    return t


def pick(queue, schedule, now, age_limit, started):
    """Index in `queue` (entries: ready time, layer, arrival, elements) of the partition sent next."""
    if schedule == "fifo":
        return min(range(len(queue)), key=lambda i: queue[i][2])
    if schedule == "ageing":
        aged = [i for i in range(len(queue)) if now - queue[i][0] > age_limit]
        if aged:
            return min(aged, key=lambda i: queue[i][2])
    if schedule == "whole" and started is not None:
        rest = [i for i in range(len(queue)) if queue[i][1] == started]
        if rest:
            return rest[0]
    return min(range(len(queue)), key=lambda i: (queue[i][1], queue[i][2]))


def iteration(params, C, T, schedule, part, age=0.0):
    """The iteration time: partitions of `part` floats, compute C, link time T for all bytes."""
    total, layers = sum(params), len(params)
    ready, acc = [0.0] * layers, 0.0
    for i in reversed(range(layers)):
        acc += params[i] / total * 2 * C / 3
        ready[i] = acc
    partitions = []  # in the order they become ready
    for i in sorted(range(layers), key=lambda i: ready[i]):
        left = params[i]
        while left > 0:
            n = min(part, left)
            partitions.append((ready[i], i, len(partitions), n))
            left -= n
    rate = total / T
    done, remaining = [0.0] * layers, list(params)
    t, k, queue, started = 0.0, 0, [], None
    while k < len(partitions) or queue:
        while k < len(partitions) and partitions[k][0] <= t + 1e-12:
            queue.append(partitions[k])
            k += 1
        if not queue:
            t = partitions[k][0]
            continue
        _, layer, _, n = queue.pop(pick(queue, schedule, t, age * C, started))
        started = layer
        t += n / rate
        remaining[layer] -= n
        if remaining[layer] == 0:
            done[layer] = t
    f = 2 * C / 3
    for i in range(layers):
        f = max(f, done[i]) + params[i] / total * C / 3
    return f


def main():
    params = resnet50()
    for part, label in ((262144, "1 MiB"), (16384, "64 KiB")):
        rows = [("fifo", 0.0), ("priority", 0.0), ("whole", 0.0), ("ageing", 0.02), ("ageing", 0.2)]
        for schedule, age in rows:
            name = schedule if schedule != "ageing" else f"ageing {age}"
            ratio = iteration(params, 1.0, 1.0, schedule, part, age)
            print(f"resnet50, {label} partitions, compute = communication: {name:12s} "
                  f"iteration / max(compute, communication) = {ratio:.3f}")


if __name__ == "__main__":
    main()
