#!/usr/bin/env bash
# Installs every build, run and test dependency of MAP from Debian 12 packages.
# The README, .ci/run and deploy/Dockerfile all call this one script.
# Usage: scripts/install-deps.sh            (as root, or with sudo available)
# Set MAPD_SKIP_APT=1 to skip (e.g. when the packages are known to be present).
set -euo pipefail

if [[ "${MAPD_SKIP_APT:-0}" == "1" ]]; then
  echo "install-deps: MAPD_SKIP_APT=1, skipping apt-get"
  exit 0
fi

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # core libraries
  libprotobuf-dev protobuf-compiler libabsl-dev
  libgrpc++-dev protobuf-compiler-grpc
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
  coinor-libcbc-dev libsqlite3-dev libcpp-httplib-dev
  # metrics: prometheus-cpp's registry and text serializer
  prometheus-cpp-dev
  # LibTorch (C++) and Debian's PyTorch for tracing test models
  libtorch-dev python3-torch python3-numpy
  # Gloo's headers (LibTorch's c10d Gloo process groups: the distributed runtime on CPU)
  libgloo-dev
  # an optimised BLAS: without it LibTorch falls back to the reference BLAS (~50x slower matmuls)
  libopenblas0-pthread
  # python client and tests; venv and pip install the mapclient package (client/python) in its test
  python3-grpcio python3-protobuf python3-pytest python3-venv python3-pip
  # torchvision's model zoo: the real-model suite (tests/import, scripts/torchvision-suite.py)
  python3-torchvision
  # tests/deploy reads the Kubernetes manifests and Grafana provisioning, and makes TLS certificates
  python3-yaml openssl
  # tests/deploy validates the Kubernetes manifests against the API's schemas: the Python client's
  # models, generated from Kubernetes' OpenAPI specification (tests/deploy/k8s_schema.py)
  python3-kubernetes
  # promtool checks the /metrics endpoints in the tests
  prometheus
  # C++ tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # the libFuzzer harnesses (fuzz/, tests/fuzz): clang with libFuzzer and its sanitizers
  clang libfuzzer-14-dev
  # the plan report test renders the HTML in headless Chromium and reads the screenshot
  chromium python3-pil
  # the multi-host cluster harness (tests/cluster): network namespaces joined by a bridge, and
  # partitions as nftables rules on it
  iproute2 nftables
)

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

# Skip the (slow) apt round trip when everything is already installed.
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
