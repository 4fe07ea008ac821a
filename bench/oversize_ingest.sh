#!/usr/bin/env bash
# The daemon's peak memory when a client sends ingest messages far over the
# 16 MiB limit (issue #38 item 3; bench/README.md, "oversized ingest
# messages"). For each size, starts fabricscoped on the fixture tree, sends
# one native Push of that size with bench's oversize_ingest, and prints the
# call's end and the daemon's VmHWM (peak RSS) before and after.
#
#   bench/oversize_ingest.sh [BUILD_DIR] [MIB...]   (default build/release; 8 64 512)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build/release}"
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(8 64 512)
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
cp -a "$src/tests/fixtures/sysfs" "$work/sysfs"
root=(); [ "$(id -u)" -eq 0 ] && root=(--allow-root)
pid=""
hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$pid/status"; }
for mib in "${sizes[@]}"; do  # a fresh daemon for each size
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  : >"$work/log"
  "$build/fabricscoped" "${root[@]}" --sysfs-root="$work/sysfs/root" --collectors=rdma_sysfs \
    --metrics-listen=127.0.0.1:0 --grpc-listen="127.0.0.1:$port" 2>"$work/log" &
  pid=$!
  for _ in $(seq 1 100); do grep -q 'serving grpc' "$work/log" && break; sleep 0.1; done
  sleep 1  # the first sweeps
  before=$(hwm)
  "$build/oversize_ingest" "127.0.0.1:$port" "$mib"
  after=$(hwm)
  echo "  daemon peak RSS ${before} kB -> ${after} kB (+$(((after - before) / 1024)) MiB)"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
