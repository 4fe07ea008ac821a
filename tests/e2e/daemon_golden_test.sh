#!/usr/bin/env bash
# Golden end-to-end test of the whole daemon (node_exporter's e2e-output.txt
# idea): the real fabricscoped with every registered collector (the list
# from --list-collectors) on the fixture tree tests/fixtures/sysfs/root plus an
# --ethtool-dir holding two fixture `ethtool -S` dumps (mlx5 as ens1f0np0, the
# netdev of the fixture's RoCE port mlx5_1/1, so it gets that port's labels;
# ice as fsice0, a netdev of no RDMA port), metrics on a free loopback port,
# scraped once every tier has completed at least two ticks. The scrape must
# pass `promtool check metrics`, and with volatile values masked it must equal
# tests/golden/daemon.metrics: every line of the exposition, i.e. raw
# families, aggregates (peak rates, pause fraction peaks, microbursts),
# detector state gauges, and every self-metric name and label set.
#
# Determinism.
#  - Order: families sorted by name, the sample lines of each family sorted
#    (the exposition's order depends on which tier thread first touched a
#    family, and prometheus-cpp keeps a family's series in a hash map).
#  - The fixture files do not change during the run, so every counter rate is
#    exactly 0: peak rates and pause fraction peaks are 0, no microburst and no
#    detector episode can happen, however late or irregular the polls are.
#  - Masked (the line stays, its value becomes <masked>, so that a new or
#    vanished series still shows in the diff): poll and correlation duration
#    histograms (buckets, sum, count), scheduler ticks and overruns (how many
#    ticks ran before the scrape), the start time, the store's bytes, samples
#    and retention (they grow with every tick), and the HTTP server's request
#    counts (fabricscope_http_requests_total: how often the test polled). In
#    fabricscope_build_info the revision label is masked (it is the commit).
#  - The host's network interfaces. The netdev and dcb_config collectors ask
#    the kernel about the fixture's netdev names (ens1f0np0: the netdev of an
#    RDMA port); ethtool reads only --ethtool-dir. A host with an interface of
#    that name (a real RoCE host may well have ens1f0np0) would add live
#    netdev counters and its real PFC configuration. So the script re-runs
#    itself in a private network namespace (`unshare -n` as root, else
#    `unshare -rn` with a user namespace) that holds only `lo`: there the
#    fixture's netdevs exist nowhere, netdev reports nothing for them (a
#    netdev unknown to the kernel is not an error) and dcb_config counts
#    not_found once per netdev, on every machine. Where no namespace can be
#    made (a container without CAP_SYS_ADMIN and no user namespaces) it runs
#    in the host's namespace, which gives the same scrape as long as none of
#    the fixture's netdevs exists there; it checks that and reports SKIPPED
#    (exit 77), saying why, if one does.
#
#   tests/e2e/daemon_golden_test.sh            compare
#   tests/e2e/daemon_golden_test.sh --update   rewrite the expected file
#   (tools/update-goldens.sh updates every golden)
set -euo pipefail

# Re-run in a private network namespace (see above), before lib.sh creates its
# temporary directory and exit trap.
if [ -z "${FABRICSCOPE_GOLDEN_NETNS:-}" ]; then
  for flags in -n -rn; do
    if unshare "$flags" true 2>/dev/null; then
      FABRICSCOPE_GOLDEN_NETNS="unshare $flags" exec unshare "$flags" bash "$0" "$@"
    fi
  done
  export FABRICSCOPE_GOLDEN_NETNS=none
fi

source "$(dirname "$0")/lib.sh"

GOLDEN="$SRC/tests/golden/daemon.metrics"
UPDATE=0
[ "${1:-}" = "--update" ] && UPDATE=1

