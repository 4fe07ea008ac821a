#!/usr/bin/env bash
# Regenerates docs/metrics.md from the metric declarations and docs/options.md
# from the option declarations compiled into fabricscoped.
# Usage: tools/update-metrics-reference.sh [BUILD_DIR]
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build/release}"
"$build/fabricscoped" --dump-metrics-reference >"$src/docs/metrics.md"
"$build/fabricscoped" --dump-options-reference >"$src/docs/options.md"
echo "wrote docs/metrics.md and docs/options.md"
