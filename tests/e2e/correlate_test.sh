#!/usr/bin/env bash
# Span correlation end to end with the real daemon and CLI: a fake sysfs tree
# with two RoCE ports (mlx5_0/1 on fsroce0, mlx5_1/1 on fsroce1, PFC on
# priority 3) and their `ethtool -S` files in --ethtool-dir. The test records
# decode-step spans; during some of them it injects a PFC pause burst
# (rx_prio3_pause_duration grows by ~80% of wall time on fsroce1), during
# others nothing. Both ports' 32-bit PMA port_xmit_wait sits saturated. It
# pushes the spans with `fabricscope push` (the first burst's decode step over
# OTLP from the real OpenTelemetry JS SDK instead) and checks that
# `fabricscope correlate --output json` says fabric for exactly the burst
# spans, naming fsroce1 and priority 3, and clean for the rest, each listing
# the saturated counters as blind (text and JSON); that a span
# hinted to the quiet port during a burst is clean; then the span aggregates
# on /metrics, and the ports, series and top subcommands.
#
# Exemplars: a real Prometheus (Debian package) with exemplar storage scrapes
# the daemon every second over OpenMetrics (its default Accept); the stalled
# burst span's trace_id must come back from /api/v1/query_exemplars on
# fabricscope_stalls_total, the target must be up without a scrape error, and
# an OpenMetrics scrape must carry the exemplars and end with "# EOF", while the
# text scrape still passes `promtool check metrics` and carries none.
source "$(dirname "$0")/lib.sh"

CLI="$BIN/fabricscope"
[ -x "$CLI" ] || fail "no CLI at $CLI"
otel_npm_modules
command -v jq >/dev/null || fail "jq is required"
command -v prometheus >/dev/null || fail "prometheus not installed (deploy/bootstrap.sh)"

SYS="$WORK/sys"
DIR="$WORK/ethtool"
mkdir -p "$DIR"
for i in 0 1; do
  PORT="$SYS/class/infiniband/mlx5_$i/ports/1"
  mkdir -p "$PORT/gid_attrs/ndevs" "$PORT/hw_counters" "$PORT/counters"
  echo Ethernet >"$PORT/link_layer"
  echo "4: ACTIVE" >"$PORT/state"
  echo "100 Gb/sec (4X EDR)" >"$PORT/rate"
  echo "fsroce$i" >"$PORT/gid_attrs/ndevs/0"
  for c in np_ecn_marked_roce_packets np_cnp_sent rp_cnp_handled out_of_sequence \
    packet_seq_err local_ack_timeout_err; do
    echo 0 >"$PORT/hw_counters/$c"
  done
  # As on long-running real hosts: the 32-bit PMA port_xmit_wait sits
  # saturated (blind), which must not turn clean spans into unknown.
  echo 4294967295 >"$PORT/counters/port_xmit_wait"
done

# Pause time (microseconds) per netdev, rewritten atomically like a real
# `ethtool -S` snapshot.
declare -A PAUSE_US=([fsroce0]=1000 [fsroce1]=1000)
put() {
  local n=$1
  printf 'NIC statistics:\n     rx_prio3_pause: %d\n     rx_prio3_pause_duration: %d\n     tx_prio3_pause: 0\n     tx_prio3_pause_duration: 0\n     rx_discards_phy: 0\n' \
    "$((PAUSE_US[$n] / 100))" "${PAUSE_US[$n]}" >"$DIR/.$n.tmp"
  mv "$DIR/.$n.tmp" "$DIR/$n"
}
put fsroce0
put fsroce1

now_ns() { date +%s%N; }

