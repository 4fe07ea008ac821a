#!/usr/bin/env python3
"""A generated fake host for bench/run_all: 8 mlx5 devices x 2 RoCE ports.

Layout (modelled on ../shared/fixtures/sysfs/tree/procfs, mlx5_0):

  ROOT/class/infiniband/mlx5_<d>/{board_id,fw_ver,hca_type,node_guid}
  ROOT/class/infiniband/mlx5_<d>/ports/<p>/{state,phys_state,rate,link_layer}
  ROOT/class/infiniband/mlx5_<d>/ports/<p>/gid_attrs/ndevs/0      netdev name
  ROOT/class/infiniband/mlx5_<d>/ports/<p>/counters/<21 IB PMA files>
  ROOT/class/infiniband/mlx5_<d>/ports/<p>/hw_counters/<28 counters + lifespan>
  ETHTOOL/<netdev>   `ethtool -S` text of the complete 751-counter mlx5 dump

Start values: the counters/ and hw_counters/ sets and values of
../shared/fixtures/infiniband/telegraf_test_mlx5_{port,hw}_counters.txt
(influxdata/telegraf, MIT), the ethtool names and values of
tests/fixtures/ethtool/mlx5/ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt (isc-projects/ethq,
MPL-2.0). Every port gets its own offset so the ports differ.

`Mover` makes the values move: every pass adds rate x elapsed time to each counter
(data and packet counters every pass, congestion counters often, error counters
rarely), never past the counter's hardware width (IB PMA error counters saturate).
sysfs counter files are rewritten in place (pwrite at offset 0 on a file kept open,
the value never gets shorter), because a reader keeps them open and preads them; an
ethtool file is replaced atomically (write + rename), like a writer of real dumps.

Run as a program it generates a tree and moves it until killed:
  fakehost.py --root DIR --ethtool-dir DIR [--interval-ms 50] [--ethtool-interval-ms 100]
(SIGUSR1 / SIGUSR2 start / stop moving the ethtool files.)
"""

import argparse
import os
import random
import re
import shutil
import signal
import sys
import time

DEVICES = 8
PORTS = 2

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED_FIXTURES = os.path.abspath(os.path.join(SRC, "..", "shared", "fixtures"))

# counters/ (IB PMA, mlx5 extended-width set): telegraf fixture values.
PMA_COUNTERS = {
    "excessive_buffer_overrun_errors": 0,
    "link_downed": 0,
    "link_error_recovery": 0,
    "local_link_integrity_errors": 0,
    "multicast_rcv_packets": 0,
    "multicast_xmit_packets": 0,
    "port_rcv_constraint_errors": 0,
    "port_rcv_data": 237159415345822,
    "port_rcv_errors": 0,
    "port_rcv_packets": 801977655075,
    "port_rcv_remote_physical_errors": 0,
    "port_rcv_switch_relay_errors": 0,
    "port_xmit_constraint_errors": 0,
    "port_xmit_data": 238334949937759,
    "port_xmit_discards": 0,
    "port_xmit_packets": 803162651391,
    # The fixture is saturated (4294967295); start below so that it moves.
    "port_xmit_wait": 1234567,
    "symbol_error": 0,
    "unicast_rcv_packets": 801977655075,
    "unicast_xmit_packets": 803162651391,
    "VL15_dropped": 0,
}
# hw_counters/ (mlx5 RoCE port, kernels ~5.6-6.x): telegraf fixture values.
HW_COUNTERS = {
    "duplicate_request": 0,
    "implied_nak_seq_err": 0,
    "local_ack_timeout_err": 38,
    "np_cnp_sent": 10284520,
    "np_ecn_marked_roce_packets": 286733949,
    "out_of_buffer": 1149772,
    "out_of_sequence": 44,
    "packet_seq_err": 1,
    "req_cqe_error": 10776,
    "req_cqe_flush_error": 2173,
    "req_remote_access_errors": 0,
    "req_remote_invalid_request": 0,
    "resp_cqe_error": 759,
    "resp_cqe_flush_error": 759,
    "resp_local_length_error": 0,
    "resp_remote_access_errors": 0,
    "rnr_nak_retry_err": 0,
    "roce_adp_retrans": 0,
    "roce_adp_retrans_to": 0,
    "roce_slow_restart": 0,
    "roce_slow_restart_cnps": 0,
    "roce_slow_restart_trans": 0,
    "rp_cnp_handled": 1,
    "rp_cnp_ignored": 0,
    "rx_atomic_requests": 0,
    "rx_icrc_encapsulated": 0,
    "rx_read_requests": 488228,
    "rx_write_requests": 3928699,
}

