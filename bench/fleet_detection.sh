#!/usr/bin/env bash
# Fleet detection quality: runs tests/e2e/fleet_test.sh (fabricsim 12 hosts on
# leaf-spine:3,2,4, one fabricscoped per host, a real Prometheus with the
# shipped rules) for every fleet scenario and scores the alerts against
# fabricsim's ground truth (bench/fleet_score.py): detection time of each
# alert after the episode started, precision/recall of the named origin,
# congested switch ports and bad links. About 1.5 minutes per scenario.
#
# usage: bench/fleet_detection.sh [OUT_DIR] [SCENARIO...]
set -euo pipefail
SRC="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$(mktemp -d /tmp/fabricscope-fleet-bench.XXXXXX)}"
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(slow_receiver pause_storm_deadlock_free incast bad_link quiet)
mkdir -p "$OUT"
for s in "${scenarios[@]}"; do
  echo "== $s" >&2
  # Scenarios without assertions in the test still record their alerts.
  # Watched for the whole 40 s episode (the bad link's errors climb through it).
  FLEET_KEEP="$OUT/$s.truth.json" FLEET_DEADLINE=1000 FLEET_WATCH=45 \
    bash "$SRC/tests/e2e/fleet_test.sh" "$s" "$OUT/$s.alerts.json" >"$OUT/$s.log" 2>&1 ||
    echo "   (the e2e assertions failed for $s: see $OUT/$s.log; scored anyway)" >&2
done
python3 "$SRC/bench/fleet_score.py" "$OUT" | tee "$OUT/score.md"
