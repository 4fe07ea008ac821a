#!/usr/bin/env bash
# Stalls without configuration (issue #33): the real OpenTelemetry JS SDK
# exports vLLM-shaped `llm_request` spans (gen_ai.* attributes, no fabricscope
# attribute, no NIC hint) to a daemon with no --stall-thresholds, over a fake
# sysfs tree with two RoCE ports whose `ethtool -S` files the test rewrites.
#
#   quiet      260 normal requests (TPOT 18-22 ms, 20-80 tokens): the
#              warm-up and the learned normal
#   burst      fsroce1 paused 80 % of the wall time for 2.5 s; inside it 4
#              slow requests (TPOT 150 ms) and 4 normal ones
#   quiet      1 slow request (TPOT 150 ms) on a quiet fabric
#
# Wants: the 4 slow burst requests are stalls judged fabric on fsroce1
# priority 3 by the learned bound (time per output token); the slow quiet one
# a stall judged clean; no normal request a stall, however long; the learned
# bound on /metrics; the stall counters by service and model.
#
# The same for NCCL Inspector dump files (--nccl-inspector-dir): 260 normal
# AllReduce records of 4 MiB (~6 ms, verbose kernel timestamps) in the quiet
# phase, 4 ten times slower and 4 normal ones inside the burst, 1 slow one
# after it, appended to the file of a process as the plugin would: the slow
# burst collectives are stalls judged fabric on fsroce1 (time per byte), the
# quiet slow one a stall judged clean, no normal one a stall.
source "$(dirname "$0")/lib.sh"

CLI="$BIN/fabricscope"
otel_npm_modules
command -v jq >/dev/null || fail "jq is required"

SYS="$WORK/sys"
DIR="$WORK/ethtool"
mkdir -p "$DIR"
for i in 0 1; do
  PORT="$SYS/class/infiniband/mlx5_$i/ports/1"
  mkdir -p "$PORT/gid_attrs/ndevs" "$PORT/hw_counters"
  echo Ethernet >"$PORT/link_layer"
  echo "4: ACTIVE" >"$PORT/state"
  echo "100 Gb/sec (4X EDR)" >"$PORT/rate"
  echo "fsroce$i" >"$PORT/gid_attrs/ndevs/0"
  for c in np_ecn_marked_roce_packets np_cnp_sent out_of_sequence local_ack_timeout_err; do
    echo 0 >"$PORT/hw_counters/$c"
  done
done
declare -A PAUSE_US=([fsroce0]=1000 [fsroce1]=1000)
put() {
  printf 'NIC statistics:\n     rx_prio3_pause: %d\n     rx_prio3_pause_duration: %d\n' \
    "$((PAUSE_US[$1] / 100))" "${PAUSE_US[$1]}" >"$DIR/.$1.tmp"
  mv "$DIR/.$1.tmp" "$DIR/$1"
}
put fsroce0
put fsroce1
# keep MS: the samples keep coming while the test waits (same values).
keep() {
  local end=$(($(now_us) + $1 * 1000))
  while [ "$(now_us)" -lt "$end" ]; do
    put fsroce0
    put fsroce1
    sleep 0.05
  done
}

NCCL="$WORK/nccl"
mkdir -p "$NCCL"
INSPECTOR_LOG="$NCCL/gpu-node-pid31337.log"
: >"$INSPECTOR_LOG"
start_daemon --sysfs-root="$SYS" --ethtool-dir="$DIR" --collectors=rdma_sysfs,ethtool \
  --lldpd-socket= --medium-interval=20ms --slow-interval=200ms --baseline-window=2s \
  --nccl-inspector-dir="$NCCL"
grpc_address
for _ in $(seq 1 $(tries 100)); do
  scrape >"$WORK/m" 2>/dev/null || true
  [ "$(grep -c '^fabricscope_pfc_pause_seconds_total{netdev="fsroce[01]",priority="3",direction="rx"}' "$WORK/m")" = 2 ] && break
  sleep 0.1
done
[ "$(grep -c '^fabricscope_pfc_pause_seconds_total{netdev="fsroce[01]"' "$WORK/m")" = 2 ] ||
  fail "pause series not exported"
keep 2500 # a baseline

REQ="$WORK/requests.jsonl"
: >"$REQ"
# request TAG START_NS TTFT_S TOKENS TPOT_MS
request() {
  printf '{"tag":"%s","start_unix_nano":"%s","queue_s":0.01,"ttft_s":%s,"tokens":%s,"tpot_ms":%s}\n' \
    "$1" "$2" "$3" "$4" "$5" >>"$REQ"
}
ms_ns() { echo $(($1 * 1000000)); }
COLL=""  # NCCL Inspector records, appended to the dump file after each phase
SN=0
# collective TAG START_US EXEC_US: one verbose coll_perf record (4 MiB).
collective() {
  SN=$((SN + 1))
  COLL+=$(printf '{"header": {"id": "0xc0ffee", "comm_name": "tp0", "rank": 0, "n_ranks": 8, "nnodes": 1}, "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": %s, "hostname": "gpu-node", "pid": 31337}, "coll_perf": {"coll": "AllReduce", "coll_sn": %s, "coll_msg_size_bytes": 4194304, "coll_exec_time_us": %s, "coll_timing_source": "kernel_gpu", "coll_algobw_gbs": 16.7, "coll_busbw_gbs": 29.3, "event_trace_ts": {"kernel_events": [{"channel_id": 0, "kernel_start_ts": %s, "kernel_stop_ts": %s}]}, "tag": "%s"}}' \
    "$(($2 + $3 + 50))" "$SN" "$3" "$2" "$(($2 + $3))" "$1")$'\n'
}