# Hardware width (counters.md section 0): PMA errors saturate at these widths.
PMA_WIDTH = {
    "symbol_error": 16, "port_rcv_errors": 16, "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16, "VL15_dropped": 16,
    "link_error_recovery": 8, "link_downed": 8, "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4, "port_xmit_wait": 32,
}

# Rates per second per port (a busy 200G RoCE port). Anything not listed: 0.02/s.
RATES = {
    "port_xmit_data": 2.5e9, "port_rcv_data": 2.4e9,  # octets / 4
    "port_xmit_packets": 2.4e6, "port_rcv_packets": 2.3e6,
    "unicast_xmit_packets": 2.4e6, "unicast_rcv_packets": 2.3e6,
    "multicast_xmit_packets": 5, "multicast_rcv_packets": 5,
    "port_xmit_wait": 2e5, "port_xmit_discards": 0.05, "symbol_error": 0.01,
    "np_ecn_marked_roce_packets": 2e4, "np_cnp_sent": 2e3, "rp_cnp_handled": 2e3,
    "rp_cnp_ignored": 1, "out_of_buffer": 20, "out_of_sequence": 2, "packet_seq_err": 0.5,
    "local_ack_timeout_err": 0.2, "rx_write_requests": 3e5, "rx_read_requests": 4e4,
    "rx_atomic_requests": 10, "roce_adp_retrans": 0.5, "duplicate_request": 0.5,
    "implied_nak_seq_err": 0.2, "req_cqe_error": 0.1, "resp_cqe_error": 0.1,
}
DEFAULT_RATE = 0.02

ETHTOOL_FIXTURE = os.path.join(SRC, "tests", "fixtures", "ethtool", "mlx5",
                               "ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt")


def ethtool_rate(name):
    if re.match(r"^(rx|tx|ch)\d+_", name):
        return 0.0  # per-channel counters stay put (keeps the writer cheap)
    if "bytes" in name:
        return 2.5e9
    if "packets" in name:
        return 2.4e6
    if "pause" in name or "discard" in name or "out_of_buffer" in name:
        return 50.0
    return 0.0  # the other ~600 names stay put (keeps the writer cheap)


def netdev_name(d, p):
    return "ens%df%d" % (d, p - 1)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class Counter:
    __slots__ = ("value", "rate", "limit", "acc", "fd")

    def __init__(self, value, rate, limit):
        self.value, self.rate, self.limit, self.acc, self.fd = value, rate, limit, 0.0, -1

    def advance(self, dt):
        """Adds rate x dt (fractions carried over); True when the value changed."""
        self.acc += self.rate * dt
        inc = int(self.acc)
        if inc <= 0 or self.value >= self.limit:
            return False
        self.acc -= inc
        self.value = min(self.limit, self.value + inc)
        return True


