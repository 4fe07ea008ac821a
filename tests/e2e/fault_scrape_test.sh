#!/usr/bin/env bash
# Misbehaving scrapers against the real daemon's /metrics endpoint (issue #10,
# item 3), with tests/tools/scrape_fault_client.py:
#   - 2 connections that never send a request (the endpoint used to have 2
#     worker threads),
#   - 20 scrapers that send GET /metrics and never read the answer,
#   - 2 scrapers that read it slowly (512 bytes every 100 ms).
# During each: the daemon stays up, a series keeps being sampled at its
# interval (checked over gRPC, which does not go through the metrics server),
# scheduler overruns stay within the margin, and a normal scrape and /healthz
# answer within 3 s. After each: the endpoint answers again within 2 s. At the
# end peak RSS is within the configured budgets.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"

cp -a "$SRC/tests/fixtures/sysfs" "$WORK/sysfs"
unprivileged_daemon
HOT_MS=25
start_daemon --sysfs-root="$WORK/sysfs/root" --collectors=rdma_sysfs \
  --hot-interval=${HOT_MS}ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms \
  --store-memory=$FAULT_STORE_MEMORY --span-memory=$FAULT_SPAN_MEMORY
grpc_address
CLIENT=(python3 "$SRC/tests/tools/scrape_fault_client.py")
scrape >"$WORK/m" || fail "first scrape"
echo "figure: exposition size $(wc -c <"$WORK/m") bytes"
sleep 2

http_ok() { curl -sf -o /dev/null --max-time 3 "http://$METRICS_ADDR$1"; }

# fault MODE N: runs the client, checks the daemon meanwhile, stops the client.
fault() {
  local mode="$1" n="$2" ov pid
  ov=$(overruns)
  "${CLIENT[@]}" "$mode" "$METRICS_ADDR" "$n" 30 >"$WORK/client.out" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 $(tries 100)); do
    grep -q '"connected"' "$WORK/client.out" && break
    kill -0 "$pid" 2>/dev/null || fail "$mode client died: $(cat "$WORK/client.out")"
    sleep 0.1
  done
  grep -q "\"connected\": $n" "$WORK/client.out" || fail "$mode client: $(cat "$WORK/client.out")"
  sleep 1
  check_alive "$mode scrapers"
  check_polled rdma_errors mlx5_1 out_of_sequence $HOT_MS "$mode scrapers ($n)"
  if http_ok /metrics && http_ok /healthz; then
    echo "ok: /metrics and /healthz answer with $n $mode scrapers connected"
  else
    known_bug "/metrics or /healthz does not answer within 3 s while $n $mode scrapers are connected" \
      "(exporters/http_server.cc)"
  fi
  kill -TERM "$pid"
  wait "$pid" || fail "$mode client failed: $(cat "$WORK/client.out")"
  local ok=0
  for _ in $(seq 1 $(tries 20)); do
    if http_ok /metrics; then ok=1; break; fi
    sleep 0.1
  done
  [ "$ok" -eq 1 ] || fail "/metrics does not answer 2 s after the $mode scrapers went away"
  check_alive "$mode scrapers"
  check_overruns "$ov" "$mode scrapers ($n)"
  [ "$mode" = slow ] && echo "figure: slow scrapers read $(tail -n1 "$WORK/client.out")"
  return 0
}

fault idle 2
fault noread 20
fault slow 2

check_memory "scrape faults"
scrape >"$WORK/final" || fail "final scrape"
promtool_check "$WORK/final"
fault_stop_daemon "after the scrape faults"
echo "PASS"
