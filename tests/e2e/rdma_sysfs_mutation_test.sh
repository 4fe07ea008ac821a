#!/usr/bin/env bash
# The rdma_sysfs collector under a changing tree: the real daemon polls a copy
# of tests/fixtures/sysfs while this script rewrites counter files in place (as
# the kernel does) and removes/restores a device:
#   - garbage in a counter file: a parse error is counted, the last good value
#     stays exported, the daemon stays up, a good value is picked up again
#   - a 16-bit PMA error counter pushed to 65535: fabricscope_ib_pma_saturated=1
#     and the exported counter stops there
#   - a 32-bit mlx5 Q-counter wrapping past 2^32: the exported counter keeps
#     counting across the wrap
#   - a 64-bit counter going backwards: fabricscope_series_resets_total counts
#     it and the exported counter never goes backwards
#   - a device removed and restored: its series and port_info disappear and
#     return, not_found is counted, the other devices keep updating meanwhile
# Every wait is bounded (10 s).
source "$(dirname "$0")/lib.sh"


cp -a "$SRC/tests/fixtures/sysfs" "$WORK/sysfs"
ROOT="$WORK/sysfs/root"
IB="$ROOT/class/infiniband"
start_daemon --sysfs-root="$ROOT" --collectors=rdma_sysfs \
  --hot-interval=20ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms

# value SAMPLE: the value of one exposition line from a fresh scrape ("" if absent).
value() {
  scrape >"$WORK/m" 2>/dev/null || { echo ""; return; }
  metric_value "$1" "$WORK/m"
}
# wait_value SAMPLE WANT: until the sample equals WANT numerically.
wait_value() {
  local got=""
  for _ in $(seq 1 $(tries 100)); do
    kill -0 "$DAEMON_PID" 2>/dev/null || fail "daemon died"
    got=$(value "$1")
    if [ -n "$got" ] && awk -v a="$got" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0) }'; then return 0; fi
    sleep 0.1
  done
  fail "$1 is '$got', want $2"
}
# wait_more SAMPLE THAN: until the sample is above THAN.
wait_more() {
  local got=""
  for _ in $(seq 1 $(tries 100)); do
    got=$(value "$1")
    if [ -n "$got" ] && awk -v a="$got" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; then return 0; fi
    sleep 0.1
  done
  fail "$1 is '$got', want more than $2"
}
errors() { local v; v=$(value "fabricscope_collector_errors_total{code=\"$1\",collector=\"rdma_sysfs\"}"); echo "${v:-0}"; }

MLX5_0="$WORK/sysfs/devices/procfs/mlx5_0/ports/1"
MLX5_1="$WORK/sysfs/devices/telegraf_roce/mlx5_1/ports/1"
REQ='fabricscope_rdma_requests_total{device="mlx5_0",port="1",counter="rx_read_requests"}'
wait_value "$REQ" 175528982

# --- garbage
parse_before=$(errors parse)
printf 'garbage\n' >"$MLX5_0/hw_counters/rx_read_requests"
wait_more "fabricscope_collector_errors_total{code=\"parse\",collector=\"rdma_sysfs\"}" "$parse_before"
[ "$(value "$REQ")" = "175528982" ] || fail "last good value not kept after garbage: $(value "$REQ")"
printf '18446744073709551616\n' >"$MLX5_0/hw_counters/rx_read_requests"  # 2^64: overflow
sleep 0.2
[ "$(value "$REQ")" = "175528982" ] || fail "overflow produced a value: $(value "$REQ")"
printf '175529000\n' >"$MLX5_0/hw_counters/rx_read_requests"
wait_value "$REQ" 175529000
echo "ok: garbage counted as parse errors, last value kept, recovered"

# --- 16-bit saturation
SYM='fabricscope_ib_port_errors_total{device="mlx5_0",port="1",counter="symbol_error"}'
SAT='fabricscope_ib_pma_saturated{device="mlx5_0",port="1",counter="symbol_error"}'
wait_value "$SAT" 0
printf '100\n' >"$MLX5_0/counters/symbol_error"
wait_value "$SYM" 100
printf '65535\n' >"$MLX5_0/counters/symbol_error"
wait_value "$SAT" 1
wait_value "$SYM" 65535
sleep 0.35  # several slow ticks at the maximum
[ "$(value "$SAT")" = "1" ] || fail "saturation flag cleared"
wait_value "$SYM" 65535
echo "ok: saturated 16-bit counter flagged and stopped"

