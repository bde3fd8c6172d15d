/*
 * bench_evsort - putting a trace's events in step 1's order (track, start,
 * longer first, kind, insertion order): loom's index sort (src/trace/
 * evsort.c, which every saved trace and lanes, the memory walk and windows
 * use) against qsort of the 56-byte events with the same comparator (what
 * the trace used before) and qsort of indices, in the same rounds, with the
 * floor of one pass that reads each event's track and start.  The events:
 * per op a memory instant, an inner op, another instant and the outer op,
 * in the order a recording collects them (each op at its end).
 *   bench_evsort [EVENTS] [ROUNDS]   (default 1200000, 5)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/loom.h"
#include "trace/trace.h"
#include "util/util.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const loom__ev *cmp_ev;
static int cmp_idx(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  int c = loom__ev_cmp_track_time(&cmp_ev[x], &cmp_ev[y]);
  return c ? c : x < y ? -1 : x > y;
}
static int cmp_events(const void *a, const void *b) { return loom__ev_cmp_track_time(a, b); }

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void fill(loom__ev *e, size_t n) {
  int64_t ts = 1700000000000000000;
  for (size_t k = 0; k + 4 <= n; k += 4, ts += 1000) {
    uint32_t a = (uint32_t)k;
    e[k] = (loom__ev){.ts = ts + 20, .kind = LOOM_KIND_MEMORY, .args_off = a};
    e[k + 1] = (loom__ev){.ts = ts + 10, .dur = 50, .kind = LOOM_KIND_CPU_OP, .args_off = a + 1};
    e[k + 2] = (loom__ev){.ts = ts + 70, .kind = LOOM_KIND_MEMORY, .args_off = a + 2};
    e[k + 3] = (loom__ev){.ts = ts, .dur = 100, .kind = LOOM_KIND_CPU_OP, .args_off = a + 3};
  }
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? (size_t)atol(argv[1]) / 4 * 4 : 1200000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 4 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "usage: bench_evsort [EVENTS] [ROUNDS]\n");
    return 2;
  }
  loom_trace *t = loom__trace_new();
  loom__ev *copy = malloc(n * sizeof *copy);
  uint32_t *idx = malloc(n * sizeof *idx), *want = malloc(n * sizeof *want);
  t->ev = loom__array_alloc(n, sizeof *t->ev); /* loom_trace_free frees it so */
  if (!t || !copy || !idx || !want || !t->ev) return 1;
  t->nev = t->cap_ev = n;
  fill(t->ev, n);
  cmp_ev = t->ev;
  double w[4][64];
  volatile int64_t sink = 0;
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    int64_t acc = 0;
    for (size_t i = 0; i < n; i++) acc += t->ev[i].ts ^ t->ev[i].track;
    sink += acc;
    double t1 = now();
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    loom__ev_sort_indices(t, idx, n);
    double t2 = now();
    for (size_t i = 0; i < n; i++) want[i] = (uint32_t)i;
    qsort(want, n, sizeof *want, cmp_idx);
    double t3 = now();
    memcpy(copy, t->ev, n * sizeof *copy);
    double t4 = now();
    qsort(copy, n, sizeof *copy, cmp_events);
    double t5 = now();
    if (memcmp(idx, want, n * sizeof *idx)) {
      fprintf(stderr, "bench_evsort: the index sort differs from qsort's order\n");
      return 1;
    }
    w[0][r] = t1 - t0, w[1][r] = t2 - t1, w[2][r] = t3 - t2, w[3][r] = t5 - t4;
  }
  static const char *const what[] = {"floor: read track and start", "loom's index sort (evsort.c)",
                                     "qsort of indices", "qsort of the events"};
  printf("%zu events, %d rounds: ns an event, min / median\n", n, rounds);
  for (int k = 0; k < 4; k++) {
    qsort(w[k], (size_t)rounds, sizeof w[k][0], cmp_d);
    printf("%-30s %6.1f / %6.1f\n", what[k], w[k][0] * 1e9 / (double)n,
           w[k][rounds / 2] * 1e9 / (double)n);
  }
  printf("index sort / qsort of the events, by median: %.2fx\n",
         w[1][rounds / 2] / w[3][rounds / 2]);
  free(copy), free(idx), free(want);
  loom_trace_free(t);
  return (int)(sink & 0);
}
