#!/usr/bin/env bash
# MAP's first GPU check, prepared here and run on a machine with an NVIDIA GPU, CUDA, CMake, Ninja,
# a C++ compiler and PyTorch 2.x — no Debian packages, no network (docs/profiler.md, "The GPU check").
#
#   scripts/gpu-check.sh pack                 here: MAP's predictions for the GPU cases (h100-80g and
#                                             h200-141g) and the CPU rehearsal's (this host), and the
#                                             dependency kit, in .gpu-kit/ (under 64 MiB: it travels)
#   scripts/gpu-check.sh [--device cuda]      there, from the repository root, .gpu-kit/ beside it:
#       [--device-type h100-80g]              (a) PyTorch's training step of each case against MAP's
#       [--part a|b|all] [--out DIR]              prediction; (b) MAP built from the kit against this
#                                             machine's LibTorch, `mapctl run --device cuda` against
#                                             PyTorch's losses and the prediction, and the NCCL test
#   scripts/gpu-check.sh --device cpu         the rehearsal, here: the same on the CPU, part (b)'s
#                                             build in a mount namespace where Debian's development
#                                             packages of the kit are covered up
#
# Tables go to stdout and to --out (default: $OUT when set, else gpu-check-out/).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
KIT_DIR="${MAPD_GPU_KIT:-$ROOT/.gpu-kit}"
DEVICE=cuda
DEVICE_TYPE=""
PART=all
OUT_DIR="${OUT:-$ROOT/gpu-check-out}"
PY="${MAPD_GPU_PYTHON:-}"
# Seconds the whole check may take: cases not begun a minute before the end are listed as not run.
BUDGET="${MAPD_GPU_BUDGET:-570}"

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
die() { echo "gpu-check: $*" >&2; exit 1; }

python_with_torch() {
  if [[ -n "$PY" ]]; then echo "$PY"; return; fi
  for p in python3 /usr/bin/python3; do
    if "$p" -c "import torch" 2>/dev/null; then echo "$p"; return; fi
  done
  die "no python3 with PyTorch found (set MAPD_GPU_PYTHON)"
}

pack() {
  local mapctl="$ROOT/build/client/mapctl/mapctl"
  [[ -x "$mapctl" ]] || die "$mapctl is not built: run scripts/build.sh first"
  mkdir -p "$KIT_DIR"
  echo "== predictions for the GPU cases (h100-80g, h200-141g)"
  /usr/bin/python3 scripts/gpu_check/check.py predict --mapctl "$mapctl" --cases cuda --device-type h100-80g \
    --device-type h200-141g -o "$KIT_DIR/predictions-cuda.json"
  echo "== predictions for the CPU rehearsal's cases (this host, measured: --device-type auto)"
  /usr/bin/python3 scripts/gpu_check/check.py predict --mapctl "$mapctl" --cases cpu --device-type auto \
    -o "$KIT_DIR/predictions-cpu.json"
  echo "== dependency kit"
  /usr/bin/python3 scripts/gpu_check/kit.py make "$KIT_DIR/deps.tar.xz"
  local total
  total=$(du -sm "$KIT_DIR" | cut -f1)
  (( total < 64 )) || die "$KIT_DIR is ${total} MiB: over the 64 MiB a device call carries"
  echo "gpu-check pack: $KIT_DIR is ${total} MiB (carry it: .gpu-kit)"
}

# Part (b)'s build: MAP's runtime and mapctl against this machine's LibTorch, its other
# dependencies from the kit only.
build_from_kit() {
  local scratch="$1" py="$2"
  mkdir -p "$scratch"
  tar -xJf "$KIT_DIR/deps.tar.xz" -C "$scratch"
  local kit="$scratch/kit/usr" torch_cmake
  torch_cmake=$("$py" -c "import torch, os; p = torch.utils.cmake_prefix_path; print(p if os.path.isdir(os.path.join(p, 'Torch')) else '')")
  [[ -n "$torch_cmake" ]] || torch_cmake=/usr/lib/x86_64-linux-gnu/cmake  # Debian's LibTorch (the rehearsal)
  local cuda=off
  if [[ "$DEVICE" == cuda* ]]; then
    cuda=on
    # NCCL: PyTorch's wheel's, where the CUDA toolkit has none.
    export MAPD_NCCL_ROOT="${MAPD_NCCL_ROOT:-$("$py" -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null || true)}"
    export LD_LIBRARY_PATH="${MAPD_NCCL_ROOT:+$MAPD_NCCL_ROOT/lib:}${LD_LIBRARY_PATH:-}"
  fi
  # The C++ standard this LibTorch's headers take (PyTorch's newer wheels may need C++20).
  local std=17 torch_include
  torch_include=$("$py" -c "import torch.utils.cpp_extension as e; print(e.include_paths()[0])" 2>/dev/null || echo /usr/include)
  if ! echo '#include <c10/core/Device.h>' | c++ -std=c++17 -fsyntax-only -x c++ -I"$torch_include" - 2>/dev/null; then
    std=20
  fi
  export PKG_CONFIG_SYSROOT_DIR="$scratch/kit"
  export PKG_CONFIG_LIBDIR="$kit/lib/x86_64-linux-gnu/pkgconfig:$kit/share/pkgconfig"
  export LD_LIBRARY_PATH="$kit/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export PATH="$kit/bin:$PATH"
  cmake -S "$ROOT" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMAPD_BUILD_BENCH=OFF \
    -DMAPD_WITH_TORCH=on -DMAPD_WITH_CUDA="$cuda" -DCMAKE_CXX_STANDARD="$std" -DCMAKE_PREFIX_PATH="$kit;$torch_cmake" \
    -DPKG_CONFIG_EXECUTABLE="$kit/bin/pkg-config" -DProtobuf_PROTOC_EXECUTABLE="$kit/bin/protoc" \
    ${MAPD_GPU_CMAKE_ARGS:-} > "$scratch/configure.log" 2>&1 || { tail -30 "$scratch/configure.log"; die "configure failed"; }
  # Nothing of Debian's development packages may have come in (the rehearsal's check; on the GPU
  # machine the same check says the kit, not something already there, was used).
  if grep -E "^[A-Za-z_]*(Protobuf|absl|gRPC|CBC|SQLite3|GLOO)[A-Za-z_]*:(FILEPATH|PATH)=/usr/(include|lib)" \
      "$scratch/build/CMakeCache.txt" | grep -v "$scratch" | grep -Ev "/lib(m|pthread|rt|dl|c)\.(so|a)$"; then
    die "the build found the dependencies above outside the kit"
  fi
  cmake --build "$scratch/build" --target mapctl mapctl-torch mapd-rank dist_test -j "$(nproc)" > "$scratch/build.log" 2>&1 \
    || { tail -40 "$scratch/build.log"; die "build failed (log: $scratch/build.log)"; }
  echo "gpu-check: MAP built from the kit against LibTorch in $torch_cmake ($scratch/build)"
}

