"""The servers' byte counters, read from their metrics endpoints while the job runs.

`zps launch` with ZPS_METRICS_PORT=P gives server i the port P + 1 + i and worker r P + 1 + S + r on
this host (docs/observability.md), so a worker finds every server's /metrics from its own port.
server_bytes() sums zps_server_pushed_bytes_total (every worker's pushes) and
zps_server_pulled_bytes_total (every pull reply) over the servers.
"""
import os
import time
import urllib.request


def _scrape(port, timeout):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=timeout) as reply:
        text = reply.read(1 << 22).decode()
    pushed = pulled = 0.0
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("zps_server_pushed_bytes_total"):
            pushed += float(value)
        elif name.startswith("zps_server_pulled_bytes_total"):
            pulled += float(value)
    return pushed, pulled


def server_bytes(rank, timeout=5.0):
    """(pushed, pulled) bytes counted by all servers so far, or None when ZPS_METRICS_PORT is not set.
    Read until two readings agree (a reply's bytes are counted just after it leaves), for at most
    `timeout` seconds."""
    own = int(os.environ.get("ZPS_METRICS_PORT", "0") or 0)
    if own <= 0:
        return None
    num_servers = int(os.environ["DMLC_NUM_SERVER"])
    first_server = own - num_servers - rank
    deadline = time.monotonic() + timeout
    last = None
    while True:
        now = [sum(c) for c in zip(*(_scrape(first_server + i, timeout) for i in range(num_servers)))]
        if now == last or time.monotonic() > deadline:
            return tuple(int(v) for v in now)
        last = now
        time.sleep(0.05)
