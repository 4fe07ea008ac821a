#!/usr/bin/env bash
# The tests that need a network namespace or a veth pair report SKIPPED, with
# the reason, where the environment cannot create one -- not PASSED, not
# FAILED (issue #16, item 7). Two ways:
#  1. A real failure: inside a user namespace (`unshare -r`: root there, but no
#     privilege over the host's network and mount namespaces) `ip netns add`
#     and `ip link add` are refused. The lldp_topology script exits 77 with
#     the reason, and the veth gtests print "[  SKIPPED ]" with theirs (the
#     marker ctest's gtest_discover_tests turns into a skip) and exit 0.
#     Left out, saying so, where user namespaces are disabled.
#  2. ctest's verdict: with FABRICSCOPE_TEST_NO_NETNS set (both probes then
#     answer "unavailable" without trying), ctest runs one script test and one
#     gtest from this build and must report both as "Skipped", neither as
#     passed nor failed, with the reason in its (verbose) output. The inner ctest runs from
#     a scratch directory that includes this build's tests, so that its
#     Testing/ log does not overwrite the outer run's.
# As root on a VM (CI) the same tests run for real: see their own results.
source "$(dirname "$0")/lib.sh"

UNIT="$BIN/unit_tests"
[ -x "$UNIT" ] || fail "unit_tests not built in $BIN"

# --- 1. a real environment that cannot create a namespace -------------------
if unshare -r true 2>/dev/null; then
  rc=0
  unshare -r bash "$SRC/tests/e2e/lldp_topology_test.sh" >"$WORK/lldp.out" 2>&1 || rc=$?
  cat "$WORK/lldp.out"
  [ "$rc" = 77 ] || fail "lldp_topology_test.sh in a user namespace exited $rc, not 77 (skipped)"
  grep -q '^SKIPPED: needs a network namespace: cannot create one (ip netns add: ' "$WORK/lldp.out" ||
    fail "no skip reason printed"

  rc=0
  unshare -r "$UNIT" --gtest_filter='NetdevVethBurstTest.*:EthtoolVethTest.*:LldpSourceVethTest.*:NetdevCollectorTest.RegexMatchesSeveralInterfaces' \
    >"$WORK/gtest.out" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { cat "$WORK/gtest.out"; fail "veth gtests in a user namespace exited $rc"; }
  grep '^\[  SKIPPED \] \|^needs ' "$WORK/gtest.out"
  n=$(grep -oE '^\[  SKIPPED \] [A-Za-z]+\.[A-Za-z]+' "$WORK/gtest.out" | sort -u | wc -l)
  [ "$n" = 6 ] || { cat "$WORK/gtest.out"; fail "expected 6 skipped veth gtests, got $n"; }
  grep -q '^\[       OK \]' "$WORK/gtest.out" && fail "a veth gtest passed in a user namespace"
  grep -q 'needs a network namespace: cannot create a network namespace (ip netns add: ' "$WORK/gtest.out" ||
    fail "gtest skip reason (namespace) missing"
  grep -q 'needs a veth pair: cannot create a veth pair (ip link add: ' "$WORK/gtest.out" ||
    fail "gtest skip reason (veth) missing"
else
  echo "note: user namespaces are not available here (unshare -r fails): part 1 left out"
fi

# --- 2. ctest reports them as skipped ----------------------------------------
mkdir -p "$WORK/ctest"
printf 'subdirs("%s")\n' "$BIN" >"$WORK/ctest/CTestTestfile.cmake"
rc=0
(cd "$WORK/ctest" &&
  FABRICSCOPE_TEST_NO_NETNS="simulated by e2e_netns_skip" \
    ctest -R '^(e2e_deploy_privileges|NetdevVethBurstTest\.TenMillisecondSamplesShowTheBurstAOneSecondPollerMisses)$' \
    -V) >"$WORK/ctest.out" 2>&1 || rc=$?
grep -E 'SKIPPED|needs|Test +#|tests passed|did not run|Skipped\)' "$WORK/ctest.out"
[ "$rc" = 0 ] || fail "ctest exited $rc (a skip must not fail the run)"
grep -q 'Total Tests: 2' "$WORK/ctest.out" || grep -q 'out of 2$' "$WORK/ctest.out" ||
  fail "the inner ctest did not run the two tests"
for t in e2e_deploy_privileges NetdevVethBurstTest.TenMillisecondSamplesShowTheBurstAOneSecondPollerMisses; do
  grep -Eq "Test +#[0-9]+: $t \.+\*+Skipped" "$WORK/ctest.out" || fail "ctest did not report $t as Skipped"
  grep -Eq "[0-9]+ - $t \(Skipped\)" "$WORK/ctest.out" || fail "$t missing from ctest's 'did not run' list"
done
grep -Eq 'Passed|\*\*\*Failed' <(grep -E 'Test +#' "$WORK/ctest.out") && fail "a test passed or failed instead of skipping"
# The reasons, in ctest's verbose output (`<test number>: ` prefixes each line).
grep -Eq '^[0-9]+: SKIPPED: needs a network namespace: simulated by e2e_netns_skip \(FABRICSCOPE_TEST_NO_NETNS\)$' "$WORK/ctest.out" ||
  fail "script skip reason not in ctest's output"
grep -Eq '^[0-9]+: needs a network namespace: simulated by e2e_netns_skip \(FABRICSCOPE_TEST_NO_NETNS\)$' "$WORK/ctest.out" ||
  fail "gtest skip reason not in ctest's output"
echo "PASS"
