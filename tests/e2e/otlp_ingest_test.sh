#!/usr/bin/env bash
# Span ingest end to end: the real daemon on port 0, the real OpenTelemetry JS
# SDK (npm, installed at test time under the build directory, never
# committed) exporting a batch over OTLP/gRPC plus invalid spans, and
# `fabricscope push` over the native API; fabricscope_ingest_spans_total on
# /metrics must count exactly what was sent, by protocol and result.
source "$(dirname "$0")/lib.sh"

CLI="$BIN/fabricscope"
[ -x "$CLI" ] || fail "$CLI not built"
otel_npm_modules

mkdir -p "$WORK/sys"
start_daemon --sysfs-root="$WORK/sys" --max-span-age=1h
grpc_address
case "$GRPC_ADDR" in *:0) fail "daemon logged port 0 instead of the bound port: $GRPC_ADDR" ;; esac

# 1. OTLP/gRPC from the real SDK: 1200 valid spans (3 batches of 512 max) + 5 invalid.
VALID=1200
timeout 120 node "$SRC/tests/e2e/otel/export_spans.js" "$GRPC_ADDR" "$VALID" >"$WORK/node.out" 2>"$WORK/node.err" ||
  fail "OTel SDK export failed: $(cat "$WORK/node.out" "$WORK/node.err")"
grep -q '"exportFailures":0' "$WORK/node.out" || fail "SDK reported failures: $(cat "$WORK/node.out")"
# The SDK logs the daemon's partial_success (5 rejected spans) as a warning.
grep -q "rejected" "$WORK/node.err" ||
  echo "note: SDK did not log the partial success message: $(cat "$WORK/node.err")" >&2

# 2. Native API via the CLI: 3 good spans, 1 end_before_start, 1 with zero ids.
NOW=$(date +%s%N)
S=$((NOW - 3000000000)); E=$((NOW - 2000000000))
{
  for i in 1 2 3; do
    printf '{"trace_id":"4bf92f3577b34da6a3ce929d0e0e473%d","span_id":"00f067aa0ba902b%d","name":"kv_transfer","start_unix_nano":%d,"end_unix_nano":%d,"attributes":{"rdma.device":"mlx5_0","bytes":%d}}\n' "$i" "$i" "$S" "$E" "$((i * 1000))"
  done
  printf '{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4739","span_id":"00f067aa0ba902b9","name":"decode","start_unix_nano":%d,"end_unix_nano":%d}\n' "$E" "$S"
  printf '{"span":{"trace_id":"00000000000000000000000000000000","span_id":"00f067aa0ba902ba","name":"decode","start_unix_nano":%d,"end_unix_nano":%d}}\n' "$S" "$E"
} >"$WORK/spans.jsonl"
rc=0
"$CLI" --server="$GRPC_ADDR" push <"$WORK/spans.jsonl" >"$WORK/push.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "push with rejected spans should exit 1, got $rc: $(cat "$WORK/push.out")"
grep -q "accepted 3, rejected 2 of 5 spans" "$WORK/push.out" || fail "push output: $(cat "$WORK/push.out")"
grep -q "stdin line 4: end_before_start" "$WORK/push.out" || fail "push output: $(cat "$WORK/push.out")"
grep -q "stdin line 5: invalid_ids" "$WORK/push.out" || fail "push output: $(cat "$WORK/push.out")"
"$CLI" --server="$GRPC_ADDR" --output=json push <<<"$(head -n1 "$WORK/spans.jsonl")" >"$WORK/push.json" ||
  fail "push of a good span failed: $(cat "$WORK/push.json")"
grep -q '"accepted_spans": *"1"' "$WORK/push.json" || fail "push json: $(cat "$WORK/push.json")"
rc=0
echo '{"trace_id":"zz"}' | "$CLI" --server="$GRPC_ADDR" push >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "line 1" "$WORK/bad.out" || fail "bad input not reported: $(cat "$WORK/bad.out")"

# 3. The counts on /metrics.
scrape >"$WORK/metrics" || fail "scrape failed"
promtool_check "$WORK/metrics"
expect_count() {
  local protocol="$1" result="$2" want="$3" got
  got=$(metric_value "fabricscope_ingest_spans_total{protocol=\"$protocol\",result=\"$result\"}" "$WORK/metrics")
  [ "$got" = "$want" ] || fail "fabricscope_ingest_spans_total{protocol=$protocol,result=$result} = '$got', want $want"
}
expect_count otlp accepted "$VALID"
expect_count otlp too_old 2
expect_count otlp in_future 2
expect_count otlp missing_name 1
expect_count otlp end_before_start 0
expect_count native accepted 4
expect_count native end_before_start 1
expect_count native invalid_ids 1
expect_count native overload 0
spans=$(awk '$1 == "fabricscope_span_store_spans" {print $2}' "$WORK/metrics")
[ "$spans" = "$((VALID + 4))" ] || fail "fabricscope_span_store_spans = $spans, want $((VALID + 4))"

stop_daemon
echo "PASS"
