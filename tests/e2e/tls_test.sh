#!/usr/bin/env bash
# Transport security (issue #10 item 4, issue #17 items 3-4): the gRPC server
# with TLS and mutual TLS; /metrics over HTTPS with client certificates and
# bcrypt basic auth from the exporter-toolkit web config file
# (--web.config.file), scraped by a real Prometheus; the file's SIGHUP reload
# and its errors. Certificates are made here with openssl (a throwaway CA, a
# server certificate for 127.0.0.1, a client certificate) and never leave
# $WORK.
source "$(dirname "$0")/lib.sh"
CLI="$BIN/fabricscope"
command -v openssl >/dev/null || fail "openssl missing (deploy/bootstrap.sh installs it)"
cd "$WORK"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=fabricscope test CA" \
  -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
  -extfile san.ext -out server.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=client" -keyout client.key -out client.csr 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -out client.pem 2>/dev/null
# A client certificate from another CA must be refused.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=rogue" -keyout rogue.key -out rogue.pem 2>/dev/null
command -v prometheus >/dev/null || fail "prometheus not installed (deploy/bootstrap.sh)"
# The bcrypt hash ($2y$, cost 5) of "s3cret-pass", made with libcrypt's
# crypt(3) as `htpasswd -nbBC 5 prometheus s3cret-pass` would.
HASH='$2y$05$fabricscopeTestSalt01uPLrAeDqeM8hDEgMF93zT1O8fde0LIVO'
cat >web.yml <<YML
tls_server_config:
  cert_file: server.pem   # relative: to this file's directory
  key_file: $WORK/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.pem
  min_version: TLS12
http_server_config:
  headers:
    X-Content-Type-Options: nosniff
basic_auth_users:
  prometheus: $HASH
YML
mkdir -p sys

start_daemon --sysfs-root="$WORK/sys" --grpc-tls-cert=server.pem --grpc-tls-key=server.key \
  --grpc-tls-client-ca=ca.pem --web.config.file="$WORK/web.yml"
grep -q 'msg="serving metrics" .*scheme=https' "$WORK/daemon.log" ||
  fail "metrics not served over https: $(grep 'serving metrics' "$WORK/daemon.log")"
GRPC_ADDR=$(sed -n 's/.*msg="serving grpc" address=\([^ ]*\).*/\1/p' "$WORK/daemon.log" | head -n1)

# gRPC: mutual TLS works; plain text, TLS without a client certificate and a
# certificate from another CA are refused.
"$CLI" --server="$GRPC_ADDR" --tls-ca=ca.pem --tls-cert=client.pem --tls-key=client.key ports \
  >ports.txt 2>ports.err || fail "mutual TLS query failed: $(cat ports.err)"
grep -q "no RDMA ports" ports.txt || fail "unexpected ports output: $(cat ports.txt)"
timeout 20 "$CLI" --server="$GRPC_ADDR" ports >/dev/null 2>&1 && fail "plain-text client accepted"
timeout 20 "$CLI" --server="$GRPC_ADDR" --tls-ca=ca.pem ports >/dev/null 2>&1 &&
  fail "TLS client without a certificate accepted by a mutual-TLS server"
timeout 20 "$CLI" --server="$GRPC_ADDR" --tls-ca=ca.pem --tls-cert=rogue.pem --tls-key=rogue.key ports \
  >/dev/null 2>&1 && fail "client certificate from another CA accepted"
# Spans over mutual TLS reach the ingest service too.
printf '{"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","name":"decode_step","start_unix_nano":%s,"end_unix_nano":%s}\n' \
  "$(($(date +%s) * 1000000000))" "$(($(date +%s) * 1000000000 + 1000000))" |
  "$CLI" --server="$GRPC_ADDR" --tls-ca=ca.pem --tls-cert=client.pem --tls-key=client.key push \
  >push.txt 2>&1 || fail "push over mutual TLS failed: $(cat push.txt)"
grep -q "accepted 1" push.txt || fail "push: $(cat push.txt)"

