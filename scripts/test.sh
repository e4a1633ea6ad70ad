#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (C++ GoogleTest suites and the pytest
# end-to-end tests of mapctl) through CTest. This is what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${MAPD_BUILD_DIR:-build}"
ctest --output-on-failure -j "${MAPD_JOBS:-2}"
