#!/usr/bin/env bash
# Detection quality smoke (issue #7): every fabricsim scenario, one seed, 10 s
# each, through `fabricscope analyze`; fails unless every injected episode is
# found (recall 1.0) and the quiet scenario raises no event. The full run
# (several seeds, figures in bench/README.md) is bench/detection_quality.py.
source "$(dirname "$0")/lib.sh"
python3 "$SRC/bench/detection_quality.py" --bin "$BIN" --seeds 1 --duration 10 \
  --json "$WORK/dq.json" || fail "detection quality below target: $(cat "$WORK/dq.json" 2>/dev/null)"
# Five detectors have ground-truth episodes in the single-host scenarios;
# pause_role has none there (its events during a storm count as side events).
jq -e '.quiet_events == 0 and .unexplained == 0 and ([.detectors[] | select(.episodes > 0)] | length) == 5' "$WORK/dq.json" >/dev/null ||
  fail "unexpected detection summary: $(cat "$WORK/dq.json")"
echo PASS