part_b() {
  local py="$1" scratch
  scratch="${MAPD_GPU_SCRATCH:-$(mktemp -d /tmp/mapd-gpu-check.XXXXXX)}"
  local t0=$SECONDS
  if [[ "$DEVICE" == cpu ]]; then
    # The rehearsal: Debian's packages of the kit covered up (a user and mount namespace: no root).
    local covers
    covers=$(/usr/bin/python3 scripts/gpu_check/kit.py hide)
    unshare --user --map-root-user --mount bash -c '
      set -e; empty=$(mktemp); for p in $1; do
        if [[ -d "$p" ]]; then mount -t tmpfs none "$p"; else mount --bind "$empty" "$p"; fi; done
      shift; "$@"' _ "$covers" "$0" --build-only --device "$DEVICE" --scratch "$scratch"
  else
    build_from_kit "$scratch" "$py"
  fi
  echo "gpu-check: part (b) build took $((SECONDS - t0)) s"
  local kit="$scratch/kit/usr"
  export LD_LIBRARY_PATH="$kit/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  "$py" scripts/gpu_check/check.py run --mapctl "$scratch/build/client/mapctl/mapctl" --predictions "$PREDICTIONS" \
    --device "$DEVICE" --device-type "$DEVICE_TYPE" --out "$OUT_DIR" --deadline "$DEADLINE" || B_FAILED=1
  echo "== NCCL collectives on one GPU (tests/rank/communicator_test.cc)"
  "$scratch/build/tests/rank/dist_test" --gtest_filter='Communicator.Nccl*:Communicator.Gloo*' 2>&1 | tail -8 | tee "$OUT_DIR/nccl.txt"
}

SCRATCH=""
BUILD_ONLY=0
ACTION=check
while [[ $# -gt 0 ]]; do
  case "$1" in
    pack) ACTION=pack ;;
    --device) DEVICE="$2"; shift ;;
    --device-type) DEVICE_TYPE="$2"; shift ;;
    --part) PART="$2"; shift ;;
    --out) OUT_DIR="$2"; shift ;;
    --kit) KIT_DIR="$2"; shift ;;
    --build-only) BUILD_ONLY=1 ;;
    --scratch) SCRATCH="$2"; shift ;;
    -h|--help) usage 0 ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done

if [[ "$ACTION" == pack ]]; then pack; exit 0; fi
if (( BUILD_ONLY )); then build_from_kit "$SCRATCH" "$(python_with_torch)"; exit 0; fi
[[ "$DEVICE" == cuda* || "$DEVICE" == cpu ]] || die "--device $DEVICE: use cuda or cpu"
[[ "$PART" =~ ^(a|b|all)$ ]] || die "--part $PART: use a, b or all"
if [[ "$DEVICE" == cpu ]]; then
  PREDICTIONS="$KIT_DIR/predictions-cpu.json"; DEVICE_TYPE="${DEVICE_TYPE:-auto}"
else
  PREDICTIONS="$KIT_DIR/predictions-cuda.json"; DEVICE_TYPE="${DEVICE_TYPE:-h100-80g}"
fi
[[ -f "$PREDICTIONS" ]] || die "$PREDICTIONS is missing: run 'scripts/gpu-check.sh pack' on the build machine and carry .gpu-kit"
mkdir -p "$OUT_DIR"
PY=$(python_with_torch)
B_FAILED=0
START=$SECONDS
DEADLINE=$(( $(date +%s) + BUDGET ))
# Part (a) leaves part (b) (the build: minutes) at least half the budget.
PART_A_DEADLINE=$(( $(date +%s) + BUDGET / 2 ))
[[ "$PART" == a ]] && PART_A_DEADLINE=$DEADLINE
echo "gpu-check: $("$PY" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)'), device $DEVICE, predictions for $DEVICE_TYPE"
if [[ "$PART" != b ]]; then
  echo "== part (a): MAP's symbolic profile against PyTorch's training step"
  "$PY" scripts/gpu_check/check.py profile --predictions "$PREDICTIONS" --device "$DEVICE" --device-type "$DEVICE_TYPE" \
    --out "$OUT_DIR" --deadline "$PART_A_DEADLINE"
  echo "gpu-check: part (a) took $((SECONDS - START)) s"
fi
if [[ "$PART" != a ]]; then
  echo "== part (b): MAP built here, mapctl run --device $DEVICE"
  part_b "$PY"
fi
echo "gpu-check: done in $((SECONDS - START)) s; tables in $OUT_DIR"
exit "$B_FAILED"
