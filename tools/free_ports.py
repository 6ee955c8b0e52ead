"""Prints a TCP port P such that P, P+1, ..., P+N-1 are free on 127.0.0.1 now (usage: free_ports.py N).

For ZPS_METRICS_PORT under zps launch, which gives the scheduler P and the servers and workers the ports
after it. P is drawn below the kernel's ephemeral range (ip_local_port_range): a port the kernel hands
out (bind to port 0) is one that any other process's next outgoing connection may take as its source
port, so a block starting there can be taken between this check and the nodes' binds, and a node that
cannot listen on its metrics port refuses to start. Below that range only an explicit bind takes a port.
"""
import random
import socket
import sys

FLOOR = 10000  # under this are the well-known and registered services' ports


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    if not 1 <= count <= 100:
        sys.exit("free_ports.py: N must be 1..100, not %d" % count)
    high = ephemeral_low() - count
    if high <= FLOOR:
        high = 65535 - count  # no room below the ephemeral range: draw from every port above FLOOR
    for _ in range(200):
        base = random.randint(FLOOR, high)
        if all(bindable(base + i) for i in range(count)):
            print(base)
            return
    sys.exit("free_ports.py: found no %d free ports in a row in 200 tries" % count)


if __name__ == "__main__":
    main()
