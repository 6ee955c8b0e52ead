#!/usr/bin/env python3
"""One side of tools/bench/torch-compare.sh: times data-parallel training steps of one model, either
with torch.distributed DDP over Gloo (--system ddp; RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
the environment), with DDP over the backend "zps" (--system ddp-zps, run by zps launch) or with
zps.torch's DistributedOptimizer (--system zps, run by zps launch), or times push_pull of one tensor
(--system pushpull). Rank 0 prints one JSON line with the per-repetition
medians; the shell script makes the table.

Models: `digits` is the MLP of examples/torch/train_digits.py (64-128-128-10, 26 k parameters) on
batches of the digits' shape; `wide` is a 1024-3072-3072-10 MLP (12.6 M parameters, 50 MB of
gradients per step); `resnet50` is torchvision's ResNet-50 with 10 classes (23.5 M parameters, 94 MB of
gradients) on images of --image-size pixels square. Data is random (the same shape every step): the
point is the step time. With --compute-steps N each worker first times N forward and backward passes
without any communication (all workers at once, as in training), so the step time splits into compute
and the wait for the gradients' sums; each step's forward and backward and its optimizer.step() are
timed apart too.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MLPS = {"digits": (64, [128, 128], 10), "wide": (1024, [3072, 3072], 10)}
MODELS = sorted(MLPS) + ["resnet50"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--system", choices=["ddp", "ddp-zps", "zps", "pushpull"], required=True)
    p.add_argument("--model", choices=MODELS, default="digits")
    p.add_argument("--batch-size", type=int, default=32, help="rows per worker per step")
    p.add_argument("--image-size", type=int, default=32, help="resnet50: the images' height and width")
    p.add_argument("--compute-steps", type=int, default=0,
                   help="forward and backward passes timed without communication before the steps")
    p.add_argument("--steps", type=int, default=20, help="timed steps per repetition")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--bytes", type=int, default=4 << 20, help="pushpull: the tensor's size")
    p.add_argument("--label", default="", help="copied into the JSON line")
    return p.parse_args()


def make_model(name, image_size):
    """The model, the shape of one input row, and the number of classes."""
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(num_classes=10), (3, image_size, image_size), 10
    inputs, hidden, outputs = MLPS[name]
    layers, width = [], inputs
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, outputs))
    return nn.Sequential(*layers), (inputs,), outputs


def timed_reps(args, step):
    """Median seconds per step of each repetition (after the warm-up steps)."""
    for _ in range(args.warmup):
        step()
    medians = []
    for _ in range(args.reps):
        times = []
        for _ in range(args.steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return medians


def main():
    args = parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(1)  # the processes share the machine's cores
    ddp = args.system in ("ddp", "ddp-zps")
    if ddp:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        if args.system == "ddp-zps":
            import zps.torch.distributed  # noqa: F401  registers the backend
        dist.init_process_group("gloo" if args.system == "ddp" else "zps")
        rank, size = dist.get_rank(), dist.get_world_size()
    else:
        import zps.torch as bps
        bps.init()
        rank, size = bps.rank(), bps.size()

    result = {"label": args.label, "system": args.system, "workers": size}
    if args.system == "pushpull":
        tensor = torch.ones(args.bytes // 4)
        step_times = timed_reps(args, lambda: bps.push_pull(tensor, average=False, name="bench"))
        result.update(bytes=args.bytes)
    else:
        model, row, outputs = make_model(args.model, args.image_size)
        x = torch.randn(args.batch_size, *row)
        y = torch.randint(0, outputs, (args.batch_size,))
        compute = []
        for _ in range(args.compute_steps):  # before the wrappers: no hook, no communication
            start = time.perf_counter()
            model.zero_grad()
            F.cross_entropy(model(x), y).backward()
            compute.append(time.perf_counter() - start)
        if compute:
            result.update(compute_s=statistics.median(compute))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if ddp:
            model = DistributedDataParallel(model)
        else:
            optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
            bps.broadcast_parameters(model.state_dict(), root_rank=0)

        # Where a step's time goes: forward and backward (DDP's all-reduces block inside backward), and
        # optimizer.step() (zps.torch waits there for the sums it started during backward).
        backward_s, optimizer_s = [], []

        def step():
            start = time.perf_counter()
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            middle = time.perf_counter()
            optimizer.step()
            backward_s.append(middle - start)
            optimizer_s.append(time.perf_counter() - middle)

        step_times = timed_reps(args, step)
        timed = args.steps * args.reps  # the warm-up steps are the first ones
        result.update(forward_backward_s=statistics.median(backward_s[-timed:]),
                      optimizer_step_s=statistics.median(optimizer_s[-timed:]))
        result.update(model=args.model, batch=args.batch_size,
                      parameters=sum(p.numel() for p in model.parameters()))
        if args.model == "resnet50":
            result.update(image_size=args.image_size)
    result.update(step_s=step_times, median_step_s=statistics.median(step_times))
    if rank == 0:
        print(json.dumps(result), flush=True)
    if ddp:
        dist.destroy_process_group()
    else:
        bps.shutdown()


if __name__ == "__main__":
    main()
