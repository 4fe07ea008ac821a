#!/usr/bin/env bash
# The Prometheus rules in deploy/prometheus are valid and their unit tests pass.
#  - `promtool check rules` on every rule file (syntax, PromQL, duplicate rules);
#  - `promtool test rules` on deploy/prometheus/tests/*.yml;
#  - every alert in the rule files has a unit test case where it fires and one
#    where it stays silent, plus summary/description/runbook annotations;
#  - the unit tests have teeth: mutated copies of the alerts (two thresholds,
#    a count, a dropped label) and of the fleet rules (each alert's
#    thresholds, the role, the switch-port join) must each make them fail.
source "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || fail "promtool not installed (deploy/bootstrap.sh: prometheus)"
RULES="$SRC/deploy/prometheus"
shopt -s nullglob
files=("$RULES"/*.rules.yml)
tests=("$RULES"/tests/*.yml)
[ ${#files[@]} -ge 2 ] || fail "expected recording and alerting rule files in $RULES"
[ ${#tests[@]} -ge 1 ] || fail "no promtool unit tests in $RULES/tests"

for f in "${files[@]}"; do
  out=$(promtool check rules "$f" 2>&1) || fail "promtool check rules $(basename "$f"): $out"
  echo "$out" | grep -q "SUCCESS" || fail "promtool check rules $(basename "$f"): $out"
done
for t in "${tests[@]}"; do
  out=$(promtool test rules "$t" 2>&1) || fail "promtool test rules $(basename "$t"):"$'\n'"$out"
done

# Every alert: a firing case and a silent case in the unit tests; annotations.
alerts=$(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$RULES"/*.rules.yml | sort -u)
[ "$(echo "$alerts" | wc -l)" -ge 14 ] || fail "expected at least 14 alerts, found: $alerts"
for a in $alerts; do
  fires=0 silent=0
  for t in "${tests[@]}"; do
    fires=$((fires + $(grep -A1 -E "^ *alertname: $a\$" "$t" | grep -cE '^ *exp_alerts: *$' || true)))
    silent=$((silent + $(grep -A1 -E "^ *alertname: $a\$" "$t" | grep -cE '^ *exp_alerts: *\[\] *$' || true)))
  done
  [ "$fires" -ge 1 ] || fail "alert $a: no unit test case where it fires"
  [ "$silent" -ge 1 ] || fail "alert $a: no unit test case where it stays silent"
  # The rule's block (from its `- alert:` line to the next rule) has the annotations.
  for key in summary description runbook; do
    n=$(awk -v a="$a" -v k="$key" '
      /^ *- (alert|record):/ { in_rule = ($0 ~ ("- alert: *" a "$")) }
      in_rule && $0 ~ ("^ *" k ":") { n++ }
      END { print n + 0 }' "$RULES"/*.rules.yml)
    [ "$n" -ge 1 ] || fail "alert $a: no $key annotation"
  done
  anchor=$(echo "$a" | tr 'A-Z' 'a-z')
  grep -q "runbook: deploy/README.md#$anchor\$" "$RULES"/*.rules.yml || fail "alert $a: runbook is not deploy/README.md#$anchor"
  grep -q "^### $a\$" "$SRC/deploy/README.md" || fail "alert $a: no '### $a' runbook section in deploy/README.md"
done
echo "alerts with firing and silent unit tests: $(echo $alerts | wc -w)"

# Mutations: each must make the unit tests fail.
mutate() {  # mutate NAME SED_EXPR [RULE_FILE, default fabricscope-alerts.rules.yml]
  local file="${3:-fabricscope-alerts.rules.yml}"
  rm -rf "$WORK/mut"
  mkdir -p "$WORK/mut/tests"
  cp "$RULES"/*.rules.yml "$WORK/mut/"
  cp "$RULES"/tests/*.yml "$WORK/mut/tests/"
  sed -i "$2" "$WORK/mut/$file"
  cmp -s "$WORK/mut/$file" "$RULES/$file" && fail "mutation '$1' changed nothing"
  promtool check rules "$WORK/mut/$file" >/dev/null 2>&1 || fail "mutation '$1' is not valid PromQL"
  # Only the unit-test files that load the mutated rule file can notice it.
  local t affected=()
  for t in "$WORK"/mut/tests/*.yml; do
    grep -qE "^ *- \.\./$file\$" "$t" && affected+=("$t")
  done
  [ ${#affected[@]} -ge 1 ] || fail "mutation '$1': no unit-test file loads $file"
  if promtool test rules "${affected[@]}" >/dev/null 2>&1; then
    fail "unit tests still pass with mutation '$1'"
  fi
}
mutate "storm fallback 0.5 -> 0.55" 's/fabricscope:pfc_pause_fraction:rate1m >= 0.5$/fabricscope:pfc_pause_fraction:rate1m >= 0.55/'
mutate "pause spreading >= 2 -> >= 1" 's/> 100) >= 2)$/> 100) >= 1)/'
mutate "stalls 0.25 -> 0.4" 's/ratio15m > 0.25$/ratio15m > 0.4/'
mutate "link degraded loses netdev" 's/max by (job, instance, device, port, netdev, kind) (max_over_time(fabricscope_link_degraded_active/max by (job, instance, device, port, kind) (max_over_time(fabricscope_link_degraded_active/'
mutate "counter saturated loses the counter" 's/max by (job, instance, device, port, counter) (fabricscope_ib_pma_saturated)/max by (job, instance, device, port) (fabricscope_ib_pma_saturated)/'
mutate "counter saturated for 15m -> 10m" '/alert: FabricCounterSaturated/,/for:/s/for: 15m/for: 10m/'
# The fleet rules (deploy/prometheus/fabricscope-fleet.rules.yml).
F=fabricscope-fleet.rules.yml
mutate "origin ignores the role" 's/fabricscope_pfc_pause_role{role="originator"}/fabricscope_pfc_pause_role/g' "$F"
mutate "origin fallback rx clear 0.05 -> 0.5" 's/fabricscope:pfc_pause_fraction:rate1m{direction="rx"} < 0.05$/fabricscope:pfc_pause_fraction:rate1m{direction="rx"} < 0.5/' "$F"
mutate "congested port: ECN hotspot 5x the median -> 500x" 's/(5 \* quantile by (job, switch) (0.5, fabric:host_ecn_marked/(500 * quantile by (job, switch) (0.5, fabric:host_ecn_marked/' "$F"
mutate "congested port: ECN hotspot floor 1000 -> 100000" 's/(fabric:host_ecn_marked:rate1m >= 1000)$/(fabric:host_ecn_marked:rate1m >= 100000)/' "$F"
mutate "congested port: ECN hotspot despite an origin" 's/^          unless on (job) (max by (job) (max_over_time(fabricscope_pfc_pause_role{role="originator"}\[1m\])) > 0)$/          unless on (job) (vector(0) > 1)/' "$F"
mutate "outlier: peers >= 3 -> >= 2" 's/(fabric:host_signal_peers:count >= 3)$/(fabric:host_signal_peers:count >= 2)/' "$F"
mutate "outlier: z >= 3 -> >= 300" 's/(fabric:host_signal:zscore >= 3)$/(fabric:host_signal:zscore >= 300)/' "$F"
mutate "bad link: 10x the median -> 100x" 's/(10 \* quantile by (job, switch)/(100 * quantile by (job, switch)/' "$F"
mutate "switch port joins lose the port" 's/group_left (switch, switch_port) fabric:link_partner:info/group_left (switch) fabric:link_partner:info/g' "$F"
echo PASS
