"""A synchronize that times out cancels the operation: no late reply is ever written into the tensor.

This script is the job's only worker and starts the scheduler and the server itself (the BytePS way:
the DMLC environment, no launcher), so that it can stop the server: SIGSTOP during a push_pull, the
synchronize with a 1 s deadline raises ZpsTimeout, the tensor is overwritten with a sentinel, SIGCONT lets
the server answer, and the sentinel must stay untouched. The next push_pull of the name must then work,
exactly: it sums on a fresh tensor of the servers (the cancelled round's tensor may be half summed, so it
is never pushed again).   Usage: cancel_test.py <zps binary>"""
import os
import signal
import socket
import subprocess
import sys
import time

try:
    import torch
except ImportError as e:
    print("SKIPPED: %s cannot import torch (install python3-torch): %s" % (sys.executable, e))
    sys.exit(77)

import zps.torch as bps


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(cond, what):
    if not cond:
        raise AssertionError("FAILED " + what)
    print("cancel test: %s: OK" % what, flush=True)


zps = sys.argv[1]
env = dict(os.environ, DMLC_PS_ROOT_URI="127.0.0.1", DMLC_NODE_HOST="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()), DMLC_NUM_SERVER="1",
           DMLC_NUM_WORKER="1", ZPS_RENDEZVOUS_TIMEOUT="60")
children = [subprocess.Popen([zps], env=dict(env, DMLC_ROLE=role)) for role in ("scheduler", "server")]
server = children[1]
try:
    os.environ.update(env, DMLC_ROLE="worker", DMLC_WORKER_ID="0")
    bps.init()
    n = 1 << 20
    t = torch.full((n,), 3.0)
    bps.push_pull_inplace(t, average=False, name="c")
    check(torch.equal(t, torch.full((n,), 3.0)), "round 1 of 'c' (4 MiB) sums normally")

    os.kill(server.pid, signal.SIGSTOP)
    h = bps.push_pull_async_inplace(t, average=False, name="c")
    try:
        bps.synchronize(h, timeout=1.0)
        raise AssertionError("FAILED synchronize returned although the server was stopped")
    except bps.ZpsTimeout as e:
        check(True, "synchronize with a 1 s deadline raised ZpsTimeout while the server was stopped (%s)" % str(e)[:160])
    t.fill_(-7.0)  # the tensor is the script's again
    os.kill(server.pid, signal.SIGCONT)
    time.sleep(2.0)  # the server answers the stale request now
    check(torch.equal(t, torch.full((n,), -7.0)), "after SIGCONT and 2 s the tensor still holds the sentinel")

    t2 = torch.full((n,), 5.0)
    check(torch.equal(bps.push_pull(t2, average=False, name="c"), torch.full((n,), 5.0)),
          "the next push_pull of 'c' works and its sum is exact (a fresh tensor on the servers)")
    check(torch.equal(bps.push_pull(t2, average=False, name="c"), torch.full((n,), 5.0)), "and the one after it")
    u = torch.full((8,), 2.0)
    bps.push_pull_inplace(u, average=False, name="other")
    check(torch.equal(u, torch.full((8,), 2.0)), "another tensor still sums normally")
    bps.shutdown()
except BaseException as e:
    # End the job with the failure, so that the scheduler and the server exit at once.
    rt = bps._runtime._runtime
    if rt is not None and not rt.finished:
        rt.finish("cancel test: %s" % e)
    raise
finally:
    for c in children:
        try:
            os.kill(c.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    deadline = time.time() + 20
    for c in children:
        try:
            c.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            c.kill()
            c.wait()
check(all(c.returncode == 0 for c in children), "scheduler and server exited 0")