# Topology: fsroce1's cable goes to leaf07 Ethernet1/12 (a topology file), and
# the PCI tree is hwloc's export of the real machine "conan"
# (tests/fixtures/hwloc/README.md): four GPUs; mlx5_0 at 04:00.0 shares a
# root port with GPU 2 (0000:84:00.0, PIX); mlx5_1 is not in that tree.
printf 'host=* netdev=fsroce1 system=leaf07 port=Ethernet1/12\n' >"$WORK/topology"
start_daemon --sysfs-root="$SYS" --ethtool-dir="$DIR" --collectors=rdma_sysfs,ethtool,topology \
  --topology-file="$WORK/topology" --lldpd-socket= --config-interval=200ms \
  --hwloc-xml="$SRC/tests/fixtures/hwloc/32em64t-2n8c2t-pci-normalio.xml" \
  --medium-interval=20ms --slow-interval=200ms --baseline-window=2s \
  --stall-thresholds=decode_step=300ms --max-span-names=10
grpc_address

# Prometheus with exemplar storage, OpenMetrics first (what deploy/README.md
# shows), started now so that it is up when the spans are correlated.
PROM_PORT=$(free_port)
mkdir -p "$WORK/prom-data"
cat >"$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: fabricscope
    static_configs:
      - targets: ['$METRICS_ADDR']
YML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --storage.tsdb.retention.time=1h \
  --enable-feature=exemplar-storage >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!
PIDS+=("$PROM_PID")
API="http://127.0.0.1:$PROM_PORT/api/v1"

# Wait until both pause series are polled.
for _ in $(seq 1 $(tries 100)); do
  scrape >"$WORK/m" 2>/dev/null || true
  [ "$(grep -c '^fabricscope_pfc_pause_seconds_total{netdev="fsroce[01]",priority="3",direction="rx"}' "$WORK/m")" = 2 ] && break
  sleep 0.1
done
grep -q 'fabricscope_pfc_pause_seconds_total{netdev="fsroce1",priority="3",direction="rx"}' "$WORK/m" ||
  fail "pause series not exported"
sleep 2.5 # a baseline window of samples

SPANS="$WORK/spans.jsonl"
: >"$SPANS"
N=0
# span NAME START END [ATTRS_JSON]: appends one span line (ids from a counter).
span() {
  N=$((N + 1))
  printf '{"trace_id":"%032x","span_id":"%016x","name":"%s","kind":"decode_step","start_unix_nano":%s,"end_unix_nano":%s,"attributes":%s}\n' \
    "$((0x5eed0000 + N))" "$N" "$1" "$2" "$3" "${4:-{\}}" >>"$SPANS"
}
# burst NETDEV MS (lib.sh): paused 80% of the wall time, through PAUSE_US and put.
quiet() { sleep "$1"; }

# 1: quiet.  2: burst on fsroce1.  3: quiet.  4: burst, hinted to mlx5_0 (the
# quiet port) -> clean.  5: burst on fsroce1, a kv_transfer.  6: quiet.
t0=$(now_ns); quiet 0.5; t1=$(now_ns); span decode_step "$t0" "$t1"; sleep 0.6
t0=$(now_ns); burst fsroce1 1000; t1=$(now_ns); OTLP_T0=$t0 OTLP_T1=$t1; sleep 0.6
t0=$(now_ns); quiet 0.5; t1=$(now_ns); span decode_step "$t0" "$t1"; sleep 0.6
t0=$(now_ns); burst fsroce1 1000; t1=$(now_ns)
span decode_step "$t0" "$t1" '{"rdma.device":"mlx5_0","rdma.port":"1"}'; sleep 0.6
t0=$(now_ns); burst fsroce1 1000; t1=$(now_ns); span kv_transfer "$t0" "$t1"; sleep 0.6
t0=$(now_ns); quiet 0.5; t1=$(now_ns); span decode_step "$t0" "$t1"
sleep 0.5

"$CLI" push --server="$GRPC_ADDR" <"$SPANS" >"$WORK/push.out" 2>&1 || {
  cat "$WORK/push.out" >&2
  fail "fabricscope push failed"
}
# Span 2 (the decode step stalled by the burst) comes over OTLP from the real
# OpenTelemetry SDK, as from an instrumented inference server: its trace id is
# the one the exemplar checks below look for.
timeout 60 node "$SRC/tests/e2e/otel/export_span.js" "$GRPC_ADDR" decode_step "$OTLP_T0" "$OTLP_T1" \
  >"$WORK/otlp_span.json" 2>"$WORK/otlp_span.err" ||
  fail "OTLP export of the stalled span failed: $(cat "$WORK/otlp_span.json" "$WORK/otlp_span.err")"
