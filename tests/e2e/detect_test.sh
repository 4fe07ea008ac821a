#!/usr/bin/env bash
# Detectors, events, recording and replay end to end (issue #7):
#  1. `fabricscope analyze` over fabricsim recordings: the pfc_storm scenario
#     yields exactly its two storms (eth2 prio 3 rx, eth3 prio 3 tx) inside the
#     ground truth; a malformed line is reported with its number and the rest
#     is still analysed; the quiet scenario yields no event at all.
#  2. The live daemon on fabricsim (pfc_storm): `fabricscope events` shows the
#     storm, /metrics counts it, /healthz and /readyz answer 200.
#  3. `fabricscope record` from that daemon, and `fabricscope analyze` of the
#     recording finds the storm again.
#  4. `fabricscoped --replay` of the recording (max speed): its events and
#     /metrics show the storm.
source "$(dirname "$0")/lib.sh"
CLI="$BIN/fabricscope"
SIM="$BIN/fabricsim"
T0=1760000000000000000

# --- 1. offline analysis ---------------------------------------------------------
"$SIM" --scenario=pfc_storm --seed=5 --duration=8s --as-fast-as-possible --start-unix-ns=$T0 \
  --record="$WORK/storm.jsonl" --ground-truth="$WORK/storm.truth.json"
# Break one line in the middle of the file.
lines=$(wc -l <"$WORK/storm.jsonl")
bad=$((lines / 2))
sed -i "${bad}s/.*/{\"ts_ns\": not json/" "$WORK/storm.jsonl"
"$CLI" --output=json analyze "$WORK/storm.jsonl" --all >"$WORK/storm.json" 2>"$WORK/storm.err" ||
  fail "analyze failed: $(cat "$WORK/storm.err")"
grep -q "line $bad:" "$WORK/storm.err" || fail "malformed line $bad not reported: $(head -3 "$WORK/storm.err")"
storms=$(jq '[.events[] | select(.detector=="pfc_storm" and .kind=="storm")] | length' "$WORK/storm.json")
[ "$storms" = 2 ] || fail "expected 2 storms, got $storms: $(jq -c '.events' "$WORK/storm.json")"
# Each storm lies within its ground-truth episode (+- 2 poll intervals of 10 ms).
for dir in rx tx; do
  jq -e --arg d "$dir" --slurpfile gt "$WORK/storm.truth.json" '
    ($gt[0].events[] | select(.kind=="pfc_storm" and .direction==$d)) as $t
    | [.events[] | select(.detector=="pfc_storm" and .kind=="storm" and .direction==$d
        and .priority==($t.priority|tostring) and .netdev==$t.netdev
        and .start_unix_nano >= $t.start_unix_nano - 20000000
        and .start_unix_nano <= $t.start_unix_nano + 20000000
        and .end_unix_nano != null
        and .end_unix_nano <= $t.end_unix_nano + 20000000)] | length == 1' \
    "$WORK/storm.json" >/dev/null || fail "no $dir storm matching the ground truth: $(jq -c .events "$WORK/storm.json"; cat "$WORK/storm.truth.json")"
done
# Spans were read and correlated; those during the rx storm on eth2 are fabric.
nspans=$(jq '.spans | length' "$WORK/storm.json")
[ "$nspans" -gt 100 ] || fail "expected spans in the analysis, got $nspans"
jq -e '.summary.spans == (.spans | length) and .summary.not_selected == 0
       and .summary.verdicts.fabric == ([.spans[] | select(.verdict=="fabric")] | length)' \
  "$WORK/storm.json" >/dev/null || fail "analyze summary: $(jq -c .summary "$WORK/storm.json")"
# Without --all (human output, --limit=1): the summary line counts every span,
# the lists say what they left out; which spans the default selects is
# SpanSelectionTest's (one analysis run less here: each costs ~9 s under ASan).
"$CLI" analyze "$WORK/storm.jsonl" --limit=1 >"$WORK/storm-limited.txt" 2>/dev/null
grep -q '^\.\.\. [0-9]* more earlier events (use --limit N' "$WORK/storm-limited.txt" &&
  grep -q "^$nspans spans: " "$WORK/storm-limited.txt" ||
  fail "analyze --limit=1: $(head -c 3000 "$WORK/storm-limited.txt")"
