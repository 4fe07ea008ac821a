#!/usr/bin/env bash
# deploy/ is consistent and valid:
#  - the PrometheusRule manifests are exactly what tools/gen-k8s-manifests.sh
#    generates from deploy/prometheus/*.rules.yml (no drift);
#  - every YAML file under deploy/ parses, every JSON file passes jq;
#  - tests/e2e/deploy/check_manifests.py: PrometheusRule specs equal the rule
#    files, the DaemonSet/Service/ServiceMonitor agree (ports, selectors,
#    probes on /healthz and /readyz, read-only /sys, no capabilities, job
#    label), flags in the unit and the DaemonSet exist in `fabricscoped
#    --help` and every --help flag is documented in deploy/README.md, memory
#    limits exceed the store budgets, every metric the dashboard and the rules
#    use is in `fabricscoped --dump-metrics-reference`;
#  - `systemd-analyze verify` of the unit prints nothing (it exits 0 on parse
#    warnings, so any output fails); ExecStart is pointed at the built binary
#    because verify requires the executable to exist;
#  - `promtool check config` of deploy/prometheus/prometheus.example.yml.
source "$(dirname "$0")/lib.sh"

[ -x "$DAEMON" ] || fail "fabricscoped not built in $BIN"
command -v jq >/dev/null || fail "jq not installed (deploy/bootstrap.sh)"
command -v promtool >/dev/null || fail "promtool not installed (deploy/bootstrap.sh: prometheus)"
command -v systemd-analyze >/dev/null || fail "systemd-analyze not installed (deploy/bootstrap.sh: systemd)"
# A Python with PyYAML (Debian: python3-yaml).
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import yaml' 2>/dev/null; then PY="$p"; break; fi
done
[ -n "$PY" ] || fail "no python3 with the yaml module (Debian package python3-yaml)"

# No drift between the rule files and the PrometheusRule objects.
"$SRC/tools/gen-k8s-manifests.sh" "$WORK/k8s" >/dev/null
for f in "$WORK"/k8s/prometheusrule-*.yaml; do
  committed="$SRC/deploy/kubernetes/$(basename "$f")"
  [ -f "$committed" ] || fail "$(basename "$f") is generated but not committed in deploy/kubernetes (run tools/gen-k8s-manifests.sh)"
  diff -u "$committed" "$f" >"$WORK/drift.diff" || fail "deploy/kubernetes/$(basename "$f") differs from the rule files (run tools/gen-k8s-manifests.sh):"$'\n'"$(head -n 40 "$WORK/drift.diff")"
done
for f in "$SRC"/deploy/kubernetes/prometheusrule-*.yaml; do
  [ -f "$WORK/k8s/$(basename "$f")" ] || fail "deploy/kubernetes/$(basename "$f") has no rule file it is generated from"
done

# JSON syntax.
n=0
while IFS= read -r -d '' f; do
  jq empty "$f" 2>"$WORK/jq.err" || fail "invalid JSON $f: $(cat "$WORK/jq.err")"
  n=$((n + 1))
done < <(find "$SRC/deploy" -name '*.json' -print0)
[ "$n" -ge 1 ] || fail "no JSON file under deploy/"

# YAML syntax and consistency.
"$DAEMON" --help >"$WORK/help.txt"
"$DAEMON" --dump-metrics-reference >"$WORK/reference.md"
"$PY" "$SRC/tests/e2e/deploy/check_manifests.py" "$SRC" "$WORK/help.txt" "$WORK/reference.md" || fail "deploy/ consistency (above)"

# systemd unit.
sed "s|^ExecStart=/usr/bin/fabricscoped |ExecStart=$DAEMON |" "$SRC/deploy/systemd/fabricscoped.service" >"$WORK/fabricscoped.service"
grep -q "^ExecStart=$DAEMON " "$WORK/fabricscoped.service" || fail "the unit's ExecStart is not /usr/bin/fabricscoped ..."
out=$(systemd-analyze verify "$WORK/fabricscoped.service" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify printed diagnostics:"$'\n'"$out"

# Example Prometheus configuration, with the rule files next to it.
cp "$SRC"/deploy/prometheus/prometheus.example.yml "$SRC"/deploy/prometheus/*.rules.yml "$WORK/"
out=$(promtool check config "$WORK/prometheus.example.yml" 2>&1) || fail "promtool check config: $out"
echo PASS
