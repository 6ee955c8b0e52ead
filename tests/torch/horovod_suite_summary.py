"""Summarises the JUnit reports of a run of Horovod's suite: counts per outcome on every rank, and each
test that did not pass on some rank with the first line of its reason. Exits 1 when a rank's report is
missing or when fewer than MIN_PASSED tests passed on rank 0."""
import sys
import xml.etree.ElementTree as ET

reports, workers, min_passed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
outcomes = {}
for r in range(workers):
    try:
        root = ET.parse("%s/rank%d.xml" % (reports, r)).getroot()
    except (OSError, ET.ParseError) as e:
        print("FAILED: rank %d wrote no report (%s)" % (r, e))
        sys.exit(1)
    for case in root.iter("testcase"):
        name = case.get("name")
        kind, reason = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                reason = (child.get("message") or child.text or "").strip().splitlines()
                reason = reason[0][:220] if reason else ""
                break
        outcomes.setdefault(name, {})[r] = (kind, reason)
counts = {}
for r in range(workers):
    c = {}
    for name, per in outcomes.items():
        kind = per.get(r, ("missing", ""))[0]
        c[kind] = c.get(kind, 0) + 1
    counts[r] = c
    print("rank %d: %s" % (r, ", ".join("%s %d" % (k, v) for k, v in sorted(c.items()))))
for name in sorted(outcomes):
    per = outcomes[name]
    bad = {r: v for r, v in per.items() if v[0] != "passed"}
    if bad:
        kinds = sorted({v[0] for v in bad.values()})
        reason = next(v[1] for v in bad.values())
        print("  %-55s %s (ranks %s): %s" % (name, "/".join(kinds), ",".join(map(str, sorted(bad))), reason))
passed = counts[0].get("passed", 0)
if passed < min_passed:
    print("FAILED: %d tests passed on rank 0, fewer than the %d this test requires" % (passed, min_passed))
    sys.exit(1)
print("horovod suite: %d passed on rank 0 (at least %d required)" % (passed, min_passed))
