#!/usr/bin/env bash
# Regenerates docs/metrics.md from the metric declarations compiled into
# fabricscoped. Usage: tools/update-metrics-reference.sh [BUILD_DIR]
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build/release}"
"$build/fabricscoped" --dump-metrics-reference >"$src/docs/metrics.md"
echo "wrote docs/metrics.md"
