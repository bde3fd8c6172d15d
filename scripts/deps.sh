#!/bin/sh
# Installs what building and testing loom needs on Debian 12 (as root), and
# fetches Perfetto's trace_processor for the trace checks (tests/tp/setup.sh).
# Idempotent; quiet unless something fails.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
pkgs="build-essential cmake pkg-config libcmocka-dev zlib1g-dev libze1 libze-dev libyajl-dev ca-certificates opencl-headers ocl-icd-opencl-dev ocl-icd-libopencl1 pocl-opencl-icd clinfo"
# PyTorch adapter and its test (CPU build of PyTorch 1.13, ~700 MB); NVTX headers
# come with the CUDA toolkit (/usr/local/cuda/include/nvtx3), ITT needs nothing.
pkgs="$pkgs g++ libtorch-dev python3-torch"
# loom report's tests: pandas for the independent Holistic Trace Analysis
# figures, Chromium to render the HTML page headless.
pkgs="$pkgs python3-pandas chromium"
# The Python package (python/loom): headers for its extension module,
# Debian's pytest for its tests (run by ctest with /usr/bin/python3), and the
# venv module with its pip for the `pip install .` test (tests/pip).
pkgs="$pkgs python3-dev python3-pytest python3-venv"
# MPI backend (PMPI wrappers built against OpenMPI's mpi.h) and its mpirun tests.
pkgs="$pkgs openmpi-bin libopenmpi-dev"
# The clang build of scripts/test.sh (ASan + the complete UBSan) and the
# libFuzzer programs (tests/fuzz): libclang-rt-14-dev ships libclang_rt.fuzzer.
pkgs="$pkgs clang-14 libclang-rt-14-dev"
# Vulkan backend (a layer built against the Vulkan headers) and its test:
# the loader, Mesa's lavapipe (a CPU Vulkan driver), glslangValidator for the
# test's GLSL shaders, vulkaninfo to look at what the driver offers.
pkgs="$pkgs libvulkan-dev libvulkan1 mesa-vulkan-drivers glslang-tools vulkan-tools"
# perf backend: libdw (elfutils) unwinds the copied user stacks and names
# frames after recording.
pkgs="$pkgs libdw-dev libelf-dev"
# The Kineto bridge's tests (bridges/kineto): libkineto is built CPU-only from
# Kineto's pinned source by scripts/kineto.sh, which needs fmt's headers and
# python3 (Kineto reads its source lists at configure time).
pkgs="$pkgs libfmt-dev python3"
# The man pages' check (ctest cli_help_options renders them with groff and man).
pkgs="$pkgs groff-base man-db"
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
: "${LOOM_TP_DIR:=$HOME/.cache/loom-tp}"
export LOOM_TP_DIR
bash "$here/tests/tp/setup.sh" "$LOOM_TP_DIR"
