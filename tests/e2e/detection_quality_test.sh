#!/usr/bin/env bash
# Detection quality gate (issues #7, #16): every fabricsim scenario, one seed,
# 10 s each, through `fabricscope analyze`; fails unless, per detector, every
# injected episode is found (recall 1.0) and >= 95% of the listed events match
# an episode of their own detector (side events of another episode count
# against it unless merged into that episode), the quiet scenario raises no
# event and PFC storms are detected within the detection time + 2 polls. The
# full run (5 seeds, figures in bench/README.md) is bench/detection_quality.py.
source "$(dirname "$0")/lib.sh"
python3 "$SRC/bench/detection_quality.py" --bin "$BIN" --seeds 1 --duration 10 \
  --json "$WORK/dq.json" 2>"$WORK/dq.err" ||
  fail "detection quality below target: $(jq -c .below_target "$WORK/dq.json" 2>/dev/null) $(cat "$WORK/dq.err")"
# Five detectors have ground-truth episodes in the single-host scenarios;
# pause_role has none there (its events during a storm are merged into it).
jq -e '.quiet_events == 0 and .unexplained == 0 and (.below_target | length) == 0 and
       ([.detectors[] | select(.episodes > 0)] | length) == 5 and
       ([.detectors[] | select(.events > 0 and .true_events < 0.95 * .events)] | length) == 0' \
  "$WORK/dq.json" >/dev/null ||
  fail "unexpected detection summary: $(cat "$WORK/dq.json")"
echo PASS
