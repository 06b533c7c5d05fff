#!/usr/bin/env python3
"""Prints N free TCP ports on 127.0.0.1 for servers that bind them a moment later.

A port from the kernel (bind to port 0) is in its ephemeral range, which every outgoing
connection draws from too: between this script releasing it and the server binding it, a client
of another test may take it (seen with several control planes and Ceph clusters starting at once:
ceph-mon's "Address already in use"). So the ports are drawn at random below the ephemeral range
(read from /proc), where only servers that ask for a port by number bind, and checked free by
binding them (all held until the last is chosen, so they are distinct). From 10000 up: Ceph's
OSDs bind in 6800-7300.

Usage: free-ports.py N   (prints the N ports on one line, space-separated)
"""
import random
import socket
import sys

LOW = 10000


def ephemeral_min():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    top = ephemeral_min()
    held = []
    rng = random.SystemRandom()
    for _ in range(2000):
        if len(held) == n:
            break
        port = rng.randrange(LOW, top)
        if any(p == port for p, _ in held):
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        held.append((port, s))
    if len(held) < n:
        sys.exit(f"free-ports.py: found only {len(held)} of {n} free ports in {LOW}..{top - 1}")
    print(*[p for p, _ in held])


if __name__ == "__main__":
    main()
