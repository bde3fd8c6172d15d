/*
 * torch_report.cpp - reports to PyTorch's profiler as a device allocator
 * does (c10::reportMemoryUsageToProfiler, here for a CUDA device of a CPU
 * build: no CUDA is needed to call it), for test_torch_memory.c: under
 * `loom record` the adapter turns each report into a loom memory record.
 * It links libc10 only and loads libtorch_cpu with dlopen, as Python does,
 * which is when the adapter attaches; its own calls then reach the
 * adapter as the allocators' do (through its GOT).  It reports 100 bytes
 * on the CPU, then on cuda:1 an allocation of 4096 bytes (pool reserved
 * 2 MiB) and its free (reserved 2 MiB), then the CPU block's free; prints
 * "enabled N" (c10::memoryProfilingEnabled() as the allocators see it).
 */
#include <c10/core/Allocator.h>
#include <dlfcn.h>

#include <cstdio>

int main() {
  if (!dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_GLOBAL)) {
    std::printf("no libtorch_cpu: %s\n", dlerror());
    return 1;
  }
  static char cpu_block[100], dev_block[16];
  c10::Device cuda1(c10::DeviceType::CUDA, 1), cpu(c10::DeviceType::CPU);
  std::printf("enabled %d\n", c10::memoryProfilingEnabled() ? 1 : 0);
  c10::reportMemoryUsageToProfiler(cpu_block, 100, 100, 0, cpu);
  c10::reportMemoryUsageToProfiler(dev_block, 4096, 4096, 2 << 20, cuda1);
  c10::reportMemoryUsageToProfiler(dev_block, -4096, 0, 2 << 20, cuda1);
  c10::reportMemoryUsageToProfiler(cpu_block, -100, 0, 0, cpu);
  return 0;
}