# /metrics over HTTPS: a client certificate from the CA and the bcrypt
# password are both needed; the probes need the certificate, no password.
M="https://$METRICS_ADDR"
TLS=(--cacert ca.pem --cert client.pem --key client.key)
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" || true; }
[ "$(code "${TLS[@]}" -u prometheus:s3cret-pass "$M/metrics")" = 200 ] ||
  fail "scrape with certificate and password failed"
curl -sf --max-time 5 "${TLS[@]}" -u prometheus:s3cret-pass -D headers.txt "$M/metrics" >m.txt
grep -q '^fabricscope_ingest_spans_total{.*result="accepted"} 1' m.txt ||
  fail "the TLS push was not counted: $(grep ingest_spans m.txt)"
grep -qi '^X-Content-Type-Options: nosniff' headers.txt || fail "configured header missing: $(cat headers.txt)"
[ "$(code "${TLS[@]}" "$M/metrics")" = 401 ] || fail "scrape without credentials not 401"
[ "$(code "${TLS[@]}" -u prometheus:wrong "$M/metrics")" = 401 ] || fail "wrong password not 401"
[ "$(code "${TLS[@]}" -u prometheus:s3cret-pas "$M/metrics")" = 401 ] || fail "password prefix not 401"
[ "$(code "${TLS[@]}" -u nobody:s3cret-pass "$M/metrics")" = 401 ] || fail "unknown user not 401"
[ "$(code "${TLS[@]}" "$M/healthz")" = 200 ] || fail "/healthz (certificate, no password) not 200"
# Without a client certificate, with one from another CA, and in plain HTTP:
# no answer at all (the TLS handshake fails).
for args in "--cacert ca.pem" "--cacert ca.pem --cert rogue.pem --key rogue.key"; do
  # shellcheck disable=SC2086
  c=$(code $args -u prometheus:s3cret-pass "$M/metrics")
  [ "$c" = 000 ] || fail "curl $args: got HTTP $c, want the connection refused"
done
[ "$(code "http://$METRICS_ADDR/metrics")" = 000 ] || fail "plain HTTP answered on the TLS port"

# A real Prometheus scrapes it over HTTPS with the client certificate and the
# password.
PROM_PORT=$(free_port)
mkdir -p prom-data
cat >prometheus.yml <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: fabricscope
    scheme: https
    tls_config: {ca_file: $WORK/ca.pem, cert_file: $WORK/client.pem, key_file: $WORK/client.key}
    basic_auth: {username: prometheus, password: s3cret-pass}
    static_configs:
      - targets: ['$METRICS_ADDR']
YML
prometheus --config.file=prometheus.yml --storage.tsdb.path=prom-data \
  --web.listen-address="127.0.0.1:$PROM_PORT" >prometheus.log 2>&1 &
PROM_PID=$!
PIDS+=("$PROM_PID")
targets=""
for _ in $(seq 1 $(tries 60)); do
  kill -0 "$PROM_PID" 2>/dev/null || fail "prometheus exited: $(tail -n 5 prometheus.log)"
  targets=$(curl -sf --max-time 3 "http://127.0.0.1:$PROM_PORT/api/v1/targets" 2>/dev/null || true)
  grep -q '"health":"up"' <<<"$targets" && break
  sleep 0.5
done
grep -q '"health":"up"' <<<"$targets" || fail "prometheus target not up over HTTPS: $targets"
curl -sf --max-time 3 --data-urlencode 'query=fabricscope_store_series' \
  "http://127.0.0.1:$PROM_PORT/api/v1/query" | grep -q '"__name__":"fabricscope_store_series"' ||
  fail "prometheus has no fabricscope series from the HTTPS scrape"
kill -TERM "$PROM_PID"
wait "$PROM_PID" 2>/dev/null || true
echo "ok: prometheus scraped /metrics over HTTPS with a client certificate and basic auth"

# SIGHUP: a malformed file keeps the running settings (counted); a good one
# takes effect (here: plain HTTP, another user) on the same port.
reloads() {
  sed -n "s/^fabricscope_web_config_reloads_total{result=\"$1\"} //p" "$2"
}
printf 'tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_typo: x\n' >web.yml
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 $(tries 50)); do
  grep -q 'web config reload failed' "$WORK/daemon.log" && break
  sleep 0.1