jq -e '[.spans[] | select(.verdict=="fabric")] | length > 0' "$WORK/storm.json" >/dev/null ||
  fail "no span judged fabric during the storms"

"$SIM" --scenario=quiet --seed=5 --duration=8s --as-fast-as-possible --start-unix-ns=$T0 \
  --record="$WORK/quiet.jsonl"
"$CLI" --output=json analyze "$WORK/quiet.jsonl" >"$WORK/quiet.json" 2>"$WORK/quiet.err"
quiet_events=$(jq '.events | length' "$WORK/quiet.json")
[ "$quiet_events" = 0 ] || fail "quiet scenario raised events: $(jq -c .events "$WORK/quiet.json")"
"$CLI" analyze "$WORK/does-not-exist.jsonl" >/dev/null 2>&1 && fail "analyze of a missing file succeeded"

# --- 2. live daemon on the simulator -----------------------------------------------
start_demo --demo-scenario=pfc_storm
# Ready once every tier ticked (the config tier ticks at start).
for _ in $(seq 1 $(tries 50)); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$METRICS_ADDR/readyz")" = 200 ] && break
  sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$METRICS_ADDR/readyz")" = 200 ] || fail "/readyz not 200"
[ "$(curl -s "http://$METRICS_ADDR/healthz")" = ok ] || fail "/healthz not ok"
# The rx storm runs 1.0-1.6 s into the simulation; poll until it is over.
for _ in $(seq 1 $(tries 60)); do
  "$CLI" --server="127.0.0.1:$GRPC_PORT" --output=json events --since=1m --detector=pfc_storm \
    >"$WORK/events.json" 2>/dev/null || true
  jq -e '[.[] | select(.kind=="storm" and .netdev=="eth2" and .direction=="rx" and .end_unix_nano != null)] | length >= 1' \
    "$WORK/events.json" >/dev/null 2>&1 && break
  sleep 0.1
done
jq -e '[.[] | select(.kind=="storm" and .netdev=="eth2" and .priority=="3" and .direction=="rx" and .end_unix_nano != null)] | length == 1' \
  "$WORK/events.json" >/dev/null || fail "live events lack the eth2 rx storm: $(cat "$WORK/events.json")"
# (Captured first: `cli | grep -q` under pipefail fails when the CLI dies of SIGPIPE.)
"$CLI" --server="127.0.0.1:$GRPC_PORT" events --since=1m >"$WORK/events.txt" 2>&1 ||
  fail "fabricscope events failed: $(cat "$WORK/events.txt")"
grep -q "pfc_storm" "$WORK/events.txt" || fail "human events output lacks the storm: $(cat "$WORK/events.txt")"
# Two --label matchers both apply.
"$CLI" --server="127.0.0.1:$GRPC_PORT" --output=json series --signal=pfc_pause_seconds --since=30s \
  --label=netdev=eth2 --label=direction=rx >"$WORK/series.json" || fail "series failed"
jq -e 'length >= 1 and all(.[]; .netdev=="eth2" and .labels.direction=="rx")' "$WORK/series.json" >/dev/null ||
  fail "series with two --label matchers: $(jq -c '[.[] | {netdev, labels}]' "$WORK/series.json")"
# The family name works as the signal; a name of nothing fails and lists the
# signals there are; labels print in one (sorted) order.
"$CLI" --server="127.0.0.1:$GRPC_PORT" series --signal=fabricscope_pfc_pause_seconds_total --since=30s \
  --label=netdev=eth2 --max-samples=2 >"$WORK/series.txt" 2>&1 || fail "series by family name failed: $(cat "$WORK/series.txt")"
grep -q '^fabricscope_pfc_pause_seconds_total{direction=rx,netdev=eth2,priority=3}' "$WORK/series.txt" ||
  fail "series titles not in sorted label order: $(head -n 3 "$WORK/series.txt")"
if "$CLI" --server="127.0.0.1:$GRPC_PORT" series --signal=pfc_pause_secs >"$WORK/nosuch.txt" 2>&1; then
  fail "an unknown signal exited 0"
fi
grep -q "no signal named 'pfc_pause_secs'; the daemon has: .*pfc_pause_seconds" "$WORK/nosuch.txt" ||
  fail "an unknown signal does not list the names: $(cat "$WORK/nosuch.txt")"
scrape >"$WORK/live.metrics" || fail "scrape failed"
# (prometheus-cpp renders self-metric labels sorted by name)
v=$(metric_value 'fabricscope_pfc_storms_total{direction="rx",netdev="eth2",priority="3"}' "$WORK/live.metrics")
[ "${v:-0}" = 1 ] || fail "fabricscope_pfc_storms_total for eth2/3/rx is '$v'"
v=$(metric_value 'fabricscope_detector_events_total{detector="pfc_storm",kind="storm"}' "$WORK/live.metrics")
[ "${v:-0}" -ge 1 ] 2>/dev/null || fail "fabricscope_detector_events_total{pfc_storm,storm} is '$v'"
grep -q '^fabricscope_pfc_storm_active{direction="rx",netdev="eth2",priority="3"} 0' "$WORK/live.metrics" ||
  fail "fabricscope_pfc_storm_active for eth2/3/rx missing or not 0 after the storm"
promtool_check "$WORK/live.metrics"

# --- 3. record from the daemon, analyze the recording ----------------------------------
"$CLI" --server="127.0.0.1:$GRPC_PORT" record --since=1m --out="$WORK/rec.jsonl" 2>"$WORK/record.err" ||
  fail "record failed: $(cat "$WORK/record.err")"
grep -q '"source":"ethtool","name":"rx_prio3_pause_duration"' "$WORK/rec.jsonl" || fail "recording lacks the pause counter"
grep -q '^{"span":' "$WORK/rec.jsonl" || fail "recording lacks spans"
"$CLI" --output=json analyze "$WORK/rec.jsonl" >"$WORK/rec.json" 2>"$WORK/rec.err" || fail "analyze of the recording failed"
jq -e '[.events[] | select(.detector=="pfc_storm" and .kind=="storm" and .netdev=="eth2" and .direction=="rx")] | length == 1' \
  "$WORK/rec.json" >/dev/null || fail "analysis of the recording lacks the storm: $(jq -c .events "$WORK/rec.json")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true

# --- 4. replay ---------------------------------------------------------------------------
: >"$WORK/daemon.log"
start_daemon --replay="$WORK/rec.jsonl" --replay-speed=max
for _ in $(seq 1 $(tries 100)); do
  grep -q 'msg="replay finished"' "$WORK/daemon.log" && break
  sleep 0.1
done
grep -q 'msg="replay finished"' "$WORK/daemon.log" || fail "replay did not finish"
GRPC_ADDR=$(sed -n 's/.*msg="serving grpc" address=\([^ ]*\).*/\1/p' "$WORK/daemon.log" | head -n1)
"$CLI" --server="$GRPC_ADDR" --output=json events --since=10m >"$WORK/replay.json" || fail "events from the replaying daemon failed"
jq -e '[.[] | select(.detector=="pfc_storm" and .kind=="storm" and .netdev=="eth2" and .direction=="rx")] | length == 1' \
  "$WORK/replay.json" >/dev/null || fail "replay lacks the storm: $(cat "$WORK/replay.json")"
scrape >"$WORK/replay.metrics"
v=$(metric_value 'fabricscope_pfc_storms_total{direction="rx",netdev="eth2",priority="3"}' "$WORK/replay.metrics")
[ "${v:-0}" = 1 ] || fail "replayed fabricscope_pfc_storms_total is '$v'"
stop_daemon
echo PASS
