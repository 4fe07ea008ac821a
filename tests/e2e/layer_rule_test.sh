#!/usr/bin/env bash
# The layer rule (cmake/check_layers.cmake): the source tree keeps it, and
# the check catches a file that breaks it (an upward include, an include of a
# peer layer, analysis reaching for protobuf), with quotes or angle brackets.
set -euo pipefail
src="${FABRICSCOPE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
check="$src/cmake/check_layers.cmake"

out=$(cmake -DLAYER_CHECK_ROOT="$src" -P "$check" 2>&1) || {
  echo "FAIL: the source tree breaks the layer rule:"; echo "$out"; exit 1; }
echo "source tree: $out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/core" "$src/store" "$src/collectors" "$src/exporters" "$src/daemon" "$tmp/"
cmake -DLAYER_CHECK_ROOT="$tmp" -P "$check" >/dev/null 2>&1 || {
  echo "FAIL: a plain copy of the tree does not pass"; exit 1; }

expect_violation() {  # <file> <line> <what the report must name>
  local file=$1 line=$2 want=$3
  local saved
  saved=$(cat "$tmp/$file" 2>/dev/null || true)
  printf '%s\n' "$line" >>"$tmp/$file"
  if out=$(cmake -DLAYER_CHECK_ROOT="$tmp" -P "$check" 2>&1); then
    echo "FAIL: $file with '$line' passed the layer check"; exit 1
  fi
  grep -qF -- "$want" <<<"$out" || {
    echo "FAIL: the report does not name '$want':"; echo "$out"; exit 1; }
  printf '%s\n' "$saved" >"$tmp/$file"
  echo "caught: $want"
}
expect_violation core/log.h '#include "store/store.h"' 'core/log.h (core) includes store/store.h (store)'
expect_violation store/chunk.cc '#include "daemon/config.h"' 'store/chunk.cc (store) includes daemon/config.h (daemon)'
expect_violation exporters/prometheus_exporter.cc '#include "collectors/collector.h"' \
  'exporters/prometheus_exporter.cc (exporters) includes collectors/collector.h (collectors)'
expect_violation daemon/detect/event_log.cc '#include "fabricscope/v1/span.pb.h"' \
  'daemon/detect/event_log.cc (analysis) includes fabricscope/v1/span.pb.h (proto)'
expect_violation daemon/service/grpc_server.cc '#include "daemon/config.h"' \
  'daemon/service/grpc_server.cc (service) includes daemon/config.h (daemon)'
# Angle brackets name a project header too.
expect_violation store/chunk.cc '#include <collectors/collector.h>' \
  'store/chunk.cc (store) includes collectors/collector.h (collectors)'
expect_violation daemon/correlate/correlator.cc '#  include <opentelemetry/proto/trace/v1/trace.pb.h>' \
  'daemon/correlate/correlator.cc (analysis) includes opentelemetry/proto/trace/v1/trace.pb.h (proto)'
echo "PASS: layer rule"
