#!/usr/bin/env bash
# Golden end-to-end test of one collector (netdev, dcb_config or topology):
# the real daemon with only that collector (and rdma_sysfs where it needs the
# port inventory) on fixed inputs, in a network namespace of the test's own,
# scraped once every tier has ticked twice. The scrape passes `promtool check
# metrics`; the collector's own families (the rows of --dump-metrics-reference
# it emits) and its fabricscope_collector_errors_total series must equal
# tests/golden/<collector>.metrics, families sorted by name and sample lines
# sorted (lib.sh normalize_scrape). Nothing is masked: the inputs do not change
# during the run.
#
#  netdev      a veth pair fsgold0/fsgold1 in the namespace (IPv6 off, no
#              address: the kernel sends nothing on its own), --netdev-include
#              both; the test sends exactly 5 raw Ethernet frames of 100 bytes
#              (EtherType 0x88b5, local experimental: no protocol answers) from
#              fsgold1 to fsgold0, then waits for them in the counters.
#  dcb_config  the fixture sysfs tree with rdma_sysfs (mlx5_1/1 is ens1f0np0,
#              with hw_counters/lifespan), eth0's MLNX_OFED ecn tree from
#              tests/fixtures/ecn, a veth pair fsdcb1/fsdcb2 as --netdev-include,
#              and --dcb-dir with `dcb pfc show` text: ens1f0np0 PFC on 3 and
#              5, eth0 on 4, fsdcb1 off, fsdcb2 no file (not_found, counted
#              once; garbage would count a parse error every tick).
#  topology    the fixture sysfs tree with rdma_sysfs, --hwloc-xml of a
#              captured machine, a --topology-file line for ens1f0np0, and a
#              real lldpd on each end of a veth pair to a second namespace
#              (fixed MACs and system names: the LLDP partner of fsgtopo0 is
#              deterministic).
#
# Needs root and network namespaces (SKIPPED with the reason elsewhere, lib.sh
# require_netns); topology needs lldpd and lldpcli (deploy/bootstrap.sh).
#
#   tests/e2e/collector_golden_test.sh COLLECTOR            compare
#   tests/e2e/collector_golden_test.sh COLLECTOR --update   rewrite the golden
#   (tools/update-goldens.sh updates every golden)
source "$(dirname "$0")/lib.sh"

COLLECTOR=${1:-}
case "$COLLECTOR" in netdev | dcb_config | topology) ;; *) fail "usage: $0 netdev|dcb_config|topology [--update]" ;; esac
UPDATE=0
[ "${2:-}" = "--update" ] && UPDATE=1
GOLDEN="$SRC/tests/golden/$COLLECTOR.metrics"

require_netns
NS="fsgold$$"
NB="fsgoldb$$"
LLDPD_PIDS=()
cleanup_golden() {
  [ -n "${DAEMON_PID:-}" ] && kill -9 "$DAEMON_PID" 2>/dev/null || true
  for p in "${LLDPD_PIDS[@]}"; do
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  ip netns del "$NS" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  cleanup
}
trap cleanup_golden EXIT
ip netns add "$NS" || fail "cannot create netns $NS"
ip -n "$NS" link set lo up
# No IPv6 on the links made from here on: no router solicitations, no DAD.
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1 ||
  fail "cannot turn IPv6 off in $NS"

ARGS=(--collectors="$COLLECTOR" --hot-interval=20ms --medium-interval=50ms --slow-interval=100ms
  --config-interval=200ms)
