#!/usr/bin/env bash
# Restart without losing the story (--state-dir, issue #10 item 5), with the
# real daemon and CLI on a fake sysfs tree plus an `ethtool -S` directory:
#  1. A PFC storm (pause time growing at wall-clock speed for 1.2 s), three
#     spans and a retransmit counter are recorded; SIGTERM writes the snapshot
#     within the 2 s stop bound.
#  2. After a restart the storm event, the spans (by trace id, correlated as
#     fabric) and the samples from before the restart are all back, the
#     counters continue, and /metrics reports what was restored. The snapshot
#     is moved aside (restored once); a snapshot.tmp that a kill during a
#     snapshot left is removed at the start.
#  3. A snapshot with one flipped byte, and one cut in half: each is reported
#     (log line with the reason, fabricscope_state_snapshot_rejected_total),
#     kept as snapshot.corrupt, and the daemon starts empty and polls.
#  4. As root: --user=nobody with a state dir nobody cannot write fails at
#     startup with a message naming the directory.
source "$(dirname "$0")/lib.sh"
CLI="$BIN/fabricscope"
command -v jq >/dev/null || fail "jq is required"

SYS="$WORK/sys"
DIR="$WORK/ethtool"
STATE="$WORK/state"
mkdir -p "$DIR" "$STATE"
PORT="$SYS/class/infiniband/mlx5_0/ports/1"
mkdir -p "$PORT/gid_attrs/ndevs" "$PORT/hw_counters" "$PORT/counters"
echo Ethernet >"$PORT/link_layer"
echo "4: ACTIVE" >"$PORT/state"
echo "100 Gb/sec (4X EDR)" >"$PORT/rate"
echo fsroce0 >"$PORT/gid_attrs/ndevs/0"
for c in np_ecn_marked_roce_packets np_cnp_sent rp_cnp_handled out_of_sequence; do
  echo 0 >"$PORT/hw_counters/$c"
done

printf 'NIC statistics:\n     rx_prio3_pause: 10\n     rx_prio3_pause_duration: 1000\n     tx_prio3_pause: 0\n     tx_prio3_pause_duration: 0\n' \
  >"$DIR/fsroce0"

# --pfc-storm-fraction=0.5: pause_storm.py rewrites the file every ~5 ms, but on a
# loaded machine its writes slip, so the 20 ms polls see fractions alternating about
# 0.7 / 1.2 during the storm (captured in a failed run); at the default 0.8 ten stormy
# polls in a row (200 ms) then rarely happen. What this test checks is the state.
ARGS=(--sysfs-root="$SYS" --ethtool-dir="$DIR" --collectors=rdma_sysfs,ethtool
  --medium-interval=20ms --slow-interval=200ms --baseline-window=1s --state-dir="$STATE"
  --pfc-storm-fraction=0.5)
grpc_addr() { sed -n 's/.*msg="serving grpc" address=\([^ ]*\).*/\1/p' "$WORK/daemon.log" | head -n1; }
wait_exported() {
  for _ in $(seq 1 $(tries 100)); do
    scrape >"$WORK/m" 2>/dev/null || true
    grep -q '^fabricscope_pfc_pause_seconds_total{netdev="fsroce0",priority="3",direction="rx"}' "$WORK/m" && return 0
    sleep 0.1
  done
  fail "pause series not exported"
}

# --- 1. record a story, stop ---------------------------------------------------------
start_daemon "${ARGS[@]}"
grep -q 'msg="no snapshot to restore; starting empty"' "$WORK/daemon.log" || fail "first start: no 'no snapshot' line"
GRPC=$(grpc_addr)
wait_exported
sleep 1.5  # a baseline window of quiet samples
# The storm: paused all the time for 1.2 s.
storm_start=$(date +%s%N)
python3 "$SRC/tests/tools/pause_storm.py" "$DIR/fsroce0" 1000 1.2 >/dev/null
storm_end=$(date +%s%N)
echo 500 >"$PORT/hw_counters/out_of_sequence"
sleep 0.6
for i in 1 2 3; do
  printf '{"trace_id":"%032x","span_id":"%016x","name":"decode_step","kind":"decode_step","start_unix_nano":%s,"end_unix_nano":%s}\n' \
    "$((0xabc0 + i))" "$i" "$((storm_start + 100000000))" "$((storm_end - 100000000))"
