#!/usr/bin/env bash
# Misbehaving gRPC clients against the real daemon (issue #10, item 3), with
# tests/tools/grpc_fault_client.js (@grpc/grpc-js from the tests/e2e/otel npm
# install):
#   1. 1000 Ingest.PushStream calls that are opened and never written to nor
#      closed, held while the checks run;
#   2. 1000 PushStream calls that each send one span and then stall, held likewise;
#   3. a flood of 10x the span rate the configuration is sized for, for 30 s.
#      The daemon has no rate setting; what bounds span ingest is the span
#      store: --span-memory=1MiB with --max-span-age=4s holds
#      1MiB / (bytes per span) spans, i.e. a sustained rate of
#      R = 1MiB / (bytes per span) / 4 s (measured from
#      fabricscope_span_store_bytes / fabricscope_span_store_spans, about 500
#      spans/s; with --max-span-age=12s, about 160 spans/s, under ASan/TSan).
#      The flood sends 10 R, 1 span in 50 with an empty name.
# During each: the daemon stays up, a series keeps being sampled at its
# interval, scheduler overruns stay within the margin, and peak RSS stays
# within --store-memory + --span-memory + overhead. Every span the daemon
# reads is counted in fabricscope_ingest_spans_total under its result; after
# each fault ingest and queries work again within 3 s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"

otel_npm_modules
cp -a "$SRC/tests/fixtures/sysfs" "$WORK/sysfs"
unprivileged_daemon
HOT_MS=25
SPAN_AGE_S=4
# The sanitizer builds ingest about 3x slower: size them for a third of the rate.
[ "$FAULT_SANITIZER" -eq 1 ] && SPAN_AGE_S=12
start_daemon --sysfs-root="$WORK/sysfs/root" --collectors=rdma_sysfs \
  --hot-interval=${HOT_MS}ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms \
  --store-memory=$FAULT_STORE_MEMORY --span-memory=$FAULT_SPAN_MEMORY --max-span-age=${SPAN_AGE_S}s \
  --ingest-stream-idle-timeout=2s
grpc_address
CLIENT=(nice -n 10 node "$SRC/tests/tools/grpc_fault_client.js" "$SRC")

probe() { "${CLIENT[@]}" probe "$GRPC_ADDR"; }
json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$1" "$2"; }
native_total() {
  scrape >"$WORK/n.m" || fail "scrape"
  metric_sum '^fabricscope_ingest_spans_total\{protocol="native",result=' "$WORK/n.m"
}
native_result() {
  scrape >"$WORK/n.m" || fail "scrape"
  metric_sum "^fabricscope_ingest_spans_total\\{protocol=\"native\",result=\"$1\"\\}" "$WORK/n.m"
}

[ "$(json_field "$(probe)" ok)" = "True" ] || fail "a push to the idle daemon failed: $(probe)"
sleep 2

# recovered WHAT: a push and a query work again within 3 s.
recovered() {
  local r=""
  for _ in $(seq 1 $(tries 10)); do
    r=$(probe)
    [ "$(json_field "$r" ok)" = "True" ] && break
    sleep 0.3
  done
  [ "$(json_field "$r" ok)" = "True" ] || fail "$1: push still fails after the client went away: $r"
  "$CLI" --server="$GRPC_ADDR" ports >/dev/null 2>"$WORK/q.err" ||
    fail "$1: query fails after the client went away: $(cat "$WORK/q.err")"
}

# stall MODE: 1000 streams, held while the checks run (a few seconds).
stall() {
  local mode="$1" ov before pid r holding failed
  ov=$(overruns)
  before=$(native_total)
  "${CLIENT[@]}" stall "$GRPC_ADDR" 1000 30 "$mode" >"$WORK/stall.out" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 $(tries 100)); do
    grep -q '"holding"' "$WORK/stall.out" && break
    kill -0 "$pid" 2>/dev/null || fail "stall client died: $(cat "$WORK/stall.out")"
    sleep 0.1
  done
  holding=$(grep '"holding"' "$WORK/stall.out") || fail "stall client: $(cat "$WORK/stall.out")"
  echo "figure: 1000 $mode streams: $holding"
  check_alive "1000 $mode streams"
  echo "figure: 1000 $mode streams: VmRSS $(proc_status_kb VmRSS) KiB, threads $(awk '$1 == "Threads:" {print $2}' "/proc/$DAEMON_PID/status")"
  # Queries have threads of their own: they work while the streams stall.
  "$CLI" --server="$GRPC_ADDR" ports >/dev/null 2>"$WORK/q.err" ||
    fail "a query fails while 1000 $mode streams stall: $(cat "$WORK/q.err")"
  # The stalled streams hold at most the ingest slots, and only until the
  # stream idle timeout (2 s here) cancels them: then a push works again while
  # the client still holds its connections.
  local ok=0
  for _ in $(seq 1 $(tries 20)); do
    r=$(probe)
    if [ "$(json_field "$r" ok)" = "True" ]; then ok=1; break; fi
    sleep 0.3
  done
  [ "$ok" = 1 ] || fail "a push still fails 6 s into a stall of 1000 $mode streams: $r"
  echo "ok: a push succeeds while 1000 $mode streams stall (idle streams cancelled)"
  scrape >"$WORK/stall.m"
  echo "figure: 1000 $mode streams: $(metric_sum '^fabricscope_ingest_streams_idle_cancelled_total' "$WORK/stall.m") idle streams cancelled," \
    "$(metric_sum '^fabricscope_ingest_calls_refused_total\{protocol="native"\}' "$WORK/stall.m") calls refused so far"
  sleep 1
  kill -TERM "$pid"
  wait "$pid" || fail "stall client failed: $(cat "$WORK/stall.out")"
  recovered "1000 $mode streams"
  check_alive "1000 $mode streams"
  # The query API was (or may have been) unavailable during the stall: look
  # back over the whole of it now.
  check_polled rdma_errors mlx5_1 out_of_sequence $HOT_MS "1000 $mode streams" 8
  check_overruns "$ov" "1000 $mode streams"
  if [ "$mode" = send ]; then
    # Each stream sent 1 span, the probes 1 each (at most 3 of them counted).
    local counted=$(($(native_total) - before)) done_line
    done_line=$(grep '"done"' "$WORK/stall.out") || fail "stall client: $(cat "$WORK/stall.out")"
    # RESOURCE_EXHAUSTED (8): refused at admission; CANCELLED (1): idle-cancelled.
    failed=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["failed"].get("8", 0))' "$done_line")
    echo "figure: 1000 send streams: $counted spans counted in fabricscope_ingest_spans_total, $failed streams refused"
    [ "$counted" -ge 2 ] && [ "$counted" -le 1003 ] || fail "1000 send streams: $counted spans counted"
    # Streams refused at admission are counted as refused calls.
    scrape >"$WORK/after.m"
    local refused
    refused=$(metric_sum '^fabricscope_ingest_calls_refused_total\{protocol="native"\}' "$WORK/after.m")
    [ "${refused%.*}" -ge "$failed" ] || fail "$failed streams refused but only $refused refused calls counted"
  fi
}

