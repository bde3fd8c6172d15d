/*
 * bench_heap.c - what the host heap recorder (libloom-heap.so, `loom record
 * --memory host`) adds to a malloc/free pair of 64 bytes: the C library's
 * own pair (called directly, the baseline), the pair through the recorder's
 * functions while no session records the heap (one load and one branch
 * each), and while a session records it (two memory records per pair), the
 * default way (loom_memory_alloc/free into the host recorder, where libloom
 * has them; else the same as the next) and with heap.names=1 (the
 * backend's records named after the calls, through host->memory: host
 * records too, where libloom has it; else host->emit).
 * Recording writes its records to new memory, so the figures include the
 * page faults that brings (bench_pages measures them alone).  Each round
 * measures the four in turn (the order rotates),
 * a fresh session for the recorded one; min and median over the rounds of
 * ns per pair, and of the cost added over the baseline in the same round.
 *
 * It runs itself again with libloom-heap.so first in LD_PRELOAD.
 * usage: bench_heap [PAIRS [ROUNDS]]  (default 200000 pairs, 11 rounds)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"

enum { BASE, OFF, ON, NAMED, NMODES };
static const char *const mode_name[NMODES] = {
    "C library malloc/free (baseline)", "through libloom-heap, not recording",
    "recording (default way)", "recording, heap.names=1 (host->memory)"};

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
static malloc_fn volatile fm[2];
static free_fn volatile ff[2];

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per pair through the functions k (0 the C library's, 1 the process's). */
static double pairs(int k, long n) {
  malloc_fn m = fm[k];
  free_fn f = ff[k];
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    void *p = m(64);
    *(volatile char *)p = (char)i;
    f(p);
  }
  return (now_ns() - t0) / (double)n;
}

static double measure(int mode, long n) {
  if (mode == BASE || mode == OFF) return pairs(mode == BASE ? 0 : 1, n);
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,heap",
                             .options = mode == NAMED ? "heap.names=1" : NULL};
  loom_session *s = NULL;
  if (loom_session_create(&cfg, &s) != LOOM_OK || loom_session_start(s) != LOOM_OK) {
    fprintf(stderr, "bench_heap: no session: %s\n", loom_last_error());
    exit(1);
  }
  double r = pairs(1, n);
  loom_trace *t = NULL;
  loom_session_stop(s, &t);
  if (!t || loom_trace_event_count(t) < (size_t)n) { /* an allocation and a free per pair */
    fprintf(stderr, "bench_heap: the session recorded %zu events for %ld pairs\n",
            t ? loom_trace_event_count(t) : 0, n);
    exit(1);
  }
  loom_trace_free(t);
  loom_session_destroy(s);
  return r;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
static double minimum(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

/* Runs again with the recorder preloaded (once). */
static void preload_self(char **argv) {
  if (getenv("BENCH_HEAP_PRELOADED")) return;
  setenv("BENCH_HEAP_PRELOADED", "1", 1);
  setenv("LD_PRELOAD", HEAP_PLUGIN, 1);
  execv("/proc/self/exe", argv);
  perror("bench_heap: exec");
  exit(1);
}

int main(int argc, char **argv) {
  preload_self(argv);
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int rounds = argc > 2 ? atoi(argv[2]) : 11;
  if (rounds < 1 || rounds > 101 || n < 1000) return fprintf(stderr, "bad arguments\n"), 2;
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  fm[0] = (malloc_fn)(uintptr_t)dlsym(libc, "malloc");
  ff[0] = (free_fn)(uintptr_t)dlsym(libc, "free");
  fm[1] = (malloc_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "malloc");
  ff[1] = (free_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "free");
  Dl_info info;
  if (!fm[0] || !dladdr((void *)(uintptr_t)fm[1], &info) || !strstr(info.dli_fname, "loom-heap")) {
    fprintf(stderr, "bench_heap: malloc is not libloom-heap.so's (%s)\n", HEAP_PLUGIN);
    return 1;
  }
  loom_init();
  double v[NMODES][101], added[NMODES][101];
  for (int m = 0; m < NMODES; m++) measure(m, n / 10); /* warm up */
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < NMODES; k++) {
      int m = (r + k) % NMODES;
      v[m][r] = measure(m, n);
    }
    for (int m = 0; m < NMODES; m++) added[m][r] = v[m][r] - v[BASE][r];
  }
  printf("bench_heap: %ld malloc(64)/free pairs per measurement, %d rounds (ns per pair); "
         "default way: %s\n", n, rounds, dlsym(RTLD_DEFAULT, "loom_memory_alloc")
                                             ? "the host recorder (loom_memory_alloc)"
                                             : "host->emit (this libloom lacks loom_memory_alloc)");
  printf("  %-38s %8s %8s %10s %10s\n", "", "min", "median", "added min", "added med");
  double med_added[NMODES];
  for (int m = 0; m < NMODES; m++) {
    double amin = minimum(added[m], rounds);
    med_added[m] = median(added[m], rounds);
    printf("  %-38s %8.1f %8.1f %10.1f %10.1f\n", mode_name[m], minimum(v[m], rounds),
           median(v[m], rounds), amin, med_added[m]);
  }
  printf("goal heap_alloc_cost: %.1f ns (target 100 ns) %s\n", med_added[ON],
         med_added[ON] <= 100 ? "met" : "missed");
  return 0;
}