OTLP_TRACE=$(jq -r .trace_id "$WORK/otlp_span.json")
[[ "$OTLP_TRACE" =~ ^[0-9a-f]{32}$ ]] || fail "export_span.js printed no trace id: $(cat "$WORK/otlp_span.json")"

"$CLI" correlate --server="$GRPC_ADDR" --since=1m --all --output=json >"$WORK/corr.json" ||
  fail "fabricscope correlate failed"
jq -e '.spans | length == 6' "$WORK/corr.json" >/dev/null || fail "want 6 spans: $(cat "$WORK/corr.json")"
verdicts=$(jq -r '[.spans[] | .verdict] | join(",")' "$WORK/corr.json")
[ "$verdicts" = "clean,fabric,clean,clean,fabric,clean" ] ||
  fail "verdicts: $verdicts (want clean,fabric,clean,clean,fabric,clean)"$'\n'"$(cat "$WORK/corr.json")"
# The summary counts every span: verdicts, stalls (decode steps over 300 ms),
# the fabric stall's top signal (blamed), and the fabric span that did not
# stall (the kv_transfer) grouped by its port and signal, with the partner.
jq -e '.summary | .spans == 6 and .verdicts == {"fabric": 2, "clean": 4, "unknown": 0}
       and .stalls == 5 and .stall_verdicts == {"fabric": 1, "clean": 4, "unknown": 0}
       and ([.blamed[].spans] | add) == 1 and .not_selected == 0 and .over_limit == 0
       and (.fabric_groups | length) == 1 and .fabric_groups_left_out == 0
       and (.fabric_groups[0] | .signal == "pfc_pause_seconds" and .netdev == "fsroce1"
            and .priority == "3" and .spans == 1 and .peak > 0.3
            and .partner.system_name == "leaf07")' \
  "$WORK/corr.json" >/dev/null || fail "summary: $(jq -c .summary "$WORK/corr.json")"
# The fabric spans name the port and the priority, with the pause fraction
# (pause frames on the same priority are anomalous too; every signal is on fsroce1).
jq -e '[.spans[] | select(.verdict == "fabric") | .signals
        | map(select(.signal == "pfc_pause_seconds" and .netdev == "fsroce1" and .priority == "3"
                     and .direction == "rx" and .pause_fraction > 0.3 and .score >= 1))
        | length] == [1, 1]' \
  "$WORK/corr.json" >/dev/null || fail "fabric spans do not name fsroce1 prio 3: $(cat "$WORK/corr.json")"
jq -e '[.spans[] | select(.verdict == "clean") | .signals | length] | all(. == 0)' "$WORK/corr.json" \
  >/dev/null || fail "clean spans list anomalous signals"
# Every span names the saturated PMA counters in its scope as blind (a
# caveat, not judged): both ports, or mlx5_0's for the hinted span.
jq -e 'all(.spans[]; ([.blind[] | select(.signal == "ib_port_xmit_wait_ticks" and .raw_name == "port_xmit_wait"
                            and .why == "saturated")] | length)
                == (if .scope == "every port" then 2 else 1 end))' "$WORK/corr.json" >/dev/null ||
  fail "blind saturated port_xmit_wait not listed: $(cat "$WORK/corr.json")"
jq -e '[.spans[] | select(.verdict == "clean") | .reason | test("port_xmit_wait saturated: blind")] | all' \
  "$WORK/corr.json" >/dev/null || fail "clean reasons do not name the blind counter"
# Stall: decode steps over 300 ms.
jq -e '[.spans[] | select(.name == "decode_step") | .stall] | all' "$WORK/corr.json" >/dev/null ||
  fail "decode steps over 300ms are stalls"

