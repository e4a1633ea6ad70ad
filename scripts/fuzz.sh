#!/usr/bin/env bash
# Runs MAP's libFuzzer harnesses (fuzz/; docs/architecture.md, "Fuzzing") from their seed corpora.
#
#   scripts/fuzz.sh [--build-dir DIR] [--seconds S | --runs N] [--keep-corpus DIR] [TARGET...]
#
# TARGET: graph_verifier | job_spec | importer (default: all that were built). Each runs for S
# seconds (default 60) or N inputs, in a fresh corpus seeded by the harness itself (the
# importer's inputs name the archives tests/import/models/make_models.py traces). Exit status 0 only when
# every target ran without a crash, leak, timeout or sanitizer report; a crashing input is left in
# the artifacts directory the run prints. The fuzz tree is built by `scripts/build.sh` (or
# `cmake --build build --target fuzzers`) when clang with libFuzzer is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${MAPD_BUILD_DIR:-build}/fuzz"
SECONDS_EACH=60
RUNS=""
KEEP=""
TARGETS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --seconds) SECONDS_EACH="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --keep-corpus) KEEP="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  for t in graph_verifier job_spec importer; do
    [[ -x "$BUILD_DIR/fuzz/${t}_fuzzer" ]] && TARGETS+=("$t")
  done
fi
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  echo "fuzz.sh: no harness in $BUILD_DIR/fuzz; build them with: cmake --build build --target fuzzers" >&2
  exit 2
fi

WORK="$(mktemp -d /tmp/mapd-fuzz-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
failed=0
for t in "${TARGETS[@]}"; do
  bin="$BUILD_DIR/fuzz/${t}_fuzzer"
  if [[ ! -x "$bin" ]]; then
    echo "fuzz.sh: $bin is not built (cmake --build build --target fuzzers)" >&2
    exit 2
  fi
  corpus="$WORK/$t/corpus"
  if [[ "$t" == importer && ! -d "$WORK/models" ]]; then
    /usr/bin/python3 tests/import/models/make_models.py "$WORK/models" >/dev/null
  fi
  export MAPD_FUZZ_ARCHIVES="$WORK/models"
  artifacts="${KEEP:+$KEEP/$t/}"
  artifacts="${artifacts:-$WORK/$t/artifacts/}"
  mkdir -p "$corpus" "$artifacts"
  MAPD_FUZZ_WRITE_SEEDS="$corpus" "$bin" 2>&1 | tail -n 1
  leaks=1
  # LibTorch keeps what its JIT compiles for the life of the process; that is not ours to find.
  [[ "$t" == importer ]] && leaks=0
  limit=(-max_total_time="$SECONDS_EACH")
  [[ -n "$RUNS" ]] && limit=(-runs="$RUNS")
  budget="$SECONDS_EACH s"
  [[ -n "$RUNS" ]] && budget="$RUNS inputs"
  echo "fuzz.sh: $t: $(ls "$corpus" | wc -l) seeds, $budget"
  log="$WORK/$t/log"
  set +e
  ASAN_OPTIONS="detect_leaks=$leaks:allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1" \
    "$bin" "${limit[@]}" -seed=1 -timeout=25 -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "$corpus" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  if [[ $rc -ne 0 ]]; then
    tail -n 60 "$log"
    echo "fuzz.sh: $t FAILED after ${execs} inputs (exit $rc); the input is in $artifacts"
    [[ -z "$KEEP" ]] && { mkdir -p /tmp/mapd-fuzz-artifacts; cp -r "$artifacts" "/tmp/mapd-fuzz-artifacts/$t" || true; echo "fuzz.sh: copied to /tmp/mapd-fuzz-artifacts/$t"; }
    failed=1
  else
    echo "fuzz.sh: $t: ${execs} inputs, 0 crashes ($(grep -o 'cov: [0-9]*' "$log" | tail -n 1))"
  fi
  [[ -n "$KEEP" ]] && { mkdir -p "$KEEP/$t"; cp -r "$corpus" "$KEEP/$t/"; }
done
exit $failed
