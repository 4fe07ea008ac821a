#!/usr/bin/env bash
# The embedded default: tools/run.sh --demo=on starts fabricscoped on fabricsim
# (the `mixed` scenario), says so in one line, and prints where to look; the
# counters of the simulated PFC storm (1.0-1.6 s) and incast bursts (from
# 2.0 s) reach /metrics; the daemon logs no warning (the simulated PFC
# configuration included); with no stall flag, the learned stalls of a decode
# step and of an Inspector AllReduce judged fabric show in correlate, and the
# correlation command run.sh printed, run as printed, shows one on its first
# lines with port, counter and switch port (the newcomer path); SIGTERM stops
# the daemon with status 0, and the simulator and its temporary tree go with it.
source "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is required"

[ -x "$BIN/fabricsim" ] || fail "fabricsim not built in $BIN"

start_demo
# The first scrape once the ethtool series exist (their first reading is the
# baseline; the storm starts 1.0 s into the simulation).
for _ in $(seq 1 $(tries 30)); do
  scrape >"$WORK/m1" || fail "first scrape failed"
  grep -q '^fabricscope_pfc_pause_seconds_total{netdev="eth2"' "$WORK/m1" && break
  sleep 0.05
done

# One line says it runs on the simulator; the others say where to look.
[ "$(grep -c 'running fabricscoped on a simulated fabric' "$WORK/run.out")" = 1 ] ||
  fail "expected one 'simulated fabric' line: $(cat "$WORK/run.out")"
# (--server where the demo's gRPC address is not the CLI's default, as here.)
for want in "fabricscope --server=127.0.0.1:$GRPC_PORT top" "fabricscope --server=127.0.0.1:$GRPC_PORT events --since 5m" \
  "fabricscope --server=127.0.0.1:$GRPC_PORT correlate --since 1m" "metrics:"; do
  grep -qF -- "$want" "$WORK/run.out" || fail "run.out does not mention '$want'"
done
DEMO_DIR=$(sed -n 's/.*live tree in \(\/tmp\/fabricscope-demo\.[A-Za-z0-9]*\).*/\1/p' "$WORK/run.out")
[ -d "$DEMO_DIR" ] || fail "demo directory '$DEMO_DIR' missing"
SIM_PIDS=$(pgrep -P "$DAEMON_PID" || true)
[ -n "$SIM_PIDS" ] || fail "no simulator process under the daemon"
pgrep -f -- "--exit-with-pid=$DAEMON_PID" >/dev/null || fail "fabricsim does not watch the daemon's pid"
grep -q 'sysfs_root=/tmp/fabricscope-demo' "$WORK/daemon.log" || fail "daemon not pointed at the demo tree"

# The storm (1.0-1.6 s) and the first bursts (2.0-2.6 s) have happened by ~3.5 s.
sleep 3.5
kill -0 "$DAEMON_PID" 2>/dev/null || fail "daemon died"
scrape >"$WORK/m2" || fail "second scrape failed"
[ -s "$DEMO_DIR/ground_truth.json" ] || fail "no ground truth written"
jq -e '.events[] | select(.kind=="pfc_storm" and .device=="mlx5_0" and .direction=="rx")' \
  "$DEMO_DIR/ground_truth.json" >/dev/null || fail "ground truth lacks the rx PFC storm"

