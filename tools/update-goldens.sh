#!/usr/bin/env bash
# Rewrites every golden file under tests/golden/ (tests/golden/README.md) from
# the binaries already built, then runs every golden once more in compare mode
# (a golden that does not reproduce is not written silently), and prints what
# changed. Builds nothing: build first, e.g.
#   cmake --preset release -DFABRICSCOPE_BUILD_TESTS=ON && cmake --build --preset release
#
# Usage: tools/update-goldens.sh [--allow-stale] [BUILD_DIR]   (default build/release)
#   --allow-stale  run even if a source file is newer than the binaries
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
allow_stale=0
if [ "${1:-}" = "--allow-stale" ]; then
  allow_stale=1
  shift
fi
build="$(cd "${1:-$src/build/release}" && pwd)"

for bin in fabricscoped unit_tests; do
  if [ ! -x "$build/$bin" ]; then
    echo "update-goldens: no $build/$bin; build it first (tests on: -DFABRICSCOPE_BUILD_TESTS=ON)" >&2
    exit 1
  fi
done
# Goldens recorded from stale binaries would not match the sources: ask the
# build tool (a dry run) whether either binary is out of date.
if [ "$allow_stale" -eq 0 ]; then
  if [ -f "$build/build.ninja" ] && command -v ninja >/dev/null; then
    plan=$(ninja -C "$build" -n fabricscoped unit_tests 2>&1) || true
    if ! grep -q 'no work to do' <<<"$plan"; then
      echo "update-goldens: the binaries in $build are out of date (rebuild, or --allow-stale):" >&2
      grep -v '^ninja: Entering' <<<"$plan" | head -n 5 >&2
      exit 1
    fi
  else
    echo "update-goldens: not a Ninja build; not checking that the binaries are up to date" >&2
  fi
fi

export FABRICSCOPE_SOURCE_DIR="$src" FABRICSCOPE_BINARY_DIR="$build"
cd "$src"
# The e2e goldens (each scrapes a real daemon) and the unit goldens.
e2e=(tests/e2e/rdma_sysfs_golden_test.sh tests/e2e/daemon_golden_test.sh
  "tests/e2e/collector_golden_test.sh netdev" "tests/e2e/collector_golden_test.sh dcb_config"
  "tests/e2e/collector_golden_test.sh topology")
unit='PrometheusExporterGoldenTest.*:EthtoolDirTest.GoldenMappingOfEveryFixture:RdmaNetlinkTest.GoldenMetrics'

for t in "${e2e[@]}"; do
  # shellcheck disable=SC2086  # "script [collector]"
  bash $t --update
done
FABRICSCOPE_UPDATE_GOLDENS=1 "$build/unit_tests" --gtest_filter="$unit" --gtest_brief=1

echo "--- checking that every golden reproduces"
for t in "${e2e[@]}"; do
  # shellcheck disable=SC2086
  bash $t >/dev/null || { echo "update-goldens: $t does not reproduce its golden" >&2; exit 1; }
done
"$build/unit_tests" --gtest_filter="$unit" --gtest_brief=1 >/dev/null ||
  { echo "update-goldens: the unit goldens do not reproduce" >&2; exit 1; }

echo "--- changes under tests/golden"
git diff --stat -- tests/golden
git status --short --untracked-files=all -- tests/golden
