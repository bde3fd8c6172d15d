/*
 * bench_shm.c - what the shared-memory arena (docs/survival.md) costs the
 * hot path: ns per range pair (loom_range_push + loom_range_pop) recording
 * into malloc'ed chunks against chunks in the arena (a MAP_SHARED file, as
 * under `loom record`) in a tmpfs folder (where loom record puts it:
 * LOOM_SHM_DIR, default /dev/shm) and, for comparison, on a disk
 * filesystem ($TMPDIR or /tmp, where it was before); and the floor (two
 * 32-byte records with a timestamp each into fresh malloc'ed memory).
 *
 * Each measurement runs in a fresh forked process (the arena is per process
 * and cannot be turned off once on), in interleaved rounds (the order
 * rotates); min and median over the rounds, of the wall clock and of the
 * thread's CPU time (on a loaded machine the wall clock also counts the
 * time the thread waited for a CPU).  Three sessions per process: the first
 * (every chunk is new memory: page faults included), a second (chunks
 * reused, as the recorder does), and a third after the arena file was
 * written back (fdatasync: what the kernel's flusher does to a dirty file
 * every 30 s in a long run; a no-op on tmpfs; nothing for malloc).
 * usage: bench_shm [PAIRS [ROUNDS [SHM_DIR [DISK_DIR]]]]
 *        (default 1,000,000, 7, $LOOM_SHM_DIR or /dev/shm, $TMPDIR or /tmp)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "loom/loom.h"
#include "loom/tools.h"

/* src/record/arena.c (private to loom-preload; exported for it) */

static long pairs = 1000000;

static double clk(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* wall and CPU ns per pair since t0 */
typedef struct tm2 { double wall, cpu; } tm2;
static tm2 mark(void) { return (tm2){clk(CLOCK_MONOTONIC), clk(CLOCK_THREAD_CPUTIME_ID)}; }
static tm2 per_pair(tm2 t0) {
  tm2 t = mark();
  return (tm2){(t.wall - t0.wall) / pairs, (t.cpu - t0.cpu) / pairs};
}

typedef struct rec { uint64_t ts, name, a, b; } rec;

__attribute__((noinline)) static void floor_pair(rec *r, const char *name) {
  r[0] = (rec){__rdtsc(), (uint64_t)(uintptr_t)name, 1, 0};
  r[1] = (rec){__rdtsc(), 0, 2, 0};
}

/* The floor into fresh memory (faults included, like a first session) */
static tm2 run_floor(void) {
  rec *buf = malloc(sizeof(rec) * 2 * (size_t)pairs);
  if (!buf) return (tm2){0, 0};
  tm2 t0 = mark();
  for (long i = 0; i < pairs; i++) floor_pair(buf + 2 * i, "op");
  tm2 t = per_pair(t0);
  free(buf);
  return t;
}

static tm2 session_pairs(void) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu",
                             .options = "buffer_size=256k,memory_cap=0"};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s)) {
    fprintf(stderr, "bench_shm: %s\n", loom_last_error());
    exit(1);
  }
  tm2 t0 = mark();
  for (long i = 0; i < pairs; i++) {
    loom_range_push("op");
    loom_range_pop();
  }
  tm2 t = per_pair(t0);
  loom_trace *tr = NULL;
  loom_session_stop(s, &tr);
  loom_session_destroy(s);
  loom_trace_free(tr);
  return t;
}

enum { K_FLOOR, K_MALLOC, K_SHM, K_DISK, NK };
static const char *const kind_name[NK] = {"floor", "malloc", "arena tmpfs", "arena disk"};
enum { NPH = 3 };

/* One measurement in a child: three sessions (floor: three runs). */
static int measure(int kind, const char *const dir[NK], tm2 out[NPH]) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t c = fork();
  if (c == 0) {
    char path[4096];
    int arena = kind == K_SHM || kind == K_DISK, afd = -1;
    snprintf(path, sizeof path, "%s/bench_shm.%d.arena", dir[kind], (int)getpid());
    if (arena && (LOOM_TOOLS_GET()->arena_begin(path, "/dev/null") != 0 || (afd = open(path, O_RDWR)) < 0))
      _exit(3);
    tm2 r[NPH];
    for (int i = 0; i < NPH; i++) {
      if (i == 2 && afd >= 0) fdatasync(afd); /* the flusher's writeback */
      r[i] = kind == K_FLOOR ? run_floor() : session_pairs();
    }
    if (arena) unlink(path);
    _exit(write(fds[1], r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
  }
  close(fds[1]);
  ssize_t n = c > 0 ? read(fds[0], out, NPH * sizeof *out) : -1;
  close(fds[0]);
  int st = 0;
  if (c > 0) waitpid(c, &st, 0);
  return n == (ssize_t)(NPH * sizeof *out) && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

static double v[NK][NPH][2][64]; /* kind, phase, wall|cpu, round */

static void print_phase(int p, int rounds) {
  static const char *const phase[NPH] = {"first session", "second session (chunks reused)",
                                         "third session, after writeback"};
  static const char *const clock_name[2] = {"wall", "cpu "};
  printf("%s\n  ns/pair        %-12s %-12s %-12s %-12s  tmpfs/malloc disk/malloc\n", phase[p],
         kind_name[0], kind_name[1], kind_name[2], kind_name[3]);
  for (int c = 0; c < 2; c++)
    for (int m = 0; m < 2; m++) { /* min, median */
      double x[NK];
      for (int k = 0; k < NK; k++) {
        qsort(v[k][p][c], (size_t)rounds, sizeof(double), cmp_d);
        x[k] = v[k][p][c][m ? rounds / 2 : 0];
      }
      printf("  %s %-6s    %-12.2f %-12.2f %-12.2f %-12.2f  %-12.3f %.3f\n", clock_name[c],
             m ? "median" : "min", x[0], x[1], x[2], x[3], x[2] / x[1], x[3] / x[1]);
    }
}

int main(int argc, char **argv) {
  if (argc > 1) pairs = atol(argv[1]);
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  const char *dir[NK] = {"", "", argc > 3 ? argv[3] : env_or("LOOM_SHM_DIR", "/dev/shm"),
                         argc > 4 ? argv[4] : env_or("TMPDIR", "/tmp")};
  if (pairs < 1000 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "usage: bench_shm [PAIRS>=1000 [ROUNDS 1..64 [SHM_DIR [DISK_DIR]]]]\n");
    return 2;
  }
  for (int r = 0; r < rounds; r++)
    for (int j = 0; j < NK; j++) {
      int k = (j + r) % NK; /* rotate the order each round */
      tm2 out[NPH];
      if (measure(k, dir, out) != 0) {
        fprintf(stderr, "bench_shm: the %s run failed (arena in %s)\n", kind_name[k], dir[k]);
        return 1;
      }
      for (int p = 0; p < NPH; p++) v[k][p][0][r] = out[p].wall, v[k][p][1][r] = out[p].cpu;
    }
  printf("bench_shm: %ld range pairs per run, %d interleaved rounds, arenas in %s (tmpfs) and "
         "%s (disk)\n", pairs, rounds, dir[K_SHM], dir[K_DISK]);
  for (int p = 0; p < NPH; p++) print_phase(p, rounds);
  return 0;
}