class FakeHost:
    """Generates the tree; move() advances every counter once."""

    def __init__(self, root, ethtool_dir, seed=1):
        self.root, self.ethtool_dir = root, ethtool_dir
        self.rng = random.Random(seed)
        self.sysfs = []  # Counter with an open fd
        self.ethtool = {}  # netdev -> (lines, [(line index, name, Counter) that move])
        self.counter_files = 0
        self._generate()
        self.last = time.monotonic()
        self.last_ethtool = self.last

    def _generate(self):
        ib = os.path.join(self.root, "class", "infiniband")
        ethtool_lines = []
        with open(ETHTOOL_FIXTURE) as f:
            for line in f:
                if ":" not in line:
                    continue
                name, value = line.rsplit(":", 1)
                ethtool_lines.append((name.strip(), int(value)))
        for d in range(DEVICES):
            dev = os.path.join(ib, "mlx5_%d" % d)
            _write(os.path.join(dev, "board_id"), "MT_0000000223\n")
            _write(os.path.join(dev, "fw_ver"), "20.31.1014\n")
            _write(os.path.join(dev, "hca_type"), "MT4123\n")
            _write(os.path.join(dev, "node_guid"), "0c42:a103:00%02x:%04x\n" % (d, d * 17))
            for p in range(1, PORTS + 1):
                port = os.path.join(dev, "ports", str(p))
                _write(os.path.join(port, "state"), "4: ACTIVE\n")
                _write(os.path.join(port, "phys_state"), "5: LinkUp\n")
                _write(os.path.join(port, "rate"), "200 Gb/sec (4X HDR)\n")
                _write(os.path.join(port, "link_layer"), "Ethernet\n")
                _write(os.path.join(port, "gid_attrs", "ndevs", "0"), netdev_name(d, p) + "\n")
                _write(os.path.join(port, "hw_counters", "lifespan"), "10\n")
                scale = 1.0 + 0.05 * (2 * d + p)  # ports differ
                for group, table in (("counters", PMA_COUNTERS), ("hw_counters", HW_COUNTERS)):
                    for name, start in table.items():
                        width = PMA_WIDTH.get(name, 64) if group == "counters" else 64
                        limit = (1 << width) - 1
                        c = Counter(min(limit, int(start * scale)),
                                    RATES.get(name, DEFAULT_RATE) * scale, limit)
                        c.acc = self.rng.random()
                        path = os.path.join(port, group, name)
                        _write(path, "%d\n" % c.value)
                        c.fd = os.open(path, os.O_WRONLY)
                        self.sysfs.append(c)
                        self.counter_files += 1
                if self.ethtool_dir:
                    lines, moving = ["NIC statistics:\n"], []
                    for name, start in ethtool_lines:
                        value = int(start * scale)
                        rate = ethtool_rate(name) * scale
                        if rate > 0:
                            c = Counter(value, rate, (1 << 64) - 1)
                            c.acc = self.rng.random()
                            moving.append((len(lines), name, c))
                        lines.append("     %s: %d\n" % (name, value))
                    self.ethtool[netdev_name(d, p)] = (lines, moving)
                    self._write_ethtool(netdev_name(d, p), lines)

    def _write_ethtool(self, netdev, lines):
        os.makedirs(self.ethtool_dir, exist_ok=True)
        text = "".join(lines)
        tmp = os.path.join(self.ethtool_dir, "." + netdev + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, os.path.join(self.ethtool_dir, netdev))

    def move_sysfs(self):
        now = time.monotonic()
        dt, self.last = now - self.last, now
        for c in self.sysfs:
            if c.advance(dt):
                os.pwrite(c.fd, b"%d\n" % c.value, 0)

    def move_ethtool(self):
        now = time.monotonic()
        dt, self.last_ethtool = now - self.last_ethtool, now
        for netdev, (lines, moving) in self.ethtool.items():
            for i, name, c in moving:
                if c.advance(dt):
                    lines[i] = "     %s: %d\n" % (name, c.value)
            self._write_ethtool(netdev, lines)

    def close(self):
        for c in self.sysfs:
            if c.fd >= 0:
                os.close(c.fd)
                c.fd = -1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--ethtool-dir", default="")
    ap.add_argument("--interval-ms", type=float, default=50)
    ap.add_argument("--ethtool-interval-ms", type=float, default=100)
    ap.add_argument("--ready-file", default="", help="created once the tree is complete")
    ap.add_argument("--exit-with-pid", type=int, default=0)
    ap.add_argument("--remove-on-exit", default="",
                    help="directory (holding --root) to delete when this program ends")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # SIGUSR1 / SIGUSR2: start / stop moving the ethtool files (run_all moves them
    # only while a daemon reads them, to keep the writer's load off the other parts).
    moving = {"ethtool": True}
    signal.signal(signal.SIGUSR1, lambda *_: moving.update(ethtool=True))
    signal.signal(signal.SIGUSR2, lambda *_: moving.update(ethtool=False))
    host = FakeHost(args.root, args.ethtool_dir)
    if args.ready_file:
        _write(args.ready_file, "%d\n" % host.counter_files)
    step = args.interval_ms / 1000.0
    eth_step = args.ethtool_interval_ms / 1000.0
    next_sysfs = next_eth = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if now >= next_sysfs:
                host.move_sysfs()
                next_sysfs = max(next_sysfs + step, now)
            if host.ethtool and now >= next_eth:
                if moving["ethtool"]:
                    host.move_ethtool()
                else:
                    host.last_ethtool = now
                next_eth = max(next_eth + eth_step, now)
            if args.exit_with_pid:
                try:
                    os.kill(args.exit_with_pid, 0)
                except ProcessLookupError:
                    break
            time.sleep(max(0.0, min(next_sysfs, next_eth) - time.monotonic()))
    finally:
        host.close()
        if args.remove_on_exit:
            shutil.rmtree(args.remove_on_exit, ignore_errors=True)


if __name__ == "__main__":
    main()