SYS="$WORK/sys"
mkdir -p "$SYS/class/infiniband" "$SYS/class/net"
case "$COLLECTOR" in
  netdev)
    ip -n "$NS" link add fsgold0 type veth peer name fsgold1 || fail "cannot create the veth pair"
    ip -n "$NS" link set fsgold0 up
    ip -n "$NS" link set fsgold1 up
    ARGS+=(--sysfs-root="$SYS" --netdev-include='fsgold[01]')
    ;;
  dcb_config)
    # The fixture's RDMA devices (mlx5_1/1 is ens1f0np0, with a lifespan
    # file), eth0's ECN tree from the ECN fixture, and a veth pair for the
    # --netdev-include names (the kernel must know them).
    mkdir -p "$SYS/class/net"
    rmdir "$SYS/class/infiniband"
    ln -s "$SRC/tests/fixtures/sysfs/root/class/infiniband" "$SYS/class/infiniband"
    cp -r "$SRC/tests/fixtures/ecn/class/net/eth0" "$SYS/class/net/"
    ip -n "$NS" link add fsdcb1 type veth peer name fsdcb2 || fail "cannot create the veth pair"
    mkdir -p "$WORK/dcb"
    printf '%s\n' 'pfc-cap 8 macsec-bypass off delay 7' \
      'prio-pfc 0:off 1:off 2:off 3:on 4:off 5:on 6:off 7:off' >"$WORK/dcb/ens1f0np0"
    printf '%s\n' 'pfc-cap 8 macsec-bypass off delay 0' \
      'prio-pfc 0:off 1:off 2:off 3:off 4:on 5:off 6:off 7:off' >"$WORK/dcb/eth0"
    printf '%s\n' 'pfc-cap 8 macsec-bypass off delay 0' \
      'prio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:off 7:off' >"$WORK/dcb/fsdcb1"
    ARGS=(--collectors=rdma_sysfs,dcb_config --sysfs-root="$SYS" --netdev-include='fsdcb[12]'
      --dcb-dir="$WORK/dcb" --hot-interval=20ms --medium-interval=50ms --slow-interval=100ms
      --config-interval=200ms)
    ;;
  topology)
    command -v lldpd >/dev/null && command -v lldpcli >/dev/null ||
      fail "lldpd/lldpcli not installed (deploy/bootstrap.sh installs the lldpd package)"
    # The fixture's RDMA devices (its relative device links resolve in place).
    rmdir "$SYS/class/infiniband"
    ln -s "$SRC/tests/fixtures/sysfs/root/class/infiniband" "$SYS/class/infiniband"
    mkdir -p "$SYS/class/net/fsgtopo0"
    ip netns add "$NB" || fail "cannot create netns $NB"
    ip netns exec "$NB" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1
    ip link add fsgtopo0 netns "$NS" address 02:00:00:00:0a:01 type veth \
      peer name fsgtopo1 netns "$NB" address 02:00:00:00:0b:01 || fail "cannot create the veth pair"
    ip -n "$NS" link set fsgtopo0 up
    ip -n "$NB" link set fsgtopo1 up
    chmod 0755 "$WORK"  # lldpd's unprivileged user reads its configuration here
    i=0
    for spec in "$NS fsgtopo0 fs-golden-node" "$NB fsgtopo1 fs-golden-peer"; do
      read -r ns ifname name <<<"$spec"
      printf 'configure lldp tx-interval 1\nconfigure system hostname %s\n' "$name" >"$WORK/lldpd$i.conf"
      ip netns exec "$ns" lldpd -d -u "$WORK/lldpd$i.sock" -I "$ifname" -O "$WORK/lldpd$i.conf" \
        >>"$WORK/lldpd$i.log" 2>&1 &
      LLDPD_PIDS+=($!)
      i=$((i + 1))
    done
    printf '%s\n' '# topology golden cabling' \
      'host=* netdev=ens1f0np0 system=leaf01 port=Ethernet1/1 chassis=02:00:00:00:01:00' >"$WORK/topology"
    ARGS=(--collectors=rdma_sysfs,topology --sysfs-root="$SYS" --netdev-include=fsgtopo0
      --lldpd-socket="$WORK/lldpd0.sock" --topology-file="$WORK/topology"
      --hwloc-xml="$SRC/tests/fixtures/hwloc/32em64t-2n8c2t-pci-normalio.xml"
      --hot-interval=20ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms)
    ;;
esac

ip netns exec "$NS" "$DAEMON" "${ROOT_ARGS[@]}" --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 \
  "${ARGS[@]}" >"$WORK/daemon.out" 2>"$WORK/daemon.log" &
DAEMON_PID=$!
PIDS+=("$DAEMON_PID")
wait_metrics_addr "daemon exited during startup"
scrape_ns() { ip netns exec "$NS" curl -sf --max-time 5 "http://$METRICS_ADDR/metrics" >"$WORK/scrape"; }

# ticked N: every tier has completed N ticks since the daemon started.
ticked() {
  local tier n
  for tier in hot medium slow config; do
    n=$(metric_value "fabricscope_scheduler_ticks_total{tier=\"$tier\"}" "$WORK/scrape")
    [ "${n:-0}" -ge "$1" ] || return 1
  done
}
# wait_scrape WHAT CONDITION...: scrapes until CONDITION holds (bounded, 30 s).
wait_scrape() {
  local what=$1
  shift
  for _ in $(seq 1 $(tries 300)); do
    kill -0 "$DAEMON_PID" 2>/dev/null || fail "daemon exited while waiting for $what"
    if scrape_ns 2>/dev/null && "$@"; then return 0; fi
    sleep 0.1
  done
  fail "not within 30 s: $what"
}
wait_scrape "two ticks of every tier" ticked 2

case "$COLLECTOR" in
  netdev)
    ip netns exec "$NS" python3 - <<'PY' || fail "cannot send the test frames"
import socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("fsgold1", 0))
frame = bytes.fromhex("020000000a01" "020000000b01" "88b5") + bytes(86)  # 100 bytes
for _ in range(5):
    s.send(frame)
PY
    frames_in() { grep -qx 'fabricscope_netdev_packets_total{netdev="fsgold0",direction="rx"} 5' "$WORK/scrape"; }
    wait_scrape "the 5 frames in fsgold0's counters" frames_in
    ;;
  topology)
    partner() { grep -q '^fabricscope_link_partner_info{[^}]*netdev="fsgtopo0",source="lldp"' "$WORK/scrape"; }
    wait_scrape "fsgtopo0's LLDP partner" partner
    ;;
esac
# Two more ticks of every tier: once-only errors counted, every gauge refreshed.
n=$(metric_value 'fabricscope_scheduler_ticks_total{tier="config"}' "$WORK/scrape")
wait_scrape "two more ticks" ticked $((${n:-0} + 2))
stop_daemon
promtool_check "$WORK/scrape"

# The collector's own families: the reference rows whose "emitted by" is it.
families=$("$DAEMON" --dump-metrics-reference |
  awk -F'|' -v c=" $COLLECTOR " '$5 == c { gsub(/[ `]/, "", $2); print $2 }' | paste -sd'|' -)
[ -n "$families" ] || fail "--dump-metrics-reference names no family of $COLLECTOR"
normalize_scrape "$WORK/scrape" "" "($families|fabricscope_collector_errors_total)" "$COLLECTOR" >"$WORK/actual"
grep -q '^fabricscope_' "$WORK/actual" || fail "the scrape has none of $COLLECTOR's families"
golden_check "$WORK/actual" "$GOLDEN"
echo "PASS"
