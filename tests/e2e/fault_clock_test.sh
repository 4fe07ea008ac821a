#!/usr/bin/env bash
# The realtime clock stepping backwards (and forwards again) while steady time
# goes on, as when NTP steps the clock (issue #10, item 3).
#
# Stepping the machine's clock in CI is not safe, so only the daemon's (and
# the CLI's) realtime is stepped: tests/tools/realtime_shift.cc, built here
# with the system compiler and LD_PRELOADed, adds an offset read from a file
# to clock_gettime(CLOCK_REALTIME), gettimeofday() and time();
# CLOCK_MONOTONIC (the scheduler's deadlines) is untouched. The daemon code is
# unchanged.
#
# After a 1 h step back, and after the step forward again: the daemon stays
# up, /healthz stays 200, a series keeps being sampled at its interval in the
# new timeline, counters keep counting and never go backwards, no sample on
# /metrics is NaN, Inf or negative, scheduler overruns stay within the
# margin; a span in the daemon's new timeline is accepted and correlated, one
# stamped with the true time (1 h ahead of the daemon) is rejected and
# counted as in_future. Peak RSS stays within the configured budgets.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"

SHIM="$WORK/realtime_shift.so"
"${CXX:-c++}" -std=c++17 -O2 -shared -fPIC -o "$SHIM" "$SRC/tests/tools/realtime_shift.cc" -ldl \
  2>"$WORK/cc.err" || fail "building the realtime shim: $(cat "$WORK/cc.err")"
OFFSET="$WORK/realtime_offset"
set_offset() {
  printf '%s\n' "$1" >"$OFFSET.tmp"
  chmod 644 "$OFFSET.tmp"
  mv "$OFFSET.tmp" "$OFFSET"
}
set_offset 0
cp -a "$SRC/tests/fixtures/sysfs" "$WORK/sysfs"
MLX5_1="$WORK/sysfs/devices/telegraf_roce/mlx5_1/ports/1"
unprivileged_daemon

export FABRICSCOPE_TEST_REALTIME_OFFSET_FILE="$OFFSET"
# The shim is preloaded ahead of a sanitizer runtime (ASan checks the order).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
HOT_MS=25
export LD_PRELOAD="$SHIM"
start_daemon --sysfs-root="$WORK/sysfs/root" --collectors=rdma_sysfs \
  --hot-interval=${HOT_MS}ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms \
  --store-memory=$FAULT_STORE_MEMORY --span-memory=$FAULT_SPAN_MEMORY
unset LD_PRELOAD
grpc_address
REAL_CLI="$CLI"
# The CLI lives in the daemon's timeline (--since is taken from its clock).
CLI="$WORK/fabricscope-shifted"
printf '#!/bin/sh\nLD_PRELOAD=%q exec %q "$@"\n' "$SHIM" "$REAL_CLI" >"$CLI"
chmod 755 "$CLI"

value() {
  scrape >"$WORK/m" 2>/dev/null || { echo ""; return; }
  metric_value "$1" "$WORK/m"
}
wait_value() {
  local got=""
  for _ in $(seq 1 $(tries 100)); do
    check_alive "waiting for $1"
    got=$(value "$1")
    [ "$got" = "$2" ] && return 0
    sleep 0.1
  done
  fail "$1 is '$got', want $2"
}
OOS1='fabricscope_rdma_errors_total{device="mlx5_1",port="1",counter="out_of_sequence"}'
spans_correlated() {
  scrape >"$WORK/s.m" || fail "scrape"
  metric_sum '^fabricscope_spans_total\{' "$WORK/s.m"
}
in_future() {
  scrape >"$WORK/s.m" || fail "scrape"
  metric_sum '^fabricscope_ingest_spans_total\{protocol="native",result="in_future"\}' "$WORK/s.m"
}
# sane_exposition WHAT: no NaN, Inf or negative sample value.
sane_exposition() {
  scrape >"$WORK/x.m" || fail "$1: scrape"
  local bad
  bad=$(grep -v '^#' "$WORK/x.m" | awk '$NF ~ /NaN|Inf|^-/' | head -n 5)
  [ -z "$bad" ] || fail "$1: bad samples on /metrics: $bad"
  promtool_check "$WORK/x.m"
}
# push_span END_OFFSET_NS: one valid span ending 1 s before (the daemon's
# realtime + END_OFFSET_NS), pushed by the CLI in the daemon's timeline.
push_span() {
  local now s e
  now=$(LD_PRELOAD="$SHIM" date +%s%N)
  e=$((now + $1 - 1000000000))
  s=$((e - 20000000))
  printf '{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902%02x","name":"decode","start_unix_nano":%d,"end_unix_nano":%d,"attributes":{"rdma.device":"mlx5_1","rdma.port":"1"}}\n' \
    $((RANDOM % 256)) "$s" "$e" | "$CLI" --server="$GRPC_ADDR" push >"$WORK/push.out" 2>&1
}

wait_value "$OOS1" 44
sleep 2
check_polled rdma_errors mlx5_1 out_of_sequence $HOT_MS "before the step"
ov=$(overruns)

# step back|forward NEW_OFFSET_NS COUNTER_VALUE WHAT
step() {
  local what="$4" before_spans nf real_n
  set_offset "$2"
  sleep 2.5  # > 2 s: check_polled looks only at samples taken after the step
  check_alive "$what"
  curl -sf -o /dev/null --max-time 3 "http://$METRICS_ADDR/healthz" || fail "$what: /healthz not 200"
  check_polled rdma_errors mlx5_1 out_of_sequence $HOT_MS "$what"
  # The step took effect: seen from the machine's clock, the samples of the
  # last 2 s are stamped 1 h back (none) after the step back, and present
  # again after the step forward.
  real_n=$(CLI="$REAL_CLI" samples_since rdma_errors mlx5_1 out_of_sequence 2)
  echo "figure: $what: $real_n samples in the last 2 s of the machine's clock"
  if [ "$1" = back ]; then
    [ "$real_n" -eq 0 ] || fail "$what: the daemon's clock did not step (shim not in effect?)"
  else
    [ "$real_n" -gt 0 ] || fail "$what: no samples in the machine's timeline after the step forward"
  fi
  printf '%s\n' "$3" >"$MLX5_1/hw_counters/out_of_sequence"
  wait_value "$OOS1" "$3"
  sane_exposition "$what"
  # A span in the daemon's timeline is accepted and correlated.
  before_spans=$(spans_correlated)
  push_span 0 || fail "$what: push of a span in the daemon's timeline: $(cat "$WORK/push.out")"
  local n=0
  for _ in $(seq 1 $(tries 100)); do
    n=$(spans_correlated)
    [ "$n" -gt "$before_spans" ] && break
    sleep 0.1
  done
  [ "$n" -gt "$before_spans" ] || fail "$what: the span was not correlated within 10 s"
  # A span 1 h ahead of the daemon's clock is rejected as in_future and counted.
  nf=$(in_future)
  if push_span 3600000000000; then fail "$what: a span 1 h in the future was accepted"; fi
  grep -q in_future "$WORK/push.out" || fail "$what: push output: $(cat "$WORK/push.out")"
  [ "$(in_future)" -eq $((nf + 1)) ] || fail "$what: in_future not counted"
  echo "ok: $what"
}

step back -3600000000000 45 "realtime stepped back 1 h"
step forward 0 46 "realtime stepped forward 1 h again"
check_overruns "$ov" "realtime steps"
check_memory "realtime steps"
fault_stop_daemon "after the clock faults"
echo "PASS"
