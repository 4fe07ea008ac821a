#!/usr/bin/env bash
# docs/metrics.md is generated from the metric declarations in the code; this
# fails when it is stale. Regenerate with tools/update-metrics-reference.sh.
source "$(dirname "$0")/lib.sh"
"$DAEMON" --dump-metrics-reference >"$WORK/metrics.md"
if ! diff -u "$SRC/docs/metrics.md" "$WORK/metrics.md"; then
  fail "docs/metrics.md is stale: run tools/update-metrics-reference.sh"
fi
echo "PASS"
