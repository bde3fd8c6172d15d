/*
 * bench_perf_work.c - the CPU-bound program bench_perf.py times: a fixed
 * amount of work (not a time budget, so a slower run shows as more time)
 * spread over a few call levels, so samples carry real call chains.
 * Prints the wall and CPU time of the work alone, in nanoseconds, so the
 * driver can tell the program's slowdown from loom's start and flush.
 *
 *   bench_perf_work [ITERATIONS [FLOOR_HZ]]   (default 60, about 1 s here)
 *
 * With FLOOR_HZ the program samples itself as cheaply as any sampler can:
 * a cpu-clock perf event at FLOOR_HZ on its own thread with only the time
 * in each sample (no call chain, no registers, no stack), and a thread that
 * polls the ring and throws its records away.  That is the floor: the
 * timer interrupt and the kernel's sample, which every sampling profiler
 * pays on this machine (in a VM each one costs exits to the hypervisor).
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* ---- the floor sampler (FLOOR_HZ) ---------------------------------------- */
enum { FLOOR_PAGES = 64 };
static atomic_int floor_stop;
static int floor_fd = -1;
static struct perf_event_mmap_page *floor_ring;

static void *floor_reader(void *arg) {
  (void)arg;
  struct pollfd p = {floor_fd, POLLIN, 0};
  while (!atomic_load(&floor_stop)) {
    poll(&p, 1, 20);
    uint64_t head = __atomic_load_n(&floor_ring->data_head, __ATOMIC_ACQUIRE);
    __atomic_store_n(&floor_ring->data_tail, head, __ATOMIC_RELEASE); /* records dropped */
  }
  return NULL;
}

static int floor_start(long hz, pthread_t *th) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.sample_period = 1000000000ull / (unsigned long long)hz;
  a.sample_type = PERF_SAMPLE_TIME;
  a.exclude_kernel = 1; /* works at any perf_event_paranoid up to 2 */
  a.exclude_hv = 1;
  a.watermark = 1;
  floor_fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
  if (floor_fd < 0) return -1;
  long page = sysconf(_SC_PAGESIZE);
  void *m = mmap(NULL, (FLOOR_PAGES + 1) * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, floor_fd, 0);
  if (m == MAP_FAILED) return -1;
  floor_ring = m;
  return pthread_create(th, NULL, floor_reader, NULL) ? -1 : 0;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 60;
  long floor_hz = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
  if (iters < 1) iters = 1;
  pthread_t th;
  if (floor_hz > 0 && floor_start(floor_hz, &th)) {
    perror("bench_perf_work: the floor sampler (perf_event_open)");
    return 1;
  }
  unsigned long long w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  double x = 1.0;
  for (long i = 0; i < iters; i++)
    for (int j = 0; j < 20; j++) x = middle(x, j % 6);
  sink = x;
  unsigned long long w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  if (floor_hz > 0) {
    atomic_store(&floor_stop, 1);
    pthread_join(th, NULL);
  }
  printf("work_wall_ns %llu work_cpu_ns %llu\n", w1 - w0, c1 - c0);
  return 0;
}