stall silent
stall send

# --- flood at 10x the configured rate.
"${CLIENT[@]}" flood "$GRPC_ADDR" 1000 1 100 1000000 >"$WORK/warm.out" || fail "warm-up push failed"
scrape >"$WORK/m" || fail "scrape"
bytes=$(sample_value fabricscope_span_store_bytes "$WORK/m")
spans=$(sample_value fabricscope_span_store_spans "$WORK/m")
[ "${spans:-0}" -gt 0 ] || fail "no spans stored by the warm-up push"
R=$((FAULT_SPAN_MEMORY * spans / bytes / SPAN_AGE_S))
echo "figure: $((bytes / spans)) bytes per span: the configuration is sized for R = $R spans/s; flooding at $((10 * R)) spans/s for 30 s"
ov=$(overruns)
before=$(native_total)
acc_before=$(native_result accepted)
mn_before=$(native_result missing_name)
"${CLIENT[@]}" flood "$GRPC_ADDR" $((10 * R)) 30 100 50 >"$WORK/flood.out" 2>&1 &
pid=$!
PIDS+=("$pid")
peak=0
polled=0
for i in $(seq 1 80); do
  kill -0 "$pid" 2>/dev/null || break
  check_alive "flood"
  rss=$(proc_status_kb VmRSS)
  [ "$rss" -gt "$peak" ] && peak=$rss
  if [ "$i" -eq 30 ]; then check_polled rdma_errors mlx5_1 out_of_sequence $HOT_MS "flood"; polled=1; fi
  sleep 0.5
done
wait "$pid" || fail "flood client failed: $(cat "$WORK/flood.out")"
[ "$polled" -eq 1 ] || fail "the flood ended before the polling check"
out=$(tail -n1 "$WORK/flood.out")
echo "figure: flood: $out"
sent=$(json_field "$out" sent)
rate=$(json_field "$out" rate)
[ "$rate" -ge $((8 * R)) ] || fail "the flood reached only $rate spans/s, want about $((10 * R))"
scrape >"$WORK/m" || fail "scrape"
counted=$(($(native_total) - before))
accepted=$(($(native_result accepted) - acc_before))
missing=$(($(native_result missing_name) - mn_before))
echo "figure: flood: $sent spans sent, $counted counted: $accepted accepted, $missing missing_name, $((counted - accepted - missing)) other results"
[ "$counted" -eq "$sent" ] || fail "flood: $sent spans sent, $counted counted in fabricscope_ingest_spans_total"
[ "$accepted" -eq "$(json_field "$out" accepted)" ] || fail "flood: accepted $accepted on /metrics vs $(json_field "$out" accepted) acknowledged"
[ "$missing" -eq "$(json_field "$out" rejected)" ] || fail "flood: missing_name $missing vs $(json_field "$out" rejected) rejected"
scrape >"$WORK/m" || fail "scrape"
sbytes=$(sample_value fabricscope_span_store_bytes "$WORK/m")
evicted=$(metric_value 'fabricscope_span_store_evictions_total{reason="budget"}' "$WORK/m")
aged=$(metric_value 'fabricscope_span_store_evictions_total{reason="age"}' "$WORK/m")
missed=$(sample_value fabricscope_correlation_spans_missed_total "$WORK/m")
echo "figure: flood: span store $sbytes bytes, evicted budget=$evicted age=$aged;" \
  "evicted before correlation: ${missed:-0}; peak VmRSS sampled $peak KiB"
[ "$sbytes" -le "$FAULT_SPAN_MEMORY" ] || fail "span store $sbytes bytes over --span-memory"
[ "${evicted:-0}" -gt 0 ] || fail "the flood did not fill the span store (no budget evictions)"
recovered "flood"
check_overruns "$ov" "flood"
check_memory "gRPC faults (peak over the flood and the stalled streams)"

scrape >"$WORK/final" || fail "final scrape"
promtool_check "$WORK/final"
fault_stop_daemon "after the grpc faults"
echo "PASS"
