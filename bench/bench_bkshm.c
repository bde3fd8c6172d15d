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

static double clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* What one measurement gives: ns per record of the thread's CPU and wall. */
typedef struct cost { double cpu, wall; } cost;
static double t0_cpu, t0_wall;
static void start_clock(void) {
  t0_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0_wall = clock_ns(CLOCK_MONOTONIC);
}
static cost stop_clock(long n) {
  return (cost){(clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0_cpu) / (double)n,
                (clock_ns(CLOCK_MONOTONIC) - t0_wall) / (double)n};
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
    .name = "benchbk", .device_type = "benchbk",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMORY),
    .configure = b_configure, .start = b_start, .stop = b_stop, .flush = b_flush};

/* Emits nrec kernel records, or (memory) nrec/2 allocations and their frees. */
static void emit_loop(int memory) {
  uint32_t name = host->intern(bk, memory ? "alloc" : "kernel", SIZE_MAX);
  loom_arg args[4] = {{.key = "grid", .type = LOOM_ARG_UINT},
                      {.key = "block", .type = LOOM_ARG_UINT, .v.u = 256}};
  if (memory) {
    args[0] = (loom_arg){.key = "addr", .type = LOOM_ARG_UINT};
    args[1] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = 256};
    args[2] = (loom_arg){.key = "device", .type = LOOM_ARG_UINT, .v.u = dev};
    args[3] = (loom_arg){.key = "memory_kind", .type = LOOM_ARG_STRING, .v.s = "device"};
  }
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_KERNEL, .clock = clk, .device = dev,
                   .resource = queue, .name = name, .nargs = 2, .args = args};
  if (memory) r.kind = LOOM_KIND_MEMORY, r.device = LOOM_DEVICE_HOST, r.resource = 0;
  for (long i = 0; i < nrec; i++) {
    r.start = (uint64_t)i * 10, r.end = r.start + 5, r.correlation = (uint64_t)i + 1;
    args[0].v.u = memory ? 0x10000 + (uint64_t)(i / 2) * 256 : (uint64_t)i;
    if (memory) {
      r.flags = i % 2 ? LOOM_RECORD_F_FREE : LOOM_RECORD_F_ALLOC;
      r.nargs = i % 2 ? 1 : 4;
      r.end = r.start;
    }
    if (host->emit(bk, &r) != LOOM_OK) exit(3);
  }
}

/* ns per emit in a session of this process. */
static cost emits(int memory) {
  host = loom_host_get(LOOM_ABI_MAJOR);
  if (!host || host->backend_register(&ops, "bench_bkshm")) return (cost){0, 0};
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,benchbk",
                             .options = "backend_memory_cap=4g"};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s) || !bk) return (cost){0, 0};
  start_clock();
  emit_loop(memory);
  cost t = stop_clock(nrec);
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

static cost run_floor(void) {
  frec *r = malloc(sizeof *r * (size_t)nrec);
  farg *g = malloc(sizeof *g * 2 * (size_t)nrec);
  if (!r || !g) return (cost){0, 0};
  start_clock();
  for (long i = 0; i < nrec; i++) floor_one(r, g, i);
  cost t = stop_clock(nrec);
  free(r);
  free(g);
  return t;
}

/* One measurement in a fresh process: 0 floor, 1 heap, 2 arena, 3 memory
 * records in the arena. */
enum { WAYS = 4 };
static cost measure(int kind, const char *dir) {
  int fds[2];
  if (pipe(fds)) return (cost){0, 0};
  pid_t p = fork();
  if (p == 0) {
    cost t = {0, 0};
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_bkshm-%d.arena", dir, (int)getpid());
    if (kind == 0) t = run_floor();
    else if (kind == 1 || LOOM_TOOLS_GET()->arena_begin(path, "") == 0) t = emits(kind == 3);
    if (kind >= 2) unlink(path);
    if (write(fds[1], &t, sizeof t) != sizeof t) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  cost t = {0, 0};
  if (read(fds[0], &t, sizeof t) != sizeof t) t = (cost){0, 0};
  close(fds[0]);
  waitpid(p, NULL, 0);
  return t;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *shm = getenv("LOOM_SHM_DIR");
  if (argc > 1) nrec = atol(argv[1]);
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  const char *dir = argc > 3 ? argv[3] : shm && *shm ? shm : "/dev/shm";
  if (nrec < 2 || rounds < 1 || rounds > 1000) {
    fprintf(stderr, "usage: bench_bkshm [RECORDS >= 2 [ROUNDS [DIR]]]\n");
    return 2;
  }
  setenv("LOOM_LOG", "error", 1);
  static double t[WAYS][2][1000];
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < WAYS; k++) {
      cost c = measure(k, dir);
      t[k][0][r] = c.cpu, t[k][1][r] = c.wall;
    }
  const char *names[WAYS] = {"floor (lock + copy)", "emit, heap records", "emit, arena records",
                             "emit, memory records"};
  double mn[WAYS][2], med[WAYS][2];
  printf("ns per record, %ld records, %d interleaved rounds, arena in %s;\n"
         "%-22s %21s %21s\n", nrec, rounds, dir, "min / median", "thread CPU", "wall");
  for (int k = 0; k < WAYS; k++) {
    for (int m = 0; m < 2; m++) {
      qsort(t[k][m], (size_t)rounds, sizeof(double), cmp);
      mn[k][m] = t[k][m][0], med[k][m] = t[k][m][rounds / 2];
    }
    printf("%-22s %9.1f / %9.1f %9.1f / %9.1f\n", names[k], mn[k][0], med[k][0], mn[k][1],
           med[k][1]);
  }
  if (mn[1][0] > 0 && med[1][0] > 0)
    printf("arena / heap (thread CPU): %.2fx (min) %.2fx (median)\n", mn[2][0] / mn[1][0],
           med[2][0] / med[1][0]);
  return mn[1][0] > 0 && mn[2][0] > 0 && mn[3][0] > 0 ? 0 : 1;
}
