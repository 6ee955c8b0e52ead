"""tools/bench/overlap_ideal.py: the ideal ResNet-50 overlap each schedule allows (its numbers are
quoted in docs/performance.md, so a change to the model shows here).

    overlap_ideal_test.py REPO_ROOT
"""
import os
import re
import subprocess
import sys


def main():
    tool = os.path.join(sys.argv[1], "tools", "bench", "overlap_ideal.py")
    out = subprocess.run([sys.executable, tool], capture_output=True, text=True)
    # "<model, partitions, ...>: <schedule>  iteration / max(compute, communication) = <ratio>"
    got = {}
    for line in out.stdout.splitlines():
        m = re.fullmatch(r"(.*?: \S+(?: [\d.]+)?) +iteration / max\(compute, communication\) = ([\d.]+)", line)
        if m:
            got[m.group(1)] = m.group(2)
    want = {
        "resnet50, 1 MiB partitions, compute = communication: fifo": "1.387",
        "resnet50, 1 MiB partitions, compute = communication: priority": "1.096",
        "resnet50, 1 MiB partitions, compute = communication: whole": "1.183",
        "resnet50, 64 KiB partitions, compute = communication: priority": "1.093",
        "resnet50, 64 KiB partitions, compute = communication: ageing 0.2": "1.387",
    }
    wrong = {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v}
    failed = out.returncode != 0 or bool(wrong)
    if failed:
        print(f"FAIL: exit {out.returncode}; (want, got): {wrong}\n{out.stdout}{out.stderr}")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
