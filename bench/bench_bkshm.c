/*
 * bench_bkshm.c - what keeping backend records in the shared-memory arena
 * (docs/survival.md, src/core/bkarena.c) costs a backend's emit: ns per
 * record (a kernel with two arguments, through host->emit) with the
 * records in the heap (no arena, as without loom record) against records in
 * the arena (a MAP_SHARED file, as under loom record), and the floor (the
 * lock emit takes, a 64-byte record and two 16-byte arguments copied into
 * arrays grown in advance).
 *
 * Each measurement runs in a fresh forked process (the arena is per process
 * and cannot be turned off once on), in interleaved rounds; min and median.
 * usage: bench_bkshm [RECORDS [ROUNDS [DIR]]]  (default 1,000,000, 7, $TMPDIR or /tmp)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"
#include "loom/tools.h"
#include "loom/plugin.h"

/* src/record/arena.c (private to loom-preload; exported for it) */

static long nrec = 1000000;
static const loom_host *host;
static loom_backend *bk;
static loom_clock clk;
static uint32_t dev, queue;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static loom_status b_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  loom_device_info info = {.struct_size = sizeof info, .name = "bench device"};
  if (host->clock_declare(b, LOOM_CLOCK_MONOTONIC_RAW, "host", &clk) ||
      host->device_add(b, &info, &dev) || host->resource_add(b, dev, "q", 1, &queue))
    return LOOM_EBACKEND;
  return LOOM_OK;
}
static loom_status b_start(loom_backend *b) { bk = b; return LOOM_OK; }
static loom_status b_stop(loom_backend *b) { (void)b; return LOOM_OK; }
static loom_status b_flush(loom_backend *b) { (void)b; return LOOM_OK; }
static const loom_backend_ops ops = {
    .struct_size = sizeof ops, .abi_major = LOOM_ABI_MAJOR, .abi_minor = LOOM_ABI_MINOR,
    .name = "benchbk", .device_type = "benchbk", .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL),
    .configure = b_configure, .start = b_start, .stop = b_stop, .flush = b_flush};

/* ns per emit in a session of this process. */
static double emits(void) {
  host = loom_host_get(LOOM_ABI_MAJOR);
  if (!host || host->backend_register(&ops, "bench_bkshm")) return 0;
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,benchbk",
                             .options = "backend_memory_cap=4g"};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s) || !bk) return 0;
  uint32_t name = host->intern(bk, "kernel", SIZE_MAX);
  loom_arg args[2] = {{.key = "grid", .type = LOOM_ARG_UINT}, {.key = "block", .type = LOOM_ARG_UINT, .v.u = 256}};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_KERNEL, .clock = clk, .device = dev,
                   .resource = queue, .name = name, .nargs = 2, .args = args};
  double t0 = now_ns();
  for (long i = 0; i < nrec; i++) {
    r.start = (uint64_t)i * 10, r.end = r.start + 5, r.correlation = (uint64_t)i + 1;
    args[0].v.u = (uint64_t)i;
    host->emit(bk, &r);
  }
  double t = (now_ns() - t0) / (double)nrec;
  loom_session_stop(s, NULL);
  loom_session_destroy(s);
  return t;
}

typedef struct frec { uint64_t a[8]; } frec;
typedef struct farg { uint64_t a[2]; } farg;
static pthread_mutex_t fmu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) static void floor_one(frec *r, farg *g, long i) {
  pthread_mutex_lock(&fmu);
  r[i] = (frec){{(uint64_t)i * 10, (uint64_t)i * 10 + 5, (uint64_t)i + 1, 0, 1, 2, 3, 4}};
  g[2 * i] = (farg){{1, (uint64_t)i}};
  g[2 * i + 1] = (farg){{2, 256}};
  pthread_mutex_unlock(&fmu);
}

static double run_floor(void) {
  frec *r = malloc(sizeof *r * (size_t)nrec);
  farg *g = malloc(sizeof *g * 2 * (size_t)nrec);
  if (!r || !g) return 0;
  double t0 = now_ns();
  for (long i = 0; i < nrec; i++) floor_one(r, g, i);
  double t = (now_ns() - t0) / (double)nrec;
  free(r);
  free(g);
  return t;
}

/* One measurement in a fresh process: 0 floor, 1 heap, 2 arena. */
static double measure(int kind, const char *dir) {
  int fds[2];
  if (pipe(fds)) return 0;
  pid_t p = fork();
  if (p == 0) {
    double t = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_bkshm-%d.arena", dir, (int)getpid());
    if (kind == 0) t = run_floor();
    else if (kind == 1 || LOOM_TOOLS_GET()->arena_begin(path, "") == 0) t = emits();
    if (kind == 2) unlink(path);
    if (write(fds[1], &t, sizeof t) != sizeof t) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  double t = 0;
  if (read(fds[0], &t, sizeof t) != sizeof t) t = 0;
  close(fds[0]);
  waitpid(p, NULL, 0);
  return t;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc > 1) nrec = atol(argv[1]);
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  const char *dir = argc > 3 ? argv[3] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  if (nrec < 1 || rounds < 1 || rounds > 1000) {
    fprintf(stderr, "usage: bench_bkshm [RECORDS [ROUNDS [DIR]]]\n");
    return 2;
  }
  setenv("LOOM_LOG", "error", 1);
  double *t[3];
  for (int k = 0; k < 3; k++) t[k] = calloc((size_t)rounds, sizeof(double));
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < 3; k++) t[k][r] = measure(k, dir);
  const char *names[] = {"floor (lock + copy)", "emit, heap records", "emit, arena records"};
  double med[3], mn[3];
  for (int k = 0; k < 3; k++) {
    qsort(t[k], (size_t)rounds, sizeof(double), cmp);
    mn[k] = t[k][0], med[k] = t[k][rounds / 2];
    printf("%-22s %8.2f ns/record min %8.2f median\n", names[k], mn[k], med[k]);
  }
  if (mn[1] > 0 && med[1] > 0)
    printf("arena / heap: %.2fx (min) %.2fx (median); %ld records, %d rounds\n", mn[2] / mn[1],
           med[2] / med[1], nrec, rounds);
  for (int k = 0; k < 3; k++) free(t[k]);
  return mn[1] > 0 && mn[2] > 0 ? 0 : 1;
}
