#!/usr/bin/env bash
# The fleet view end to end: fabricsim's leaf-spine fleet (12 hosts on
# leaf-spine:3,2,4), one real fabricscoped per simulated host reading that
# host's tree and topology file, and a real Prometheus scraping all of them
# every 1 s with the shipped rule files (deploy/prometheus/*.rules.yml) loaded.
#
# usage: fleet_test.sh [SCENARIO] [RESULT_JSON]
#   SCENARIO: slow_receiver (default), quiet, incast, bad_link,
#             pause_storm_deadlock_free
#   RESULT_JSON: where to keep the alerts seen (bench/fleet_detection.sh)
#   FLEET_WATCH: seconds after the episode start to watch the alerts (30)
#
# The episode starts 15 s after the simulator (--episode-start), on host-06
# (--origin), behind leaf02 Ethernet1/2. Asserted per scenario, through the
# Prometheus HTTP API (alerts as tests/e2e/fleet/watch_alerts.py saw them):
#  - slow_receiver: FabricPFCStormOrigin fires naming host-06 ens1f0np0
#    priority 3 and leaf02 Ethernet1/2, within DEADLINE s (default 15) of the
#    episode start, and names no other host; FabricSwitchPortCongested names
#    leaf02 Ethernet1/2;
#  - incast: FabricSwitchPortCongested names the leaf port toward the target,
#    FabricPFCStormOrigin never fires;
#  - quiet: no Fabric* alert is pending or firing in 40 s (bench only: CI runs
#    slow_receiver, which asserts that nothing was pending before its storm).
# Prometheus labels each target with instance=host-NN (the way sites relabel
# instance to the node name), so the alerts name hosts.
source "$(dirname "$0")/lib.sh"

SCENARIO="${1:-slow_receiver}"
RESULT="${2:-$WORK/alerts.json}"
DEADLINE="${FLEET_DEADLINE:-15}"
HOSTS=12
command -v prometheus >/dev/null || fail "prometheus not installed (deploy/bootstrap.sh)"
command -v jq >/dev/null || fail "jq is required"
SIM="$BIN/fabricsim"
[ -x "$SIM" ] || fail "no fabricsim at $SIM"

FLEET="$WORK/fleet"
"$SIM" --hosts=$HOSTS --fabric=leaf-spine:3,2,4 --scenario="$SCENARIO" --out="$FLEET" \
  --episode-start=15s --episode-length=40s --episode-period=300s --origin=host-06 \
  --seed=1 --exit-with-pid=$$ >"$WORK/fabricsim.log" 2>&1 &
SIM_PID=$!
PIDS+=("$SIM_PID")
for _ in $(seq 1 $(tries 100)); do
  [ -f "$FLEET/host-$HOSTS/topology" ] && [ -f "$FLEET/host-$HOSTS/ethtool/ens1f0np0" ] && break
  sleep 0.1
done
[ -f "$FLEET/host-$HOSTS/ethtool/ens1f0np0" ] || fail "fabricsim wrote no fleet: $(cat "$WORK/fabricsim.log")"

# One daemon per host. The hot tier is raised to 100 ms for 12 daemons on a
# 2-core machine (the documented default stays 10 ms).
TARGETS=""
for i in $(seq -w 1 $HOSTS); do
  h="host-$i"
  port=$(free_port)
  "$DAEMON" "${ROOT_ARGS[@]}" --metrics-listen=127.0.0.1:$port --grpc-listen=127.0.0.1:0 \
    --sysfs-root="$FLEET/$h/sys" --ethtool-dir="$FLEET/$h/ethtool" \
    --topology-file="$FLEET/$h/topology" --lldpd-socket= \
    --collectors=rdma_sysfs,ethtool,topology --hot-interval=100ms --medium-interval=100ms \
    --slow-interval=1s --config-interval=1s --store-memory=16MiB \
    >"$WORK/$h.out" 2>"$WORK/$h.log" &
  PIDS+=("$!")
  TARGETS+="      - targets: ['127.0.0.1:$port']"$'\n'"        labels: {instance: '$h'}"$'\n'
done

