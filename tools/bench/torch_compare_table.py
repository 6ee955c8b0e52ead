#!/usr/bin/env python3
"""The table of tools/bench/torch-compare.sh from its results.jsonl (one JSON object per run, each with
the round it ran in).   Usage: torch_compare_table.py RESULTS.jsonl BATCH

Step times are medians over rounds of each run's median; ratios are taken within a round (the runs of
one round saw the same machine) and then the median over rounds, so a busy minute moves one round's
ratio rather than one side of every ratio. Exits 1 when a configuration has no result."""
import json
import statistics
import sys

CONFIGS = (("ddp", "DDP/Gloo"), ("ddp-zps-1s", "DDP/zps 1 srv"), ("zps-1s", "zps 1 server"),
           ("zps-1s-nobuckets", "  no buckets"), ("zps-2s", "zps 2 servers"))


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    batch = int(sys.argv[2])
    step = {}  # (model, label) -> {round: seconds}
    for r in rows:
        if "model" in r and r["label"] != "zps-bench":
            step.setdefault((r["model"], r["label"]), {})[r["round"]] = r["median_step_s"]
    missing = 0
    print("\n# step time, samples/s: medians over rounds; ratio: median over rounds of DDP step / zps step"
          " in the same round (>= 1.0: zps is at least as fast; the goal)")
    print("# %-8s %-14s %10s %10s %11s %7s  %s" % ("model", "system", "params", "step (ms)", "samples/s", "ratio",
                                                  "ratio per round"))
    for model in sorted({m for m, _ in step}):
        params = next(r["parameters"] for r in rows if r.get("model") == model)
        base = step.get((model, "ddp"), {})
        for label, name in CONFIGS:
            runs = step.get((model, label), {})
            if not runs:
                print("  %-8s %-14s no result" % (model, name))
                missing += 1
                continue
            seconds = median(list(runs.values()))
            ratios = [base[k] / runs[k] for k in sorted(runs) if k in base] if label != "ddp" else []
            ratio = "%.2f" % median(ratios) if ratios else ""
            print("  %-8s %-14s %10d %10.2f %11.0f %7s  %s" % (model, name, params, seconds * 1e3, 2 * batch / seconds,
                                                              ratio, " ".join("%.2f" % x for x in ratios)))
    python = {r["round"]: r["median_step_s"] for r in rows if r["label"] == "pushpull"}
    bench = {r["round"]: median([row["p50_us"] * 1e-6 for row in r["rows"]]) for r in rows if r["label"] == "zps-bench"}
    both = sorted(set(python) & set(bench))
    if not both:
        print("# push_pull: no result")
        return 1
    size = next(r["bytes"] for r in rows if r["label"] == "pushpull")
    ratios = [python[k] / bench[k] for k in both]
    print("# push_pull of one %d-byte float32 tensor, 2 workers, 1 server: Python %.3f ms, zps bench p50 %.3f ms"
          " (medians); Python / bench %.2f (median over rounds: %s; goal <= 1.10)" % (
              size, median([python[k] for k in both]) * 1e3, median([bench[k] for k in both]) * 1e3, median(ratios),
              " ".join("%.2f" % x for x in ratios)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
