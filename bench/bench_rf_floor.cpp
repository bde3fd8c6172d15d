// bench_rf_floor.cpp - the floor of recording PyTorch ops: a global
// RecordFunction callback that does nothing, for bench/bench_pytorch.py.
// What any observer pays (PyTorch's RecordFunction machinery, and with
// inputs the copy of every op's inputs), so that the benchmark can tell it
// from what loom's adapter adds.  Loaded into the benchmark's process after
// `import torch` (ctypes, RTLD_GLOBAL), then bench_rf_floor_add(inputs).
#include <ATen/record_function.h>

#include <atomic>

namespace {
std::atomic<uint64_t> starts{0};
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &) {
  starts.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}
void on_end(const at::RecordFunction &, at::ObserverContext *) {}
} // namespace

// Registers the empty callback, asking PyTorch for the inputs when inputs
// is non-zero (as loom's adapter does with shapes, and torch.profiler with
// record_shapes).  Returns the callback's handle.
extern "C" __attribute__((visibility("default"))) uint64_t bench_rf_floor_add(int inputs) {
  return at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end).needsInputs(inputs != 0));
}

// How many times the start callback ran (the benchmark checks the floor
// really observed the ops).
extern "C" __attribute__((visibility("default"))) uint64_t bench_rf_floor_starts(void) {
  return starts.load(std::memory_order_relaxed);
}