# Quiet: 260 normal requests inside [Q0, Q0 + 3.1 s].
Q0=$(($(now_us) * 1000))
keep 3300
for i in $(seq 1 260); do
  request "normal-$i" $((Q0 + $(ms_ns $((RANDOM % 1400))))) 0.0$((4 + RANDOM % 6)) \
    $((20 + RANDOM % 61)) "$((18 + RANDOM % 4)).$((RANDOM % 10))"
  collective "normal-$i" $((Q0 / 1000 + 300000 + i * 10000)) $((5800 + RANDOM % 401))
done
printf '%s' "$COLL" >>"$INSPECTOR_LOG"
COLL=""

# Burst on fsroce1: slow and normal requests inside it.
B0=$(($(now_us) * 1000))
burst fsroce1 2500
for i in 1 2 3 4; do
  request "slow-burst-$i" $((B0 + $(ms_ns $((200 + 20 * i))))) 0.05 12 150
  request "normal-burst-$i" $((B0 + $(ms_ns $((250 + 20 * i))))) 0.05 80 20
  collective "slow-burst-$i" $((B0 / 1000 + 500000 + i * 300000)) 60000
  collective "normal-burst-$i" $((B0 / 1000 + 600000 + i * 300000)) 6000
done

# Quiet again: one slow request.
C0=$(($(now_us) * 1000))
keep 2600
request "slow-quiet" $((C0 + $(ms_ns 300))) 0.05 12 150
collective "slow-quiet" $((C0 / 1000 + 1500000)) 60000
printf '%s' "$COLL" >>"$INSPECTOR_LOG"

# Two exports: the quiet requests first (the SDK's batches of one export may
# arrive in any order; a learner judges each span by what came before it).
grep '"tag":"normal-[0-9]' "$REQ" >"$WORK/first.jsonl"
grep -v '"tag":"normal-[0-9]' "$REQ" >"$WORK/second.jsonl"
for part in first second; do
  timeout 60 node "$SRC/tests/e2e/otel/export_requests.js" "$GRPC_ADDR" "$WORK/$part.jsonl" \
    >>"$WORK/ids.jsonl" 2>"$WORK/node.err" || fail "export failed: $(cat "$WORK/node.err")"
done
[ "$(wc -l <"$WORK/ids.jsonl")" = 269 ] || fail "want 269 exported requests, got $(wc -l <"$WORK/ids.jsonl")"

# Every request correlated (settle: the slowest tier plus a hot interval).
for _ in $(seq 1 $(tries 100)); do
  "$CLI" --server="$GRPC_ADDR" correlate --since 2m --all --limit 0 --output json >"$WORK/c.json" 2>/dev/null || true
  [ "$(jq '[.spans[] | select(.name == "llm_request")] | length' "$WORK/c.json" 2>/dev/null)" = 269 ] && break
  sleep 0.2
done
jq -s 'map({(.span_id): .tag}) | add' "$WORK/ids.jsonl" >"$WORK/tags.json"
jq --slurpfile tags "$WORK/tags.json" \
  '[.spans[] | select(.name == "llm_request") | . + {tag: $tags[0][.span_id]}]' \
  "$WORK/c.json" >"$WORK/judged.json"
[ "$(jq length "$WORK/judged.json")" = 269 ] || fail "want 269 correlated requests, got $(jq length "$WORK/judged.json")"
jq -e 'all(.kind == "request" and .phase == "decode" and .service == "vllm")' "$WORK/judged.json" >/dev/null ||
  fail "requests not understood as GenAI decode: $(jq -c '.[0] | {kind, phase, service}' "$WORK/judged.json")"

stalls=$(jq -c '[.[] | select(.stall) | .tag] | sort' "$WORK/judged.json")
[ "$stalls" = '["slow-burst-1","slow-burst-2","slow-burst-3","slow-burst-4","slow-quiet"]' ] ||
  fail "stalls: want the 4 slow burst requests and slow-quiet, got $stalls"
jq -e '[.[] | select(.tag | startswith("slow-burst"))] | all(.verdict == "fabric"
    and .stall_check.source == "learned" and .stall_check.cost_kind == "time_per_output_token"
    and (.signals | any(.anomalous and .netdev == "fsroce1" and .priority == "3")))' \
  "$WORK/judged.json" >/dev/null ||
  fail "slow burst requests not judged fabric on fsroce1 prio 3: $(jq -c '[.[] | select(.tag | startswith("slow-burst")) | {verdict, stall_check, s: [.signals[] | select(.anomalous) | .netdev]}]' "$WORK/judged.json")"
