"""torch.distributed all-reduce over Gloo: the PyTorch reference of tools/bench/cluster.sh.

One process per rank, each started in its own emulated host:
    python3 gloo_allreduce.py RANK WORLD MASTER_ADDR MASTER_PORT BYTES[,BYTES...] MIN_SECONDS
Rank 0 prints one JSON object per size, in the same shape as mpi_allreduce.cc (algbw = bytes / p50 of
the slowest rank), and every rank checks the sum exactly. Exits 1 on a wrong sum.
"""
import json
import sys
import time

import torch
import torch.distributed as dist


def main():
    if len(sys.argv) != 7:
        sys.exit("usage: gloo_allreduce.py RANK WORLD MASTER_ADDR MASTER_PORT BYTES[,BYTES...] MIN_SECONDS")
    rank, world = int(sys.argv[1]), int(sys.argv[2])
    addr, port = sys.argv[3], int(sys.argv[4])
    sizes = [int(s) for s in sys.argv[5].split(",") if s]
    min_time = float(sys.argv[6])
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=120))
    wrong = 0
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        expect = world * (world + 1) / 2
        t = torch.empty(n, dtype=torch.float32)
        start = time.perf_counter()
        for _ in range(2):
            t.fill_(rank + 1)
            dist.all_reduce(t)
        # Rank 0's estimate decides the iteration count for all.
        iters = torch.tensor([max(3, min(1000, int(min_time / ((time.perf_counter() - start) / 2))))])
        dist.broadcast(iters, 0)
        lat = []
        for _ in range(int(iters.item())):
            t.fill_(rank + 1)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            lat.append(time.perf_counter() - t0)
            wrong += int((t != expect).sum().item())
        slowest = torch.tensor(lat, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            p50 = slowest.median().item()
            print(json.dumps({"test": "gloo_allreduce", "np": world, "bytes": n * 4, "iters": len(lat),
                              "p50_us": round(p50 * 1e6, 1), "algbw_gbs": round(n * 4 / p50 / 1e9, 7)}), flush=True)
    total = torch.tensor([wrong])
    dist.all_reduce(total)
    dist.destroy_process_group()
    if total.item():
        print(f"gloo_allreduce: {total.item()} wrong values", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
