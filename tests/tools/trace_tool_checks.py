"""What the tests of the trace tools (tools/bench/cluster_trace.py, tools/bench/overlap_trace.py) share:
writing a made-up trace file, and checking that a folder without trace files is refused."""
import json
import os
import subprocess
import sys


def write_trace(path, events):
    """A trace file as zps writes it: complete events ("X") under traceEvents."""
    with open(path, "w") as f:
        json.dump({"traceEvents": [dict(e, ph="X", pid=0, tid=0) for e in events]}, f)


def refuses_folder_without_traces(tool, folder, *args):
    """True when `tool folder args...` exits non-zero and says there are no trace events."""
    empty = subprocess.run([sys.executable, tool, os.path.join(folder, "none"), *args], capture_output=True, text=True)
    if empty.returncode == 0 or "no worker or server trace events" not in empty.stderr:
        print(f"FAIL: a folder without traces: exit {empty.returncode}, {empty.stderr!r}")
        return False
    return True


def verdict(failed):
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0