FIXTURE_ROOT="$SRC/tests/fixtures/sysfs/root"
if [ "$FABRICSCOPE_GOLDEN_NETNS" = none ]; then
  for n in $(cat "$FIXTURE_ROOT"/class/infiniband/*/ports/*/gid_attrs/ndevs/* 2>/dev/null | sort -u); do
    # Asked over netlink (what the collectors see); /sys may be another namespace's.
    if command -v ip >/dev/null; then
      ip link show dev "$n" >/dev/null 2>&1 || continue
    else
      [ -e "/sys/class/net/$n" ] || continue
    fi
    skip "needs a network namespace: this host has an interface named $n, a netdev of the fixture tree, and no network namespace can be made (unshare -n / -rn): the scrape would show the host's interface"
  done
else
  # A new network namespace starts with lo down.
  ip link set lo up || fail "cannot bring lo up in the private network namespace"
fi

ETHTOOL="$WORK/ethtool"
mkdir -p "$ETHTOOL"
# The dumps end with exactly one newline (a missing one would read as truncated).
printf '%s\n' "$(cat "$SRC/tests/fixtures/ethtool/mlx5/lkml_bpf_20240619_mlx5_k5.15_nonzero.txt")" \
  >"$ETHTOOL/ens1f0np0"
printf '%s\n' "$(cat "$SRC/tests/fixtures/ethtool/other/ice_25g_k4.18_statistics.txt")" \
  >"$ETHTOOL/fsice0"

# Every registered collector (fabricscoped --list-collectors), so that a new
# one shows here without editing this script. Their inputs are fixed: the
# fixture tree and --ethtool-dir; topology reads the fixture cabling file and
# a captured machine's hwloc XML (never this host's PCI tree) and no lldpd;
# rdma_netlink is not used off /sys (it says so in its gauges).
COLLECTORS=$("$DAEMON" --list-collectors | awk 'NF { print $1 }' | paste -sd, -)
[ -n "$COLLECTORS" ] || fail "--list-collectors listed nothing"
printf '%s\n' '# daemon golden cabling' \
  'host=* netdev=ens1f0np0 system=leaf01 port=Ethernet1/1 chassis=02:00:00:00:01:00' >"$WORK/topology"
start_daemon --sysfs-root="$FIXTURE_ROOT" --ethtool-dir="$ETHTOOL" --collectors="$COLLECTORS" \
  --topology-file="$WORK/topology" --lldpd-socket= \
  --hwloc-xml="$SRC/tests/fixtures/hwloc/32em64t-2n8c2t-pci-normalio.xml" \
  --hot-interval=20ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms

# Wait (bounded: 30 s, for a loaded machine) until every tier has completed
# two ticks: every collector has polled twice, so every counter has a rate and
# a peak, and the once-only errors (unsupported, not_found) have been counted.
ready=0
for _ in $(seq 1 $(tries 300)); do
  if scrape >"$WORK/scrape" 2>/dev/null; then
    ready=1
    for tier in hot medium slow config; do
      n=$(metric_value "fabricscope_scheduler_ticks_total{tier=\"$tier\"}" "$WORK/scrape")
      awk -v n="${n:-0}" 'BEGIN { exit !(n >= 2) }' || ready=0
    done
    [ "$ready" -eq 1 ] && break
  fi
  sleep 0.1
done
[ "$ready" -eq 1 ] || fail "not every tier ticked twice within 30 s"
scrape >"$WORK/scrape" || fail "scrape failed"
stop_daemon
promtool_check "$WORK/scrape"

# Normalized (lib.sh normalize_scrape: families and samples sorted); the
# volatile families keep name and labels, their values become <masked>.
volatile='^(fabricscope_collector_poll_duration_seconds|fabricscope_rdma_sysfs_cached_reads_total|fabricscope_device_queries_total|fabricscope_correlation_duration_seconds|fabricscope_stall_duration_seconds|fabricscope_scheduler_ticks_total|fabricscope_scheduler_overruns_total|fabricscope_start_time_seconds|fabricscope_store_bytes|fabricscope_store_seek_index_bytes|fabricscope_store_samples|fabricscope_store_retention_seconds|fabricscope_http_requests_total)(_bucket|_sum|_count)?[{ ]'
normalize_scrape "$WORK/scrape" "$volatile" >"$WORK/actual"

# Sanity: the scrape covers every collector and the aggregates, so that an
# update cannot silently record a daemon that exported nothing.
for want in '^fabricscope_port_info\{' '^fabricscope_pfc_pause_seconds_total\{netdev="ens1f0np0"' \
  '^fabricscope_pfc_pause_frames_total\{netdev="fsice0"' '^fabricscope_discards_total\{device="mlx5_1",port="1",netdev="ens1f0np0"' \
  '^fabricscope_peak_rate_per_second\{' '^fabricscope_pfc_pause_fraction_peak\{' '^fabricscope_microbursts_total\{' \
  '^fabricscope_pfc_storm_active\{' '^fabricscope_collector_errors_total\{code="not_found",collector="dcb_config"\}' \
  '^fabricscope_collector_errors_total\{[^}]*collector="netdev"' '^fabricscope_scheduler_ticks_total\{tier="hot"\} <masked>$'; do
  grep -qE "$want" "$WORK/actual" || fail "no line matching $want in the scrape"
done

golden_check "$WORK/actual" "$GOLDEN"
echo "PASS (network namespace: $FABRICSCOPE_GOLDEN_NETNS)"