jq -e '[.[] | select(.tag == "slow-quiet")] | .[0] | .verdict == "clean" and .stall_check.source == "learned"' \
  "$WORK/judged.json" >/dev/null ||
  fail "slow quiet request: want a stall judged clean, got $(jq -c '.[] | select(.tag == "slow-quiet") | {verdict, reason, stall_check}' "$WORK/judged.json")"
# Cost against the learned bound: 150 ms per token against about 2 x 20 ms.
jq -e '.[] | select(.tag == "slow-quiet") | .stall_check | (.cost_seconds > 0.14 and .cost_seconds < 0.16
    and .bound_seconds > 0.03 and .bound_seconds < 0.06 and .samples >= 200)' "$WORK/judged.json" >/dev/null ||
  fail "stall check: $(jq -c '.[] | select(.tag == "slow-quiet") | .stall_check' "$WORK/judged.json")"
"$CLI" --server="$GRPC_ADDR" correlate --since 2m --stalls >"$WORK/c.txt" 2>&1
grep -q 'stall: TPOT 150.0ms vs learned' "$WORK/c.txt" ||
  fail "correlate does not explain the stall: $(head -n 12 "$WORK/c.txt")"

# /metrics: the learned bound and the stall counters by service and model.
scrape >"$WORK/m"
bound=$(metric_value 'fabricscope_stall_bound_seconds{cost="time_per_output_token",key="vllm meta-llama/Llama-3.1-8B-Instruct decode",kind="request",source="learned"}' "$WORK/m")
awk -v b="$bound" 'BEGIN { exit !(b > 0.03 && b < 0.06) }' || fail "learned bound on /metrics: '$bound'"
want() {
  got=$(metric_value "$1" "$WORK/m")
  [ "$got" = "$2" ] || fail "$1: want $2, got '$got'"
}
M='model="meta-llama/Llama-3.1-8B-Instruct",name="llm_request",service="vllm"'
want "fabricscope_stalls_total{$M,verdict=\"fabric\"}" 4
want "fabricscope_stalls_total{$M,verdict=\"clean\"}" 1
want "fabricscope_stalls_total{$M,verdict=\"unknown\"}" 0

# The NCCL Inspector collectives: the record's sn tells its tag.
jq -c '[.spans[] | select(.name == "AllReduce")]' "$WORK/c.json" >"$WORK/colls.json"
[ "$(jq length "$WORK/colls.json")" = 269 ] || fail "want 269 collective spans, got $(jq length "$WORK/colls.json")"
want "fabricscope_nccl_inspector_records_total{result=\"span\"}" 269
want "fabricscope_nccl_inspector_records_total{result=\"malformed\"}" 0
# sn 1-260 quiet normal; then per burst i: slow (260 + 2i - 1), normal (260 + 2i); 269 slow quiet.
"$CLI" --server="$GRPC_ADDR" correlate --since 2m --all --limit 0 --output json >"$WORK/c2.json"
coll_stalls=$(jq -c '[.spans[] | select(.name == "AllReduce" and .stall) | .start_unix_nano] | length' "$WORK/c2.json")
[ "$coll_stalls" = 5 ] || fail "want 5 collective stalls, got $coll_stalls"
jq -e '[.spans[] | select(.name == "AllReduce" and .stall)] | sort_by(.start_unix_nano)
    | (.[0:4] | all(.verdict == "fabric" and .stall_check.cost_kind == "time_per_byte"
                    and .stall_check.source == "learned" and .stall_check.key == "tp0 AllReduce 4MiB"
                    and (.signals | any(.anomalous and .netdev == "fsroce1"))))
      and (.[4].verdict == "clean")' "$WORK/c2.json" >/dev/null ||
  fail "collective stalls: $(jq -c '[.spans[] | select(.name == "AllReduce" and .stall) | {verdict, stall_check}]' "$WORK/c2.json")"
# Step-level evidence: a slow burst request lists the slow collectives inside
# its decode (the second export ran after the Inspector records were read).
jq -e '[.spans[] | select(.name == "llm_request" and .stall and .verdict == "fabric")]
    | any(.steps | length > 0 and all(.name == "AllReduce" and .cost_kind == "time_per_byte"))' \
  "$WORK/c2.json" >/dev/null ||
  fail "no step evidence on the slow burst requests: $(jq -c '[.spans[] | select(.name == "llm_request" and .stall) | .steps]' "$WORK/c2.json")"
grep -q 'stall: bandwidth .* GB/s vs learned' <("$CLI" --server="$GRPC_ADDR" correlate --since 2m --stalls --limit 0) ||
  fail "correlate does not explain a collective stall"
echo "PASS: 269 vLLM-shaped requests and 269 Inspector collectives, no thresholds: 5 stalls each (4 fabric on fsroce1, 1 clean); learned TPOT bound ${bound}s"