PROM_PORT=$(free_port)
cat >"$WORK/prometheus.yml" <<Y
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
$(for f in "$SRC"/deploy/prometheus/*.rules.yml; do echo "  - $f"; done)
scrape_configs:
  - job_name: fabricscope
    static_configs:
$TARGETS
Y
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prometheus.log" 2>&1 &
PIDS+=("$!")
API="http://127.0.0.1:$PROM_PORT/api/v1"

# Every target up (bounded).
for _ in $(seq 1 $(tries 60)); do
  up=$(curl -sf --max-time 2 --data-urlencode 'query=sum(up{job="fabricscope"})' "$API/query" |
    jq -r '.data.result[0].value[1] // 0' 2>/dev/null || echo 0)
  [ "$up" = "$HOSTS" ] && break
  sleep 0.5
done
[ "$up" = "$HOSTS" ] || fail "only $up of $HOSTS daemons are up in Prometheus: $(tail -5 "$WORK/prometheus.log")"

if [ "$SCENARIO" = quiet ]; then
  python3 "$SRC/tests/e2e/fleet/watch_alerts.py" "$API" "$FLEET/ground_truth.json" "$RESULT" 0 40
else
  python3 "$SRC/tests/e2e/fleet/watch_alerts.py" "$API" "$FLEET/ground_truth.json" "$RESULT" \
    "${FLEET_WATCH:-30}" $((${FLEET_WATCH:-30} + 60))
fi
cp "$FLEET/ground_truth.json" "$WORK/ground_truth.json" 2>/dev/null || true

# Prometheus' own cost for this fleet (bench/fleet_detection.sh reports it):
# resident memory, head series, samples appended per second, and the last
# evaluation time of each rule group.
curl -sf --max-time 5 "http://127.0.0.1:$PROM_PORT/metrics" |
  grep -E '^(process_resident_memory_bytes|prometheus_tsdb_head_series|prometheus_rule_group_last_duration_seconds|prometheus_tsdb_head_samples_appended_total)' \
  >"${RESULT%.json}.prometheus.txt" || true

# The fleet dashboard's every query runs against this Prometheus; during the
# slow_receiver storm every panel has data (tests/e2e/deploy/check_dashboard.py:
# exit 2 = a query failed, 1 = a panel without series).
if [ "$SCENARIO" = slow_receiver ]; then
  rc=0
  python3 "$SRC/tests/e2e/deploy/check_dashboard.py" "$API" "$SRC/deploy/grafana/fabricscope-fleet.json" panels \
    >"$WORK/fleet-panels.out" 2>&1 || rc=$?
  cat "$WORK/fleet-panels.out"
  [ "$rc" -eq 0 ] || fail "fleet dashboard: rc $rc (above)"
fi
[ -z "${FLEET_KEEP:-}" ] || cp "$FLEET/ground_truth.json" "$FLEET_KEEP"

# firing NAME [JQ_FILTER_ON_LABELS]: the alerts of NAME that fired (JSON lines).
firing() {
  jq -c --arg n "$1" '.alerts[] | select(.name == $n and .first_firing_unix != null)
    | {labels, after: (.first_firing_unix - ($ep // 0))}' --argjson ep \
    "$(jq '.episode_start_unix // 0' "$RESULT")" "$RESULT"
}
summary() { jq -c '.alerts[] | {name, instance: .labels.instance, switch: .labels.switch, switch_port: .labels.switch_port, pending: .first_pending_unix, firing: .first_firing_unix}' "$RESULT"; }

case "$SCENARIO" in
  slow_receiver)
    origin=$(firing FabricPFCStormOrigin)
    [ -n "$origin" ] || fail "FabricPFCStormOrigin never fired; alerts: $(summary)"
    echo "$origin" | jq -e -s 'all(.labels.instance == "host-06")' >/dev/null ||
      fail "FabricPFCStormOrigin names another host: $origin"
    echo "$origin" | jq -e -s 'any(.labels.netdev == "ens1f0np0" and .labels.priority == "3"
      and .labels.switch == "leaf02" and .labels.switch_port == "Ethernet1/2")' >/dev/null ||
      fail "FabricPFCStormOrigin labels: $origin"
    after=$(echo "$origin" | jq -s 'map(.after) | min')
    echo "FabricPFCStormOrigin fired $after s after the storm started"
    awk -v a="$after" -v d="$DEADLINE" 'BEGIN { exit !(a <= d) }' ||
      fail "FabricPFCStormOrigin fired $after s after the storm started (deadline $DEADLINE s)"
    # The fleet was quiet until the storm: no Fabric* alert (the fleet and the
    # per-host rules) was pending before the episode started (the whole quiet
    # scenario, 40 s without an episode, runs in bench/fleet_detection.sh).
    early=$(jq -c '.episode_start_unix as $ep | [.alerts[] | select((.name | startswith("Fabric"))
      and ((.name | startswith("Fabricscope")) | not) and .first_pending_unix != null
      and .first_pending_unix < $ep) | {name, labels}]' "$RESULT")
    [ "$early" = "[]" ] || fail "alerts before the storm started (a quiet fleet must raise none): $early"
    cong=$(firing FabricSwitchPortCongested)
    echo "$cong" | jq -e -s 'any(.labels.switch == "leaf02" and .labels.switch_port == "Ethernet1/2")' \
      >/dev/null || fail "FabricSwitchPortCongested does not name leaf02 Ethernet1/2: $(summary)"
    ;;
  incast)
    [ -z "$(firing FabricPFCStormOrigin)" ] || fail "incast named an origin: $(firing FabricPFCStormOrigin)"
    target=$(jq -r '.episodes[0].target | "\(.leaf) \(.leaf_port)"' "$WORK/ground_truth.json")
    firing FabricSwitchPortCongested | jq -e -s --arg t "$target" \
      'any("\(.labels.switch) \(.labels.switch_port)" == $t)' >/dev/null ||
      fail "FabricSwitchPortCongested does not name $target: $(summary)"
    ;;
  quiet)
    n=$(jq '[.alerts[] | select(.name | startswith("Fabric") and (startswith("Fabricscope") | not))] | length' "$RESULT")
    [ "$n" = 0 ] || fail "the quiet fleet raised alerts: $(summary)"
    ;;
  *) echo "no assertions for $SCENARIO (bench run)" ;;
esac
echo "PASS $SCENARIO"
