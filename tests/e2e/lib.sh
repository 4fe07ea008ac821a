# Shared helpers for the end-to-end tests (sourced, not run).
# Every helper is bounded in time; every started process is killed on exit.
set -euo pipefail

SRC="${FABRICSCOPE_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${FABRICSCOPE_BINARY_DIR:-$SRC/build/release}"
DAEMON="$BIN/fabricscoped"
WORK="$(mktemp -d /tmp/fabricscope-e2e.XXXXXX)"
PIDS=()
# The daemon refuses root without --allow-root (tests run as root in CI).
ROOT_ARGS=()
[ "$(id -u)" -eq 0 ] && ROOT_ARGS=(--allow-root)

# Sanitizer builds run the same code several times slower (ASan/UBSan 2-4x at
# -O1, TSan 5-15x) and CI runs two tests at once on 2 cores: tests/CMakeLists.txt
# sets FABRICSCOPE_TEST_SLOWDOWN for them. Every bounded wait loop in the e2e tests
# runs `for _ in $(seq 1 $(tries N))`: N tries in a release build, N x slowdown in
# a sanitizer build. The loops end as soon as their condition holds, so this only
# moves the point where a test gives up, never what it asserts.
SLOWDOWN="${FABRICSCOPE_TEST_SLOWDOWN:-1}"
tries() { echo $(($1 * SLOWDOWN)); }

cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# skip REASON: ends the test as SKIPPED (exit 77: the SKIP_RETURN_CODE that
# tests/CMakeLists.txt gives every script test), with the reason on stdout.
skip() {
  echo "SKIPPED: $*"
  exit 77
}

# require_netns: skips the test unless this environment can create a network
# namespace with a veth pair in it (an unprivileged container, a chroot or a
# user namespace cannot; root on a VM, as in CI, can). Probes by creating one
# and deleting it. FABRICSCOPE_TEST_NO_NETNS=REASON skips without trying (the
# skip path's own test, tests/e2e/netns_skip_test.sh); the unit tests' probe
# (tests/unit/collectors/net_env.h) honours it too.
require_netns() {
  [ -z "${FABRICSCOPE_TEST_NO_NETNS:-}" ] ||
    skip "needs a network namespace: ${FABRICSCOPE_TEST_NO_NETNS} (FABRICSCOPE_TEST_NO_NETNS)"
  command -v ip >/dev/null 2>&1 || skip "needs a network namespace: iproute2's ip is not installed"
  local ns="fsprobe$$" out
  out=$(ip netns add "$ns" 2>&1) ||
    skip "needs a network namespace: cannot create one (ip netns add: $out)"
  if ! out=$(ip -n "$ns" link add fsp0 type veth peer name fsp1 2>&1); then
    ip netns del "$ns" 2>/dev/null || true
    skip "needs a veth pair in a network namespace: cannot create one (ip link add: $out)"
  fi
  ip netns del "$ns" 2>/dev/null || true
}

fail() {
  echo "FAIL: $*" >&2
  if [ -f "$WORK/daemon.log" ]; then echo "--- daemon log (tail) ---" >&2; tail -n 30 "$WORK/daemon.log" >&2; fi
  exit 1
}

# otel_npm_modules: the npm install of tests/e2e/otel/package.json (the real
# OpenTelemetry JS SDK; @grpc/grpc-js and @grpc/proto-loader come with its
# OTLP exporter), cached under the build directory and reinstalled only when
# package.json changes; exports NODE_PATH. Several tests need it and ctest runs
# them in parallel: the install is serialised with flock.
otel_npm_modules() {
  command -v node >/dev/null || fail "node is not installed (deploy/bootstrap.sh installs Node.js)"
  command -v npm >/dev/null || fail "npm is not installed (deploy/bootstrap.sh installs Node.js)"
  local dir="$BIN/otel-e2e" rc=0
  mkdir -p "$dir"
  (
    flock -w 300 9 || { echo "timed out waiting for another test's npm install" >&2; exit 1; }
    if ! cmp -s "$SRC/tests/e2e/otel/package.json" "$dir/package.json" ||
       [ ! -d "$dir/node_modules/@opentelemetry/exporter-trace-otlp-grpc" ] ||
       [ ! -d "$dir/node_modules/@grpc/proto-loader" ]; then
      cp "$SRC/tests/e2e/otel/package.json" "$dir/package.json"
      rm -rf "$dir/node_modules" "$dir/package-lock.json"
      if ! (cd "$dir" && timeout 240 npm install --no-audit --no-fund --loglevel=error \
            >"$WORK/npm.log" 2>&1); then
        rm -f "$dir/package.json"  # retry the install next time
        tail -n 30 "$WORK/npm.log" >&2
        exit 1
      fi
    fi
  ) 9>"$dir.lock" || rc=$?
  [ "$rc" -eq 0 ] || fail "npm install of tests/e2e/otel failed (is the npm registry reachable?)"
  export NODE_PATH="$dir/node_modules"
}

