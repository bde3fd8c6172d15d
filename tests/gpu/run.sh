#!/bin/sh
# tests/gpu/run.sh [BUILD_DIR] - the CUDA backend on a real GPU, in one command.
#
# On a machine with an NVIDIA GPU and CUDA 13 (nvcc under /usr/local/cuda):
# builds loom (BUILD_DIR, default build-gpu) with the CUPTI backend, builds
# tests/gpu/app.cu (several kernels, copies both ways, two streams, a CUDA
# graph, an event sync, framework ops marked through loom's API, device,
# pinned and managed allocations and a leak), records it
# with `loom record --devices cpu,cuda`, converts the trace to .pftrace, and
# checks both with tests/gpu/check.py in trace_processor: exact kernel and
# copy counts, flows, External ids, graph ids, sync records, and the memory
# records of each allocation and free (count, bytes, kind, device, on its
# call's thread), as a table.
# Exit 0: every check passes; 1: a check fails or a step breaks; 77: no nvcc
# or no GPU here (nothing was run).  The checks themselves are tested
# without a GPU by tests/gpu/selftest.sh (ctest gpu_check_selftest).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build-gpu}
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$cuda/bin/nvcc
if [ ! -x "$nvcc" ]; then
  echo "run.sh: no nvcc at $nvcc: CUDA 13 is needed"
  exit 77
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run.sh: no GPU visible (nvidia-smi -L fails): nothing to record"
  exit 77
fi
nvidia-smi -L
"$nvcc" --version | tail -1
echo "== build loom ($build)"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
test -f "$build/plugins/libloom-cupti.so" || { echo "run.sh: the CUPTI backend was not built"; exit 1; }
out=$build/gpu-run
mkdir -p "$out"
echo "== build tests/gpu/app.cu"
"$nvcc" -O2 -o "$out/app" "$src/tests/gpu/app.cu" -I"$src/include" -L"$build" -lloom \
  -Xlinker -rpath="$build"
echo "== loom record"
"$build/loom" backends || true
"$build/loom" record -o "$out/app.json.gz" --devices cpu,cuda --plugin "$build/plugins/libloom-cupti.so" \
  -- "$out/app"
"$build/loom" convert "$out/app.json.gz" "$out/app.pftrace"
rc=0
for t in "$out/app.json.gz" "$out/app.pftrace"; do
  echo "== check $t"
  /usr/bin/python3 "$src/tests/gpu/check.py" --tp "$src/tests/tp/tp.mjs" "$t" || rc=1
done
"$build/loom" report "$out/app.json.gz" | head -40 || true
exit $rc
