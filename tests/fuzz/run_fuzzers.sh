#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset by default: clang, full
# libFuzzer instrumentation, build/fuzz; CI uses its debug-asan tree, where they
# are already built) and runs each for a bounded time on a copy of its seed
# corpus. Fails if any target
# finds a crash, a sanitizer report, a leak, a timeout or an out-of-memory.
#
# Usage: tests/fuzz/run_fuzzers.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 30
#   TARGET              default: every target (fuzz_counter fuzz_ethtool_text
#                       fuzz_netlink fuzz_recording fuzz_native_span
#                       fuzz_otlp_span fuzz_config fuzz_snapshot fuzz_ib_mad
#                       fuzz_web_config fuzz_accept fuzz_nccl_inspector)
# Environment:
#   FUZZ_JOBS      build parallelism (default 1)      FUZZ_NICE  nice level (default 15)
#   FUZZ_PRESET    configure preset (default fuzz; debug-asan in tests/run_all.sh)
#   FUZZ_BUILD_DIR build tree (default build/$FUZZ_PRESET, the preset's)
#
# Seeds: fuzz/corpus/<target>/ (generated and regression seeds, committed)
# plus, for the text parsers, the fixtures of tests/fixtures. With every target
# (no TARGET given) it first checks that the committed gen_* seeds are what
# fuzz_gen_seeds writes now (a format or option change regenerates them).
# Committed corpora are never modified: the fuzzer works in a temporary copy.
# A failing input is kept in $FUZZ_BUILD_DIR/artifacts/<target>/; reproduce
# it with
#   $FUZZ_BUILD_DIR/fuzz/<target> <artifact>
# Prints per target: executions, exec/s, and the coverage of libFuzzer's
# final line (cov: edges, ft: features).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

seconds=${1:-30}
shift || true
targets=("$@")
all=(fuzz_counter fuzz_ethtool_text fuzz_netlink fuzz_recording fuzz_native_span fuzz_otlp_span
  fuzz_config fuzz_snapshot fuzz_ib_mad fuzz_web_config fuzz_accept fuzz_nccl_inspector)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
case "$seconds" in '' | *[!0-9]*) echo "SECONDS_PER_TARGET must be a number" >&2; exit 2 ;; esac

preset=${FUZZ_PRESET:-fuzz}
build=${FUZZ_BUILD_DIR:-build/$preset}
jobs=${FUZZ_JOBS:-1}
nice=${FUZZ_NICE:-15}

check_seeds=0
[ $# -gt 0 ] || check_seeds=1
build_targets=("${targets[@]}")
[ "$check_seeds" = 0 ] || build_targets+=(fuzz_gen_seeds)

echo "=== fuzz: configure and build (${build_targets[*]}) ==="
t0=$(date +%s)
cmake --preset "$preset" -B "$build" >/dev/null
nice -n "$nice" cmake --build "$build" --target "${build_targets[@]}" -j "$jobs"
echo "build: $(($(date +%s) - t0)) s"

work=$(mktemp -d /tmp/fabricscope-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT

if [ "$check_seeds" = 1 ]; then
  mkdir -p "$work/gen"
  "$build/fuzz/fuzz_gen_seeds" "$work/gen" >/dev/null
  stale=()
  while IFS= read -r -d '' f; do
    rel=${f#"$work/gen/"}
    cmp -s "$f" "fuzz/corpus/$rel" || stale+=("fuzz/corpus/$rel")
  done < <(find "$work/gen" -type f -print0)
  while IFS= read -r -d '' f; do
    [ -e "$work/gen/${f#fuzz/corpus/}" ] || stale+=("$f (no longer generated: delete it)")
  done < <(find fuzz/corpus -type f -name 'gen_*' -print0)
  if [ ${#stale[@]} -gt 0 ]; then
    printf 'stale generated seed: %s\n' "${stale[@]}"
    echo "regenerate: $build/fuzz/fuzz_gen_seeds fuzz/corpus (fuzz/README.md, Seeds)"
    exit 1
  fi
  echo "generated seeds: $(find "$work/gen" -type f | wc -l) files, as committed"
fi

# Copies every regular file under the given paths into $1, named by content
# hash (fixture trees repeat file names; libFuzzer names units the same way).
seed() {
  local dst=$1
  shift
  local f
  for src in "$@"; do
    [ -e "$src" ] || continue
    while IFS= read -r -d '' f; do
      case "$(basename "$f")" in README* | *.md) continue ;; esac
      cp "$f" "$dst/$(sha1sum <"$f" | cut -c1-40)"
    done < <(find "$src" -type f -print0)
  done
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=()
summary=()
for t in "${targets[@]}"; do
  bin=$build/fuzz/$t
  corpus=$work/$t/corpus
  artifacts=$work/$t/artifacts
  mkdir -p "$corpus" "$artifacts"
  seed "$corpus" "fuzz/corpus/$t"
  case $t in
    fuzz_counter) seed "$corpus" tests/fixtures/sysfs tests/fixtures/ecn ;;
    fuzz_ethtool_text) seed "$corpus" tests/fixtures/ethtool/mlx5 tests/fixtures/ethtool/other ;;
  esac
  nseeds=$(find "$corpus" -type f | wc -l)
  echo "=== $t: ${seconds}s, $nseeds seeds ==="
  log=$work/$t/log
  rc=0
  timeout --kill-after=10 $((seconds + 120)) \
    "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || rc=$?
  # (A run that crashes on a seed prints no statistics: these stay empty.)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$({ grep -o 'cov: [0-9]*' "$log" || true; } | tail -1 | cut -d' ' -f2)
  ft=$({ grep -o 'ft: [0-9]*' "$log" || true; } | tail -1 | cut -d' ' -f2)
  line=$(printf '%-18s executions %-10s exec/s %-7s cov: %-6s ft: %-6s' "$t" "${execs:-?}" \
    "${rate:-?}" "${cov:-?}" "${ft:-?}")
  if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$artifacts")" ]; then
    keep=$root/$build/artifacts/$t
    mkdir -p "$keep"
    cp "$artifacts"/* "$keep"/ 2>/dev/null || true
    grep -E 'ERROR: |runtime error|FUZZ_CHECK|SUMMARY: ' "$log" | head -5 || true
    tail -40 "$log" >"$keep/last_log.txt"
    echo "FAILED (rc $rc); inputs and log in $keep"
    failed+=("$t")
    line="$line  FAILED"
  fi
  echo "$line"
  summary+=("$line")
done

echo "=== fuzz summary (${seconds}s per target) ==="
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all fuzz targets passed"
