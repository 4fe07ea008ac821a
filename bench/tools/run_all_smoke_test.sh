#!/usr/bin/env bash
# CI smoke of bench/run_all (issue 9): runs every part once (--smoke, a few
# seconds) against this build directory's binaries, so that the harness cannot
# rot. Asserts only that every part ran and produced numbers — never a timing.
set -euo pipefail

SRC="${FABRICSCOPE_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${FABRICSCOPE_BINARY_DIR:-$SRC/build/release}"
WORK="$(mktemp -d /tmp/fabricscope-bench-smoke.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

fail() {
  echo "FAIL: $*" >&2
  [ -f "$WORK/out" ] && cat "$WORK/out" >&2
  exit 1
}

# The README must not change in smoke mode.
before=$(sha256sum "$SRC/bench/README.md")
timeout 120 "$SRC/bench/run_all" --smoke --build-dir="$BIN" --json="$WORK/res.json" \
  >"$WORK/out" 2>&1 || fail "bench/run_all --smoke exited $?"
[ "$(sha256sum "$SRC/bench/README.md")" = "$before" ] || fail "--smoke rewrote bench/README.md"

# Every part present, no errors, every figure a finite number (>= 0; CPU per
# unit of work > 0 where the work was certainly done).
python3 - "$WORK/res.json" <<'PY' || fail "results incomplete"
import json, math, sys
r = json.load(open(sys.argv[1]))
bad = []
def num(path, positive=False):
    v = r
    for k in path.split("."):
        if not isinstance(v, dict) or k not in v:
            bad.append(path + " missing"); return
        v = v[k]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
        bad.append("%s = %r is not a number >= 0" % (path, v))
    elif positive and v <= 0:
        bad.append("%s = %r is not > 0" % (path, v))
if r.get("errors"):
    bad.append("errors: %r" % r["errors"])
for p in ["sweep.fs_cpu_s_per_sweep", "sweep.fs_sched_s_per_sweep", "sweep.ne_cpu_s_per_scrape",
          "sweep.ratio", "sweep.fs_poll_wall_s_per_sweep", "steady.cpu_pct",
          "steady.store_mib", "scrape.fs.cpu_s_per_scrape", "scrape.ne.cpu_s_per_scrape"]:
    num(p)
for p in ["sweep.ne_sched_s_per_scrape", "steady.rss_mib", "steady.ticks_hot",
          "scrape.fs.latency_p50_s", "scrape.ne.latency_p50_s", "scrape.fs.samples",
          "scrape.ne.samples", "ingest.native_spans_per_cpu_s", "ingest.otlp_spans_per_cpu_s",
          "ingest.correlate_p50_us", "ingest.correlate_p99_us", "ingest.correlate1000_p50_us",
          "ingest.correlate1000_p99_us", "store.append_ns_per_sample", "store.bytes_per_sample",
          "restore.wall_s", "restore.cpu_s", "restore.snapshot_mib", "restore.samples"]:
    num(p, positive=True)
if r.get("sweep", {}).get("counter_files") != 16 * 49:
    bad.append("sweep.counter_files = %r, want 784" % r.get("sweep", {}).get("counter_files"))
# The hot tier's files: the 12 default hot counters of each of the 16 ports.
if r.get("steady", {}).get("hot_files") != 16 * 12:
    bad.append("steady.hot_files = %r, want 192" % r.get("steady", {}).get("hot_files"))
if bad:
    print("\n".join(bad)); sys.exit(1)
PY

# The printed table has a row for every part.
for row in '| 1 |' '| 1c |' '| 1d |' '| 1e |' '| 2 |' '| 2b |' '| 2c |' '| 3 |' '| 3b |' '| 4 |' '| 4b |' '| 4c |' '| 4d |' '| 5 |' '| 5b |' '| 6 |'; do
  grep -qF "$row" "$WORK/out" || fail "table row '$row' missing"
done
grep -q 'Load average' "$WORK/out" || fail "load average not printed"
echo "PASS"
