#!/usr/bin/env bash
# The ethtool collector through the --ethtool-dir seam with the real daemon:
# a fake sysfs tree with one RoCE port (mlx5_0 port 1, netdev fsroce0) and
# DIR/fsroce0 in `ethtool -S` format. While the daemon runs the test rewrites
# the file and checks the exported values: counters moving, PFC enabled on
# priority 3 (rx_prio3_pause* names appear mid-run), a truncated write (parse
# error, last good value kept), the file vanishing (series gone, not_found
# counted) and coming back; and a netdev whose file vanishes in the middle of
# a PFC storm: the storm must end (gauge back to 0, event closed at its last
# sample, saying why) instead of staying active forever.
source "$(dirname "$0")/lib.sh"

FX="$SRC/tests/fixtures/ethtool/mlx5/lkml_bpf_20240619_mlx5_k5.15_nonzero.txt"
SYS="$WORK/sys"
PORT="$SYS/class/infiniband/mlx5_0/ports/1"
mkdir -p "$PORT/gid_attrs/ndevs" "$PORT/hw_counters" "$PORT/counters"
echo Ethernet >"$PORT/link_layer"
echo "4: ACTIVE" >"$PORT/state"
echo "100 Gb/sec (4X EDR)" >"$PORT/rate"
echo fsroce0 >"$PORT/gid_attrs/ndevs/0"
echo 10 >"$PORT/hw_counters/lifespan"
DIR="$WORK/ethtool"
mkdir -p "$DIR"

# put NAME CONTENT: atomic rewrite, as a real writer would do it.
put() { printf '%s' "$2" >"$DIR/.$1.tmp" && mv "$DIR/.$1.tmp" "$DIR/$1"; }
put fsroce0 "$(cat "$FX")
"
# A netdev that belongs to no RDMA port (i40e names): device/port stay "".
put fsplain0 "NIC statistics:
     port.rx_priority_3_xoff_rx: 11
     port.link_xoff_tx: 4
"

start_daemon --sysfs-root="$SYS" --ethtool-dir="$DIR" --collectors=rdma_sysfs,ethtool,dcb_config \
  --medium-interval=50ms --config-interval=1s

DISC='fabricscope_discards_total{device="mlx5_0",port="1",netdev="fsroce0",priority="",reason="rx_discards_phy"}'
PRIO0='fabricscope_discards_total{device="mlx5_0",port="1",netdev="fsroce0",priority="0",reason="rx_prio_discards"}'
TXDUR='fabricscope_pfc_pause_seconds_total{netdev="fsroce0",priority="global",direction="tx"}'
TXPAUSE='fabricscope_pfc_pause_frames_total{netdev="fsroce0",priority="global",direction="tx"}'
P3='fabricscope_pfc_pause_frames_total{netdev="fsroce0",priority="3",direction="rx"}'
P3DUR='fabricscope_pfc_pause_seconds_total{netdev="fsroce0",priority="3",direction="rx"}'
P3TR='fabricscope_pfc_pause_transitions_total{netdev="fsroce0",priority="3",direction="rx"}'
I40E='fabricscope_pfc_pause_frames_total{netdev="fsplain0",priority="3",direction="rx"}'
PARSE='fabricscope_collector_errors_total{code="parse",collector="ethtool"}'
NOTFOUND='fabricscope_collector_errors_total{code="not_found",collector="ethtool"}'

# value NAME FILE: metric_value, or "" when the line is absent (set -e safe).
value() { metric_value "$1" "$2" || true; }
# same_number A B: equal within 1e-9 relative (values are scaled doubles).
same_number() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (b < 0 ? -b : b); exit !(d <= 1e-9 * m + 1e-12) }'; }
# wait_value NAME WANT: polls /metrics (bounded, 10 s) until NAME has value WANT.
wait_value() {
  local got=""
  for _ in $(seq 1 $(tries 100)); do
    scrape >"$WORK/m" 2>/dev/null || true
    got=$(value "$1" "$WORK/m")
    [ -n "$got" ] && same_number "$got" "$2" && return 0
    sleep 0.1
  done
  fail "$1: want $2, got '${got}'"
}
# wait_absent NAME: until no line for NAME is exported.
wait_absent() {
  for _ in $(seq 1 $(tries 100)); do
    scrape >"$WORK/m" 2>/dev/null || true
    grep -qF "$1 " "$WORK/m" || return 0
    sleep 0.1
  done
  fail "$1 still exported"
}

wait_value "$DISC" 58591428329
wait_value "$PRIO0" 58591314012
wait_value "$TXDUR" 771.10381
wait_value "$TXPAUSE" 5745042
wait_value "$I40E" 11
wait_value 'fabricscope_hw_counters_lifespan_seconds{device="mlx5_0",port="1"}' 0.01
promtool_check "$WORK/m"
grep -q 'fabricscope_pfc_pause_frames_total{netdev="fsroce0",priority="3"' "$WORK/m" &&
  fail "priority 3 exported before PFC was enabled"
# Per-ring names are not registered.
grep -q 'rx0_' "$WORK/m" && fail "per-ring counters exported"

