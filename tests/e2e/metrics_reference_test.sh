#!/usr/bin/env bash
# docs/metrics.md and docs/options.md are generated from the metric and option
# declarations in the code; this fails when either is stale. Regenerate both
# with tools/update-metrics-reference.sh.
source "$(dirname "$0")/lib.sh"
"$DAEMON" --dump-metrics-reference >"$WORK/metrics.md"
if ! diff -u "$SRC/docs/metrics.md" "$WORK/metrics.md"; then
  fail "docs/metrics.md is stale: run tools/update-metrics-reference.sh"
fi
"$DAEMON" --dump-options-reference >"$WORK/options.md"
if ! diff -u "$SRC/docs/options.md" "$WORK/options.md"; then
  fail "docs/options.md is stale: run tools/update-metrics-reference.sh"
fi
# Every option of --help is in the reference, with the declaring plugin's.
for opt in $("$DAEMON" --help | sed -n 's/^  --\([a-z0-9.-]*\)[=[].*/\1/p'); do
  [ "$opt" = config ] && continue  # the one flag that is no config key
  grep -qF -- "| \`--$opt\` |" "$WORK/options.md" || fail "--$opt is in --help but not in docs/options.md"
done
grep -qF '| `--pfc-storm-fraction` | NUMBER | `0.8` | restart | detector pfc_storm |' "$WORK/options.md" ||
  fail "a detector's option is not listed as its own"
grep -qF '| `--lldpd-socket` | PATH | `/run/lldpd.socket` | restart | collector topology |' "$WORK/options.md" ||
  fail "a collector's option is not listed as its own"
echo "PASS"
