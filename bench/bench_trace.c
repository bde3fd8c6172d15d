/*
 * bench_trace.c - the Kineto-like trace of bench_report and bench_diff:
 * per iteration an op, its launch call and the kernel on one of four
 * streams (every 16th a copy), a step range every 1000 iterations.  slow
 * multiplies the second kernel's durations (1: the trace bench_report
 * times; 2: bench_diff's variant, one kernel twice as slow); with_memory
 * adds an allocation in each op and the free of the one of 8 iterations
 * before (bench_report --memory).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_trace.h"

/* --memory: an allocation in the op of iteration i and the free of the one
 * of iteration i - 8 (2 events), as PyTorch writes them with
 * profile_memory=True: Kineto's [memory] instants, the CUDA caching
 * allocator's running totals. */
static size_t memory_events(FILE *f, size_t i, long long ts) {
  unsigned long long addr = 0x7f0000000000ull + (unsigned long long)i * 4096;
  size_t bytes = 4096 + (i % 7) * 512, total = 8 * 6144, reserved = (size_t)1 << 26;
  fprintf(f, "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\","
             "\"pid\":1,\"tid\":1,\"ts\":%lld.%03lld,\"args\":{\"Total Reserved\":%zu,"
             "\"Total Allocated\":%zu,\"Bytes\":%zu,\"Addr\":%llu,\"Device Type\":1,"
             "\"Device Id\":0}},\n",
          (ts + 200) / 1000, (ts + 200) % 1000, reserved, total + bytes, bytes, addr);
  if (i < 8) return 1;
  fprintf(f, "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\","
             "\"pid\":1,\"tid\":1,\"ts\":%lld.%03lld,\"args\":{\"Total Reserved\":%zu,"
             "\"Total Allocated\":%zu,\"Bytes\":-%zu,\"Addr\":%llu,\"Device Type\":1,"
             "\"Device Id\":0}},\n",
          (ts + 300) / 1000, (ts + 300) % 1000, reserved, total, 4096 + ((i - 8) % 7) * 512,
          addr - 8 * 4096);
  return 2;
}

size_t bench_write_kineto(const char *path, size_t n, int slow, int with_memory,
                          size_t *memory) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(1);
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  static const char *kernels[] = {
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)",
      "ampere_sgemm_128x64_tn", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float> > >",
      "softmax_warp_forward", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"};
  static const char *ops[] = {"aten::add", "aten::mm", "aten::linear", "aten::mean", "aten::softmax",
                              "c10d::allreduce_"};
  fprintf(f, "{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0,\"name\":\"bench\"}],\n\"traceEvents\":[\n");
  size_t ev = 0;
  size_t mem_ev = 0;
  long long ts = 1700000000000000LL; /* ns */
  unsigned seed = 1;
  for (size_t i = 0; ev + 4 <= n; i++) {
    seed = seed * 1103515245u + 12345u;
    int k = (int)(seed >> 16) % 6;
    long long kd = 2000 + (seed >> 8) % 18000, lat = 3000 + (seed >> 4) % 17000;
    if (k == 1) kd *= slow;
    if (i % 1000 == 0) {
      fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%zu\",\"pid\":1,"
                 "\"tid\":1,\"ts\":%lld.%03lld,\"dur\":%lld.000},\n", i / 1000, ts / 1000, ts % 1000, 1000LL * 12);
      ev++;
    }
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":%lld.%03lld,"
               "\"dur\":9.500,\"args\":{\"External id\":%zu,\"Sequence number\":%zu,"
               "\"Input Dims\":[[64,64],[64,64]],\"Input type\":[\"float\",\"float\"]}},\n",
            ops[k], (ts + 100) / 1000, (ts + 100) % 1000, i + 1, i);
    if (with_memory) mem_ev += memory_events(f, i, ts);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
               "\"ts\":%lld.%03lld,\"dur\":4.250,\"args\":{\"External id\":%zu,\"correlation\":%zu,"
               "\"cbid\":211}},\n", (ts + 1000) / 1000, (ts + 1000) % 1000, i + 1, i + 1);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,\"tid\":%d,\"ts\":%lld.%03lld,"
               "\"dur\":%lld.%03lld,\"args\":{\"External id\":%zu,\"correlation\":%zu,\"device\":0,"
               "\"stream\":%d,\"grid\":[64,1,1],\"block\":[128,1,1],\"registers per thread\":32}},\n",
            kernels[k], 7 + (int)(i % 4), (ts + lat) / 1000, (ts + lat) % 1000, kd / 1000, kd % 1000, i + 1,
            i + 1, 7 + (int)(i % 4));
    ev += 3;
    if (i % 16 == 0) {
      fprintf(f, "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pinned -> Device)\",\"pid\":0,"
                 "\"tid\":20,\"ts\":%lld.%03lld,\"dur\":3.000,\"args\":{\"correlation\":%zu,\"stream\":20,"
                 "\"bytes\":65536}},\n", (ts + lat + 500) / 1000, (ts + lat + 500) % 1000, i + 1);
      ev++;
    }
    ts += 12000;
  }
  fprintf(f, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"end\",\"pid\":1,\"tid\":1,\"ts\":%lld}]}\n", ts / 1000);
  fclose(f);
  if (memory) *memory = mem_ev;
  return ev + 1 + mem_ev;
}
