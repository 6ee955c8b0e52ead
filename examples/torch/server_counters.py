"""The byte counters of a running job's servers (and of this worker), read from their metrics endpoints.

`zps launch` with ZPS_METRICS_PORT=P gives server i the port P + 1 + i and worker r P + 1 + S + r on
this host (docs/observability.md), so a worker finds every server's /metrics from its own port.
server_bytes() sums zps_server_pushed_bytes_total (every worker's pushes) and
zps_server_pulled_bytes_total (every pull reply) over the servers.
"""
import os
import time
import urllib.request


def scrape(port, names, timeout=5.0):
    """{name: the sum of every series of counter `name`} from http://127.0.0.1:port/metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=timeout) as reply:
        text = reply.read(1 << 22).decode()
    sums = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        name = series.split("{", 1)[0]
        if name in sums:
            sums[name] += float(value)
    return sums


def own_port():
    """This process's metrics port (ZPS_METRICS_PORT as zps launch set it), or 0 when off."""
    return int(os.environ.get("ZPS_METRICS_PORT", "0") or 0)


def server_bytes(rank, timeout=5.0):
    """(pushed, pulled) bytes counted by all servers so far, or None when ZPS_METRICS_PORT is not set.
    Read until two readings agree (a reply's bytes are counted just after it leaves), for at most
    `timeout` seconds."""
    if own_port() <= 0:
        return None
    num_servers = int(os.environ["DMLC_NUM_SERVER"])
    first_server = own_port() - num_servers - rank
    names = ("zps_server_pushed_bytes_total", "zps_server_pulled_bytes_total")
    deadline = time.monotonic() + timeout
    last = None
    while True:
        now = [0, 0]
        for i in range(num_servers):
            sums = scrape(first_server + i, names, timeout)
            now = [now[0] + int(sums[names[0]]), now[1] + int(sums[names[1]])]
        if now == last or time.monotonic() > deadline:
            return tuple(now)
        last = now
        time.sleep(0.05)