# Selectors: each keeps its spans, the summary still counts all six.
selected() { # ARGS... -> "verdicts|not_selected|over_limit"
  "$CLI" correlate --server="$GRPC_ADDR" --since=1m --output=json "$@" |
    jq -r '"\([.spans[] | .verdict] | join(","))|\(.summary.not_selected)|\(.summary.over_limit)|\(.summary.spans)"'
}
[ "$(selected)" = "clean,fabric,clean,clean,fabric,clean|0|0|6" ] || fail "default (stalls and fabric): $(selected)"
[ "$(selected --verdict=fabric)" = "fabric,fabric|4|0|6" ] || fail "--verdict=fabric: $(selected --verdict=fabric)"
[ "$(selected --verdict=clean --verdict=unknown)" = "clean,clean,clean,clean|2|0|6" ] ||
  fail "--verdict=clean --verdict=unknown: $(selected --verdict=clean --verdict=unknown)"
[ "$(selected --verdict=unknown)" = "|6|0|6" ] || fail "--verdict=unknown: $(selected --verdict=unknown)"
[ "$(selected --stalls --name=kv_transfer)" = "|1|0|1" ] || fail "--stalls: $(selected --stalls --name=kv_transfer)"
# Over the limit the stalls come first, the fabric-bound one before the clean
# ones (the kv_transfer is no stall): one fabric stall and one clean, in start
# order.
limited=$(selected --verdict=clean,fabric --limit=2)
[ "${limited#*|}" = "0|4|6" ] && [ "$(tr ',' '\n' <<<"${limited%%|*}" | sort | paste -sd,)" = "clean,fabric" ] ||
  fail "--limit=2: $limited"
# The human output starts with the summary line and says what the limit left out.
"$CLI" correlate --server="$GRPC_ADDR" --since=1m --verdict=fabric --limit=1 >"$WORK/limited.txt"
head -n1 "$WORK/limited.txt" | grep -q '^6 spans: 4 clean, 2 fabric; 5 stalls: 4 clean, 1 fabric; stalls blamed on: pfc_pause_' ||
  fail "summary line: $(cat "$WORK/limited.txt")"
grep -q '^\.\.\. 1 more selected spans (use --limit N; --limit 0 shows all)$' "$WORK/limited.txt" &&
  grep -q '^\.\.\. 4 more spans not listed (use --verdict, --stalls or --all)$' "$WORK/limited.txt" &&
  [ "$(grep -c 'FABRIC  trace' "$WORK/limited.txt")" = 1 ] || fail "left-out lines: $(cat "$WORK/limited.txt")"

# By trace id and by span id: every span of the id, whatever its verdict.
TRACE=$(jq -r '.spans[1].trace_id' "$WORK/corr.json")
"$CLI" correlate --server="$GRPC_ADDR" --trace-id="$TRACE" --output=json >"$WORK/one.json"
jq -e '.spans | length == 1 and .[0].verdict == "fabric"' "$WORK/one.json" >/dev/null ||
  fail "correlate --trace-id: $(cat "$WORK/one.json")"
SPANID=$(jq -r '.spans[0].span_id' "$WORK/corr.json")
"$CLI" correlate --server="$GRPC_ADDR" --span-id="$SPANID" --output=json >"$WORK/one.json"
jq -e '.spans | length == 1 and .[0].verdict == "clean"' "$WORK/one.json" >/dev/null ||
  fail "correlate --span-id: $(cat "$WORK/one.json")"
"$CLI" correlate --server="$GRPC_ADDR" --since=1m --name=kv_transfer --output=json >"$WORK/one.json"
jq -e '.spans | length == 1 and .[0].name == "kv_transfer"' "$WORK/one.json" >/dev/null ||
  fail "correlate --name: $(cat "$WORK/one.json")"
# Human output names the signal and where.
"$CLI" correlate --server="$GRPC_ADDR" --since=1m >"$WORK/corr.txt"
[ -z "${E2E_KEEP_OUTPUT:-}" ] || cp "$WORK/corr.txt" "$E2E_KEEP_OUTPUT"  # README example
grep -q 'FABRIC' "$WORK/corr.txt" && grep -q 'pfc_pause_seconds.*fsroce1 -> leaf07 Ethernet1/12 prio 3 rx' "$WORK/corr.txt" ||
  fail "human output: $(cat "$WORK/corr.txt")"