# sum_family FILE FAMILY FILTER: the sum of a family's samples whose labels match FILTER.
sum_family() {
  awk -v fam="$2{" -v re="$3" 'index($0, fam) == 1 && $0 ~ re { s += $NF } END { printf "%.6f\n", s + 0 }' "$1"
}
grep -q '^fabricscope_pfc_pause_seconds_total{' "$WORK/m2" || fail "no fabricscope_pfc_pause_seconds_total series"
grep -q '^fabricscope_ecn_marked_packets_total{' "$WORK/m2" || fail "no fabricscope_ecn_marked_packets_total series"
P1=$(sum_family "$WORK/m1" fabricscope_pfc_pause_seconds_total 'netdev="eth2".*direction="rx"|direction="rx".*netdev="eth2"')
P2=$(sum_family "$WORK/m2" fabricscope_pfc_pause_seconds_total 'netdev="eth2".*direction="rx"|direction="rx".*netdev="eth2"')
E1=$(sum_family "$WORK/m1" fabricscope_ecn_marked_packets_total 'device="mlx5_0"')
E2=$(sum_family "$WORK/m2" fabricscope_ecn_marked_packets_total 'device="mlx5_0"')
echo "pfc rx pause seconds on eth2: $P1 -> $P2; ecn marked on mlx5_0: $E1 -> $E2"
# The 600 ms storm reached /metrics: the exported total counts from the
# daemon's first reading (its baseline, well before 1.0 s), so it holds the
# storm's ~0.6 s by now, and the storm detector saw it. (Not P2 - P1: under
# TSan the first scrape can come after the storm; that counters keep moving
# between scrapes is the ECN check.)
awk -v b="$P2" 'BEGIN { exit !(b >= 0.5) }' || fail "PFC pause seconds below the storm's: $P1 -> $P2"
S2=$(sum_family "$WORK/m2" fabricscope_pfc_storms_total 'netdev="eth2"')
# The storm detector judges each 100 ms ethtool interval by its pause fraction
# (>= 0.8 for 200 ms). Under a sanitizer on a loaded 2-core machine the
# simulator's 10 ms rewrites and the daemon's polls can slip against each
# other by tens of ms, so an interval inside the 600 ms storm can read a
# fraction below 0.8 and that storm is never declared (seen once in CI:
# 0.6 s of pause read, no storm). The scenario repeats every 36 s: then the
# test waits for the next cycle's storm (model time 37.0-37.6 s) rather than
# lowering the fraction the demo runs with.
if ! awk -v s="$S2" 'BEGIN { exit !(s >= 1) }'; then
  echo "note: the first storm was not declared ($S2; pause seconds $P1 -> $P2); waiting for the next cycle's"
  # Wall-clock paced: the next storm ends ~37.6 s after the simulator started,
  # at any slowdown; 45 s of waiting covers it.
  for _ in $(seq 1 450); do
    sleep 0.1
    scrape >"$WORK/m3" || fail "scrape while waiting for the second storm failed"
    S2=$(sum_family "$WORK/m3" fabricscope_pfc_storms_total 'netdev="eth2"')
    awk -v s="$S2" 'BEGIN { exit !(s >= 1) }' && break
  done
fi
awk -v s="$S2" 'BEGIN { exit !(s >= 1) }' || fail "no PFC storm counted on eth2 ($S2), not even in the second cycle"
awk -v a="$E1" -v b="$E2" 'BEGIN { exit !(b > a) }' || fail "ECN marked packets did not move: $E1 -> $E2"

# It starts without warnings: every source the daemon reads is simulated,
# PFC configuration included (fabricsim --dcb-dir: PFC on priority 3, the
# simulated fabric's lossless class, as dcbnl would report on a real host).
if grep -E 'level=(warn|error)' "$WORK/daemon.log"; then fail "the demo logged warnings (above)"; fi
for nd in eth2 eth3; do
  grep -Eq "^fabricscope_pfc_enabled\{.*netdev=\"$nd\".*priority=\"3\".*\} 1\$" "$WORK/m2" ||
    fail "no PFC enabled on $nd priority 3: $(grep '^fabricscope_pfc_enabled' "$WORK/m2")"
  grep -Eq "^fabricscope_pfc_enabled\{.*netdev=\"$nd\".*priority=\"0\".*\} 0\$" "$WORK/m2" ||
    fail "PFC priority 0 of $nd not reported off"
done