# Counters move.
put fsroce0 "$(sed -e 's/rx_discards_phy: 58591428329/rx_discards_phy: 58591429329/' \
  -e 's/tx_global_pause_duration: 771103810/tx_global_pause_duration: 772103810/' "$FX")
"
wait_value "$DISC" 58591429329
wait_value "$TXDUR" 772.10381

# PFC enabled on priority 3: five names appear in the middle of the set.
PFC_ON=$(sed -e 's/rx_discards_phy: 58591428329/rx_discards_phy: 58591430329/' \
  -e 's/tx_global_pause_duration: 771103810/tx_global_pause_duration: 772103810/' \
  -e 's/^\(     rx_prio0_discards:.*\)$/\1\n     rx_prio3_pause: 42\n     rx_prio3_pause_duration: 2500000\n     rx_prio3_pause_transition: 7\n     tx_prio3_pause: 9\n     tx_prio3_pause_duration: 1000/' \
  "$FX")
put fsroce0 "$PFC_ON
"
wait_value "$P3" 42
wait_value "$P3DUR" 2.5
wait_value "$P3TR" 7
wait_value "$DISC" 58591430329
wait_value "$PRIO0" 58591314012

# More pause on priority 3.
put fsroce0 "$(printf '%s\n' "$PFC_ON" | sed -e 's/rx_prio3_pause: 42/rx_prio3_pause: 50/' \
  -e 's/rx_prio3_pause_duration: 2500000/rx_prio3_pause_duration: 4000000/')
"
wait_value "$P3" 50
wait_value "$P3DUR" 4

# A truncated, non-atomic write: parse error counted, last good value kept.
printf '     rx_discards_phy: 1' >"$DIR/fsroce0"
for _ in $(seq 1 $(tries 100)); do
  scrape >"$WORK/m"
  v=$(value "$PARSE" "$WORK/m")
  [ -n "$v" ] && [ "$v" != "0" ] && break
  sleep 0.1
done
[ -n "$(value "$PARSE" "$WORK/m")" ] || fail "truncated file not counted as a parse error"
same_number "$(value "$DISC" "$WORK/m")" 58591430329 || fail "truncated file changed the value"
same_number "$(value "$P3" "$WORK/m")" 50 || fail "truncated file changed the prio 3 value"

# The file vanishes: series gone, not_found counted once.
rm -f "$DIR/fsroce0"
wait_absent "$DISC"
wait_absent "$P3"
[ "$(value "$NOTFOUND" "$WORK/m")" = "1" ] || fail "vanished file: not_found $(value "$NOTFOUND" "$WORK/m")"

# A storm on a netdev that then vanishes mid-storm (pause time growing at
# wall-clock speed on priority 3 of fsstorm0, then its file is removed).
STORM='fabricscope_pfc_storm_active{direction="rx",netdev="fsstorm0",priority="3"}'
python3 "$SRC/tests/tools/pause_storm.py" "$DIR/fsstorm0" 0 60 >/dev/null &
STORM_PID=$!
PIDS+=("$STORM_PID")
wait_value "$STORM" 1
kill "$STORM_PID"
wait "$STORM_PID" 2>/dev/null || true
rm -f "$DIR/fsstorm0" "$DIR/.fsstorm0.tmp"
gone_ns=$(date +%s%N)
# Ended once not judged for 5 s (plus up to 1 s until the next sweep); 30 s bound.
ended=0
for _ in $(seq 1 $(tries 300)); do
  scrape >"$WORK/m" 2>/dev/null || true
  if [ "$(value "$STORM" "$WORK/m")" = 0 ]; then ended=1; break; fi
  sleep 0.1
done
[ "$ended" = 1 ] || fail "storm of a vanished netdev still active: $(grep -F "$STORM" "$WORK/m")"
echo "figure: storm of a vanished netdev ended after $((($(date +%s%N) - gone_ns) / 1000000)) ms"
GRPC_ADDR=$(sed -n 's/.*msg="serving grpc" address=\([^ ]*\).*/\1/p' "$WORK/daemon.log" | head -n1)
"$BIN/fabricscope" --server="$GRPC_ADDR" --output=json events --since=5m --detector=pfc_storm \
  >"$WORK/storm.json" 2>&1 || fail "events: $(cat "$WORK/storm.json")"
jq -e '[.[] | select(.netdev=="fsstorm0" and .end_unix_nano != null and (.summary | contains("stopped reporting")))] | length == 1' \
  "$WORK/storm.json" >/dev/null || fail "the vanished netdev's storm event: $(cat "$WORK/storm.json")"
same_number "$(value "$I40E" "$WORK/m")" 11 || fail "the other netdev stopped being exported"

# ... and comes back (PFC off again: priority 3 stays absent).
put fsroce0 "$(sed -e 's/rx_discards_phy: 58591428329/rx_discards_phy: 58591431329/' \
  -e 's/tx_global_pause_duration: 771103810/tx_global_pause_duration: 772103810/' "$FX")
"
wait_value "$DISC" 58591431329
grep -qF "$P3 " "$WORK/m" && fail "priority 3 back although PFC is off"
grep -q '^fabricscope_series_resets_total{[^}]*netdev="fsroce0"' "$WORK/m" &&
  fail "a counter reset although every value only grew"
promtool_check "$WORK/m"

stop_daemon
echo "PASS"
