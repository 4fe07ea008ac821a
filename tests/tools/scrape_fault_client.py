#!/usr/bin/env python3
"""Misbehaving Prometheus scrapers for tests/e2e/fault_scrape_test.sh.

  scrape_fault_client.py idle HOST:PORT N HOLD_S
      N connections that never send a request.
  scrape_fault_client.py noread HOST:PORT N HOLD_S
      N connections that send GET /metrics and never read (4 KiB receive buffer).
  scrape_fault_client.py slow HOST:PORT N HOLD_S
      N connections that send GET /metrics and read 512 bytes every 100 ms.

Prints one JSON line once the connections are set up ({"mode", "connected"})
and one when done (slow: bytes read per connection). Holds HOLD_S seconds or
until SIGTERM, then closes everything.
"""
import json
import signal
import socket
import sys
import time


def main():
    mode, addr, n, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    host, port = addr.rsplit(":", 1)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
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