# start_daemon ARGS...: starts fabricscoped with metrics on a free loopback
# port; sets DAEMON_PID and METRICS_ADDR.
start_daemon() {
  "$DAEMON" "${ROOT_ARGS[@]}" --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 "$@" >"$WORK/daemon.out" 2>"$WORK/daemon.log" &
  DAEMON_PID=$!
  PIDS+=("$DAEMON_PID")
  wait_metrics_addr "daemon exited during startup"
}

# wait_metrics_addr WHY: waits (bounded) for the daemon's "serving metrics" log
# line in $WORK/daemon.log and sets METRICS_ADDR; fails with WHY (and
# $WORK/run.out, if any) if DAEMON_PID exits first.
# logged_metrics_addr: the address of the "serving metrics" line in
# $WORK/daemon.log, "" while there is none (the log may not exist yet: the
# daemon's shell opens it after the fork).
logged_metrics_addr() {
  sed -n 's/.*msg="serving metrics" address=\([^ ]*\).*/\1/p' "$WORK/daemon.log" 2>/dev/null | head -n1 || true
}

wait_metrics_addr() {
  METRICS_ADDR=""
  for _ in $(seq 1 $(tries 100)); do
    METRICS_ADDR=$(logged_metrics_addr)
    [ -n "$METRICS_ADDR" ] && break
    kill -0 "$DAEMON_PID" 2>/dev/null || fail "$1 $(cat "$WORK/run.out" 2>/dev/null || true)"
    sleep 0.1
  done
  [ -n "$METRICS_ADDR" ] || fail "daemon did not log its metrics address"
}

# grpc_address: the bound gRPC address from the daemon log (sets GRPC_ADDR), waiting
# (bounded) for the "serving grpc" line.
grpc_address() {
  GRPC_ADDR=""
  for _ in $(seq 1 $(tries 50)); do
    GRPC_ADDR=$(sed -n 's/.*msg="serving grpc" address=\([^ ]*\).*/\1/p' "$WORK/daemon.log" | head -n1)
    [ -n "$GRPC_ADDR" ] && return 0
    sleep 0.1
  done
  fail "daemon did not log its gRPC address"
}

# wait_log PATTERN WHY: waits (bounded) until $WORK/daemon.log has a line
# matching the grep -E PATTERN; fails with WHY if it never comes or DAEMON_PID
# exits first. Lines logged just after "serving metrics" (the user switch,
# discovery) are not there yet when wait_metrics_addr returns.
wait_log() {
  for _ in $(seq 1 $(tries 100)); do
    grep -qE "$1" "$WORK/daemon.log" 2>/dev/null && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.05
  done
  grep -qE "$1" "$WORK/daemon.log" 2>/dev/null || fail "$2"
}

# normalize_scrape SCRAPE VOLATILE [KEEP [COLLECTOR]]: the exposition in a
# form a golden can compare. The exposition's order is not part of the
# contract and not deterministic (the registry creates families on first use,
# on whichever tier thread comes first; prometheus-cpp keeps a family's series
# in a hash map), so families are sorted by name (HELP, TYPE, then the sample
# lines) and their sample lines sorted. Sample lines of families matching the
# regex VOLATILE (may be empty) keep name and labels, the value becomes
# <masked>; so does the revision label of fabricscope_build_info. KEEP (a
# regex, full match of the family name) keeps only those families;
# COLLECTOR keeps only its fabricscope_collector_errors_total series.
normalize_scrape() {
  python3 - "$1" "$2" "${3:-}" "${4:-}" <<'PY'
import re, sys
path, volatile, keep, collector = sys.argv[1:5]
volatile = re.compile(volatile) if volatile else None
keep = re.compile(keep) if keep else None
families = {}  # name -> [help/type lines, sample lines]
current = None
for line in open(path):
    line = line.rstrip("\n")
    if not line:
        continue
    m = re.match(r"# (HELP|TYPE) (\S+)", line)
    if m:
        current = families.setdefault(m.group(2), [[], []])
        current[0].append(line)
        continue
    if line.startswith("#"):
        continue
    if current is None:
        sys.exit("sample line before any HELP/TYPE: " + line)
    if volatile and volatile.match(line):
        line = line[: line.rindex(" ")] + " <masked>"
    line = re.sub(r'^(fabricscope_build_info\{.*revision=")[^"]*"', r'\1<masked>"', line)
    if (collector and line.startswith("fabricscope_collector_errors_total{")
            and 'collector="%s"' % collector not in line):
        continue
    current[1].append(line)
for name in sorted(families):
    if keep and not keep.fullmatch(name):
        continue
    meta, samples = families[name]
    print("\n".join(meta + sorted(samples)))
PY
}