# --- 32-bit wrap (hot tier Q-counter)
OOS='fabricscope_rdma_errors_total{device="mlx5_1",port="1",counter="out_of_sequence"}'
wait_value "$OOS" 44
printf '4294967290\n' >"$MLX5_1/hw_counters/out_of_sequence"
wait_value "$OOS" 4294967290
printf '5\n' >"$MLX5_1/hw_counters/out_of_sequence"
wait_value "$OOS" 4294967301
value "$OOS" >/dev/null
grep -q 'fabricscope_series_resets_total{.*counter="out_of_sequence"' "$WORK/m" &&
  fail "a wrap was counted as a reset"
echo "ok: 32-bit wrap counted across 2^32"

# --- 64-bit decrease = reset
CNP='fabricscope_cnp_sent_total{device="mlx5_1",port="1"}'
RESETS='fabricscope_series_resets_total{source="hw_counters",device="mlx5_1",port="1",netdev="ens1f0np0",counter="np_cnp_sent"}'
wait_value "$CNP" 10284520
printf '1000\n' >"$MLX5_1/hw_counters/np_cnp_sent"
wait_value "$RESETS" 1
wait_value "$CNP" 10284520
printf '1500\n' >"$MLX5_1/hw_counters/np_cnp_sent"
wait_value "$CNP" 10285020
echo "ok: reset counted, exported counter never went backwards"

# --- hot-plug: remove mlx5_1, keep polling the rest, restore it
nf_before=$(errors not_found)
# Counter series of a vanished device go; the detectors' state gauges
# (fabricscope_*_active, 0 unless an episode is open) stay for every port they
# have seen, and so do the collector's own counts per device of cached reads
# and device queries (self-metrics, like its error counts), so they are not
# part of this check.
# mlx5_1_counters FILE: those lines of a scrape that name mlx5_1, into
# $WORK/mlx5_1 (a file, not a pipe into `grep -q`: under pipefail the writer's
# SIGPIPE when grep -q stops early would read as "no match").
mlx5_1_counters() {
  grep -v '^#' "$1" | grep -v '^fabricscope_[a-z_]*_active{' |
    grep -v '^fabricscope_rdma_sysfs_cached_reads_total{' | grep -v '^fabricscope_device_queries_total{' |
    grep 'device="mlx5_1"' >"$WORK/mlx5_1" || true
  [ -s "$WORK/mlx5_1" ]
}
mv "$IB/mlx5_1" "$WORK/mlx5_1.saved"
gone=0
for _ in $(seq 1 $(tries 100)); do
  if scrape >"$WORK/m" && ! mlx5_1_counters "$WORK/m"; then gone=1; break; fi
  sleep 0.1
done
[ "$gone" -eq 1 ] || fail "mlx5_1 series still exported after the device vanished"
wait_more "fabricscope_collector_errors_total{code=\"not_found\",collector=\"rdma_sysfs\"}" "$nf_before"
OOS0='fabricscope_rdma_errors_total{device="mlx5_0",port="1",counter="out_of_sequence"}'
printf '7\n' >"$MLX5_0/hw_counters/out_of_sequence"
wait_value "$OOS0" 7
value "$OOS0" >/dev/null
if mlx5_1_counters "$WORK/m"; then
  fail "mlx5_1 came back while removed: $(head -n 5 "$WORK/mlx5_1")"
fi
mv "$WORK/mlx5_1.saved" "$IB/mlx5_1"
wait_value "$CNP" 10285020
wait_value 'fabricscope_port_info{device="mlx5_1",port="1",netdev="ens1f0np0",link_layer="Ethernet",state="ACTIVE",rate="100 Gb/sec (4X EDR)",driver="mlx5",fw_ver="14.28.2006"}' 1
printf '1600\n' >"$MLX5_1/hw_counters/np_cnp_sent"
wait_value "$CNP" 10285120
echo "ok: device removed and restored without restart"

scrape >"$WORK/final" || fail "final scrape"
promtool_check "$WORK/final"
stop_daemon
echo "PASS"
