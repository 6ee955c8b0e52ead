"""The table of `DLRM=1 tools/bench/cluster.sh`: DLRM with its tables on zps's servers against the same
model in DistributedDataParallel over Gloo, on the emulated cluster, and one `goal:` line.

    dlrm_cluster_table.py RESULTS RATE LAYOUT WORKERS SERVERS

RESULTS holds the JSON lines of rank 0 of examples/torch/train_dlrm.py ("system": "zps") and of
tools/bench/dlrm_compare.py --system ddp, tagged with "rep" (the round) and "run" (dlrm_SYSTEM_roundN).
Per round: samples/s of the job and its ratio zps / DDP (> 1: zps trains faster); the table shows the
medians over rounds, and the test AUC of each (both systems train the same data by the round's seed).
Goals: >= 2x DDP/Gloo with the servers on their own hosts, >= 1.3x colocated. Exits 1 when a result is
missing, else 0 (met or not).
"""
import json
import statistics
import sys


def options(run):
    """The train_dlrm.py options of a zps run that are not the example's defaults (cluster.sh's
    DLRM_ARGS), as ", with ..." for the goal line; "" for the defaults."""
    named = []
    if run.get("table_optimizer", "adagrad") != "adagrad":
        named.append(run["table_optimizer"] + " tables")
    if run.get("row_cache_steps", 0):
        named.append("row cache %d steps" % run["row_cache_steps"])
    if run.get("row_cache_write_back", 0):
        named.append("write-back")
    return ", with " + ", ".join(named) if named else ""


def main():
    path, rate, layout = sys.argv[1], sys.argv[2], sys.argv[3]
    workers, servers = int(sys.argv[4]), int(sys.argv[5])
    rows = [json.loads(line) for line in open(path) if line.strip()]
    runs = {}  # system -> {round: row}
    for r in rows:
        if r.get("run", "").startswith("dlrm_") and "samples_per_s" in r:
            runs.setdefault(r["system"], {})[r["rep"]] = r
    goal = 2.0 if layout == "separate" else 1.3
    where = f"{workers}+{servers} hosts" if layout == "separate" else f"colocated, {workers} hosts"
    zps, ddp = runs.get("zps", {}), runs.get("ddp", {})
    rounds = sorted(set(zps) | set(ddp))
    where_at = f"{where} at {rate}" + options(next(iter(zps.values()), {}))
    print(f"\n# DLRM, zps against DDP/Gloo, {workers} workers, {servers} servers ({layout}), links at {rate}; "
          f"medians over {len(rounds)} rounds; ratio: zps samples/s / DDP samples/s in the same round")
    print("# %-10s %10s %8s %8s %6s  %s" % ("system", "samples/s", "AUC", "Bayes", "ratio", "ratio per round"))
    ratios = [zps[k]["samples_per_s"] / ddp[k]["samples_per_s"] for k in rounds if k in zps and k in ddp]
    missing = 0
    for name, got in (("DDP/Gloo", ddp), ("zps", zps)):
        if not got:
            print("  %-10s no result" % name)
            missing += 1
            continue
        values = list(got.values())
        mine = ratios if name == "zps" else []
        print(("  %-10s %10.0f %8.4f %8.4f %6s  %s" % (
            name, statistics.median(v["samples_per_s"] for v in values), statistics.median(v["auc"] for v in values),
            statistics.median(v["bayes_auc"] for v in values), "%.2f" % statistics.median(mine) if mine else "",
            " ".join("%.2f" % x for x in mine))).rstrip())
    if ratios:
        value = statistics.median(ratios)
        print(f"goal: {where_at}, DLRM: zps samples/s {value:.2f}x DDP/Gloo (>= {goal}) "
              f"{'met' if value >= goal else 'NOT met'}")
    else:
        print(f"goal: {where_at}, DLRM: zps against DDP/Gloo: a result is missing, NOT met")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
