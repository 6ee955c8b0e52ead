#!/usr/bin/env python3
"""tools/bench/dlrm-stream.sh's helper and table.

    dlrm_stream_table.py --servers OUT    # the servers' exit lines of one job's output, as a JSON list
    dlrm_stream_table.py RESULTS          # the table of every run, then the goal lines

A server's exit line says "param tables: R rows held, ... C rows created, E evicted; peak resident
memory P bytes"; a row of the DLRM tables (Adagrad, float32, dimension 16) is charged ROW_BYTES against
ZPS_TABLE_MEMORY_BYTES (docs/tables.md)."""
import json
import re
import statistics
import sys

ROW_BYTES = 224
EXIT_LINE = re.compile(r"param tables: (\d+) rows held.*?(\d+) rows created, (\d+) evicted; "
                       r"peak resident memory (\d+) bytes")


def servers(path):
    found = [dict(zip(("held", "created", "evicted", "peak_rss"), map(int, m.groups())))
             for m in EXIT_LINE.finditer(open(path, errors="replace").read())]
    if len(found) != 2:
        sys.exit("dlrm_stream_table: expected the exit lines of 2 servers in %s, found %d" % (path, len(found)))
    return found


def table(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    print("| seed | budget per server | test AUC | rows held (s0 + s1) | created | evicted | bytes charged (max) "
          "| peak RSS (max) | samples/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    held_ok, changes = {}, {}
    for r in sorted(runs, key=lambda r: (r["seed"], r["budget"])):
        s = r["servers"]
        charged = max(x["held"] for x in s) * ROW_BYTES
        # Every row a server created is held or was evicted: the counts add up.
        counted = all(x["created"] - x["evicted"] == x["held"] for x in s)
        if r["budget"]:
            b = r["budget"]
            held_ok[b] = held_ok.get(b, True) and counted and charged <= b and all(x["evicted"] > 0 for x in s)
            base = [u for u in runs if u["seed"] == r["seed"] and u["budget"] == 0]
            if base:
                changes.setdefault(b, []).append(r["auc"] - base[0]["auc"])
        print("| %d | %s | %.5f | %d + %d | %d | %d | %d | %.0f MiB | %.0f |" % (
            r["seed"], "%d B" % r["budget"] if r["budget"] else "none", r["auc"], s[0]["held"], s[1]["held"],
            sum(x["created"] for x in s), sum(x["evicted"] for x in s), charged,
            max(x["peak_rss"] for x in s) / 2**20, r["samples_per_s"]))
    if not changes:
        print("dlrm_stream_table: no seed has both a budget run and an unbounded one")
        return 1
    for b in sorted(changes):
        median = statistics.median(changes[b])
        print("goal: stream of new ids, budget %d bytes per server: rows charged within the budget on every server, "
              "rows evicted, created - evicted = held: %s" % (b, "met" if held_ok[b] else "NOT met"))
        print("goal: stream of new ids, budget %d bytes per server: AUC on recent rows - unbounded run's: %+.4f, "
              "median of %d seeds (worst %+.4f) (>= -0.002) %s" % (b, median, len(changes[b]), min(changes[b]),
                                                                 "met" if median >= -0.002 else "NOT met"))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--servers":
        print(json.dumps(servers(sys.argv[2])))
    elif len(sys.argv) == 2:
        sys.exit(table(sys.argv[1]))
    else:
        sys.exit(__doc__)
