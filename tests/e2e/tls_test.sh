#!/usr/bin/env bash
# Transport security (issue #10 item 4): the gRPC server with TLS and mutual
# TLS; /metrics with basic auth (plain HTTP: Debian 12's civetweb cannot serve
# TLS with OpenSSL 3, see exporters/prometheus_exporter.h). Certificates are made here with
# openssl (a throwaway CA, a server certificate for 127.0.0.1, a client
# certificate) and never leave $WORK.
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
printf '# scrapers\nprometheus:s3cret-pass\n' >auth.txt
mkdir -p sys

start_daemon --sysfs-root="$WORK/sys" --grpc-tls-cert=server.pem --grpc-tls-key=server.key \
  --grpc-tls-client-ca=ca.pem --metrics-auth-file=auth.txt
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

# /metrics: basic auth; the probes stay open (no credentials).
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" || true; }
[ "$(code -u prometheus:s3cret-pass "http://$METRICS_ADDR/metrics")" = 200 ] ||
  fail "scrape with the right credentials failed"
curl -sf --max-time 5 -u prometheus:s3cret-pass "http://$METRICS_ADDR/metrics" >m.txt
grep -q '^fabricscope_ingest_spans_total{.*result="accepted"} 1' m.txt ||
  fail "the TLS push was not counted: $(grep ingest_spans m.txt)"
[ "$(code "http://$METRICS_ADDR/metrics")" = 401 ] || fail "scrape without credentials not 401"
[ "$(code -u prometheus:wrong "http://$METRICS_ADDR/metrics")" = 401 ] ||
  fail "scrape with a wrong password not 401"
[ "$(code -u prometheus:s3cret-pas "http://$METRICS_ADDR/metrics")" = 401 ] ||
  fail "scrape with a password prefix not 401"
[ "$(code "http://$METRICS_ADDR/healthz")" = 200 ] || fail "/healthz (no credentials) not 200"
stop_daemon

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
echo PASS