grep -q '    blind: ib_port_xmit_wait_ticks mlx5_1/1 fsroce1 saturated (counters/port_xmit_wait): not judged' "$WORK/corr.txt" ||
  fail "human output lacks the blind caveat: $(cat "$WORK/corr.txt")"
# The stall first; the fabric span that did not stall (the kv_transfer) as one
# grouped line, not listed by itself.
grep -qE '^ +1 span  pfc_pause_seconds +mlx5_1/1 fsroce1 -> leaf07 Ethernet1/12 prio 3 rx .* paused up to [0-9.]+% of a span' "$WORK/corr.txt" ||
  fail "human output lacks the grouped kv_transfer: $(cat "$WORK/corr.txt")"
! grep -q 'kv_transfer' "$WORK/corr.txt" || fail "the non-stall fabric span is listed by itself: $(cat "$WORK/corr.txt")"
[ "$(grep -c 'STALL  FABRIC' "$WORK/corr.txt")" = 1 ] || fail "want the one fabric stall listed: $(cat "$WORK/corr.txt")"
# --all-series: each line names its counter (three rdma_errors lines per port
# that differ only in it).
"$CLI" correlate --server="$GRPC_ADDR" --span-id="$SPANID" --all-series >"$WORK/all.txt"
for c in out_of_sequence packet_seq_err local_ack_timeout_err; do
  [ "$(grep -cE "#[0-9]+ rdma_errors $c +mlx5_[01]/1" "$WORK/all.txt")" = 2 ] ||
    fail "--all-series lacks rdma_errors $c on both ports: $(cat "$WORK/all.txt")"
done
grep -qE "#[0-9]+ discards rx_discards_phy +mlx5_[01]/1 fsroce[01]" "$WORK/all.txt" ||
  fail "--all-series lacks discards rx_discards_phy: $(cat "$WORK/all.txt")"
grep -qE "#[0-9]+ ib_port_xmit_wait_ticks +mlx5_0/1 fsroce0 +blind: saturated" "$WORK/all.txt" ||
  fail "--all-series does not mark port_xmit_wait blind: $(cat "$WORK/all.txt")"
# Usage errors exit 2 and name the flag.
rc=0
"$CLI" correlate --server="$GRPC_ADDR" --trace-id=zz 2>"$WORK/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- '--trace-id' "$WORK/err" || fail "bad --trace-id: rc $rc"
rc=0
"$CLI" correlate --server="$GRPC_ADDR" --since=1m --verdict=bogus 2>"$WORK/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- 'for flag --verdict' "$WORK/err" || fail "bad --verdict: rc $rc $(cat "$WORK/err")"
rc=0
"$CLI" events --server="$GRPC_ADDR" --limit=x 2>"$WORK/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- 'for flag --limit' "$WORK/err" || fail "bad --limit: rc $rc $(cat "$WORK/err")"

# Span aggregates (the worker correlates each span once its window was polled).
want_metric() {
  local got=""
  for _ in $(seq 1 $(tries 100)); do
    scrape >"$WORK/m" 2>/dev/null || true
    got=$(metric_value "$1" "$WORK/m")
    [ "$got" = "$2" ] && return 0
    sleep 0.1
  done
  fail "$1: want $2, got '$got'"
}
want_metric 'fabricscope_spans_total{model="",name="decode_step",service="",verdict="clean"}' 4
# The fabric one came over OTLP: its resource's service.name is a label.
want_metric 'fabricscope_spans_total{model="",name="decode_step",service="e2e-inference",verdict="fabric"}' 1
want_metric 'fabricscope_spans_total{model="",name="kv_transfer",service="",verdict="fabric"}' 1
want_metric 'fabricscope_stalls_total{model="",name="decode_step",service="e2e-inference",verdict="fabric"}' 1
want_metric 'fabricscope_stall_signals_total{model="",name="decode_step",service="e2e-inference",signal="pfc_pause_seconds"}' 1
want_metric 'fabricscope_stall_duration_seconds_count{model="",name="decode_step",service="",verdict="clean"}' 4
promtool_check "$WORK/m"
grep -q 'trace_id=' "$WORK/m" && fail "exemplars in the text format"


# ports, series, top.
"$CLI" ports --server="$GRPC_ADDR" --output=json >"$WORK/ports.json"
jq -e 'length == 2 and .[1].device == "mlx5_1" and .[1].netdev == "fsroce1"' "$WORK/ports.json" \
  >/dev/null || fail "ports: $(cat "$WORK/ports.json")"
"$CLI" ports --server="$GRPC_ADDR" --limit=1 >"$WORK/ports.txt"
[ "$(grep -c '^mlx5_' "$WORK/ports.txt")" = 1 ] && grep -q '^\.\.\. 1 more ports (use --limit N' "$WORK/ports.txt" ||
  fail "ports --limit=1: $(cat "$WORK/ports.txt")"
"$CLI" series --server="$GRPC_ADDR" --signal=pfc_pause_seconds --label=netdev=fsroce1 --since=1s \
  --limit=1 >"$WORK/series.txt"
[ "$(grep -c '^fabricscope_pfc_pause_seconds_total{' "$WORK/series.txt")" = 1 ] &&
  grep -q '^\.\.\. 1 more series (use --limit N' "$WORK/series.txt" ||
  fail "series --limit=1: $(head -c 2000 "$WORK/series.txt")"
"$CLI" series --server="$GRPC_ADDR" --signal=pfc_pause_seconds --label=netdev=fsroce1 --since=30s \
  --output=json >"$WORK/series.json"
# rx and tx pause time of fsroce1 priority 3; the rx one saw the bursts.
jq -e 'length == 2 and all(.labels.priority == "3" and .netdev == "fsroce1")
       and (map(select(.labels.direction == "rx"))[0]
            | (.samples | length) > 100 and ([.samples[] | .rate // 0] | max) > 0.3)' \
  "$WORK/series.json" >/dev/null ||
  fail "series: $(head -c 2000 "$WORK/series.json")"
( burst fsroce1 3000 ) &
TOP_BURST=$!
PIDS+=("$TOP_BURST")
"$CLI" top --server="$GRPC_ADDR" --iterations=3 --interval=300ms </dev/null >"$WORK/top.txt" ||
  fail "top failed"
[ "$(grep -c '^fabricscope top' "$WORK/top.txt")" = 3 ] || fail "top: want 3 frames: $(cat "$WORK/top.txt")"
grep -E '^mlx5_1/1 +fsroce1 +leaf07 Ethernet1/12 +3 ' "$WORK/top.txt" >/dev/null || fail "top: no fsroce1 prio 3 row: $(cat "$WORK/top.txt")"
"$CLI" top --server="$GRPC_ADDR" --iterations=1 --output=json </dev/null >"$WORK/top.json"
jq -e '.rows | map(select(.netdev == "fsroce1" and .priority == "3")) | .[0].pause.peak > 30' \
  "$WORK/top.json" >/dev/null || fail "top json: $(cat "$WORK/top.json")"

# One writer at a time: the burst behind `top` ends first.
wait "$TOP_BURST" || true
# GPU-scoped spans: during a burst on fsroce1 (mlx5_1), a span of GPU 2
# (nearest NIC mlx5_0, PIX) is clean and says which NICs it covered; a span of
# a GPU the topology does not know falls back to every port and sees the burst.
: >"$SPANS"
t0=$(now_ns); burst fsroce1 1000; t1=$(now_ns)
span gpu_step "$t0" "$t1" '{"fabricscope.gpu":"0000:84:00.0"}'
span gpu_step "$t0" "$t1" '{"fabricscope.gpu":"7"}'
sleep 0.6
"$CLI" push --server="$GRPC_ADDR" <"$SPANS" >"$WORK/push.out" 2>&1 || fail "push: $(cat "$WORK/push.out")"
for _ in $(seq 1 $(tries 50)); do
  "$CLI" correlate --server="$GRPC_ADDR" --since=1m --name=gpu_step --all --output=json >"$WORK/gpu.json" || true
  [ "$(jq '.spans | length' "$WORK/gpu.json" 2>/dev/null)" = 2 ] && break
  sleep 0.1
done
jq -e '.spans | length == 2
       and (map(select(.scope | startswith("NICs nearest GPU 0000:84:00.0 (PIX): mlx5_0/1")))
            | length == 1 and .[0].verdict == "clean")
       and (map(select(.scope | test("GPU 7 unknown"))) | length == 1 and .[0].verdict == "fabric")' \
  "$WORK/gpu.json" >/dev/null || fail "GPU-scoped spans: $(cat "$WORK/gpu.json")"
"$CLI" correlate --server="$GRPC_ADDR" --since=1m --name=gpu_step --all >"$WORK/gpu.txt"
grep -q 'scope: NICs nearest GPU 0000:84:00.0 (PIX): mlx5_0/1' "$WORK/gpu.txt" ||
  fail "correlate text lacks the GPU scope: $(cat "$WORK/gpu.txt")"

# push with bad lines: the good spans are sent, every bad line is named by its
# number, a span the daemon rejects is named by its stdin line too; exit 1.
: >"$SPANS"
t0=$(now_ns)
span mixed_push "$t0" "$((t0 + 1000000))"
echo '{"trace_id": "not json' >>"$SPANS"
span mixed_push "$((t0 + 1000000))" "$t0" # ends before it starts: the daemon rejects it
echo '[]' >>"$SPANS"
if "$CLI" push --server="$GRPC_ADDR" <"$SPANS" >"$WORK/mixed.out" 2>"$WORK/mixed.err"; then
  fail "push with bad lines exited 0"
fi
grep -q '^fabricscope push: stdin line 2: .*(not sent)$' "$WORK/mixed.err" || fail "bad line 2 not named: $(cat "$WORK/mixed.err")"
grep -q '^fabricscope push: stdin line 4: .*(not sent)$' "$WORK/mixed.err" || fail "bad line 4 not named: $(cat "$WORK/mixed.err")"
grep -q '^accepted 1, rejected 1 of 2 spans sent; 2 bad lines not sent$' "$WORK/mixed.out" ||
  fail "push summary: $(cat "$WORK/mixed.out")"
grep -q '^  stdin line 3: ' "$WORK/mixed.out" || fail "the rejected span is not named by its line: $(cat "$WORK/mixed.out")"

# The README's push example runs as printed (its timestamps come from `date`):
# the sh block that pipes into `fabricscope push`, its last line the output.
awk '/^```sh$/ { inb = 1; b = ""; next }
     /^```$/ { if (inb && b ~ /\| fabricscope push/) { printf "%s", b; exit } inb = 0; next }
     inb { b = b $0 "\n" }' "$SRC/README.md" >"$WORK/readme_push"
[ -s "$WORK/readme_push" ] || fail "no push example in README.md"
head -n -1 "$WORK/readme_push" | sed "s#| fabricscope push#| \"\$CLI\" push --server=\"\$GRPC_ADDR\"#" >"$WORK/readme_push.sh"
CLI="$CLI" GRPC_ADDR="$GRPC_ADDR" bash -eu "$WORK/readme_push.sh" >"$WORK/readme_push.out" 2>&1 ||
  fail "the README's push example failed: $(cat "$WORK/readme_push.out")"
[ "$(cat "$WORK/readme_push.out")" = "$(tail -n 1 "$WORK/readme_push")" ] ||
  fail "the README's push example printed '$(cat "$WORK/readme_push.out")', the README says '$(tail -n 1 "$WORK/readme_push")'"

# (Last: its polling must not push the bursts above out of `series --since=30s`.)
# OpenMetrics: the stall counter carries the fabric stall's trace id.
FABRIC_TRACE=$(jq -r '.spans[] | select(.verdict == "fabric" and .stall) | .trace_id' "$WORK/corr.json")
[ "$FABRIC_TRACE" = "$OTLP_TRACE" ] ||
  fail "the fabric stall is '$FABRIC_TRACE', not the span exported over OTLP ($OTLP_TRACE)"
curl -sf --max-time 5 -H 'Accept: application/openmetrics-text;version=1.0.0' \
  -D "$WORK/om.headers" "http://$METRICS_ADDR/metrics" >"$WORK/om" || fail "OpenMetrics scrape failed"
grep -qi '^content-type: application/openmetrics-text; version=1.0.0' "$WORK/om.headers" ||
  fail "OpenMetrics content type: $(cat "$WORK/om.headers")"
[ "$(tail -n1 "$WORK/om")" = "# EOF" ] || fail "OpenMetrics body does not end with # EOF"
grep -q "^fabricscope_stalls_total{model=\"\",name=\"decode_step\",service=\"e2e-inference\",verdict=\"fabric\"} 1 # {trace_id=\"$FABRIC_TRACE\",span_id=\"[0-9a-f]\{16\}\"} [0-9.e-]* [0-9]*\.[0-9]*$" "$WORK/om" ||
  fail "no exemplar with trace $FABRIC_TRACE on the stall counter: $(grep '^fabricscope_stall' "$WORK/om")"
# gzip when asked (curl --compressed decodes it), 406 for a format we cannot serve.
curl -sf --max-time 5 --compressed -H 'Accept: application/openmetrics-text' -D "$WORK/gz.headers" \
  "http://$METRICS_ADDR/metrics" >"$WORK/om.gz.txt" || fail "gzip scrape failed"
grep -qi '^content-encoding: gzip' "$WORK/gz.headers" || fail "no gzip: $(cat "$WORK/gz.headers")"
grep -q "trace_id=\"$FABRIC_TRACE\"" "$WORK/om.gz.txt" || fail "gzip OpenMetrics body lacks the exemplar"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'Accept: application/json' "http://$METRICS_ADDR/metrics")
[ "$code" = 406 ] || fail "Accept: application/json: want 406, got $code"
# Prometheus: the exemplar through its API; the target healthy.
from=$(($(date +%s) - 120))
got=""
for _ in $(seq 1 $(tries 100)); do
  kill -0 "$PROM_PID" 2>/dev/null || { tail -n 20 "$WORK/prometheus.log" >&2; fail "prometheus exited"; }
  got=$(curl -sf --max-time 5 --data-urlencode 'query=fabricscope_stalls_total{verdict="fabric"}' \
    --data-urlencode "start=$from" --data-urlencode "end=$(($(date +%s) + 10))" \
    "$API/query_exemplars" 2>/dev/null |
    jq -r '[.data[]?.exemplars[]?.labels.trace_id] | join(",")' 2>/dev/null || true)
  [[ ",$got," == *",$FABRIC_TRACE,"* ]] && break
  sleep 0.2
done
[[ ",$got," == *",$FABRIC_TRACE,"* ]] ||
  fail "query_exemplars on fabricscope_stalls_total: want trace $FABRIC_TRACE, got '$got'"
curl -sf --max-time 5 "$API/targets" >"$WORK/targets.json" || fail "prometheus targets"
jq -e '.data.activeTargets | length == 1 and .[0].health == "up" and .[0].lastError == ""' \
  "$WORK/targets.json" >/dev/null || fail "scrape target not healthy: $(cat "$WORK/targets.json")"
[ "$(curl -sf --max-time 5 --data-urlencode 'query=fabricscope_stalls_total{name="decode_step",verdict="fabric"}' \
  "$API/query" | jq -r '.data.result[0].value[1]')" = 1 ] ||
  fail "Prometheus does not have fabricscope_stalls_total from the OpenMetrics scrape"

stop_daemon
echo "PASS"
