/*
 * bench_shm.c - what the shared-memory arena (docs/survival.md) costs the
 * hot path: ns per range pair (loom_range_push + loom_range_pop) recording
 * into malloc'ed chunks against chunks in the arena (a MAP_SHARED file, as
 * under `loom record`), and the floor (two 32-byte records with a timestamp
 * each into a thread-local array).
 *
 * Each measurement runs in a fresh forked process (the arena is per process
 * and cannot be turned off once on), in interleaved rounds; min and median
 * over the rounds.  Two figures per kind: the first session (every chunk is
 * new memory: page faults included) and a second session in the same
 * process (chunks reused or allocated again, as the recorder does).
 * usage: bench_shm [PAIRS [ROUNDS [DIR]]]  (default 1,000,000, 7, $TMPDIR or /tmp)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "loom/loom.h"

/* src/record/arena.c (private to loom-preload; exported for it) */
int loom__arena_begin(const char *path, const char *out);

static long pairs = 1000000;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef struct rec { uint64_t ts, name, a, b; } rec;

__attribute__((noinline)) static void floor_pair(rec *r, const char *name) {
  r[0] = (rec){__rdtsc(), (uint64_t)(uintptr_t)name, 1, 0};
  r[1] = (rec){__rdtsc(), 0, 2, 0};
}

/* The floor into fresh memory (faults included, like a first session) */
static double run_floor(void) {
  rec *buf = malloc(sizeof(rec) * 2 * (size_t)pairs);
  if (!buf) return 0;
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) floor_pair(buf + 2 * i, "op");
  double t = (now_ns() - t0) / pairs;
  free(buf);
  return t;
}

static double session_pairs(void) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu",
                             .options = "buffer_size=256k,memory_cap=0"};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s)) {
    fprintf(stderr, "bench_shm: %s\n", loom_last_error());
    exit(1);
  }
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    loom_range_push("op");
    loom_range_pop();
  }
  double t = (now_ns() - t0) / pairs;
  loom_trace *tr = NULL;
  loom_session_stop(s, &tr);
  loom_session_destroy(s);
  loom_trace_free(tr);
  return t;
}

enum { K_FLOOR, K_MALLOC, K_ARENA, NK };
static const char *const kind_name[NK] = {"floor", "malloc chunks", "arena chunks"};

/* One measurement in a child: first and second session (floor: twice). */
static int measure(int kind, const char *dir, double out[2]) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t c = fork();
  if (c == 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_shm.%d.arena", dir, (int)getpid());
    if (kind == K_ARENA && loom__arena_begin(path, "/dev/null") != 0) _exit(3);
    double r[2];
    for (int i = 0; i < 2; i++) r[i] = kind == K_FLOOR ? run_floor() : session_pairs();
    if (kind == K_ARENA) unlink(path);
    _exit(write(fds[1], r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
  }
  close(fds[1]);
  ssize_t n = c > 0 ? read(fds[0], out, 2 * sizeof *out) : -1;
  close(fds[0]);
  int st = 0;
  if (c > 0) waitpid(c, &st, 0);
  return n == (ssize_t)(2 * sizeof *out) && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc > 1) pairs = atol(argv[1]);
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  const char *dir = argc > 3 ? argv[3] : getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  if (pairs < 1000 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "usage: bench_shm [PAIRS>=1000 [ROUNDS 1..64 [DIR]]]\n");
    return 2;
  }
  double v[NK][2][64];
  for (int r = 0; r < rounds; r++)
    for (int j = 0; j < NK; j++) {
      int k = (j + r) % NK; /* rotate the order each round */
      double out[2];
      if (measure(k, dir, out) != 0) {
        fprintf(stderr, "bench_shm: the %s run failed (arena in %s)\n", kind_name[k], dir);
        return 1;
      }
      v[k][0][r] = out[0];
      v[k][1][r] = out[1];
    }
  printf("bench_shm: %ld range pairs per run, %d interleaved rounds, arena in %s\n", pairs,
         rounds, dir);
  double med[NK][2], mn[NK][2];
  for (int k = 0; k < NK; k++)
    for (int p = 0; p < 2; p++) {
      qsort(v[k][p], (size_t)rounds, sizeof(double), cmp_d);
      mn[k][p] = v[k][p][0];
      med[k][p] = v[k][p][rounds / 2];
    }
  static const char *const phase[2] = {"first session ", "second session"};
  for (int p = 0; p < 2; p++) {
    printf("%s  %-14s %-14s %-14s  arena/malloc (min, median)\n", phase[p], "floor",
           "malloc", "arena");
    printf("  ns/pair min   %-14.2f %-14.2f %-14.2f  %.3f\n", mn[K_FLOOR][p], mn[K_MALLOC][p],
           mn[K_ARENA][p], mn[K_ARENA][p] / mn[K_MALLOC][p]);
    printf("  ns/pair med   %-14.2f %-14.2f %-14.2f  %.3f\n", med[K_FLOOR][p], med[K_MALLOC][p],
           med[K_ARENA][p], med[K_ARENA][p] / med[K_MALLOC][p]);
    printf("  x floor (min) %-14s %-14.2f %-14.2f\n", "1", mn[K_MALLOC][p] / mn[K_FLOOR][p],
           mn[K_ARENA][p] / mn[K_FLOOR][p]);
  }
  return 0;
}
