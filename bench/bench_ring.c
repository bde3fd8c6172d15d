/*
 * bench_ring.c - cost of a range pair (push + pop) in flight-recorder mode
 * (mode=ring: each thread recycles its oldest chunk once its share of the
 * budget is used) against normal recording and the floor, measured in the
 * same run: a 32-byte record plus an rdtsc read, twice, into a thread-local
 * array (what any recorder must at least do).  The three are interleaved,
 * REPEAT times each, each run a fresh session; prints min and median ns per
 * pair and the ratios (goal: ring within 1.1x of normal).  The ring is much
 * smaller than what a run writes, so it wraps many times (the steady state:
 * no allocation), while normal recording allocates a chunk each time one
 * fills; "ring, never full" (a 2 GiB ring) allocates as normal recording
 * does, showing what ring mode adds at chunk boundaries.  Then the cost of a dump of the full ring (copy, build the trace).
 * usage: bench_ring [PAIRS [RING_SIZE]]   (default 2,000,000 and 16m)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "loom/loom.h"

enum { REPEAT = 7 };
static long pairs = 2000000;
static const char *ring_size = "16m";

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef struct rec { uint64_t ts, name, a, b; } rec;
static rec *floor_buf;

__attribute__((noinline)) static void floor_pair(const char *name, long i) {
  rec *r = floor_buf + 2 * i;
  r[0] = (rec){__rdtsc(), (uint64_t)(uintptr_t)name, 1, 0};
  r[1] = (rec){__rdtsc(), 0, 2, 0};
}

static double run_floor(void) {
  floor_buf = malloc(sizeof(rec) * 2 * (size_t)pairs);
  memset(floor_buf, 0, sizeof(rec) * 2 * (size_t)pairs); /* fault pages in */
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) floor_pair("op", i);
  double t = (now_ns() - t0) / pairs;
  free(floor_buf);
  return t;
}

static loom_session *begin(const char *opts) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = opts};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s)) {
    fprintf(stderr, "bench_ring: %s\n", loom_last_error());
    exit(1);
  }
  return s;
}

/* ns per pair recording with opts; *dump_ms: a dump at the end (ring). */
static double run_loom(const char *opts, double *dump_ms, size_t *dump_events) {
  loom_session *s = begin(opts);
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    loom_range_push("op");
    loom_range_pop();
  }
  double t = (now_ns() - t0) / pairs;
  if (dump_ms) {
    loom_trace *d = NULL;
    double d0 = now_ns();
    if (loom_session_dump(s, "bench", &d) != LOOM_OK) {
      fprintf(stderr, "bench_ring: %s\n", loom_last_error());
      exit(1);
    }
    *dump_ms = (now_ns() - d0) * 1e-6;
    *dump_events = loom_trace_event_count(d);
    loom_trace_free(d);
  }
  loom_trace *tr = NULL;
  loom_session_stop(s, &tr);
  loom_session_destroy(s);
  loom_trace_free(tr);
  return t;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double med(double *v) {
  double c[REPEAT];
  memcpy(c, v, sizeof c);
  qsort(c, REPEAT, sizeof *c, cmp);
  return c[REPEAT / 2];
}

static double min(double *v) {
  double m = v[0];
  for (int i = 1; i < REPEAT; i++) m = v[i] < m ? v[i] : m;
  return m;
}

int main(int argc, char **argv) {
  if (argc > 1) pairs = atol(argv[1]);
  if (argc > 2) ring_size = argv[2];
  if (pairs <= 0) {
    fprintf(stderr, "usage: bench_ring [PAIRS [RING_SIZE]]\n");
    return 2;
  }
  char ring_opts[128];
  snprintf(ring_opts, sizeof ring_opts, "mode=ring,ring_size=%s", ring_size);
  double fl[REPEAT], nm[REPEAT], rg[REPEAT], rb[REPEAT], dump[REPEAT], dump_big;
  size_t ev_big;
  size_t dump_ev = 0;
  run_loom("", NULL, NULL); /* warm up: the interner, the thread's buffer */
  for (int r = 0; r < REPEAT; r++) {
    fl[r] = run_floor();
    nm[r] = run_loom("", NULL, NULL);
    rg[r] = run_loom(ring_opts, &dump[r], &dump_ev);
    rb[r] = run_loom("mode=ring,ring_size=2g", &dump_big, &ev_big);
  }
  printf("bench_ring: %ld range pairs per run, %d runs of each, interleaved; ring_size=%s\n",
         pairs, REPEAT, ring_size);
  printf("  %-22s %8s %8s %10s %10s\n", "ns per pair", "min", "median", "/floor", "/normal");
  printf("  %-22s %8.2f %8.2f %10.2f %10s\n", "floor", min(fl), med(fl), 1.0, "");
  printf("  %-22s %8.2f %8.2f %10.2f %10.2f\n", "normal recording", min(nm), med(nm),
         med(nm) / med(fl), 1.0);
  printf("  %-22s %8.2f %8.2f %10.2f %10.2f\n", "ring mode", min(rg), med(rg),
         med(rg) / med(fl), med(rg) / med(nm));
  printf("  %-22s %8.2f %8.2f %10.2f %10.2f\n", "ring, never full", min(rb), med(rb),
         med(rb) / med(fl), med(rb) / med(nm));
  printf("  ring/normal by min: %.3f, by median: %.3f (goal: within 1.1)\n", min(rg) / min(nm),
         med(rg) / med(nm));
  printf("  dump of the full ring (%zu events): min %.1f ms, median %.1f ms\n", dump_ev,
         min(dump), med(dump));
  return 0;
}
