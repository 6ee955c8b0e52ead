"""Where a push-pull round's time goes on the emulated cluster: reads the Chrome trace files that
`ZPS_TRACE_ON=1` makes (`TRACE=1 tools/bench/cluster.sh` sets it) and splits each worker's round of each
tensor into its phases, against the pipeline the links allow.

    cluster_trace.py TRACE_DIR RATE [MIN_BYTES]

TRACE_DIR holds worker-<rank>.json and server-<rank>.json; RATE is the links' rate (200mbit); tensors
smaller than MIN_BYTES (default 1 MiB) are left out (the bench's control tensor). Per tensor, medians over
the traced rounds (the first round is left out when there are more than two: it includes connection
start-up) of, per worker and round, in milliseconds from that worker's own start of the round:

  stagger     how much later this worker started the round than the first worker did
  pushed      the last of its partitions taken in by a server (its push phase)
  completed   the last key summed from every worker's push (every server's last key)
  done        its last reply in: the round as the worker sees it (what zps bench times)
  drain       done - pushed: the time its link's send direction waits, idle, for replies
  ideal       (tensor + workers x partition) / R: pushes and replies of different keys overlap, and the
              last key's replies (one partition to each worker) go out after the last push is in

Server times come from the servers' trace events (a push is logged when it has been received whole),
worker times from the workers'; all processes run on one machine, so they share one clock.
"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict

KEY_PARTITION_BITS = 24  # worker/placement.h: key = tensor id << 24 | partition index


def rate_bytes_per_s(rate):
    n, unit = re.fullmatch(r"(\d+)(kbit|mbit|gbit)", rate).groups()
    return int(n) * {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit] / 8


def load(trace_dir, role):
    events = []
    for path in sorted(glob.glob(os.path.join(trace_dir, role + "-*.json"))):
        with open(path) as f:
            events += [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    return events


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    trace_dir, rate = sys.argv[1], rate_bytes_per_s(sys.argv[2])
    min_bytes = int(sys.argv[3]) if len(sys.argv) == 4 else 1 << 20
    workers, servers = load(trace_dir, "worker"), load(trace_dir, "server")
    if not workers or not servers:
        sys.exit(f"cluster_trace.py: no worker or server trace events in {trace_dir}")

    # (tensor, round) -> worker -> [start, last reply]; key sizes; (tensor, round, worker) -> last push in.
    rounds = defaultdict(dict)
    part_bytes = defaultdict(set)
    tensor_bytes = defaultdict(lambda: defaultdict(int))
    for e in workers:
        a = e["args"]
        tensor, r, w = a["key"] >> KEY_PARTITION_BITS, a["round"], a["worker"]
        span = rounds[(tensor, r)].setdefault(w, [e["ts"], e["ts"]])
        span[0] = min(span[0], e["ts"])
        if "pull" in e["name"]:
            span[1] = max(span[1], e["ts"] + e["dur"])
            tensor_bytes[(tensor, r)][w] += a["bytes"]
        part_bytes[tensor].add(a["bytes"])
    pushed, completed = defaultdict(int), defaultdict(int)
    key_done = defaultdict(int)
    for e in servers:
        a = e["args"]
        if a["op"] not in ("push", "push_pull"):
            continue
        tensor, r = a["key"] >> KEY_PARTITION_BITS, a["round"]
        end = e["ts"] + e["dur"]
        pushed[(tensor, r, a["worker"])] = max(pushed[(tensor, r, a["worker"])], end)
        key_done[(a["key"], r)] = max(key_done[(a["key"], r)], end)
    for (key, r), end in key_done.items():
        t = key >> KEY_PARTITION_BITS
        completed[(t, r)] = max(completed[(t, r)], end)

    by_tensor = defaultdict(list)
    for (tensor, r) in sorted(rounds):
        by_tensor[tensor].append(r)
    print("# where a round's time goes (ms from each worker's own start of the round; medians over workers "
          "and rounds)")
    print("# %12s %9s %6s %8s %8s %10s %8s %8s %8s %10s" % ("tensor(B)", "part(B)", "rounds", "stagger", "pushed",
                                                            "completed", "done", "drain", "ideal", "ideal/done"))
    for tensor, rs in sorted(by_tensor.items()):
        if len(rs) > 2:
            rs = rs[1:]
        sizes = [max(tensor_bytes[(tensor, r)].values(), default=0) for r in rs]
        size = max(sizes) if sizes else 0
        if size < min_bytes:
            continue
        part = max(part_bytes[tensor])
        n = len(rounds[(tensor, rs[0])])
        cols = defaultdict(list)
        for r in rs:
            spans = rounds[(tensor, r)]
            first = min(s[0] for s in spans.values())
            for w, (start, done) in spans.items():
                cols["stagger"].append(start - first)
                cols["pushed"].append(pushed[(tensor, r, w)] - start)
                cols["completed"].append(completed[(tensor, r)] - start)
                cols["done"].append(done - start)
                cols["drain"].append(done - pushed[(tensor, r, w)])
        m = {k: statistics.median(v) / 1000 for k, v in cols.items()}
        ideal = (size + n * part) / rate * 1000
        print("  %12d %9d %6d %8.1f %8.1f %10.1f %8.1f %8.1f %8.1f %10.2f" % (
            size, part, len(rs), m["stagger"], m["pushed"], m["completed"], m["done"], m["drain"], ideal,
            ideal / m["done"]))
    print("# ideal = (tensor + workers x partition) / R at R = %.1f MB/s (TCP/IP headers add about 5%% on "
          "the wire)" % (rate / 1e6))


if __name__ == "__main__":
    main()
