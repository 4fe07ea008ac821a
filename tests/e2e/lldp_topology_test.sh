#!/usr/bin/env bash
# Link partners from real lldpd on a real veth pair (issue #18, item 5).
#
# Two network namespaces A and B joined by a veth pair, a real lldpd in each
# (foreground, its own control socket, only the veth, 1 s transmit interval,
# a system name of our choosing), and fabricscoped in A with only the topology
# collector on A's veth (--netdev-include) and A's lldpd socket
# (--lldpd-socket), ticking every second. The sysfs root is a fake tree with
# no RDMA device and only A's veth under class/net (the collector lists the
# --netdev-include interfaces there). Checked on /metrics, scraped inside A:
#  - fabricscope_link_partner_info for A's veth appears with B's system name,
#    B's veth MAC as partner_port_id (lldpd's port id subtype on a veth) and
#    B's ifname as partner_port_description, source="lldp";
#  - B's system name changes (lldpcli): the series changes, the old label set
#    is gone;
#  - B's lldpd stops (shutdown LLDPDU, else the 4 s TTL): the series goes;
#  - A's lldpd stops: fabricscope_topology_source_up{source="lldp"} drops to 0
#    and the collector counts the `unsupported` error once, not every tick.
# Needs root (creates namespaces; CI runs tests as root; SKIPPED elsewhere), lldpd and lldpcli
# (deploy/bootstrap.sh). Every wait is bounded; lldpd, the daemon and the
# namespaces are removed on exit, also on failure.
source "$(dirname "$0")/lib.sh"

# Skipped (exit 77, with the reason) where no network namespace with a veth
# pair can be created (lib.sh require_netns); as root on a VM it runs.
require_netns
command -v curl >/dev/null || fail "curl not installed"
command -v lldpd >/dev/null && command -v lldpcli >/dev/null ||
  fail "lldpd/lldpcli not installed (deploy/bootstrap.sh installs the lldpd package)"

NA="fslldpa$$"
NB="fslldpb$$"
IA="fsla$$"
IB="fslb$$"
NAME_B="fs-peer-b-$$"
NAME_B2="fs-peer-b-$$-renamed"
LLDPD_PID=(0 0)
LLDPD_NS=("$NA" "$NB")
LLDPD_IF=("$IA" "$IB")

