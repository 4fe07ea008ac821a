#!/usr/bin/env bash
# The README's run command from a checkout the daemon's user cannot read
# (issue #38): root clones into /root (mode 0700) and runs tools/run.sh; the
# daemon switches to `nobody` once listening and then reads the demo's hwloc
# XML, which must therefore not be read from the checkout. Here the checkout
# is a copy of tools/run.sh, the hwloc fixture and the three binaries in a
# fresh 0700 directory; the demo must serve the captured machine's GPUs
# (fabricscope_gpu_info from the hwloc XML) and log no error (the start-up
# path check names any path `nobody` cannot read, at level=error).
# Needs root and a `nobody` user (skipped otherwise, with the reason).
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root (run.sh switches to nobody only when started as root)"
id nobody >/dev/null 2>&1 || skip "needs a 'nobody' user"

PRIV="$WORK/home"
mkdir -m 0700 "$PRIV"
CHECKOUT="$PRIV/project"
mkdir -p "$CHECKOUT/tools" "$CHECKOUT/tests/fixtures/hwloc" "$CHECKOUT/build/release"
cp "$SRC/tools/run.sh" "$CHECKOUT/tools/"
cp "$SRC"/tests/fixtures/hwloc/*.xml "$CHECKOUT/tests/fixtures/hwloc/"
for b in fabricscoped fabricsim fabricscope; do cp "$BIN/$b" "$CHECKOUT/build/release/"; done
# The premise: nobody cannot read anything in there.
if su -s /bin/sh nobody -c "test -r '$CHECKOUT/tools/run.sh'" 2>/dev/null; then
  fail "nobody can read $CHECKOUT: the test's premise does not hold"
fi

GRPC_PORT=$(free_port)
FABRICSCOPE_BINARY_DIR="$CHECKOUT/build/release" "$CHECKOUT/tools/run.sh" --demo=on \
  --metrics-listen=127.0.0.1:0 --grpc-listen="127.0.0.1:$GRPC_PORT" \
  >"$WORK/run.out" 2>"$WORK/daemon.log" &
DAEMON_PID=$!
PIDS+=("$DAEMON_PID")
wait_metrics_addr "demo exited during startup:"
wait_log 'msg="switched user" user=nobody' "the daemon did not switch to nobody"

# The topology collector reads the hwloc XML at start (config tier).
for _ in $(seq 1 $(tries 100)); do
  curl -sf --max-time 5 "http://$METRICS_ADDR/metrics" >"$WORK/m" || fail "scrape failed"
  grep -q '^fabricscope_gpu_info{' "$WORK/m" && break
  sleep 0.1
done
GPUS=$(grep -c '^fabricscope_gpu_info{' "$WORK/m" || true)
[ "$GPUS" -ge 1 ] || fail "no fabricscope_gpu_info: the hwloc XML was not read as nobody"
if grep -E 'level=error|Permission denied' "$WORK/daemon.log"; then
  fail "the demo from a private checkout logged errors"
fi
echo "demo from a 0700 checkout: $GPUS GPUs from the hwloc XML, no error logged"
stop_daemon
echo "PASS"
