#!/usr/bin/env python3
"""Prints tools/bench/dlrm-row-cache.sh's table from its results (one JSON object per run of
train_dlrm.py): per K, the medians over seeds of the servers' embedding bytes per sample, of their drop
against K = 0 with the same seed, of the test AUC and its change against K = 0 (and the worst seed's
change), and of samples/s."""
import json
import statistics
import sys


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    by = {(r["seed"], r["row_cache_steps"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    ks = sorted({r["row_cache_steps"] for r in runs})
    if 0 not in ks or any("servers_pulled" not in r["embedding_bytes_per_sample"] for r in runs):
        print("dlrm_row_cache_table: need runs with K = 0 and the servers' counters (ZPS_METRICS_PORT)")
        return 1

    def med(values):
        return statistics.median(values) if values else float("nan")

    print("| K | pulled B/sample | pushed B/sample | pulled vs K=0 | pulled+pushed vs K=0 | AUC | AUC - AUC(K=0) "
          "| worst AUC change | samples/s | seeds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for k in ks:
        rows, pulled_drop, total_drop, auc_change = [], [], [], []
        for seed in seeds:
            run, base = by.get((seed, k)), by.get((seed, 0))
            if run is None or base is None:
                continue
            rows.append(run)
            b, r = base["embedding_bytes_per_sample"], run["embedding_bytes_per_sample"]
            pulled_drop.append(1 - r["servers_pulled"] / b["servers_pulled"])
            total = r["servers_pulled"] + r["servers_pushed"]
            total_drop.append(1 - total / (b["servers_pulled"] + b["servers_pushed"]))
            auc_change.append(run["auc"] - base["auc"])
        print("| %d | %.1f | %.1f | %+.1f%% | %+.1f%% | %.4f | %+.4f | %+.4f | %.0f | %d |" % (
            k, med([r["embedding_bytes_per_sample"]["servers_pulled"] for r in rows]),
            med([r["embedding_bytes_per_sample"]["servers_pushed"] for r in rows]),
            -100 * med(pulled_drop), -100 * med(total_drop), med([r["auc"] for r in rows]), med(auc_change), min(auc_change),
            med([r["samples_per_s"] for r in rows]), len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