# stop_lldpd I: SIGTERM (lldpd sends a shutdown LLDPDU and removes its
# socket), SIGKILL after 5 s.
stop_lldpd() {
  local pid=${LLDPD_PID[$1]}
  [ "$pid" -gt 0 ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $(tries 50)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  LLDPD_PID[$1]=0
}
cleanup_all() {
  [ -n "${DAEMON_PID:-}" ] && kill -9 "$DAEMON_PID" 2>/dev/null || true
  stop_lldpd 0
  stop_lldpd 1
  ip netns del "$NA" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  cleanup
}
trap cleanup_all EXIT

lldpd_fail() {
  echo "--- lldpd A ---" >&2
  tail -n 20 "$WORK/lldpd0.log" >&2 || true
  echo "--- lldpd B ---" >&2
  tail -n 20 "$WORK/lldpd1.log" >&2 || true
  echo "--- last scrape ---" >&2
  grep -E '^fabricscope_(link_partner_info|topology_source_up|collector_errors_total\{[^}]*topology)' "$WORK/metrics" >&2 || true
  fail "$@"
}

ip netns add "$NA" || fail "cannot create netns $NA"
ip netns add "$NB" || fail "cannot create netns $NB"
ip link add "$IA" netns "$NA" type veth peer name "$IB" netns "$NB" || fail "cannot create the veth pair"
ip -n "$NA" link set lo up
ip -n "$NA" link set "$IA" up
ip -n "$NB" link set "$IB" up
MAC_B=$(ip netns exec "$NB" cat "/sys/class/net/$IB/address")
[ -n "$MAC_B" ] || fail "no MAC on $IB"

# lldpd runs lldpcli on its start-up configuration as its unprivileged user
# (_lldpd), which must reach the socket in $WORK.
chmod 0755 "$WORK"

# start_lldpd I NAME: lldpd in namespace I on its veth only, with its own
# socket and a start-up configuration instead of /etc/lldpd.conf and
# /etc/lldpd.d (`ip netns exec` execs lldpd: $! is lldpd's pid).
start_lldpd() {
  local i=$1
  printf 'configure lldp tx-interval 1\nconfigure system hostname %s\n' "$2" >"$WORK/lldpd$i.conf"
  ip netns exec "${LLDPD_NS[$i]}" lldpd -d -u "$WORK/lldpd$i.sock" -I "${LLDPD_IF[$i]}" \
    -O "$WORK/lldpd$i.conf" >>"$WORK/lldpd$i.log" 2>&1 &
  LLDPD_PID[$i]=$!
}
start_lldpd 0 "fs-node-a-$$"
start_lldpd 1 "$NAME_B"

# A fake sysfs tree: no RDMA device; A's veth under class/net.
mkdir -p "$WORK/sys/class/infiniband" "$WORK/sys/class/net/$IA"

ip netns exec "$NA" "$DAEMON" "${ROOT_ARGS[@]}" --sysfs-root="$WORK/sys" --netdev-include="$IA" \
  --collectors=topology --config-interval=1s --lldpd-socket="$WORK/lldpd0.sock" \
  --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 >"$WORK/daemon.out" 2>"$WORK/daemon.log" &
DAEMON_PID=$!
PIDS+=("$DAEMON_PID")
wait_metrics_addr "daemon exited during startup"

scrape_a() { ip netns exec "$NA" curl -sf --max-time 5 "http://$METRICS_ADDR/metrics" >"$WORK/metrics"; }
partner_lines() { grep '^fabricscope_link_partner_info{' "$WORK/metrics" || true; }
# wait_until SECONDS DESCRIPTION CONDITION...: scrapes every 0.5 s until the
# condition (a command over $WORK/metrics) holds; fails after SECONDS.
wait_until() {
  local secs=$1 what=$2
  shift 2
  local deadline=$((SECONDS + secs))
  while :; do
    kill -0 "$DAEMON_PID" 2>/dev/null || lldpd_fail "daemon exited while waiting for: $what"
    if scrape_a && "$@"; then return 0; fi
    [ "$SECONDS" -lt "$deadline" ] || lldpd_fail "not within ${secs}s: $what"
    sleep 0.5
  done
}
# one_partner NAME: exactly one link_partner_info series, for A's veth, with
# B's port as LLDP names it and system name NAME.
one_partner() {
  local lines
  lines=$(partner_lines)
  [ "$(printf '%s\n' "$lines" | grep -c .)" = 1 ] || return 1
  for want in "netdev=\"$IA\"" 'source="lldp"' "partner_system_name=\"$1\"" \
    "partner_port_id=\"$MAC_B\"" "partner_port_description=\"$IB\"" "partner_chassis_id=\"$MAC_B\""; do
    grep -qF "$want" <<<"$lines" || return 1
  done
  grep -q ' 1$' <<<"$lines"
}
no_partner() { [ -z "$(partner_lines)" ]; }
lldp_up() { grep -qx "fabricscope_topology_source_up{source=\"lldp\"} $1" "$WORK/metrics"; }
lldp_down() { lldp_up 0; }

wait_until 30 "partner $NAME_B on $IA" one_partner "$NAME_B"
lldp_up 1 || lldpd_fail "fabricscope_topology_source_up{source=\"lldp\"} is not 1"
echo "ok: partner appeared: $(partner_lines)"

# --- The packaged unit's user reaches lldpd's socket (issue #35, item 5) ----
# The unit runs a DynamicUser with the unit's SupplementaryGroups; lldpd made
# the socket (mode and group its own). An unprivileged user with that group
# (setpriv, as systemd would set it up) reads the partner; the same user
# without it gets the lldp source down and a log line that names the group.
# The daemon runs from a copy in $WORK: the checkout may be private to root.
UNIT="$SRC/deploy/systemd/fabricscoped.service"
UNIT_GROUP=$(sed -n 's/^SupplementaryGroups=//p' "$UNIT")
[ "$UNIT_GROUP" = _lldpd ] || lldpd_fail "the unit's SupplementaryGroups is '$UNIT_GROUP', want _lldpd"
echo "lldpd socket: $(stat -c '%A %U:%G' "$WORK/lldpd0.sock")"
[ "$(stat -c %G "$WORK/lldpd0.sock")" = "$UNIT_GROUP" ] ||
  lldpd_fail "lldpd's socket group is $(stat -c %G "$WORK/lldpd0.sock"), not the unit's $UNIT_GROUP"
command -v setpriv >/dev/null || fail "setpriv (util-linux) not installed"
install -m 0755 "$DAEMON" "$WORK/fabricscoped"
# as_unit_user TAG SETPRIV_GROUP_ARGS...: the daemon as nobody in A's
# namespace; waits for its metrics address (AS_ADDR) and two config ticks.
as_unit_user() {
  local tag=$1
  shift
  ip netns exec "$NA" setpriv --reuid=nobody --regid=nogroup "$@" -- "$WORK/fabricscoped" \
    --sysfs-root="$WORK/sys" --netdev-include="$IA" --collectors=topology --config-interval=1s \
    --lldpd-socket="$WORK/lldpd0.sock" --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 \
    >"$WORK/$tag.out" 2>"$WORK/$tag.log" &
  AS_PID=$!
  PIDS+=("$AS_PID")
  AS_ADDR=""
  for _ in $(seq 1 $(tries 100)); do
    AS_ADDR=$(sed -n 's/.*msg="serving metrics" address=\([^ ]*\).*/\1/p' "$WORK/$tag.log" | head -n1)
    [ -n "$AS_ADDR" ] && break
    kill -0 "$AS_PID" 2>/dev/null || lldpd_fail "daemon as nobody ($tag) exited: $(cat "$WORK/$tag.log")"
    sleep 0.1
  done
  [ -n "$AS_ADDR" ] || lldpd_fail "daemon as nobody ($tag) logged no metrics address"
  local deadline=$((SECONDS + 30))
  while :; do
    ip netns exec "$NA" curl -sf --max-time 5 "http://$AS_ADDR/metrics" >"$WORK/$tag.metrics" || true
    [ "$(metric_value 'fabricscope_scheduler_ticks_total{tier="config"}' "$WORK/$tag.metrics")" -ge 2 ] 2>/dev/null && break
    [ "$SECONDS" -lt "$deadline" ] || lldpd_fail "daemon as nobody ($tag): no two config ticks in 30 s"
    sleep 0.5
  done
}
as_unit_user with-group --groups="$UNIT_GROUP"
deadline=$((SECONDS + 30))
until grep -q "^fabricscope_link_partner_info{.*partner_system_name=\"$NAME_B\"" "$WORK/with-group.metrics"; do
  [ "$SECONDS" -lt "$deadline" ] || lldpd_fail "nobody with $UNIT_GROUP: no partner: $(grep topology "$WORK/with-group.log" | tail -3)"
  sleep 0.5
  ip netns exec "$NA" curl -sf --max-time 5 "http://$AS_ADDR/metrics" >"$WORK/with-group.metrics" || true
done
grep -qx 'fabricscope_topology_source_up{source="lldp"} 1' "$WORK/with-group.metrics" ||
  lldpd_fail "nobody with $UNIT_GROUP: lldp source not up"
kill -TERM "$AS_PID"
wait "$AS_PID" || lldpd_fail "daemon as nobody with $UNIT_GROUP did not stop cleanly"
echo "ok: as nobody with group $UNIT_GROUP (the unit's): partner read"
as_unit_user without-group --clear-groups
grep -qx 'fabricscope_topology_source_up{source="lldp"} 0' "$WORK/without-group.metrics" ||
  lldpd_fail "nobody without $UNIT_GROUP: lldp source up"
grep 'level=error' "$WORK/without-group.log" | grep -F "$WORK/lldpd0.sock" | grep -q "$UNIT_GROUP" ||
  lldpd_fail "nobody without $UNIT_GROUP: no start-up error naming the socket and the group: $(cat "$WORK/without-group.log")"
kill -TERM "$AS_PID"
wait "$AS_PID" || true
echo "ok: as nobody without it: lldp down, the start-up error names $UNIT_GROUP"

lldpcli -u "$WORK/lldpd1.sock" configure system hostname "$NAME_B2" >/dev/null ||
  lldpd_fail "lldpcli could not rename B"
wait_until 30 "partner renamed to $NAME_B2" one_partner "$NAME_B2"
! grep -qF "partner_system_name=\"$NAME_B\"" "$WORK/metrics" || lldpd_fail "old label set still exported"
echo "ok: partner renamed: $(partner_lines)"

stop_lldpd 1
wait_until 30 "partner gone after B's lldpd stopped" no_partner
echo "ok: partner gone"

# A's lldpd stops: LLDP unavailable, reported once while ticks go on.
stop_lldpd 0
wait_until 30 "source_up{source=lldp} 0" lldp_down
errors_now() { metric_value 'fabricscope_collector_errors_total{code="unsupported",collector="topology"}' "$WORK/metrics"; }
ticks_now() { metric_value 'fabricscope_scheduler_ticks_total{tier="config"}' "$WORK/metrics"; }
e0=$(errors_now)
t0=$(ticks_now)
[ "${e0:-0}" -ge 1 ] || lldpd_fail "lldpd unreachable not counted as unsupported"
more_ticks() { [ "$(ticks_now)" -ge $((t0 + 3)) ]; }
wait_until 30 "three more config ticks" more_ticks
[ "$(errors_now)" = "$e0" ] || lldpd_fail "unsupported errors went from $e0 to $(errors_now) while lldpd stayed away"
echo "ok: lldpd gone: source_up 0, unsupported counted ($e0 in all since start), not again over $(($(ticks_now) - t0)) ticks"
stop_daemon
DAEMON_PID=""
