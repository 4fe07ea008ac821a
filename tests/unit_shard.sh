#!/usr/bin/env bash
# One GoogleTest shard of unit_tests (the sanitizer presets run the unit
# tests as FABRICSCOPE_UNIT_TEST_SHARDS shards: tests/CMakeLists.txt).
# Prints the shard's count ("unit_tests shard 3/16: 41 tests ran, 41
# passed") and fails a shard that ran no test: a filter or a sharding change
# that empties a shard would otherwise pass silently. tests/run_all.sh sums
# the shards' lines after the run.
#
#   tests/unit_shard.sh UNIT_TESTS_BINARY [gtest flags...]
set -uo pipefail
bin=$1
shift
out=$("$bin" --gtest_brief=1 "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
ran=$(sed -n 's/^\[==========\] \([0-9][0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' <<<"$out" | tail -n1)
passed=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) tests\{0,1\}\..*/\1/p' <<<"$out" | tail -n1)
echo "unit_tests shard $((${GTEST_SHARD_INDEX:-0} + 1))/${GTEST_TOTAL_SHARDS:-1}: ${ran:-0} tests ran, ${passed:-0} passed"
[ "$rc" -eq 0 ] || exit "$rc"
if [ "${ran:-0}" -eq 0 ]; then
  echo "FAIL: this shard ran no test (filter: ${GTEST_FILTER:-none})"
  exit 1
fi
