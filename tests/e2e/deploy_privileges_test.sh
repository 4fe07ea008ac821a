#!/usr/bin/env bash
# The collectors need no privilege (deploy/README.md, "Privileges"; the
# systemd unit and the DaemonSet grant none).
#
# In a network namespace created here, with a veth pair, fabricscoped runs
# once as root and once as UID 65534 with every capability dropped (empty
# bounding set, no_new_privs), on the veth netdevs (--netdev-include) with
# the netdev, ethtool and dcb_config collectors (rtnetlink RTM_GETLINK,
# SIOCETHTOOL, ethtool netlink PAUSE_GET/FEC_GET, dcbnl IEEE_GET). Both runs
# must export the same netdev series and the same collector error counts by
# code, with no permission_denied. (veth answers the pause, FEC and DCB
# requests with EOPNOTSUPP: the kernel passed them to the driver instead of
# refusing them for lack of a capability.) Needs root to create the namespace;
# everything is removed on exit.
source "$(dirname "$0")/lib.sh"

# Skipped (exit 77, with the reason) where no network namespace with a veth
# pair can be created (lib.sh require_netns); as root on a VM it runs.
require_netns
command -v setpriv >/dev/null || fail "setpriv (util-linux) not installed"
NS="fsdeploy$$"
ip netns add "$NS" || fail "cannot create netns $NS"
cleanup_ns() { ip netns del "$NS" 2>/dev/null || true; }
trap 'cleanup_ns; cleanup' EXIT
ip -n "$NS" link add fsva type veth peer name fsvb || fail "cannot create the veth pair in $NS"
ip -n "$NS" link set lo up
ip -n "$NS" link set fsva up
ip -n "$NS" link set fsvb up
# An empty sysfs tree (no RDMA devices) readable by everyone.
mkdir -p "$WORK/sys/class/infiniband"
chmod 0755 "$WORK" "$WORK/sys" "$WORK/sys/class" "$WORK/sys/class/infiniband"

# ticked FILE TIER: the exposition FILE shows TIER ticked at least twice (every
# collector of the tier polled and counted its errors at least once).
ticked() { awk -v t="fabricscope_scheduler_ticks_total{tier=\"$2\"}" '$1 == t && $2 >= 2 {f = 1} END {exit !f}' "$1"; }
# run_as NAME [WRAPPER...]: runs the daemon in the namespace, scrapes it after
# the medium (ethtool) and config (dcb_config) tiers have ticked twice, writes
# $WORK/NAME.metrics and NAME.status. (Only the config tier was awaited once:
# under ASan a scrape then could precede ethtool's first poll and its error.)
run_as() {
  local name=$1
  shift
  ip netns exec "$NS" "$@" "$DAEMON" "${ROOT_ARGS[@]}" --sysfs-root="$WORK/sys" --netdev-include='fsv.*' \
    --collectors=netdev,ethtool,dcb_config --config-interval=200ms \
    --metrics-listen=127.0.0.1:19478 --grpc-listen=127.0.0.1:19479 \
    >"$WORK/$name.out" 2>"$WORK/$name.log" &
  local pid=$!
  PIDS+=("$pid")
  local ok=0
  for _ in $(seq 1 $(tries 50)); do
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.log" >&2; fail "$name: daemon exited"; }
    if ip netns exec "$NS" curl -sf --max-time 2 http://127.0.0.1:19478/metrics >"$WORK/$name.metrics" 2>/dev/null &&
      grep -q '^fabricscope_netdev_packets_total{netdev="fsva"' "$WORK/$name.metrics" &&
      grep -q '^fabricscope_collector_errors_total{code="unsupported",collector="dcb_config"} [1-9]' "$WORK/$name.metrics" &&
      ticked "$WORK/$name.metrics" medium && ticked "$WORK/$name.metrics" config; then
      ok=1
      break
    fi
    sleep 0.2
  done
  grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs)' "/proc/$pid/status" >"$WORK/$name.status"
  kill -TERM "$pid"
  wait "$pid" || true
  [ "$ok" = 1 ] || { cat "$WORK/$name.log" >&2; fail "$name: no netdev series / dcb_config poll within 10 s"; }
}
run_as root
run_as unprivileged setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs
grep -q 'Uid:[[:space:]]*65534' "$WORK/unprivileged.status" || fail "not running as 65534: $(cat "$WORK/unprivileged.status")"
grep -q 'CapEff:[[:space:]]*0000000000000000' "$WORK/unprivileged.status" || fail "capabilities left: $(cat "$WORK/unprivileged.status")"
grep -q 'CapBnd:[[:space:]]*0000000000000000' "$WORK/unprivileged.status" || fail "bounding set left: $(cat "$WORK/unprivileged.status")"

for name in root unprivileged; do
  # Error classes seen (non-zero counts), and the netdev series.
  grep '^fabricscope_collector_errors_total' "$WORK/$name.metrics" | grep -v ' 0$' | sed 's/ .*//' | sort >"$WORK/$name.errors"
  grep -E '^fabricscope_netdev_[a-z_]+_total\{netdev="fsv' "$WORK/$name.metrics" | sed 's/ .*//' | sort >"$WORK/$name.series"
done
echo "root errors: $(tr '\n' ' ' <"$WORK/root.errors")"
echo "unprivileged errors: $(tr '\n' ' ' <"$WORK/unprivileged.errors")"
! grep -q 'permission_denied' "$WORK/unprivileged.errors" || fail "permission_denied without capabilities: $(cat "$WORK/unprivileged.errors")"
diff -u "$WORK/root.errors" "$WORK/unprivileged.errors" || fail "collector errors differ between root and unprivileged"
[ "$(wc -l <"$WORK/unprivileged.series")" -ge 8 ] || fail "too few netdev series unprivileged: $(cat "$WORK/unprivileged.series")"
diff -u "$WORK/root.series" "$WORK/unprivileged.series" || fail "netdev series differ between root and unprivileged"
# The ethtool and dcbnl requests reached the driver (EOPNOTSUPP) in both runs.
for name in root unprivileged; do
  grep -q 'collector="ethtool"' "$WORK/$name.errors" || fail "$name: the ethtool netlink requests were not answered"
  grep -q 'collector="dcb_config"' "$WORK/$name.errors" || fail "$name: the dcbnl request was not answered"
done
echo PASS
