#!/usr/bin/env bash
# Cross-check with the reference exporter: node_exporter's infiniband collector
# and fabricscoped read the same fixture tree (tests/fixtures/sysfs/root); for
# every counter node_exporter reports that fabricscope also reads, the values
# must agree (port data counters are octets/4 x 4 in both). A mapped counter
# that fabricscope does not export at all is a failure too; node_exporter's
# legacy_* families (counters_ext/) are listed but not compared, because
# fabricscope reads counters_ext/ only where counters/ lacks 64-bit values.
source "$(dirname "$0")/lib.sh"


NODE_EXPORTER="${NODE_EXPORTER:-prometheus-node-exporter}"
command -v "$NODE_EXPORTER" >/dev/null || fail "$NODE_EXPORTER not installed (deploy/bootstrap.sh)"
TREE="$SRC/tests/fixtures/sysfs/root"

start_daemon --sysfs-root="$TREE" --collectors=rdma_sysfs \
  --hot-interval=20ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms
ready=0
for _ in $(seq 1 $(tries 100)); do
  if scrape >"$WORK/ours" 2>/dev/null; then
    slow=$(metric_value 'fabricscope_scheduler_ticks_total{tier="slow"}' "$WORK/ours")
    if awk -v s="${slow:-0}" 'BEGIN { exit !(s >= 1) }'; then ready=1; break; fi
  fi
  sleep 0.1
done
[ "$ready" -eq 1 ] || fail "no slow tick within 10 s"
scrape >"$WORK/ours" || fail "scrape failed"
promtool_check "$WORK/ours"

# node_exporter on a free port: pick one, retry if it was taken meanwhile.
ne_ok=0
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 40000))
  "$NODE_EXPORTER" --path.sysfs="$TREE" --collector.disable-defaults --collector.infiniband \
    --web.listen-address="127.0.0.1:$port" >"$WORK/ne.log" 2>&1 &
  NE_PID=$!
  PIDS+=("$NE_PID")
  for _ in $(seq 1 $(tries 50)); do
    if curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" >"$WORK/ne" 2>/dev/null; then
      ne_ok=1
      break
    fi
    kill -0 "$NE_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ "$ne_ok" -eq 1 ] && break
  kill "$NE_PID" 2>/dev/null || true
done
[ "$ne_ok" -eq 1 ] || { cat "$WORK/ne.log" >&2; fail "node_exporter did not serve metrics"; }
kill "$NE_PID" 2>/dev/null || true
grep -q '^node_infiniband_' "$WORK/ne" || fail "node_exporter reported no infiniband metrics"

# node_exporter metric -> fabricscope family and the extra label of our sample.
cat >"$WORK/map" <<'MAP'
port_data_received_bytes_total fabricscope_port_bytes_total direction=rx
port_data_transmitted_bytes_total fabricscope_port_bytes_total direction=tx
port_packets_received_total fabricscope_port_packets_total direction=rx
port_packets_transmitted_total fabricscope_port_packets_total direction=tx
unicast_packets_received_total fabricscope_port_unicast_packets_total direction=rx
unicast_packets_transmitted_total fabricscope_port_unicast_packets_total direction=tx
multicast_packets_received_total fabricscope_port_multicast_packets_total direction=rx
multicast_packets_transmitted_total fabricscope_port_multicast_packets_total direction=tx
port_transmit_wait_total fabricscope_ib_port_xmit_wait_ticks_total -
link_downed_total fabricscope_ib_port_errors_total counter=link_downed
link_error_recovery_total fabricscope_ib_port_errors_total counter=link_error_recovery
symbol_error_total fabricscope_ib_port_errors_total counter=symbol_error
port_errors_received_total fabricscope_ib_port_errors_total counter=port_rcv_errors
port_receive_remote_physical_errors_total fabricscope_ib_port_errors_total counter=port_rcv_remote_physical_errors
port_receive_switch_relay_errors_total fabricscope_ib_port_errors_total counter=port_rcv_switch_relay_errors
port_discards_transmitted_total fabricscope_ib_port_errors_total counter=port_xmit_discards
port_discards_received_total fabricscope_ib_port_errors_total counter=port_rcv_discards
port_constraint_errors_transmitted_total fabricscope_ib_port_errors_total counter=port_xmit_constraint_errors
port_constraint_errors_received_total fabricscope_ib_port_errors_total counter=port_rcv_constraint_errors
local_link_integrity_errors_total fabricscope_ib_port_errors_total counter=local_link_integrity_errors
excessive_buffer_overrun_errors_total fabricscope_ib_port_errors_total counter=excessive_buffer_overrun_errors
vl15_dropped_total fabricscope_ib_port_errors_total counter=VL15_dropped
MAP

awk -v report="$WORK/report" '
  function labels(s, out,   n, parts, i, kv) {
    # s: a="x",b="y" -> out["a"]="x"
    n = split(s, parts, "\",")
    for (i = 1; i <= n; i++) {
      sub(/"$/, "", parts[i])
      split(parts[i], kv, "=\"")
      out[kv[1]] = kv[2]
    }
  }
  FILENAME == ARGV[1] { map_family[$1] = $2; map_extra[$1] = $3; next }
  FILENAME == ARGV[2] {
    if ($0 ~ /^#/ || $0 !~ /^fabricscope_/) next
    name = $1; sub(/\{.*/, "", name)
    lab = $1; if (lab ~ /\{/) { sub(/^[^{]*\{/, "", lab); sub(/\}$/, "", lab) } else lab = ""
    delete L; labels(lab, L)
    key = name "|" L["device"] "|" L["port"] "|" L["direction"] L["counter"]
    ours[key] = $2
    next
  }
  {
    if ($0 ~ /^#/ || $0 !~ /^node_infiniband_/) next
    name = $1; sub(/\{.*/, "", name); sub(/^node_infiniband_/, "", name)
    if (name !~ /_total$/) next  # info, state, rate: not counters
    lab = $1; sub(/^[^{]*\{/, "", lab); sub(/\}$/, "", lab)
    delete L; labels(lab, L)
    if (!(name in map_family)) { print "not compared (not read by fabricscope): " $1 > report; skipped++; next }
    extra = map_extra[name]; sub(/^[a-z]+=/, "", extra); if (extra == "-") extra = ""
    key = map_family[name] "|" L["device"] "|" L["port"] "|" extra
    if (!(key in ours)) { print "MISSING in fabricscope: " $1 " (" key ")" > report; bad++; next }
    a = $2 + 0; b = ours[key] + 0
    d = a - b; if (d < 0) d = -d
    m = a < 0 ? -a : a
    if (d > m * 1e-15) { print "MISMATCH " $1 " node_exporter=" $2 " fabricscope=" ours[key] > report; bad++; next }
    compared++
  }
  END {
    print "compared " compared + 0 ", mismatched/missing " bad + 0 ", not compared " skipped + 0 > report
    exit (bad > 0 || compared < 100) ? 1 : 0
  }
' "$WORK/map" "$WORK/ours" "$WORK/ne" || { cat "$WORK/report" >&2; fail "node_exporter cross-check"; }
cat "$WORK/report"
stop_daemon
echo "PASS"
