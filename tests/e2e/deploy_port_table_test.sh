#!/usr/bin/env bash
# The port table of the Grafana dashboard (deploy/grafana/fabricscope.json,
# "Ports: link partner, PCI placement, nearest GPUs"): its instant queries and
# transformations fit together, and its PromQL, run by `promtool test rules`
# over synthetic topology series, keeps per device exactly the GPUs of the
# closest relation class present, and one row per port for the PCI placement
# and the link partner (tests/e2e/deploy/check_port_table.py).
source "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || fail "promtool not installed (deploy/bootstrap.sh: prometheus)"
command -v python3 >/dev/null || fail "python3 not installed"
python3 "$SRC/tests/e2e/deploy/check_port_table.py" "$SRC/deploy/grafana/fabricscope.json" "$WORK" ||
  fail "port table panel (above)"
out=$(cd "$WORK" && promtool check rules rules.yml 2>&1) || fail "promtool check rules: $out"
out=$(cd "$WORK" && promtool test rules test.yml 2>&1) || fail "promtool test rules:"$'\n'"$out"

# Teeth: ranking NODE before PHB must make the nearest-GPU case fail.
sed -i 's/relation=\\"PHB\\"} \* 3/relation=\\"PHB\\"} * 9/g' "$WORK/rules.yml"
grep -q '\* 9' "$WORK/rules.yml" || fail "mutation changed nothing"
if (cd "$WORK" && promtool test rules test.yml >/dev/null 2>&1); then
  fail "promtool tests still pass with PHB ranked after SYS"
fi
echo PASS
