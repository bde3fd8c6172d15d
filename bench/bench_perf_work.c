/*
 * bench_perf_work.c - the CPU-bound program bench_perf.py times: a fixed
 * amount of work (not a time budget, so a slower run shows as more time)
 * spread over a few call levels, so samples carry real call chains.
 * Prints the wall and CPU time of the work alone, in nanoseconds, so the
 * driver can tell the program's slowdown from loom's start and flush.
 *
 *   bench_perf_work [ITERATIONS]      (default 60, about 1 s here)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink;

static unsigned long long now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

__attribute__((noinline)) static double leaf_mul(double x, int n) {
  for (int i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

__attribute__((noinline)) static double leaf_div(double x, int n) {
  for (int i = 0; i < n; i++) x = x / 1.0000001 + 1e-9;
  return x;
}

__attribute__((noinline)) static double middle(double x, int depth) {
  if (depth > 0) return middle(x, depth - 1) + 1e-12;
  return leaf_div(leaf_mul(x, 200000), 100000);
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 60;
  if (iters < 1) iters = 1;
  unsigned long long w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  double x = 1.0;
  for (long i = 0; i < iters; i++)
    for (int j = 0; j < 20; j++) x = middle(x, j % 6);
  sink = x;
  unsigned long long w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  printf("work_wall_ns %llu work_cpu_ns %llu\n", w1 - w0, c1 - c0);
  return 0;
}