done >"$WORK/spans.jsonl"
"$CLI" --server="$GRPC" push <"$WORK/spans.jsonl" >"$WORK/push.out" 2>&1 || fail "push: $(cat "$WORK/push.out")"
for _ in $(seq 1 $(tries 50)); do
  "$CLI" --server="$GRPC" --output=json events --since=1m --detector=pfc_storm >"$WORK/ev1.json" 2>/dev/null || true
  jq -e '[.[] | select(.kind=="storm" and .netdev=="fsroce0" and .end_unix_nano != null)] | length == 1' \
    "$WORK/ev1.json" >/dev/null 2>&1 && break
  sleep 0.1
done
jq -e '[.[] | select(.kind=="storm" and .netdev=="fsroce0" and .end_unix_nano != null)] | length == 1' \
  "$WORK/ev1.json" >/dev/null || fail "no storm event before the restart: $(cat "$WORK/ev1.json")"
"$CLI" --server="$GRPC" --output=json series --signal=pfc_pause_seconds --label=direction=rx --since=1m \
  >"$WORK/s1.json" || fail "series before the restart"
before_samples=$(jq '.[0].samples | length' "$WORK/s1.json")
first_ts=$(jq '.[0].samples[0].ts_unix_nano' "$WORK/s1.json")
[ "$before_samples" -gt 50 ] || fail "only $before_samples pause samples before the restart"
scrape >"$WORK/m1"
oos_before=$(metric_value 'fabricscope_rdma_errors_total{device="mlx5_0",port="1",counter="out_of_sequence"}' "$WORK/m1")
[ "$oos_before" = 500 ] || fail "out_of_sequence total before the restart: '$oos_before'"
stopped_at=$(date +%s%N)
stop_daemon
grep -q 'msg="snapshot written"' "$WORK/daemon.log" || fail "no 'snapshot written' line"
grep 'msg="snapshot written"' "$WORK/daemon.log" | grep -q 'spans=3' || fail "snapshot without the 3 spans: $(grep 'snapshot written' "$WORK/daemon.log")"
[ -s "$STATE/snapshot" ] || fail "no $STATE/snapshot"
[ -e "$STATE/snapshot.tmp" ] && fail "temporary snapshot left behind"

# --- 2. restart: the story is still there -------------------------------------------------
sleep 0.5
echo 700 >"$PORT/hw_counters/out_of_sequence"  # moved while the daemon was down
# What a kill -9 during a snapshot leaves: a partial snapshot.tmp beside the
# complete snapshot of the stop before. The start restores the snapshot and
# removes the temporary file.
head -c 1000 /dev/urandom >"$STATE/snapshot.tmp"
: >"$WORK/daemon.log"
start_daemon "${ARGS[@]}"
grep -q 'msg="restored snapshot"' "$WORK/daemon.log" || fail "no 'restored snapshot' line"
[ -e "$STATE/snapshot.tmp" ] && fail "an interrupted snapshot's temporary file was left at start"
grep -q "msg=\"removed an interrupted snapshot's temporary file\"" "$WORK/daemon.log" ||
  fail "the removal of snapshot.tmp was not logged"
[ -e "$STATE/snapshot" ] && fail "the snapshot was not moved aside after restoring it"
[ -s "$STATE/snapshot.restored" ] || fail "no snapshot.restored"
GRPC=$(grpc_addr)
wait_exported
scrape >"$WORK/m2"
[ "$(metric_value 'fabricscope_state_restored{kind="spans"}' "$WORK/m2")" = 3 ] || fail "restored spans metric: $(grep state_restored "$WORK/m2")"
[ "$(metric_value 'fabricscope_state_restored{kind="events"}' "$WORK/m2")" -ge 1 ] || fail "restored events metric"
samples=$(metric_value 'fabricscope_state_restored{kind="samples"}' "$WORK/m2")
[ "${samples%.*}" -gt "$before_samples" ] 2>/dev/null || fail "restored samples metric '$samples'"
promtool_check "$WORK/m2"
"$CLI" --server="$GRPC" --output=json events --since=10m --detector=pfc_storm >"$WORK/ev2.json" || fail "events after the restart"
jq -e --slurpfile a "$WORK/ev1.json" \
  '[.[] | select(.kind=="storm" and .netdev=="fsroce0")] | length == 1 and
   .[0].start_unix_nano == ($a[0] | map(select(.kind=="storm"))[0].start_unix_nano)' "$WORK/ev2.json" >/dev/null ||
  fail "storm event not restored: $(cat "$WORK/ev2.json") vs $(cat "$WORK/ev1.json")"
