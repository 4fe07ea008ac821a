#!/usr/bin/env bash
# Golden end-to-end test of the rdma_sysfs collector: the real daemon on the
# fixture tree (tests/fixtures/sysfs/root), metrics on a free loopback port,
# scraped once every tier (slow and config included) has polled; the scrape
# passes `promtool check metrics` and its rdma_sysfs part equals
# tests/golden/rdma_sysfs.metrics. That part is every family the collector
# feeds (port_info, port/IB/ECN/CNP/RDMA/discard counters, ib_pma_saturated,
# series_resets_total, collector_errors_total); volatile lines (durations,
# ticks, overruns, start time, build revision, store sizes, HTTP requests) and the
# daemon-wide self-metrics of other components are left out, so that a new
# metric elsewhere does not change this file.
#
#   tests/e2e/rdma_sysfs_golden_test.sh            compare
#   tests/e2e/rdma_sysfs_golden_test.sh --update   rewrite the expected file
source "$(dirname "$0")/lib.sh"


GOLDEN="$SRC/tests/golden/rdma_sysfs.metrics"
UPDATE=0
[ "${1:-}" = "--update" ] && UPDATE=1

start_daemon --sysfs-root="$SRC/tests/fixtures/sysfs/root" --collectors=rdma_sysfs \
  --hot-interval=20ms --medium-interval=50ms --slow-interval=100ms --config-interval=200ms

# Wait (bounded) until two slow and two config ticks have completed: every
# counter file has been read at least once and unsupported files were asked once.
ready=0
for _ in $(seq 1 $(tries 100)); do
  if scrape >"$WORK/scrape" 2>/dev/null; then
    slow=$(metric_value 'fabricscope_scheduler_ticks_total{tier="slow"}' "$WORK/scrape")
    cfg=$(metric_value 'fabricscope_scheduler_ticks_total{tier="config"}' "$WORK/scrape")
    if awk -v s="${slow:-0}" -v c="${cfg:-0}" 'BEGIN { exit !(s >= 2 && c >= 2) }'; then
      ready=1
      break
    fi
  fi
  sleep 0.1
done
[ "$ready" -eq 1 ] || fail "no slow/config tick within 10 s"
scrape >"$WORK/scrape" || fail "scrape failed"
promtool_check "$WORK/scrape"

ours='^(# (HELP|TYPE) )?fabricscope_(port_info|port_[a-z_]+_total|ib_port_[a-z_]+_total|ecn_[a-z_]+_total|cnp_[a-z_]+_total|rdma_[a-z_]+_total|discards_total|ib_pma_saturated|series_resets_total|collector_errors_total)[ {]'
volatile='^(# (HELP|TYPE) )?(fabricscope_collector_poll_duration_seconds|fabricscope_rdma_sysfs_cached_reads_total|fabricscope_scheduler_ticks_total|fabricscope_scheduler_overruns_total|fabricscope_start_time_seconds|fabricscope_build_info|fabricscope_store_|fabricscope_http_requests_total)'
grep -E "$ours" "$WORK/scrape" | grep -Ev "$volatile" >"$WORK/actual" || true
grep -q '^fabricscope_port_info{' "$WORK/actual" || fail "no fabricscope_port_info in the scrape"

if [ "$UPDATE" -eq 1 ]; then
  cp "$WORK/actual" "$GOLDEN"
  stop_daemon
  echo "updated $GOLDEN ($(wc -l <"$GOLDEN") lines)"
  exit 0
fi
[ -f "$GOLDEN" ] || fail "missing $GOLDEN (run $0 --update)"
if ! diff -u "$GOLDEN" "$WORK/actual" >"$WORK/diff"; then
  head -n 80 "$WORK/diff" >&2
  fail "scrape differs from $GOLDEN (if the change is intended: $0 --update)"
fi
stop_daemon
echo "PASS"
