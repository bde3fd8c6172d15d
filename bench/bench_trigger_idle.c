/*
 * bench_trigger_idle.c - what an annotation call costs when no session
 * records: loom.h's inline check (loom_active_v1 loaded and tested in the
 * caller, the call into libloom only when set) against the floor it is
 * meant to reach, an inline load and branch of the program's own, and
 * against the call a program compiled with an older header makes (the
 * exported function, through the PLT).  The same in a process that waits
 * for `loom trigger`: a session in window mode (windows=on) started, no
 * window recording, and the control socket's thread serving requests (the
 * same server loom-preload.so runs, linked in here).  Floors beside them:
 * the loop alone, an empty function of the program, an empty function in a
 * shared library (bench_empty.c).
 *
 * The inline floor is loom's check with the program's own flag: the same
 * relaxed atomic load (__atomic_load_n) of a 32-bit global with external
 * linkage (the compiler can assume nothing about its value), the same mask
 * test, __builtin_expect and a never-taken call, twice per pair.  Both
 * flags sit in the program's data (loom_active_v1 is copied there by the
 * dynamic linker, a copy relocation, as for any program that reads it), so
 * both loads are one instruction relative to the instruction pointer; an
 * atomic load is neither hoisted out of the loop nor merged with the next,
 * in either loop alike; and the loops are placed alike (LOOP_FN).
 *
 * Rounds interleave the cases (in a rotating order); each prints min and
 * median ns per call (a loom_range_push or a loom_range_pop) over the
 * rounds.  The goal (issue 38): loom's inline idle call at most 1.2x the
 * inline load and branch, by median.  Short rounds, many of them: on a
 * shared machine the minimum is a round that no other process interrupted.
 * usage: bench_trigger_idle [PAIRS_PER_ROUND [ROUNDS]]   (200,000, 301)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>

#include "loom/loom.h"
#include "loom/tools.h"

static long pairs = 200000;

/* Each measured loop in a function of its own, at the same alignment: the
 * inline floor's loop and loom's compile to the same instructions at the
 * same offset, so that neither gains from where its loop falls in the
 * instruction cache or the decoders' windows. */
#define LOOP_FN __attribute__((noinline, aligned(64)))

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

LOOP_FN static double run_floor(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) __asm__ volatile("" ::: "memory");
  return (now_ns() - t0) / (2.0 * pairs);
}

/* this program's empty function, and the shared library's */
__attribute__((noinline)) static void empty_push(const char *name) {
  __asm__ volatile("" ::"r"(name));
}
__attribute__((noinline)) static void empty_pop(void) { __asm__ volatile(""); }
void bench_empty_push(const char *name);
void bench_empty_pop(void);

LOOP_FN static double run_empty(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    empty_push("step_work");
    empty_pop();
  }
  return (now_ns() - t0) / (2.0 * pairs);
}

LOOP_FN static double run_empty_so(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    bench_empty_push("step_work");
    bench_empty_pop();
  }
  return (now_ns() - t0) / (2.0 * pairs);
}

/* The inline floor: loom.h's check (LOOM__ACTIVE) on this program's flag,
 * never set. */
uint32_t bench_flag;
#define BENCH_ON __builtin_expect((__atomic_load_n(&bench_flag, __ATOMIC_RELAXED) & 1u) != 0, 0)
static inline void flag_push(const char *name) {
  if (BENCH_ON) bench_empty_push(name);
}
static inline void flag_pop(void) {
  if (BENCH_ON) bench_empty_pop();
}

LOOP_FN static double run_flag(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    flag_push("step_work");
    flag_pop();
  }
  return (now_ns() - t0) / (2.0 * pairs);
}

/* loom.h's calls: the inline check */
LOOP_FN static double run_calls(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    loom_range_push("step_work");
    loom_range_pop();
  }
  return (now_ns() - t0) / (2.0 * pairs);
}

/* the exported functions, as a program compiled with an older loom.h
 * calls them */
LOOP_FN static double run_exported(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    (loom_range_push)("step_work");
    (loom_range_pop)();
  }
  return (now_ns() - t0) / (2.0 * pairs);
}

static loom_session *waiting;

/* A session waiting for a trigger: window mode, nothing recording, and the
 * control socket served. */
static void wait_begin(void) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = "windows=on"};
  if (loom_session_create(&cfg, &waiting) || loom_session_start(waiting)) {
    fprintf(stderr, "bench: cannot start a session waiting for triggers: %s\n", loom_last_error());
    exit(1);
  }
  LOOM_TOOLS_GET()->ctl_start();
}

static void wait_end(void) {
  LOOM_TOOLS_GET()->ctl_stop("the benchmark round ended");
  loom_trace *t = NULL;
  loom_session_stop(waiting, &t);
  loom_session_destroy(waiting);
  loom_trace_free(t);
}

static double run_waiting(double (*run)(void)) {
  wait_begin();
  double ns = run();
  wait_end();
  return ns;
}