# Decode-step spans reach the daemon through `fabricscope push` (when the CLI is built).
if grep -q "spans pushed to" "$WORK/run.out"; then
  S2=$(sum_family "$WORK/m2" fabricscope_ingest_spans_total 'protocol="native".*result="accepted"')
  echo "spans accepted: $S2"
  awk -v n="$S2" 'BEGIN { exit !(n > 10) }' || fail "no pushed spans accepted by the daemon ($S2)"
  # Stalls with no flag (issue #33): within a scenario cycle (36 s) the
  # learner (warm after 200 decode steps, ~3 s) calls a decode step and an
  # Inspector AllReduce of one of the scenario's episodes (the retransmit storm
  # at ~20 s) stalls, judged fabric. Release build only: it waits ~20 s of
  # wall time, which the sanitizer stage (the same code, checked by the unit
  # tests and e2e_genai_stalls there) need not spend again.
  found=0
  [ "$SLOWDOWN" = 1 ] || found=skip
  for _ in $(seq 1 600); do
    [ "$found" = skip ] && break
    "$BIN/fabricscope" --server="127.0.0.1:$GRPC_PORT" correlate --since 2m --stalls --limit 0 \
      --output json >"$WORK/stalls.json" 2>/dev/null || true
    if jq -e '[.spans[] | select(.stall and .verdict == "fabric" and .stall_check.source == "learned")]
        | (any(.name == "decode_step") and any(.name == "AllReduce"))' "$WORK/stalls.json" >/dev/null 2>&1; then
      found=1
      break
    fi
    sleep 0.1
  done
  [ "$found" != 0 ] ||
    fail "no learned stall judged fabric in the demo: $(jq -c '[.spans[] | {name, stall, verdict, s: .stall_check.source}] | .[0:5]' "$WORK/stalls.json" 2>&1 | head -c 600)"
  [ "$found" = skip ] || echo "learned stalls: $(jq '[.spans[] | select(.stall)] | length' "$WORK/stalls.json")"

  # The newcomer path (issue #35): the README's first command ran the demo
  # (start_demo runs tools/run.sh as the README does); the correlation
  # command it printed, run as printed, answers on its first lines: a stall
  # judged fabric, with its port, counter and switch port, and that port is
  # one where the simulator injected an episode during the stall.
  if [ "$found" = 1 ]; then
    CORR_CMD=$(sed -n 's/^  correlation:  //p' "$WORK/run.out")
    [[ "$CORR_CMD" == *"fabricscope "*"correlate --since 1m" ]] || fail "no correlation command printed: $(cat "$WORK/run.out")"
    # shellcheck disable=SC2086  # the printed command line, split as a shell would
    $CORR_CMD >"$WORK/first.txt" 2>&1 || fail "the printed correlation command failed: $(cat "$WORK/first.txt")"
    head -n 12 "$WORK/first.txt" >"$WORK/first12.txt"
    echo "--- the first lines of '$CORR_CMD' ---"
    cut -c1-160 "$WORK/first12.txt"
    head -n1 "$WORK/first.txt" | grep -Eq '; [0-9]+ stalls?: ([0-9]+ fabric|.*, [0-9]+ fabric); stalls blamed on: ' ||
      fail "the summary line does not count fabric stalls and what they are blamed on: $(head -n1 "$WORK/first.txt")"
    STALL_LINE=$(grep -m1 -n '  STALL  FABRIC  ' "$WORK/first12.txt" || true)
    [ -n "$STALL_LINE" ] || fail "no stall judged fabric on the first 12 lines: $(cat "$WORK/first12.txt")"
    # The stall's top signal: its counter, its port and the switch port.
    TOP=$(sed -n "$((${STALL_LINE%%:*} + 1)),12p" "$WORK/first12.txt" | grep -m1 '! #1 ' || true)
    [[ "$TOP" =~ \!\ \#1\ ([a-z_]+( [a-z_]+)?)\ +(mlx5_[0-9]+)/1\ eth[0-9]+\ -\>\ leaf0[12]\ Ethernet1/1 ]] ||
      fail "the first stall's top signal does not name counter, port and switch port: '$TOP'"
    TOP_DEVICE=${BASH_REMATCH[3]}
    SPAN_HEX=$(sed 's/.* span \([0-9a-f]*\)$/\1/' <<<"${STALL_LINE#*:}")
    "$BIN/fabricscope" --server="127.0.0.1:$GRPC_PORT" correlate --span-id "$SPAN_HEX" --output json >"$WORK/first.json" ||
      fail "correlate --span-id $SPAN_HEX failed"
    jq -e --slurpfile gt "$DEMO_DIR/ground_truth.json" --arg dev "$TOP_DEVICE" '
        .spans[0] as $s
        | [$gt[0].events[] | select(.device == $dev and .start_unix_nano <= $s.end_unix_nano
                                     and (.end_unix_nano == null or .end_unix_nano >= $s.start_unix_nano))]
        | length > 0' "$WORK/first.json" >/dev/null ||
      fail "the first stall ($SPAN_HEX, top signal on $TOP_DEVICE) overlaps no injected episode on $TOP_DEVICE: $(jq -c '.spans[0] | {start_unix_nano, end_unix_nano}' "$WORK/first.json")"
    echo "newcomer path: stall $SPAN_HEX on the first lines, blamed on $TOP_DEVICE, which the simulator disturbed then"
  fi
elif [ -x "$BIN/fabricscope" ]; then
  fail "fabricscope is built but the demo does not push spans: $(head -n1 "$WORK/run.out")"
fi

# SIGTERM: the daemon exits 0 within 2 s; the simulator and its tree follow.
stop_daemon
for _ in $(seq 1 $(tries 100)); do
  alive=0
  for p in $SIM_PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && [ ! -d "$DEMO_DIR" ] && break
  sleep 0.05
done
for p in $SIM_PIDS; do kill -0 "$p" 2>/dev/null && fail "simulator process $p still running after the daemon stopped"; done
if pgrep -f -- "--exit-with-pid=$DAEMON_PID" >/dev/null; then fail "fabricsim still running after the daemon stopped"; fi
[ ! -d "$DEMO_DIR" ] || fail "demo directory $DEMO_DIR left behind"

# --demo=off runs the daemon alone (no simulator line).
FABRICSCOPE_BINARY_DIR="$BIN" "$SRC/tools/run.sh" --demo=off --version >"$WORK/off.out"
grep -q "^fabricscoped " "$WORK/off.out" || fail "--demo=off did not run fabricscoped"
if FABRICSCOPE_BINARY_DIR="$BIN" "$SRC/tools/run.sh" --demo=sometimes 2>"$WORK/bad.err"; then
  fail "--demo=sometimes accepted"
fi
grep -q "auto, on or off" "$WORK/bad.err" || fail "bad --demo value not explained"
echo "PASS"
