/*
 * memfloor.h - the floor of bench_opencl's and bench_vulkan's `alloc`
 * runs: PAIRS pairs of loom_memory_alloc/free (libloom is in the process
 * under `loom record`), two of loom's own memory records per pair and no
 * runtime, in a process with a second thread of its own, as a runtime's
 * program has (pocl's, lavapipe's), so that loom's pager makes the records'
 * pages present for both alike (src/record/pager.c).
 */
#ifndef LOOM_BENCH_MEMFLOOR_H
#define LOOM_BENCH_MEMFLOOR_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

/* ns per pair: wall time, CPU time of every thread, the thread's CPU time */
typedef struct memfloor { double wall, cpu, thread; } memfloor;

static double memfloor_clock(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *memfloor_idle(void *arg) {
  pause();
  return arg;
}

/* 0 with *out filled; -1 when libloom's calls or the thread are missing. */
static int memfloor_run(long n, uint64_t bytes, memfloor *out) {
  typedef void (*mem_fn)(uint64_t, uint64_t, int, int32_t, uint64_t);
  mem_fn al = (mem_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "loom_memory_alloc");
  mem_fn fr = (mem_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "loom_memory_free");
  pthread_t th;
  if (!al || !fr || pthread_create(&th, NULL, memfloor_idle, NULL) != 0) return -1;
  for (uint64_t i = 0; i < 64; i++) { /* warm up, as the runtimes' loops */
    al(0x1000 + i, bytes, 1, 0, 0);
    fr(0x1000 + i, 0, 1, 0, 0);
  }
  double t0 = memfloor_clock(CLOCK_MONOTONIC), p0 = memfloor_clock(CLOCK_PROCESS_CPUTIME_ID),
         c0 = memfloor_clock(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < n; i++) {
    al(0x100000 + (uint64_t)i, bytes, 1, 0, 0);
    fr(0x100000 + (uint64_t)i, 0, 1, 0, 0);
  }
  out->thread = (memfloor_clock(CLOCK_THREAD_CPUTIME_ID) - c0) / n;
  out->cpu = (memfloor_clock(CLOCK_PROCESS_CPUTIME_ID) - p0) / n;
  out->wall = (memfloor_clock(CLOCK_MONOTONIC) - t0) / n;
  return 0;
}

#endif