# golden_check ACTUAL GOLDEN: with UPDATE=1 writes GOLDEN from ACTUAL and
# exits 0; else fails, showing the diff, unless they are equal.
golden_check() {
  if [ "${UPDATE:-0}" -eq 1 ]; then
    cp "$1" "$2"
    echo "updated $2 ($(wc -l <"$2") lines)"
    exit 0
  fi
  [ -f "$2" ] || fail "missing $2 (run $0 ${COLLECTOR:-} --update)"
  if ! diff -u "$2" "$1" >"$WORK/diff"; then
    head -n 80 "$WORK/diff" >&2
    fail "scrape differs from $2 (if the change is intended: tools/update-goldens.sh)"
  fi
}

# free_port: a free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_demo [run.sh args...]: the README's quick start on the simulator
# (tools/run.sh --demo=on) with metrics on a free port and gRPC on GRPC_PORT (a
# fixed free port: the simulator pushes spans to it); sets DAEMON_PID,
# METRICS_ADDR, GRPC_PORT. run.sh's output goes to $WORK/run.out, the
# daemon's log to $WORK/daemon.log. The port is free when picked but another
# test running beside this one may bind it before the daemon does: then the
# daemon refuses to start ("grpc-listen: cannot listen"), and the demo is
# started again on another port (3 attempts).
start_demo() {
  local attempt
  for attempt in 1 2 3; do
    GRPC_PORT=$(free_port)
    FABRICSCOPE_BINARY_DIR="$BIN" "$SRC/tools/run.sh" --demo=on \
      --metrics-listen=127.0.0.1:0 --grpc-listen="127.0.0.1:$GRPC_PORT" "$@" \
      >"$WORK/run.out" 2>"$WORK/daemon.log" &
    DAEMON_PID=$!
    PIDS+=("$DAEMON_PID")
    METRICS_ADDR=""
    for _ in $(seq 1 $(tries 100)); do
      METRICS_ADDR=$(logged_metrics_addr)
      [ -n "$METRICS_ADDR" ] && return 0
      kill -0 "$DAEMON_PID" 2>/dev/null || break
      sleep 0.1
    done
    if ! kill -0 "$DAEMON_PID" 2>/dev/null && [ "$attempt" -lt 3 ] &&
      grep -q 'grpc-listen: cannot listen' "$WORK/daemon.log"; then
      echo "note: gRPC port $GRPC_PORT was taken before the daemon bound it; starting again"
      continue
    fi
    wait_metrics_addr "demo exited during startup:"
    return 0
  done
}

# The wall clock in microseconds.
now_us() { local t=$EPOCHREALTIME; echo "${t/[.,]/}"; }

# burst NETDEV MS: a PFC pause burst in a test's fake `ethtool -S` files: for
# MS of wall time, the pause time of NETDEV grows by 80 % of the time passed,
# rewritten about every 20 ms through the test's PAUSE_US array and its
# `put NETDEV`. The pause follows the wall clock, not the loop count: on a
# loaded machine the loop stretches, and a fixed amount per step would dilute
# the pause fraction (seen under ASan: 0.26 over a 3 s "1 s" burst).
burst() {
  local last end now
  last=$(now_us)
  end=$((last + $2 * 1000))
  while [ "$last" -lt "$end" ]; do
    sleep 0.02
    now=$(now_us)
    PAUSE_US[$1]=$((PAUSE_US[$1] + (now - last) * 8 / 10))
    last=$now
    put "$1"
  done
}

scrape() { curl -sf --max-time 5 "http://$METRICS_ADDR/metrics"; }

# metric_value NAME_WITH_LABELS FILE: the value of one exposition line.
# Prints nothing (and succeeds) when the line is absent.
metric_value() { { grep -F "$1 " "$2" || true; } | head -n1 | awk '{print $NF}'; }

# stop_daemon: SIGTERM, must exit 0 within 2 s (x the sanitizer slowdown).
stop_daemon() {
  kill -TERM "$DAEMON_PID"
  for _ in $(seq 1 $(tries 20)); do
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$DAEMON_PID" 2>/dev/null && fail "daemon still running $(tries 2) s after SIGTERM"
  local rc=0
  wait "$DAEMON_PID" || rc=$?
  [ "$rc" -eq 0 ] || fail "daemon exited $rc after SIGTERM"
}

promtool_check() {
  local out
  out=$(promtool check metrics <"$1" 2>&1) || fail "promtool check metrics: $out"
}
