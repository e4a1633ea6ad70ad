#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (C++ GoogleTest suites and the pytest
# end-to-end tests of mapctl) through CTest. This is what .ci/run calls.
#   scripts/test.sh          every test but the long form's (CTest label `long`: the slowest
#                            end-to-end cases, @pytest.mark.long in tests/cli)
#   scripts/test.sh --long   every test, the long form's included
set -euo pipefail
cd "$(dirname "$0")/.."
LABELS=(-LE long)
if [[ "${1:-}" == "--long" ]]; then
  LABELS=()
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/test.sh [--long]" >&2
  exit 2
fi
scripts/install-deps.sh
scripts/build.sh
cd "${MAPD_BUILD_DIR:-build}"
ctest --output-on-failure -j "${MAPD_JOBS:-2}" "${LABELS[@]}"
