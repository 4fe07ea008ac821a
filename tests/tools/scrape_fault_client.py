#!/usr/bin/env python3
"""Misbehaving Prometheus scrapers for tests/e2e/fault_scrape_test.sh.

  scrape_fault_client.py idle HOST:PORT N HOLD_S
      N connections that never send a request.
  scrape_fault_client.py noread HOST:PORT N HOLD_S
      N connections that send GET /metrics and never read (4 KiB receive buffer).
  scrape_fault_client.py slow HOST:PORT N HOLD_S
      N connections that send GET /metrics and read 512 bytes every 100 ms.
  scrape_fault_client.py trickle HOST:PORT N HOLD_S
      N connections that send a request line and then one header byte
      every 3 s each (never idle, never done: a slowloris). A connection the
      server closes is opened again (at most 20 x N connects in all).

Prints one JSON line once the connections are set up ({"mode", "connected"})
and one when done (slow: bytes read per connection; trickle: connects made,
connections the server closed). Holds HOLD_S seconds or
until SIGTERM, then closes everything.
"""
import json
import resource
import signal
import socket
import sys
import time


def trickle(host, port, n, hold, stop):
    """N slowloris connections for HOLD_S seconds; see the module doc."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
    budget = 20 * n
    stats = {"connects": 0, "closed_by_server": 0}

    def open_one():
        if stats["connects"] >= budget:
            return None
        stats["connects"] += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((host, int(port)))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: trickle\r\nX-Slow: ")
            s.setblocking(False)
            return s
        except OSError:
            s.close()
            return None

    socks = [open_one() for _ in range(n)]
    print(json.dumps({"mode": "trickle", "connected": sum(s is not None for s in socks)}),
          flush=True)
    end = time.monotonic() + hold
    i = 0
    step = max(1, n // 60)  # every socket once per ~3 s at 50 ms a step
    while not stop[0] and time.monotonic() < end:
        for _ in range(step):
            s = socks[i]
            alive = False
            if s is not None:
                try:
                    s.send(b"a")
                    alive = s.recv(1, socket.MSG_PEEK) != b""
                except BlockingIOError:
                    alive = True  # nothing to read: still open
                except OSError:
                    alive = False
            if not alive:
                if s is not None:
                    stats["closed_by_server"] += 1
                    s.close()
                socks[i] = open_one()
            i = (i + 1) % n
        time.sleep(0.05)
    for s in socks:
        if s is not None:
            s.close()
    print(json.dumps({"mode": "trickle", "done": True, **stats}), flush=True)


def main():
    mode, addr, n, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    host, port = addr.rsplit(":", 1)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    if mode == "trickle":
        trickle(host, port, n, hold, stop)
        return
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if mode != "idle":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(5)
        s.connect((host, int(port)))
        if mode != "idle":
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: fault\r\n\r\n")
        socks.append(s)
    print(json.dumps({"mode": mode, "connected": len(socks)}), flush=True)
    read = [0] * len(socks)
    end = time.monotonic() + hold
    while not stop[0] and time.monotonic() < end:
        if mode == "slow":
            for i, s in enumerate(socks):
                s.setblocking(False)
                try:
                    read[i] += len(s.recv(512))
                except (BlockingIOError, OSError):
                    pass
        time.sleep(0.1)
    for s in socks:
        s.close()
    print(json.dumps({"mode": mode, "done": True, "bytes_read": read}), flush=True)


if __name__ == "__main__":
    main()
