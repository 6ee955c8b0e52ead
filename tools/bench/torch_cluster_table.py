"""The table of `TORCH=... tools/bench/cluster.sh`: zps.torch and DDP over the backend "zps" against DDP
over Gloo, training on the emulated cluster, and one `goal:` line per model and zps system.

    torch_cluster_table.py RESULTS RATE LAYOUT WORKERS SERVERS MODELS

RESULTS holds the JSON lines of tools/bench/torch_compare.py's rank 0, tagged with "rep" (the round) and
"run" (torch_SYSTEM_MODEL_roundN). MODELS is comma separated. Per round: the step time (the
median of the run's timed steps), samples/s for the job (workers x batch / step) and the ratio DDP step
/ zps step (> 1: zps trains faster); the table shows the medians of those per-round values, so a busy
minute moves one round's ratio rather than one side of every ratio. `compute` is the median forward and
backward pass without communication, timed on all workers at once before the steps; `fwd+bwd` and
`opt.step` split the step (DDP's all-reduces block inside backward, zps.torch waits in
optimizer.step() for the sums it started during backward); `link` is the time
a step's gradients need on one link at the rate: the gradient bytes once each way for a parameter
server on its own hosts, 2(n-1)/n of them for ring all-reduce and for servers colocated with the
workers. Goals: >= 1.3x DDP/Gloo with the servers on their own hosts, >= 1.0x colocated. Exits 1 when
a result is missing, else 0 (met or not).
"""
import json
import statistics
import sys

from cluster_table import rate_bytes_per_s

SYSTEMS = (("ddp", "DDP/Gloo"), ("zps", "zps.torch"), ("ddp-zps", "DDP/zps"))


def main():
    path, rate, layout = sys.argv[1], sys.argv[2], sys.argv[3]
    workers, servers = int(sys.argv[4]), int(sys.argv[5])
    models = sys.argv[6].split(",")
    rows = [json.loads(line) for line in open(path) if line.strip()]
    link = rate_bytes_per_s(rate)
    ring_factor = 2 * (workers - 1) / workers if workers > 1 else 1
    ps_factor = max(1, workers / servers) if layout == "separate" else ring_factor
    goal = 1.3 if layout == "separate" else 1.0
    where = (f"{workers}+{servers} hosts" if layout == "separate" else f"colocated, {workers} hosts")

    runs = {}  # (model, system) -> {round: row}
    for r in rows:
        if r.get("run", "").startswith("torch_") and "median_step_s" in r:
            runs.setdefault((r["model"], r["system"]), {})[r["rep"]] = r
    rounds = len({k for v in runs.values() for k in v})
    print(f"\n# zps.torch against DDP/Gloo, {workers} workers, {servers} servers ({layout}), links at {rate}; "
          f"medians over {rounds} rounds of each round's value; ratio: DDP step / zps step in the same round (> 1: zps is faster)")
    print("# %-9s %-10s %9s %6s %10s %13s %8s %8s %10s %9s %6s  %s" % (
        "model", "system", "params", "batch", "step (ms)", "compute (ms)", "fwd+bwd", "opt.step", "link (ms)",
        "samples/s", "ratio", "ratio per round"))
    missing, goals = 0, []
    for model in models:
        ddp = runs.get((model, "ddp"), {})
        for system, name in SYSTEMS:
            got = runs.get((model, system), {})
            if not got:
                print("  %-9s %-10s no result" % (model, name))
                missing += 1
                if system != "ddp":
                    goals.append(f"goal: {where} at {rate}, {model}: {name} against DDP/Gloo: no {name} result, NOT met")
                continue
            any_row = next(iter(got.values()))
            gradient_bytes = 4 * any_row["parameters"]
            factor = ring_factor if system == "ddp" else ps_factor
            steps = [got[k]["median_step_s"] for k in sorted(got)]

            def ms(key):  # the median over rounds of one timing, '-' when the runs did not record it
                values = [got[k][key] for k in sorted(got) if key in got[k]]
                return "%.0f" % (statistics.median(values) * 1e3) if values else "-"

            samples = [workers * got[k]["batch"] / got[k]["median_step_s"] for k in sorted(got)]
            ratios = ([ddp[k]["median_step_s"] / got[k]["median_step_s"] for k in sorted(got) if k in ddp]
                      if system != "ddp" else [])
            ratio = "%.2f" % statistics.median(ratios) if ratios else ""
            print(("  %-9s %-10s %9d %6d %10.0f %13s %8s %8s %10.0f %9.1f %6s  %s" % (
                model, name, any_row["parameters"], any_row["batch"], statistics.median(steps) * 1e3, ms("compute_s"),
                ms("forward_backward_s"), ms("optimizer_step_s"),
                factor * gradient_bytes / link * 1e3, statistics.median(samples), ratio,
                " ".join("%.2f" % x for x in ratios))).rstrip())
            if system != "ddp":
                if ratios:
                    value = statistics.median(ratios)
                    goals.append(f"goal: {where} at {rate}, {model}: {name} step throughput "
                                 f"{value:.2f}x DDP/Gloo (>= {goal}) {'met' if value >= goal else 'NOT met'}")
                else:
                    goals.append(f"goal: {where} at {rate}, {model}: {name} against DDP/Gloo: no DDP result, NOT met")
    for line in goals:
        print(line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
