#!/usr/bin/env bash
# fabricscoped --explain-cost on the fixture tree: the read plan of every RDMA
# port with what each read costs the device (ARCHITECTURE.md, "What a read
# costs the device"), the same flags as the daemon (a device excluded is not
# in the plan), and nothing read when no RDMA collector is enabled. The
# daemon is not started.
source "$(dirname "$0")/lib.sh"

FIXTURE="$SRC/tests/fixtures/sysfs/root"
"$DAEMON" --explain-cost --sysfs-root="$FIXTURE" --rdma-device-exclude='hfi1_0' \
  >"$WORK/plan" 2>"$WORK/log" || fail "--explain-cost failed: $(cat "$WORK/log")"
cat "$WORK/plan"
# mlx5_1 port 1: 12 hot hw_counters files read every 10 ms (one pread each),
# the driver asked once per staleness window (HZ 100 assumed, lifespan 10 ms:
# every 2nd read, 3 firmware commands on mlx5: 150/s); 21 PMA files a second,
# one MAD each.
grep -Eq '^mlx5_1/1 +rdma_sysfs +hw_counters files +hot +12 +100 +1200 +150 ' "$WORK/plan" ||
  fail "no hot hw_counters row for mlx5_1/1"
grep -Eq '^mlx5_1/1 +rdma_sysfs +counters/ files \(IB PMA\) +slow +21 +1\.00 +21 +21 +one PerfMgt MAD per file$' "$WORK/plan" ||
  fail "no PMA row for mlx5_1/1"
grep -Eq '^  mlx5_1: 171 queries/s, 1381 syscalls/s$' "$WORK/plan" || fail "no per-device total for mlx5_1"
grep -q '^All devices: ' "$WORK/plan" || fail "no total"
grep -q 'hfi1_0' "$WORK/plan" && fail "an excluded device is in the plan"
"$DAEMON" --explain-cost --sysfs-root="$FIXTURE" --collectors=netdev >"$WORK/none" 2>/dev/null ||
  fail "--explain-cost without RDMA collectors failed"
grep -q '^No RDMA device is read' "$WORK/none" || fail "no 'nothing read' line: $(cat "$WORK/none")"
echo "PASS"
