#!/usr/bin/env bash
# fabricsim's command line reads like the other two binaries': --flag=value
# and --flag value alike, --version with the same version and revision as
# fabricscoped, a flag without its value named with both spellings.
source "$(dirname "$0")/lib.sh"

SIM="$BIN/fabricsim"
want=$("$DAEMON" --version | sed 's/^fabricscoped //')
got=$("$SIM" --version) || fail "fabricsim --version failed"
[ "$got" = "fabricsim $want" ] || fail "fabricsim --version says '$got', fabricscoped says '$want'"

# The same short run in both spellings writes the same spans (same seed, same
# start time).
"$SIM" --scenario quiet --duration 1s --as-fast-as-possible --start-unix-ns 1760000000000000000 \
  --spans-out "$WORK/a.jsonl" 2>"$WORK/a.err" || fail "space-separated flags refused: $(cat "$WORK/a.err")"
"$SIM" --scenario=quiet --duration=1s --as-fast-as-possible --start-unix-ns=1760000000000000000 \
  --spans-out="$WORK/b.jsonl" 2>"$WORK/b.err" || fail "--flag=value refused: $(cat "$WORK/b.err")"
[ -s "$WORK/a.jsonl" ] || fail "no spans written"
cmp -s "$WORK/a.jsonl" "$WORK/b.jsonl" || fail "the two spellings gave different spans"

if "$SIM" --seed >/dev/null 2>"$WORK/c.err"; then fail "--seed without a value accepted"; fi
grep -q -- '--seed needs a value (--seed=VALUE or --seed VALUE)' "$WORK/c.err" ||
  fail "unclear message for a missing value: $(cat "$WORK/c.err")"
if "$SIM" --no-such-flag 1 >/dev/null 2>"$WORK/d.err"; then fail "an unknown flag accepted"; fi
grep -q 'unknown flag --no-such-flag' "$WORK/d.err" || fail "unknown flag not named: $(cat "$WORK/d.err")"
echo "PASS"
