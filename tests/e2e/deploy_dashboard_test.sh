#!/usr/bin/env bash
# The Grafana dashboard and the Prometheus rules work against the real daemon.
#
# tools/run.sh --demo=on runs fabricscoped on fabricsim (the `mixed` scenario:
# PFC storm at 1 s, incast microbursts from 2 s, ECN too aggressive from 3.5 s,
# ...) with decode-step spans pushed over gRPC and a 30 ms stall threshold. A
# real Prometheus (Debian package) on loopback scrapes it every second as job
# "fabricscope" with deploy/prometheus/*.rules.yml loaded. Then, through the
# Prometheus HTTP API (tests/e2e/deploy/check_dashboard.py):
#  - every panel target of deploy/grafana/fabricscope.json, with the dashboard
#    variables resolved as Grafana would ("All"), must run without error and
#    return at least one series (polled until it does, at most ~40 s);
#  - every recording and alerting rule must evaluate without error, and its
#    expression must run as an instant query;
#  - FabricPFCStorm must fire for the scenario's PFC storm (eth2, priority 3, rx);
# and the daemon's health endpoints the Kubernetes probes use must answer:
# /healthz 200 "ok", /readyz 200.
source "$(dirname "$0")/lib.sh"

command -v prometheus >/dev/null || fail "prometheus not installed (deploy/bootstrap.sh)"
command -v python3 >/dev/null || fail "python3 not installed"
[ -x "$BIN/fabricsim" ] || fail "fabricsim not built in $BIN"
CHECK="$SRC/tests/e2e/deploy/check_dashboard.py"
DASH="$SRC/deploy/grafana/fabricscope.json"

start_demo --stall-thresholds=decode_step=30ms

PROM_PORT=$(free_port)
mkdir -p "$WORK/prom-data"
cat >"$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:
  - $SRC/deploy/prometheus/fabricscope-recording.rules.yml
  - $SRC/deploy/prometheus/fabricscope-alerts.rules.yml
scrape_configs:
  - job_name: fabricscope
    static_configs:
      - targets: ['$METRICS_ADDR']
YML
promtool check config "$WORK/prometheus.yml" >"$WORK/promtool.out" 2>&1 || fail "promtool check config: $(cat "$WORK/promtool.out")"
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --storage.tsdb.retention.time=1h \
  >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!
PIDS+=("$PROM_PID")
API="http://127.0.0.1:$PROM_PORT/api/v1"

# Panels: poll until every target has series (the scenario's episodes and the
# first correlated stalls take a few seconds), at most ~40 s. A query error
# fails at once.
rc=1
for i in $(seq 1 40); do
  kill -0 "$PROM_PID" 2>/dev/null || { tail -n 20 "$WORK/prometheus.log" >&2; fail "prometheus exited"; }
  kill -0 "$DAEMON_PID" 2>/dev/null || fail "daemon exited"
  if curl -sf --max-time 2 "$API/query?query=up" >/dev/null 2>&1; then
    rc=0
    python3 "$CHECK" "$API" "$DASH" panels >"$WORK/panels.out" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && { cat "$WORK/panels.out" >&2; fail "a dashboard query failed"; }
    [ "$rc" -eq 0 ] && break
  fi
  sleep 1
done
cat "$WORK/panels.out"
[ "$rc" -eq 0 ] || fail "dashboard panels without series after $i s (above)"

# Rules: every rule evaluated (1 s interval) without error.
rc=1
for _ in $(seq 1 $(tries 10)); do
  rc=0
  python3 "$CHECK" "$API" - rules >"$WORK/rules.out" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && { cat "$WORK/rules.out" >&2; fail "a rule failed"; }
  [ "$rc" -eq 0 ] && break
  sleep 1
done
cat "$WORK/rules.out"
[ "$rc" -eq 0 ] || fail "rules not evaluated"

# The alerts work on the daemon's real series: the scenario's PFC storm on
# eth2 priority 3 rx (1.0-1.6 s) fires FabricPFCStorm (detector source).
firing=""
for _ in $(seq 1 $(tries 20)); do
  firing=$(curl -sf --max-time 5 "$API/alerts" | python3 -c 'import json,sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    l = a["labels"]
    if l["alertname"] == "FabricPFCStorm" and a["state"] == "firing":
        print("%s/%s/%s/%s" % (l.get("netdev"), l.get("priority"), l.get("direction"), l.get("source")))' 2>/dev/null || true)
  grep -qx 'eth2/3/rx/detector' <<<"$firing" && break
  sleep 1
done
echo "FabricPFCStorm firing: $(tr "\n" " " <<<"$firing")"
grep -qx 'eth2/3/rx/detector' <<<"$firing" || fail "FabricPFCStorm not firing for eth2 priority 3 rx"

# Liveness and readiness endpoints (deploy/kubernetes/daemonset.yaml probes).
code=$(curl -s --max-time 5 -o "$WORK/healthz" -w '%{http_code}' "http://$METRICS_ADDR/healthz" || true)
[ "$code" = 200 ] || fail "/healthz answered $code: $(head -c 200 "$WORK/healthz" 2>/dev/null)"
grep -qx 'ok' "$WORK/healthz" || fail "/healthz body is not 'ok': $(head -c 200 "$WORK/healthz")"
code=$(curl -s --max-time 5 -o "$WORK/readyz" -w '%{http_code}' "http://$METRICS_ADDR/readyz" || true)
[ "$code" = 200 ] || fail "/readyz answered $code: $(head -c 200 "$WORK/readyz" 2>/dev/null)"

kill -TERM "$PROM_PID"
stop_daemon
echo PASS
