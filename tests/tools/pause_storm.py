#!/usr/bin/env python3
"""Writes an `ethtool -S` file whose rx priority-3 pause time grows at wall-clock
speed (paused all the time) for SECONDS, rewritten atomically every 5 ms.

Usage: pause_storm.py FILE START_US SECONDS   (prints the final pause time, us)
"""
import os
import sys
import time


def write(path, us):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w") as f:
        f.write("NIC statistics:\n"
                f"     rx_prio3_pause: {us // 100}\n"
                f"     rx_prio3_pause_duration: {us}\n"
                "     tx_prio3_pause: 0\n"
                "     tx_prio3_pause_duration: 0\n")
    os.rename(tmp, path)


def main():
    path, start_us, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    t0 = time.monotonic()
    while True:
        elapsed = time.monotonic() - t0
        us = start_us + int(min(elapsed, seconds) * 1e6)
        write(path, us)
        if elapsed >= seconds:
            print(us)
            return
        time.sleep(0.005)


if __name__ == "__main__":
    main()
