"""The table of tools/bench/cluster.sh: medians over its repetitions, the bandwidth bounds, the ratios and
one `goal:` line per goal of the emulated-cluster benchmark that this run can measure.

    cluster_table.py RESULTS RATE LAYOUT WORKERS SERVERS SIZES HALF_RATE MPI GLOO [DELAY_VARIANT]

RESULTS holds JSON lines tagged with "rep" and "run" (zps, zps_half, mpi_ring, mpi_default, gloo, and
zps_delay / mpi_ring_delay for the delay variant). DELAY_VARIANT: the delay of the variant's runs, or
"skipped: <why>", or empty (none asked for).
Goodput is bytes / p50 for every column (zps bench's goodput_gbs, the all-reduces' algbw_gbs), so the
columns compare directly. Exits 1 when a zps result is missing, else 0 (met or not).
"""
import json
import re
import statistics
import sys


def rate_bytes_per_s(rate):
    n, unit = re.fullmatch(r"(\d+)(kbit|mbit|gbit)", rate).groups()
    return int(n) * {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit] / 8


def main():
    path, rate, layout = sys.argv[1], sys.argv[2], sys.argv[3]
    workers, servers = int(sys.argv[4]), int(sys.argv[5])
    sizes = [int(s) for s in sys.argv[6].split(",")]
    half, have_mpi, have_gloo = sys.argv[7] == "1", sys.argv[8] == "1", sys.argv[9] == "1"
    delay = sys.argv[10] if len(sys.argv) > 10 else ""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    r = rate_bytes_per_s(rate)
    n = workers
    ring_factor = 2 * (n - 1) / n if n > 1 else 1
    # A worker's link carries the tensor once each way when every server has its own host, and a
    # server's link carries workers / servers tensors each way, the limit with fewer servers than
    # workers; colocated, a worker's host also serves 1/n of the keys to the others: the ring's traffic.
    ps_factor = max(1, workers / servers) if layout == "separate" else ring_factor

    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def zps(run, size):
        return med([row["goodput_gbs"] for x in rows if x["run"] == run for row in x.get("rows", [])
                    if row["bytes"] == size])

    def allreduce(run, size):
        return med([x["algbw_gbs"] for x in rows if x["run"] == run and x.get("bytes") == size])

    def f(v, digits=3):
        return "-" if v is None else f"{v:.{digits}f}"

    def mb(v):  # GB/s as MB/s: the rates emulated here are tens of MB/s
        return "-" if v is None else f"{v * 1e3:.1f}"

    def ratio(a, b):
        return a / b if a and b else None

    reps = len({x["rep"] for x in rows if x["run"] == "zps"})
    print(f"\nmedians of {reps} repetitions; goodput = bytes / p50 per worker, MB/s (1e6 bytes); links {rate} "
          f"({r / 1e6:.1f} MB/s) each way; {workers} workers, {servers} servers ({layout})")
    print(f"bounds: PS {ps_factor:.2f} x tensor / R, ring all-reduce {ring_factor:.2f} x tensor / R\n")
    head = ["size", "zps", "MPI ring", "MPI default", "Gloo", "PS bound", "ring bound", "zps/PS bound",
            "zps/MPI ring", "zps/MPI default", "zps/Gloo"]
    if half:
        head += [f"zps at R/2", "time x at R/2"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    goals, notes = [], []
    missing = False
    for size in sizes:
        z = zps("zps", size)
        missing |= z is None
        ring, default, gloo = allreduce("mpi_ring", size), allreduce("mpi_default", size), allreduce("gloo", size)
        ps_bound, ring_bound = r / ps_factor / 1e9, r / ring_factor / 1e9
        cells = [f"{size / 2**20:g} MiB", mb(z), mb(ring), mb(default), mb(gloo), mb(ps_bound), mb(ring_bound),
                 f(ratio(z, ps_bound), 2), f(ratio(z, ring), 2), f(ratio(z, default), 2), f(ratio(z, gloo), 2)]
        if half:
            zh = zps("zps_half", size)
            cells += [mb(zh), f(ratio(z, zh), 2)]
        print("| " + " | ".join(cells) + " |")
        notes.append(f"{size / 2**20:g} MiB against their own bounds: zps / PS bound {f(ratio(z, ps_bound), 2)}, "
                     f"MPI ring / ring bound {f(ratio(ring, ring_bound), 2)}, MPI default {f(ratio(default, ring_bound), 2)}, "
                     f"Gloo {f(ratio(gloo, ring_bound), 2)}")
        name = f"{size / 2**20:g} MiB, {workers} workers x {servers} servers"
        if layout == "separate":
            goals.append((f"zps goodput / PS bound, {name}", ratio(z, ps_bound), 0.85))
            if servers >= workers:
                goals.append((f"zps goodput / MPI ring, {name}", ratio(z, ring), 1.3))
        else:
            goals.append((f"zps goodput / MPI ring, {name} colocated", ratio(z, ring), 1.0))
        if delay and not delay.startswith("skipped"):
            zd = zps("zps_delay", size)
            missing |= zd is None
            notes.append(f"{size / 2**20:g} MiB with {delay} delay per link: zps {mb(zd)} MB/s, "
                         f"MPI ring {mb(allreduce('mpi_ring_delay', size))} MB/s")
            goals.append((f"zps goodput / PS bound with {delay} delay per link, {name}", ratio(zd, ps_bound), 0.8))
        if half:
            goals.append((f"zps time at R/2 / time at R (the link is the limit), {name}",
                          ratio(z, zps("zps_half", size)), 1.8))
    print()
    for line in notes:
        print(line)
    print()
    for what, measured, target in goals:
        verdict = "n/a" if measured is None else ("met" if measured >= target else "NOT met")
        print(f"goal: {what}: {f(measured, 3)} (>= {target}) {verdict}")
    if delay.startswith("skipped"):
        print(f"goal: zps goodput / PS bound with delay per link: {delay}")
    if not have_mpi:
        print("note: MPI not run (MPI=0, or mpicxx/mpirun missing): its columns are '-'")
    if not have_gloo:
        print("note: Gloo not run (GLOO=0, or torch.distributed does not import with /usr/bin/python3): '-'")
    if missing:
        print("cluster.sh: a zps result is missing (see the logs next to the results)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
