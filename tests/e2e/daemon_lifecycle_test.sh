#!/usr/bin/env bash
# The daemon starts, serves valid /metrics, reloads on SIGHUP (keeping the old
# config when the new one is invalid), exits 0 on SIGTERM within 2 s, and
# rejects bad flags and config with a message that names the key.
source "$(dirname "$0")/lib.sh"

# (Output captured first: `cmd | grep -q` fails under pipefail when grep exits
# before cmd has written everything and cmd dies of SIGPIPE.)
"$DAEMON" --help >"$WORK/help.txt"
grep -q -- "--sysfs-root=DIR" "$WORK/help.txt" || fail "--help lacks --sysfs-root"
"$DAEMON" --version >"$WORK/version.txt"
grep -q "fabricscoped " "$WORK/version.txt" || fail "--version"

expect_startup_error() {
  local want="$1"; shift
  local rc=0
  "$DAEMON" "${ROOT_ARGS[@]}" "$@" >/dev/null 2>"$WORK/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "daemon accepted $*"
  grep -q -- "$want" "$WORK/err" || fail "error for $* does not mention '$want': $(cat "$WORK/err")"
}
expect_startup_error 'invalid value "often" for flag --hot-interval: ' --hot-interval=often
expect_startup_error "debug, info, warn, error" --log-level=chatty
expect_startup_error "no-such-flag" --no-such-flag=1
expect_startup_error "collectors" --metrics-listen=127.0.0.1:0 --collectors=nonesuch
printf 'slow-interval = eventually\n' >"$WORK/bad.conf"
expect_startup_error 'bad.conf:1: invalid value "eventually" for slow-interval: ' --config="$WORK/bad.conf"

# Startup tells the truth: a --sysfs-root without class/infiniband and
# class/net is one warning naming both (the daemon keeps running), and a
# --state-dir that does not exist yet is created, mode 0700.
start_daemon --sysfs-root="$WORK/nonexistent" --state-dir="$WORK/state/new" --collectors=rdma_sysfs
[ "$(grep -c 'has no class/infiniband and no class/net' "$WORK/daemon.log")" = 1 ] ||
  fail "no single sysfs-root warning: $(cat "$WORK/daemon.log")"
[ "$(stat -c %a "$WORK/state/new")" = 700 ] || fail "--state-dir not created 0700"
stop_daemon

mkdir -p "$WORK/sys"
printf 'log-level = info\nsysfs-root = %s\n' "$WORK/sys" >"$WORK/good.conf"
start_daemon --config="$WORK/good.conf"

scrape >"$WORK/m1" || fail "scrape failed"
promtool_check "$WORK/m1"
grep -q '^fabricscope_build_info{.*version="[0-9.]*".*} 1$' "$WORK/m1" || fail "no build_info"
grep -q '^fabricscope_start_time_seconds [0-9.e+]*$' "$WORK/m1" || fail "no start_time"

# A valid reload.
printf 'log-level = debug\nsysfs-root = %s\n' "$WORK/sys" >"$WORK/good.conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 $(tries 50)); do grep -q 'msg="config reloaded"' "$WORK/daemon.log" && break; sleep 0.1; done
grep -q 'msg="config reloaded"' "$WORK/daemon.log" || fail "no reload logged"
scrape >"$WORK/m2"
[ "$(metric_value 'fabricscope_config_reloads_total{result="success"}' "$WORK/m2")" = "1" ] || fail "reload success not counted"

# An invalid reload keeps the daemon running on the old config.
printf 'log-level = shouting\n' >"$WORK/good.conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 $(tries 50)); do grep -q 'msg="config reload failed' "$WORK/daemon.log" && break; sleep 0.1; done
grep -q 'msg="config reload failed' "$WORK/daemon.log" || fail "failed reload not logged"
grep 'config reload failed' "$WORK/daemon.log" | grep -q "log-level" || fail "reload error does not name the key"
scrape >"$WORK/m3" || fail "daemon died after a bad reload"
[ "$(metric_value 'fabricscope_config_reloads_total{result="failure"}' "$WORK/m3")" = "1" ] || fail "reload failure not counted"

stop_daemon
grep -q 'msg=stopped' "$WORK/daemon.log" || fail "no clean stop logged"

# The CLI against an address where no daemon listens says what to check next.
port=$(free_port)
if "$BIN/fabricscope" ports --server "127.0.0.1:$port" >"$WORK/cli.out" 2>"$WORK/cli.err"; then
  fail "the CLI succeeded without a daemon"
fi
grep -q "is fabricscoped running and serving gRPC on 127.0.0.1:$port?" "$WORK/cli.err" ||
  fail "no next step after a refused connection: $(cat "$WORK/cli.err")"
grep -q -- '--server HOST:PORT' "$WORK/cli.err" || fail "the hint does not name --server"
echo "PASS"
