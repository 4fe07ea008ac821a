#!/usr/bin/env bash
# Least privilege (issue #10 item 4): started as root, the daemon refuses to
# run unless --allow-root or --user; with --user=nobody it binds, switches to
# uid 65534 with no capabilities, and still reads the counters and serves
# /metrics; an unknown user is a startup error; configured paths the user
# cannot read or write are named at start. gRPC listens on loopback by
# default. Run as non-root, the daemon simply starts.
source "$(dirname "$0")/lib.sh"
FIX="$SRC/tests/fixtures/sysfs/root"
# A world-readable copy of the fixture tree (the checkout may be private).
cp -rL "$FIX" "$WORK/root" 2>/dev/null || cp -r "$FIX" "$WORK/root"
chmod -R a+rX "$WORK"

"$DAEMON" --help >"$WORK/help.txt"  # captured: no SIGPIPE race with grep -q under pipefail
grep -q -- '--grpc-listen=HOST:PORT' "$WORK/help.txt" || fail "--help lacks --grpc-listen"
grep -A3 -- '--grpc-listen=HOST:PORT' "$WORK/help.txt" | grep -q '(default: 127.0.0.1:' ||
  fail "gRPC does not listen on loopback by default"

if [ "$(id -u)" -ne 0 ]; then
  "$DAEMON" --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 --sysfs-root="$WORK/root" \
    >/dev/null 2>"$WORK/daemon.log" &
  pid=$!
  PIDS+=("$pid")
  sleep 1
  kill -0 "$pid" || fail "an unprivileged daemon did not start"
  echo "PASS (not root: the root policy cannot be exercised here)"
  exit 0
fi

# Root without --allow-root or --user: refused, exit 2, the message says what to do.
rc=0
"$DAEMON" --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 --sysfs-root="$WORK/root" \
  >/dev/null 2>"$WORK/refused.err" || rc=$?
[ "$rc" = 2 ] || fail "root without --allow-root: exit $rc, want 2"
grep -q "refusing to run as root" "$WORK/refused.err" || fail "no refusal message: $(cat "$WORK/refused.err")"
grep -q -- "--user=NAME" "$WORK/refused.err" || fail "refusal does not name --user"

# An unknown user: a startup error that names it.
rc=0
"$DAEMON" --user=no-such-user-fs --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 \
  --sysfs-root="$WORK/root" >/dev/null 2>"$WORK/nouser.err" || rc=$?
[ "$rc" = 1 ] || fail "unknown user: exit $rc, want 1"
grep -q "no such user 'no-such-user-fs'" "$WORK/nouser.err" || fail "unknown user not named: $(cat "$WORK/nouser.err")"

# --user=nobody: bound as root, then uid/gid 65534, no capabilities, still polling.
"$DAEMON" --user=nobody --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 \
  --sysfs-root="$WORK/root" --collectors=rdma_sysfs >"$WORK/daemon.out" 2>"$WORK/daemon.log" &
DAEMON_PID=$!
PIDS+=("$DAEMON_PID")
wait_log 'msg="switched user" user=nobody uid=65534' "no switch logged: $(cat "$WORK/daemon.log")"
read -r _ ruid euid suid fsuid < <(grep '^Uid:' "/proc/$DAEMON_PID/status")
[ "$ruid $euid $suid $fsuid" = "65534 65534 65534 65534" ] || fail "uids after the switch: $ruid $euid $suid $fsuid"
[ "$(awk '/^CapEff:/ {print $2}' "/proc/$DAEMON_PID/status")" = 0000000000000000 ] || fail "capabilities left"
[ "$(awk '/^CapPrm:/ {print $2}' "/proc/$DAEMON_PID/status")" = 0000000000000000 ] || fail "permitted capabilities left"
[ "$(awk '/^NoNewPrivs:/ {print $2}' "/proc/$DAEMON_PID/status")" = 1 ] || fail "no_new_privs not set"
# Every thread switched (glibc applies setuid to all threads).
for t in /proc/"$DAEMON_PID"/task/*; do
  [ "$(awk '/^Uid:/ {print $3}' "$t/status")" = 65534 ] || fail "thread $t still has euid $(awk '/^Uid:/ {print $3}' "$t/status")"
done
METRICS_ADDR=$(sed -n 's/.*msg="serving metrics" address=\([^ ]*\).*/\1/p' "$WORK/daemon.log" | head -n1)
for _ in $(seq 1 $(tries 50)); do
  scrape >"$WORK/m" 2>/dev/null && grep -q '^fabricscope_port_bytes_total{device="mlx5_0"' "$WORK/m" && break
  sleep 0.1
done
grep -q '^fabricscope_port_bytes_total{device="mlx5_0"' "$WORK/m" || fail "no counters read as nobody"
denied=$(awk '/^fabricscope_collector_errors_total\{.*code="permission_denied"/ { s += $NF } END { print s + 0 }' "$WORK/m")
[ "$denied" = 0 ] || fail "$denied permission errors as nobody"
stop_daemon

# Paths the switched user cannot use (issue #38): named at start, with the
# option, the path and the user; the daemon runs on (the state dir is fatal:
# e2e_state). A 0700 directory stands for a checkout under root's home.
mkdir -m 0700 "$WORK/private"
cp "$SRC/tests/fixtures/hwloc/32em64t-2n8c2t-pci-normalio.xml" "$WORK/private/hwloc.xml"
printf 'host=* netdev=eth2 system=leaf01 port=Ethernet1/1\n' >"$WORK/private/topology"
: >"$WORK/daemon.log"
"$DAEMON" --user=nobody --metrics-listen=127.0.0.1:0 --grpc-listen=127.0.0.1:0 \
  --sysfs-root="$WORK/root" --collectors=rdma_sysfs,topology --lldpd-socket= \
  --hwloc-xml="$WORK/private/hwloc.xml" --topology-file="$WORK/private/topology" \
  --incident-dir="$WORK/private/incidents" >/dev/null 2>"$WORK/daemon.log" &
DAEMON_PID=$!
PIDS+=("$DAEMON_PID")
wait_metrics_addr "daemon exited with unreadable paths:"
for _ in $(seq 1 $(tries 50)); do
  [ "$(grep -c 'level=error component=daemon' "$WORK/daemon.log")" -ge 3 ] && break
  sleep 0.05
done
for want in "--hwloc-xml $WORK/private/hwloc.xml is not readable (Permission denied)" \
  "--topology-file $WORK/private/topology is not readable (Permission denied)" \
  "--incident-dir $WORK/private/incidents is not writable (Permission denied)"; do
  grep 'level=error component=daemon' "$WORK/daemon.log" | grep -F -- "$want" | grep -q 'the daemon runs as nobody (uid 65534), set by --user' ||
    fail "no start-up error naming '$want' and the user: $(grep level=error "$WORK/daemon.log")"
done
kill -0 "$DAEMON_PID" || fail "the daemon stopped over unreadable paths"
stop_daemon

# --allow-root: stays root.
start_daemon --sysfs-root="$WORK/root" --collectors=rdma_sysfs
[ "$(awk '/^Uid:/ {print $3}' "/proc/$DAEMON_PID/status")" = 0 ] || fail "--allow-root did not stay root"
stop_daemon
echo PASS
