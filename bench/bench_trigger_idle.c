/*
 * bench_trigger_idle.c - what an annotation call costs in a process that
 * waits for `loom trigger`: a session in window mode (windows=on) started,
 * no window recording, and the control socket's thread serving requests
 * (the same server loom-preload.so runs, linked in here).  Against, in the
 * same run: the same call with no loom session (the idle call), and the
 * floor (the loop with a compiler barrier, no call).
 *
 * Rounds interleave the three (in a rotating order); each prints min and
 * median ns per call (a loom_range_push or a loom_range_pop) over the rounds,
 * and the waiting call's cost over the idle call and over the floor.  The
 * goal: at most 1 ns per call while waiting, like the idle call.
 * Short rounds, many of them: on a shared machine the minimum is a round
 * that no other process interrupted.
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

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double run_floor(void) {
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

static double run_empty(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    empty_push("step_work");
    empty_pop();
  }
  return (now_ns() - t0) / (2.0 * pairs);
}

static double run_empty_so(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    bench_empty_push("step_work");
    bench_empty_pop();
  }
  return (now_ns() - t0) / (2.0 * pairs);
}

static double run_calls(void) {
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    loom_range_push("step_work");
    loom_range_pop();
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

static double run_waiting(void) {
  wait_begin();
  double ns = run_calls();
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

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void stats(double *v, int n, double *min, double *med) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  *min = v[0];
  *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  int rounds = 301;
  if (argc > 1) pairs = atol(argv[1]);
  if (argc > 2) rounds = atoi(argv[2]);
  if (pairs <= 0 || rounds <= 0 || rounds > 1000) {
    fprintf(stderr, "usage: bench_trigger_idle [PAIRS_PER_ROUND [ROUNDS]]\n");
    return 2;
  }
  /* the server is really there: its socket answers `loom trigger --list` */
  wait_begin();
  char dir[4096], sock[4200];
  LOOM_TOOLS_GET()->ctl_dir_name(dir, sizeof dir, getenv("XDG_RUNTIME_DIR"), geteuid());
  LOOM_TOOLS_GET()->ctl_sock_path(sock, sizeof sock, dir, (long)getpid());
  int served = answers(sock);
  wait_end();
  if (!served) fprintf(stderr, "bench: no control socket answers at %s\n", sock);

  enum { FLOOR, EMPTY, EMPTY_SO, IDLE, WAIT, NRUN };
  double *v[NRUN], mn[NRUN], md[NRUN];
  for (int k = 0; k < NRUN; k++) v[k] = calloc((size_t)rounds, sizeof(double));
  run_floor(); /* warm up */
  run_calls();
  for (int r = 0; r < rounds; r++) {
    for (int j = 0; j < NRUN; j++) {
      int k = (r + j) % NRUN;
      switch (k) {
      case FLOOR: v[k][r] = run_floor(); break;
      case EMPTY: v[k][r] = run_empty(); break;
      case EMPTY_SO: v[k][r] = run_empty_so(); break;
      case IDLE: v[k][r] = run_calls(); break;
      default: v[k][r] = run_waiting(); break;
      }
    }
  }
  for (int k = 0; k < NRUN; k++) stats(v[k], rounds, &mn[k], &md[k]);
  printf("annotation call while waiting for a trigger: %d rounds of %ld push/pop pairs, "
         "interleaved\n", rounds, pairs);
  printf("                                              min      median  ns/call\n");
  printf("  floor: empty loop, no call              %8.3f %8.3f\n", mn[FLOOR], md[FLOOR]);
  printf("  floor: empty function, this program     %8.3f %8.3f\n", mn[EMPTY], md[EMPTY]);
  printf("  floor: empty function, shared library   %8.3f %8.3f\n", mn[EMPTY_SO], md[EMPTY_SO]);
  printf("  no loom session (idle call)             %8.3f %8.3f\n", mn[IDLE], md[IDLE]);
  printf("  waiting for a trigger (socket served)   %8.3f %8.3f  (goal: <= 1 ns)\n", mn[WAIT],
         md[WAIT]);
  printf("  waiting / idle call                     %8.2fx %7.2fx\n", mn[WAIT] / mn[IDLE],
         md[WAIT] / md[IDLE]);
  printf("  waiting - idle call                     %8.3f %8.3f ns\n", mn[WAIT] - mn[IDLE],
         md[WAIT] - md[IDLE]);
  printf("  waiting - empty function, shared lib.   %8.3f %8.3f ns  (loom's own part)\n",
         mn[WAIT] - mn[EMPTY_SO], md[WAIT] - md[EMPTY_SO]);
  printf("  waiting - empty loop                    %8.3f %8.3f ns\n", mn[WAIT] - mn[FLOOR],
         md[WAIT] - md[FLOOR]);
  for (int k = 0; k < NRUN; k++) free(v[k]);
  return served ? 0 : 1;
}