"$CLI" --server="$GRPC" --output=json correlate --trace-id="$(printf '%032x' $((0xabc0 + 2)))" >"$WORK/c2.json" ||
  fail "correlate after the restart"
jq -e '.spans | length == 1 and .[0].verdict == "fabric"' "$WORK/c2.json" >/dev/null ||
  fail "restored span not found or not fabric: $(cat "$WORK/c2.json")"
"$CLI" --server="$GRPC" --output=json series --signal=pfc_pause_seconds --label=direction=rx --since=10m \
  >"$WORK/s2.json" || fail "series after the restart"
jq -e --argjson first "$first_ts" --argjson n "$before_samples" --argjson stop "$stopped_at" \
  '.[0].samples[0].ts_unix_nano == $first and
   ([.[0].samples[] | select(.ts_unix_nano <= $stop)] | length) >= $n and
   ([.[0].samples[] | select(.ts_unix_nano > $stop)] | length) > 0' "$WORK/s2.json" >/dev/null ||
  fail "samples from before the restart missing: $(head -c 600 "$WORK/s2.json")"
# Counters continue: the total counts what moved while the daemon was down.
for _ in $(seq 1 $(tries 50)); do
  scrape >"$WORK/m3"
  [ "$(metric_value 'fabricscope_rdma_errors_total{device="mlx5_0",port="1",counter="out_of_sequence"}' "$WORK/m3")" = 700 ] && break
  sleep 0.1
done
[ "$(metric_value 'fabricscope_rdma_errors_total{device="mlx5_0",port="1",counter="out_of_sequence"}' "$WORK/m3")" = 700 ] ||
  fail "out_of_sequence total after the restart: $(grep out_of_sequence "$WORK/m3")"
stop_daemon
[ -s "$STATE/snapshot" ] || fail "no snapshot after the second stop"

# --- 3. corrupt and truncated snapshots -----------------------------------------------------
expect_rejected() {
  local reason=$1
  : >"$WORK/daemon.log"
  start_daemon "${ARGS[@]}"
  grep 'msg="snapshot rejected; starting empty"' "$WORK/daemon.log" | grep -q "reason=$reason" ||
    fail "no rejection with reason=$reason: $(grep -i snapshot "$WORK/daemon.log")"
  [ -s "$STATE/snapshot.corrupt" ] || fail "rejected snapshot not kept as snapshot.corrupt"
  [ -e "$STATE/snapshot" ] && fail "rejected snapshot still in place"
  wait_exported
  scrape >"$WORK/m4"
  [ "$(metric_value "fabricscope_state_snapshot_rejected_total{reason=\"$reason\"}" "$WORK/m4")" = 1 ] ||
    fail "rejection ($reason) not counted: $(grep rejected_total "$WORK/m4")"
  [ "$(metric_value 'fabricscope_state_restored{kind="spans"}' "$WORK/m4")" = 0 ] || fail "spans restored from a bad snapshot"
  "$CLI" --server="$(grpc_addr)" --output=json events --since=10m >"$WORK/ev3.json"
  jq -e 'length == 0' "$WORK/ev3.json" >/dev/null || fail "events restored from a bad snapshot: $(cat "$WORK/ev3.json")"
  stop_daemon
  [ -s "$STATE/snapshot" ] || fail "no snapshot after the stop following a rejection"
}
# A flipped bit in the file's last byte: the last record's CRC (a bit flipped
# elsewhere can land on a record length, which reads as truncation instead).
size=$(stat -c %s "$STATE/snapshot")
python3 - "$STATE/snapshot" "$((size - 1))" <<'EOF'
import sys
path, pos = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(pos)
    b = f.read(1)
    f.seek(pos)
    f.write(bytes([b[0] ^ 0x40]))
EOF
expect_rejected checksum
truncate -s "$(($(stat -c %s "$STATE/snapshot") / 2))" "$STATE/snapshot"
expect_rejected truncated

# --- 4. an unwritable state dir under --user ------------------------------------------------
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  mkdir -p "$WORK/rootonly"
  chmod 700 "$WORK/rootonly"
  rc=0
  "$DAEMON" --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 --collectors=netdev --user=nobody \
    --state-dir="$WORK/rootonly" >/dev/null 2>"$WORK/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "daemon started with a state dir its user cannot write"
  grep -q -- "--state-dir $WORK/rootonly is not writable" "$WORK/err" || fail "unwritable state dir error: $(cat "$WORK/err")"
fi
echo "PASS"
