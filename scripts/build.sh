#!/usr/bin/env bash
# Configures and builds MAP. Used by scripts/test.sh, scripts/demo.sh and scripts/tour.sh.
#   MAPD_BUILD_DIR  build folder (default: build)
#   MAPD_JOBS       parallel compile jobs (default: 2 — LibTorch headers are heavy)
#   MAPD_WITH_CUDA  auto|on|off (default: auto)
#   MAPD_WITH_TORCH auto|on|off (default: auto; off builds mapd, mapd-worker and the planner only)
#   MAPD_BUILD_TYPE CMake build type (default: RelWithDebInfo)
#   MAPD_BUILD_FUZZ 0 skips the libFuzzer harnesses' clang tree (build/fuzz; built when clang is here)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${MAPD_BUILD_DIR:-build}"
JOBS="${MAPD_JOBS:-2}"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" \
    -DCMAKE_BUILD_TYPE="${MAPD_BUILD_TYPE:-RelWithDebInfo}" \
    -DMAPD_WITH_CUDA="${MAPD_WITH_CUDA:-auto}" \
    -DMAPD_WITH_TORCH="${MAPD_WITH_TORCH:-auto}" \
    -DMAPD_FUZZ_JOBS="$JOBS"
fi
cmake --build "$BUILD_DIR" -j "$JOBS" "$@"
# The libFuzzer harnesses' clang tree (build/fuzz), after the main one so that the two never
# compete for the cores; only when clang with libFuzzer is here (cmake/fuzz.cmake) and the whole
# build was asked for. MAPD_BUILD_FUZZ=0 skips it.
if [[ $# -eq 0 && "${MAPD_BUILD_FUZZ:-1}" != "0" ]] && grep -q '^MAPD_FUZZ_ENABLED:INTERNAL=ON' "$BUILD_DIR/CMakeCache.txt"; then
  cmake --build "$BUILD_DIR" --target fuzzers
fi
