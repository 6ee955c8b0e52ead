"""tools/bench/cluster_trace.py on a made-up trace whose phases are known: 2 workers, 2 servers, one
tensor of 4 partitions of 1000 B, one round, at 8mbit (1 MB/s). Checks every column of its row, and
that a folder without trace files is refused with a message.

    cluster_trace_test.py REPO_ROOT
"""
import os
import subprocess
import sys
import tempfile

from trace_tool_checks import refuses_folder_without_traces, verdict, write_trace

KEY = 1 << 24  # tensor 1, partition 0



def main():
    tool = os.path.join(sys.argv[1], "tools", "bench", "cluster_trace.py")
    with tempfile.TemporaryDirectory() as d:
        # Worker 0 starts at 1 ms, worker 1 at 3 ms; replies (push_pull ends) as listed.
        starts, replies = {0: 1000, 1: 3000}, {0: [10000, 11000, 12000, 13000], 1: [10500, 11500, 12500, 14000]}
        # Pushes taken in by the servers (partition i on server i % 2).
        arrivals = {0: [4000, 5000, 6000, 7000], 1: [5000, 6000, 7000, 9000]}
        for w in (0, 1):
            write_trace(os.path.join(d, f"worker-{w}.json"), [
                {"name": "push_pull", "cat": "worker", "ts": starts[w], "dur": replies[w][i] - starts[w],
                 "args": {"key": KEY + i, "round": 1, "bytes": 1000, "server": i % 2, "worker": w}}
                for i in range(4)])
        for s in (0, 1):
            write_trace(os.path.join(d, f"server-{s}.json"), [
                {"name": "sum", "cat": "server", "ts": arrivals[w][i] - 100, "dur": 100,
                 "args": {"key": KEY + i, "round": 1, "worker": w, "bytes": 1000, "server": s, "op": "push_pull"}}
                for w in (0, 1) for i in range(4) if i % 2 == s])
        out = subprocess.run([sys.executable, tool, d, "8mbit", "1000"], capture_output=True, text=True)
        rows = [line.split() for line in out.stdout.splitlines() if not line.startswith("#")]
        # stagger (0, 2) ms; pushed (6, 6); completed 9 ms less each start (8, 6); done (12, 11);
        # drain (6, 5); ideal (4000 + 2 x 1000) B / 1 MB/s = 6 ms; 6 / 11.5 = 0.52.
        want = ["4000", "1000", "1", "1.0", "6.0", "7.0", "11.5", "5.5", "6.0", "0.52"]
        failed = out.returncode != 0 or rows != [want]
        if failed:
            print(f"FAIL: want the row {want}, got exit {out.returncode}:\n{out.stdout}{out.stderr}")
        if not refuses_folder_without_traces(tool, d, "8mbit"):
            failed = True
    return verdict(failed)


if __name__ == "__main__":
    sys.exit(main())