/* Asks the server what `loom trigger --list` asks; 1 when it answers. */
static int answers(const char *sock) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%.*s", (int)sizeof a.sun_path - 1, sock);
  char buf[512] = "";
  const char req[] = LOOM_TOOLS_CTL_MAGIC "\nop=info\n\n";
  int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
           write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1) &&
           read(fd, buf, sizeof buf - 1) > 0 && !strncmp(buf, "info ", 5);
  if (fd >= 0) close(fd);
  return ok;
}

/* 1 when the server answers and the waiting session leaves the host bit of
 * loom_active_v1 clear (and sets it again to 0 at its stop). */
static int check_waiting(void) {
  wait_begin();
  char dir[4096], sock[4200];
  LOOM_TOOLS_GET()->ctl_dir_name(dir, sizeof dir, getenv("XDG_RUNTIME_DIR"), geteuid());
  LOOM_TOOLS_GET()->ctl_sock_path(sock, sizeof sock, dir, (long)getpid());
  int served = answers(sock);
  uint32_t on = __atomic_load_n(&loom_active_v1, __ATOMIC_RELAXED);
  wait_end();
  uint32_t off = __atomic_load_n(&loom_active_v1, __ATOMIC_RELAXED);
  if (!served) fprintf(stderr, "bench: no control socket answers at %s\n", sock);
  if (on & LOOM_ACTIVE_HOST) fprintf(stderr, "bench: the waiting session records the host\n");
  if (off) fprintf(stderr, "bench: loom_active_v1 is %u with no session\n", off);
  return served && !(on & LOOM_ACTIVE_HOST) && !off;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void stats(double *v, int n, double *min, double *med) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  *min = v[0];
  *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

enum { FLOOR, FLAG, EMPTY, EMPTY_SO, INLINE, EXPORTED, WAIT, WAIT_EXPORTED, NRUN };

static double run_case(int k) {
  switch (k) {
  case FLOOR: return run_floor();
  case FLAG: return run_flag();
  case EMPTY: return run_empty();
  case EMPTY_SO: return run_empty_so();
  case INLINE: return run_calls();
  case EXPORTED: return run_exported();
  case WAIT: return run_waiting(run_calls);
  default: return run_waiting(run_exported);
  }
}

static void report(int rounds, const double *mn, const double *md) {
  static const char *const what[NRUN] = {
      "floor: empty loop, no call", "floor: inline load and branch (own flag)",
      "floor: empty function, this program", "floor: empty function, shared library",
      "loom.h inline check, no session", "exported call, no session (older header)",
      "loom.h inline check, waiting for trigger", "exported call, waiting for trigger"};
  printf("annotation call with no session recording: %d rounds of %ld push/pop pairs, "
         "interleaved\n", rounds, pairs);
  printf("                                                  min   median  ns/call\n");
  for (int k = 0; k < NRUN; k++) printf("  %-42s %8.3f %8.3f\n", what[k], mn[k], md[k]);
  printf("  inline check / inline load and branch     %8.2fx %7.2fx\n", mn[INLINE] / mn[FLAG],
         md[INLINE] / md[FLAG]);
  printf("  inline check - inline load and branch     %8.3f %8.3f ns\n", mn[INLINE] - mn[FLAG],
         md[INLINE] - md[FLAG]);
  printf("  exported call / inline check              %8.2fx %7.2fx\n", mn[EXPORTED] / mn[INLINE],
         md[EXPORTED] / md[INLINE]);
  printf("  waiting / no session (inline check)       %8.2fx %7.2fx\n", mn[WAIT] / mn[INLINE],
         md[WAIT] / md[INLINE]);
  printf("  exported call - empty function, shared    %8.3f %8.3f ns  (loom's own part)\n",
         mn[EXPORTED] - mn[EMPTY_SO], md[EXPORTED] - md[EMPTY_SO]);
  double r = md[INLINE] / md[FLAG];
  printf("goal idle_call: %.2f (target 1.2) %s\n", r, r <= 1.2 ? "met" : "missed");
}

int main(int argc, char **argv) {
  int rounds = 301;
  if (argc > 1) pairs = atol(argv[1]);
  if (argc > 2) rounds = atoi(argv[2]);
  if (pairs <= 0 || rounds <= 0 || rounds > 1000) {
    fprintf(stderr, "usage: bench_trigger_idle [PAIRS_PER_ROUND [ROUNDS]]\n");
    return 2;
  }
  int ok = check_waiting(); /* the server is really there, the flag as it should be */
  double *v[NRUN], mn[NRUN], md[NRUN];
  for (int k = 0; k < NRUN; k++) v[k] = calloc((size_t)rounds, sizeof(double));
  run_floor(); /* warm up */
  run_calls();
  run_exported();
  for (int r = 0; r < rounds; r++)
    for (int j = 0; j < NRUN; j++) {
      int k = (r + j) % NRUN;
      v[k][r] = run_case(k);
    }
  for (int k = 0; k < NRUN; k++) stats(v[k], rounds, &mn[k], &md[k]);
  report(rounds, mn, md);
  for (int k = 0; k < NRUN; k++) free(v[k]);
  return ok ? 0 : 1;
}
