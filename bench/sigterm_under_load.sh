#!/usr/bin/env bash
# How long SIGTERM takes under load (issue #38 item 4; README: "SIGTERM stops
# the daemon within 2 s"). Each run starts the README's demo (tools/run.sh
# --demo=on, the `mixed` scenario: storms, bursts, spans pushed every second)
# with --incident-dir (short windows, so recordings wait at the stop) and
# --state-dir, loads it for SECONDS with
#   - /metrics scraped every 50 ms,
#   - `fabricscope correlate --since 1m` every 200 ms (gRPC queries),
#   - 500 spans pushed every 100 ms (`fabricscope push`),
#   - 200 connections trickling headers (tests/tools/scrape_fault_client.py),
# then sends SIGTERM and prints the time to exit (polled every 10 ms) and the
# daemon's own `msg=stopped` line (took, and each stage of the stop).
#
#   bench/sigterm_under_load.sh [BUILD_DIR] [RUNS] [SECONDS]   (build/release 5 20)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$src/build/release}" && pwd)"
runs="${2:-5}"
seconds="${3:-20}"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for run in $(seq 1 "$runs"); do
  work=$(mktemp -d)
  grpc=$(free_port)
  FABRICSCOPE_BINARY_DIR="$build" "$src/tools/run.sh" --demo=on --allow-root \
    --metrics-listen=127.0.0.1:0 --grpc-listen="127.0.0.1:$grpc" \
    --incident-dir="$work/incidents" --incident-before=2s --incident-after=2s \
    --state-dir="$work/state" >"$work/run.out" 2>"$work/daemon.log" &
  daemon=$!
  pids=("$daemon")
  addr=""
  for _ in $(seq 1 100); do
    addr=$(sed -n 's/.*msg="serving metrics" address=\([^ ]*\).*/\1/p' "$work/daemon.log" | head -n1)
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || { echo "run $run: the demo did not start"; cat "$work/daemon.log"; exit 1; }
  python3 - "$work/spans.jsonl" <<'PY'
import json, sys, time
now = time.time_ns()
with open(sys.argv[1], "w") as f:
    for i in range(500):
        f.write(json.dumps({"trace_id": "%032x" % (0xfeed0000 + i), "span_id": "%016x" % (i + 1),
                            "name": "decode", "kind": "decode_step",
                            "start_unix_nano": now - 30_000_000, "end_unix_nano": now}) + "\n")
PY
  end=$((SECONDS + seconds))
  (while [ $SECONDS -lt $end ]; do curl -s -o /dev/null --max-time 2 "http://$addr/metrics" || true; sleep 0.05; done) &
  pids+=($!)
  (while [ $SECONDS -lt $end ]; do "$build/fabricscope" --server="127.0.0.1:$grpc" correlate --since 1m >/dev/null 2>&1 || true; sleep 0.2; done) &
  pids+=($!)
  (while [ $SECONDS -lt $end ]; do "$build/fabricscope" --server="127.0.0.1:$grpc" push <"$work/spans.jsonl" >/dev/null 2>&1 || true; sleep 0.1; done) &
  pids+=($!)
  python3 "$src/tests/tools/scrape_fault_client.py" trickle "$addr" 200 "$((seconds + 5))" >/dev/null 2>&1 &
  pids+=($!)
  sleep "$seconds"
  t0=$(date +%s%N)
  kill -TERM "$daemon"
  while kill -0 "$daemon" 2>/dev/null; do
    sleep 0.01
    [ $(( $(date +%s%N) - t0 )) -lt 60000000000 ] || { echo "run $run: still running 60 s after SIGTERM"; exit 1; }
  done
  t1=$(date +%s%N)
  rc=0
  wait "$daemon" || rc=$?
  echo "run $run: exit $rc $(((t1 - t0) / 1000000)) ms after SIGTERM; $(grep -o 'msg=stopped.*' "$work/daemon.log")"
  cleanup
  wait 2>/dev/null || true
  rm -rf "$work"
done