done
grep 'web config reload failed' "$WORK/daemon.log" | grep -q 'tls_server_config.client_auth_typo: unknown key' ||
  fail "bad web config reload not logged with the key: $(grep 'web config' "$WORK/daemon.log")"
curl -sf --max-time 5 "${TLS[@]}" -u prometheus:s3cret-pass "$M/metrics" >m2.txt ||
  fail "old settings lost after a bad reload"
[ "$(reloads failure m2.txt)" = 1 ] || fail "failed reload not counted: $(grep web_config_reloads m2.txt)"
printf 'basic_auth_users:\n  scraper: %s\n' "$HASH" >web.yml
kill -HUP "$DAEMON_PID"
c=""
for _ in $(seq 1 $(tries 50)); do
  c=$(code -u scraper:s3cret-pass "http://$METRICS_ADDR/metrics")
  [ "$c" = 200 ] && break
  sleep 0.1
done
[ "$c" = 200 ] || fail "reloaded web config (plain HTTP, user scraper) not in effect: $c"
[ "$(code -u prometheus:s3cret-pass "http://$METRICS_ADDR/metrics")" = 401 ] ||
  fail "removed user still accepted"
stop_daemon

# The deprecated --metrics-auth-file still works for this release (plain
# HTTP, plain passwords), with a warning; it cannot be combined with the file.
printf '# scrapers\nprometheus:s3cret-pass\n' >auth.txt
start_daemon --sysfs-root="$WORK/sys" --metrics-auth-file=auth.txt
[ "$(code -u prometheus:s3cret-pass "http://$METRICS_ADDR/metrics")" = 200 ] ||
  fail "deprecated auth file: right password refused"
[ "$(code -u prometheus:wrong "http://$METRICS_ADDR/metrics")" = 401 ] ||
  fail "deprecated auth file: wrong password not 401"
grep -q 'metrics-auth-file is deprecated' "$WORK/daemon.log" || fail "no deprecation warning"
stop_daemon
rc=0
"$DAEMON" "${ROOT_ARGS[@]}" --sysfs-root="$WORK/sys" --metrics-listen=127.0.0.1:0 \
  --grpc-listen=127.0.0.1:0 --metrics-auth-file=auth.txt --web.config.file=web.yml >/dev/null 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "cannot be combined" err.txt || fail "auth file + web config: rc=$rc $(cat err.txt)"

# Bad security config is a startup error that names the option.
rc=0
"$DAEMON" "${ROOT_ARGS[@]}" --sysfs-root="$WORK/sys" --metrics-listen=127.0.0.1:0 \
  --grpc-listen=127.0.0.1:0 --grpc-tls-cert=server.pem >/dev/null 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "grpc-tls-key" err.txt || fail "cert without key: rc=$rc $(cat err.txt)"
printf 'no-colon-here\n' >badauth.txt
rc=0
"$DAEMON" "${ROOT_ARGS[@]}" --sysfs-root="$WORK/sys" --metrics-listen=127.0.0.1:0 \
  --grpc-listen=127.0.0.1:0 --metrics-auth-file=badauth.txt >/dev/null 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "badauth.txt:1" err.txt || fail "bad auth file: rc=$rc $(cat err.txt)"
# A malformed web config: the error names the key.
printf 'basic_auth_users:\n  prometheus: %s\nhttp_server_config:\n  headerz: {}\n' "$HASH" >bad.yml
rc=0
"$DAEMON" "${ROOT_ARGS[@]}" --sysfs-root="$WORK/sys" --metrics-listen=127.0.0.1:0 \
  --grpc-listen=127.0.0.1:0 --web.config.file=bad.yml >/dev/null 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "http_server_config.headerz: unknown key" err.txt ||
  fail "malformed web config: rc=$rc $(cat err.txt)"
printf 'basic_auth_users:\n  prometheus: s3cret-pass\n' >plain.yml
rc=0
"$DAEMON" "${ROOT_ARGS[@]}" --sysfs-root="$WORK/sys" --metrics-listen=127.0.0.1:0 \
  --grpc-listen=127.0.0.1:0 --web.config.file=plain.yml >/dev/null 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "basic_auth_users.prometheus: expected a bcrypt hash" err.txt ||
  fail "plain-text password in the web config: rc=$rc $(cat err.txt)"
echo PASS
