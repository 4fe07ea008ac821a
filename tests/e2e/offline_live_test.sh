#!/usr/bin/env bash
# Offline answers equal live ones (issue #35, item 3). The demo (tools/run.sh
# on fabricsim, learned stalls, link partners from its cabling file) runs
# ~35 s; `fabricscope record --since 30s` writes what the daemon holds, headed
# by its recording line (window, ports with link rates, partners and PCI/GPU
# places, every option, learned stall bounds, version), each span with the
# daemon's stall judgement. Then, from the same daemon, the live answers
# (`correlate --all --output json`, `events`) and, from the file alone,
# `fabricscope analyze`:
#  - every span whose baseline window lies inside the recording has the same
#    verdict and stall decision offline as live (spans ending in the last 3 s
#    are left out: the live daemon may not have polled their window yet);
#  - spans whose baseline starts before the recording are "baseline
#    incomplete", not judged, and only those;
#  - the detector events that start a baseline window after the recording's
#    start and ended 3 s before its end are the same, start and end;
#  - offline output names the link partners (as live does).
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"
command -v python3 >/dev/null || fail "python3 is required"
CLI="$BIN/fabricscope"
[ -x "$CLI" ] || fail "no CLI at $CLI"

start_demo
C=("$CLI" --server="127.0.0.1:$GRPC_PORT")
# ~35 s of the mixed scenario (wall-paced), so that the 30 s recording starts
# after the daemon's first polls.
sleep 35
kill -0 "$DAEMON_PID" 2>/dev/null || fail "demo daemon died"
"${C[@]}" record --since 30s --out "$WORK/rec.jsonl" 2>"$WORK/record.err" ||
  fail "record failed: $(cat "$WORK/record.err")"
"${C[@]}" correlate --since 40s --all --limit 0 --output json >"$WORK/live.json" ||
  fail "live correlate failed"
"${C[@]}" events --since 40s --limit 0 --output json >"$WORK/live_events.json" ||
  fail "live events failed"
stop_daemon

head -n1 "$WORK/rec.jsonl" >"$WORK/header.json"
jq -e '.recording | .version != "" and .to_unix_nano > .from_unix_nano
       and ([.ports[] | select(.rate | test("Gb/sec"))] | length) == 2
       and ([.partners[] | .system_name] | sort) == ["leaf01", "leaf02"]
       and (.options["correlate-rate-factor"] | length) > 0
       and (.options["detectors"] | length) > 0' "$WORK/header.json" >/dev/null ||
  fail "the recording's first line is not a complete header: $(head -c 600 "$WORK/header.json")"
grep -q '"judgement":{"stall":' "$WORK/rec.jsonl" || fail "no span line carries the daemon's judgement"

"$CLI" analyze "$WORK/rec.jsonl" --all --limit 0 --output json >"$WORK/offline.json" 2>"$WORK/analyze.err" ||
  fail "analyze failed: $(cat "$WORK/analyze.err")"
"$CLI" analyze "$WORK/rec.jsonl" >"$WORK/offline.txt" 2>&1 || fail "analyze (human) failed"
grep -q '^recorded by fabricscoped .*: 2 ports, 2 link partners, ' "$WORK/offline.txt" ||
  fail "analyze does not say what the header gave: $(head -n 4 "$WORK/offline.txt")"
grep -Eq -- '-> leaf0[12] Ethernet1/1' "$WORK/offline.txt" || fail "offline output names no link partner"

python3 - "$WORK/header.json" "$WORK/live.json" "$WORK/offline.json" "$WORK/live_events.json" <<'EOF' ||
import json, sys
header = json.load(open(sys.argv[1]))["recording"]
live = json.load(open(sys.argv[2]))
off = json.load(open(sys.argv[3]))
live_events = json.load(open(sys.argv[4]))
start, end = header["from_unix_nano"], header["to_unix_nano"]
baseline = 10 * 10**9  # --baseline-window (the demo's default)
settle = 3 * 10**9     # the live daemon's slowest tier and the correlation worker
key = lambda s: (s["trace_id"], s["span_id"], s["name"])
L = {key(s): s for s in live["spans"]}
O = {key(s): s for s in off["spans"]}
def window_start(s):
    w = s.get("window_start_unix_nano", 0)
    return w if w else s["start_unix_nano"]
fails = []
compared = incomplete = 0
for k, o in O.items():
    full = window_start(o) - baseline >= start
    if o["reason"].startswith("baseline incomplete") != (not full):
        fails.append(f"{k[2]} {k[1]}: baseline incomplete={not full} but reason {o['reason'][:80]!r}")
        continue
    if not full:
        incomplete += 1
        continue
    if o["end_unix_nano"] > end - settle or k not in L:
        continue
    compared += 1
    l = L[k]
    if (l["verdict"], l["stall"]) != (o["verdict"], o["stall"]):
        fails.append(f"{k[2]} {k[1]} at {o['start_unix_nano']}: live {l['verdict']}/{l['stall']} "
                     f"({l['reason'][:60]!r}) offline {o['verdict']}/{o['stall']} ({o['reason'][:60]!r})")
print(f"spans: {len(O)} offline, {compared} compared with live, {incomplete} baseline incomplete")
if compared < 100:
    fails.append(f"only {compared} spans compared")
if incomplete == 0:
    fails.append("no span reported baseline incomplete (the recording's first 10 s)")
def ev_key(e):
    return (e["detector"], e["kind"], e["device"], e["port"], e["netdev"], e["priority"],
            e["direction"], e["start_unix_nano"], e["end_unix_nano"])
def inside(e):
    return (e["start_unix_nano"] >= start + baseline and e["end_unix_nano"] is not None
            and e["end_unix_nano"] <= end - settle)
le = sorted(ev_key(e) for e in live_events if inside(e))
oe = sorted(ev_key(e) for e in off["events"] if inside(e))
print(f"events inside the window: {len(le)} live, {len(oe)} offline")
if le != oe:
    fails.append(f"events differ: live only {sorted(set(le) - set(oe))[:3]}, offline only {sorted(set(oe) - set(le))[:3]}")
if not le:
    fails.append("no event inside the window to compare")
for f in fails[:10]:
    print("MISMATCH:", f)
sys.exit(1 if fails else 0)
EOF
  fail "offline answers differ from live ones (above)"
echo "PASS"
