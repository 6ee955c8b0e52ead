"""tools/bench/overlap_trace.py on a made-up trace whose waits are known: 2 workers, 1 server, a fifo copy
of one tensor and a priority copy of two layers, one round, 300 ms of compute (a 100 ms forward pass).
Checks the lines it prints for worker 0 (and the layers pushed apart and each worker's pushes into the
server, from the server's trace), and that
a folder without trace files is refused with a message.

    overlap_trace_test.py REPO_ROOT
"""
import os
import subprocess
import sys
import tempfile

from trace_tool_checks import refuses_folder_without_traces, verdict, write_trace

MB = 1_000_000



def worker_event(name, tensor, tid, ts, end, nbytes, worker):
    return {"name": name, "cat": "worker", "ts": ts, "dur": end - ts,
            "args": {"tensor": f"bench/m/{tensor}", "key": tid << 24, "round": 1, "bytes": nbytes, "server": 0,
                     "worker": worker}}


def push_in(tid, at, worker, op, nbytes=1):
    return {"name": "sum", "cat": "server", "ts": at - 1000, "dur": 1000,
            "args": {"key": tid << 24, "round": 1, "worker": worker, "bytes": nbytes, "server": 0, "op": op}}


def main():
    tool = os.path.join(sys.argv[1], "tools", "bench", "overlap_trace.py")
    with tempfile.TemporaryDirectory() as d:
        # fifo: tensor 1 (2 MB), one push_pull from 0 to 40 ms. priority: layer 0 = tensor 3 (1 MB), layer 1
        # = tensor 4 (3 MB); the backward pushes layer 1 at 0 ms (acknowledged at 10, reply at 60) and
        # layer 0 at 50 ms (acknowledged at 55, reply at 120).
        write_trace(os.path.join(d, "worker-0.json"), [
            worker_event("push_pull", "fifo/t", 1, 0, 40000, 2 * MB, 0),
            worker_event("push", "priority/l1", 4, 0, 10000, 3 * MB, 0),
            worker_event("pull", "priority/l1", 4, 10000, 60000, 3 * MB, 0),
            worker_event("push", "priority/l0", 3, 50000, 55000, 1 * MB, 0),
            worker_event("pull", "priority/l0", 3, 55000, 120000, 1 * MB, 0)])
        write_trace(os.path.join(d, "worker-1.json"), [worker_event("push", "priority/l0", 3, 60000, 90000, 1 * MB, 1)])
        # Pushes in at the server: tensor 1 at 20 and 30 ms; layer 1 at 8 and 20 ms; layer 0 at 52 and 100 ms.
        write_trace(os.path.join(d, "server-0.json"), [
            push_in(1, 20000, 0, "push_pull"), push_in(1, 30000, 1, "push_pull"),
            push_in(4, 8000, 0, "push", 3 * MB), push_in(4, 20000, 1, "push", 3 * MB),
            push_in(3, 52000, 0, "push", MB), push_in(3, 100000, 1, "push", MB)])
        out = subprocess.run([sys.executable, tool, d, "300"], capture_output=True, text=True)
        lines = [" ".join(line.split()) for line in out.stdout.splitlines()]
        # fifo: its reply at 40 ms keeps the forward (from 0 ms) waiting 40 ms; the round completed at 30 ms,
        # 30 ms after the push; then 100 ms of forward: 140 ms.
        # priority: the forward starts at 50 ms, waits for layer 0 until 120 ms (its round completed at
        # 100 ms, 50 ms after the push, and the reply came 20 ms later), computes it for 1/4 of 100 ms,
        # finds layer 1 there (60 ms) and computes it for 75 ms: 70 ms blocked, 220 ms.
        want = [
            "fifo, round 1, worker 0: 1 tensors; backward issued its last push at 0 ms",
            "keys: last worker's push in after the first's: median 10 ms, p90 10 ms (1 keys)",
            "apart: layer 0: workers' pushes in at [0, 10] ms",
            "0 40 30 10",
            "rebuilt: forward blocked 40 ms, iteration 140 ms",
            "rates (ms: pushes acknowledged / replies received, MB/s): 0: 0.0/4.0",
            "priority, round 1, worker 0: 2 tensors; backward issued its last push at 50 ms",
            "keys: last worker's push in after the first's: median 30 ms, p90 48 ms (2 keys)",
            "apart: layer 0: workers' pushes in at [44, 92] ms",
            "apart: layer 1: workers' pushes in at [0, 12] ms",
            # 4 MB from each worker; worker 0's last in at 44 ms, worker 1's at 92 ms after the first.
            "into server 0: last push in at [44, 92] ms, MB/s [90.9, 43.5]",
            "0 70 50 20",
            "rebuilt: forward blocked 70 ms, iteration 220 ms",
            "rates (ms: pushes acknowledged / replies received, MB/s): 0: 8.0/8.0",
        ]
        missing = [w for w in want if w not in lines]
        failed = out.returncode != 0 or bool(missing)
        if failed:
            print(f"FAIL: exit {out.returncode}, lines missing {missing} from:\n{out.stdout}{out.stderr}")
        if not refuses_folder_without_traces(tool, d, "300"):
            failed = True
    return verdict(failed)


if __name__ == "__main__":
    sys.exit(main())
