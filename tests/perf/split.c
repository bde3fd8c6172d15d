/*
 * split.c - a CPU-bound program for the sampling tests: it spends about 70%
 * of its time in busy_seventy (inside the user range "range_a") and 30% in
 * busy_thirty (inside "range_b"), in deterministic loops timed by the CPU
 * time of the thread, so the shares do not depend on the machine's load.
 * With "sleep" as argument it instead sleeps 1 ms 200 times (context
 * switches); with "deep", it works 300 ms at the bottom of a recursion 300
 * calls deep (stacks past the frames a sample keeps); with "kernel", it spends
 * 100 ms of CPU in the kernel (reads of /dev/zero), so samples land there; with
 * "closefds FILE" it records itself (a session of its own, perf sampling)
 * and, as daemons do, closes every descriptor it did not open and opens
 * pipes and FILE in their numbers (closefds below).  Built with
 * -fno-omit-frame-pointer off: the default, so unwinding has to use DWARF
 * through libc's start code.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <loom/loom.h>

static volatile double sink;

/* Iterations between two reads of the thread's CPU clock (a system call
 * here, not the vDSO): about 0.1 ms of work, so the leaf of almost every
 * sample is the busy function itself and the overshoot past the target
 * time stays far below the 5-point tolerance. */
#define CHUNK 50000

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) void busy_seventy(double ms) {
  double end = cpu_ms() + ms, x = 1.0;
  while (cpu_ms() < end)
    for (int i = 0; i < CHUNK; i++) x = x * 1.0000001 + 1e-9;
  sink = x;
}

__attribute__((noinline)) void busy_thirty(double ms) {
  double end = cpu_ms() + ms, x = 2.0;
  while (cpu_ms() < end)
    for (int i = 0; i < CHUNK; i++) x = x * 0.9999999 + 1e-9;
  sink = x;
}

/* Other names at the same addresses and sizes, which samples must not
 * take (libdwfl's rule, which loom's symbol index follows): a global
 * symbol over a weak one, a global over a local. */
void busy_seventy_weak(double ms) __attribute__((weak, alias("busy_seventy")));
static void busy_thirty_local(double ms) __attribute__((alias("busy_thirty"), used));

/* Not a tail call: each level keeps its frame. */
__attribute__((noinline)) double deep(int n, double ms) {
  if (n == 0) {
    busy_seventy(ms);
    return sink;
  }
  double r = deep(n - 1, ms);
  sink = sink + r;
  return r + 1;
}

static double self_cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* The process's CPU time over 300 ms asleep. */
static void idle_ms(const char *what) {
  double c0 = self_cpu_ms();
  struct timespec nap = {0, 300000000};
  nanosleep(&nap, NULL);
  printf("idle cpu ms %s %.1f\n", what, self_cpu_ms() - c0);
}

/* Records itself with perf sampling; mid-way closes every descriptor but
 * 0-2 (loom's perf events among them) and takes their numbers for 10 pipes
 * and 20 opens of path, each open writing one line.  Prints the process's
 * CPU time over 300 ms asleep before and after the opens, the session's
 * warnings, then,
 * after the session is destroyed, whether each of its descriptors is still
 * open, each pipe empty and path exactly its own lines. */
static int closefds(const char *path) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,perf"};
  loom_session *s = NULL;
  loom_trace *t = NULL;
  if (loom_session_create(&cfg, &s) != LOOM_OK || loom_session_start(s) != LOOM_OK) return 2;
  busy_seventy(100);
  close_range(3, ~0u, 0);
  idle_ms("closed"); /* loom's numbers closed */
  int pipes[10][2], files[20];
  for (int i = 0; i < 10; i++)
    if (pipe(pipes[i])) return 3;
  for (int i = 0; i < 20; i++) {
    char line[32];
    files[i] = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC * !i, 0600);
    int n = snprintf(line, sizeof line, "program line %d\n", i);
    if (files[i] < 0 || write(files[i], line, (size_t)n) != n) return 4;
  }
  idle_ms("reused"); /* loom's numbers the program's pipes and files */
  busy_thirty(100);
  if (loom_session_stop(s, &t) != LOOM_OK) return 5;
  for (size_t i = 0; i < loom_session_warning_count(s); i++)
    printf("warning: %s\n", loom_session_warning(s, i));
  loom_trace_free(t);
  loom_session_destroy(s);
  int open_fds = 0, empty = 0;
  for (int i = 0; i < 20; i++) open_fds += fcntl(files[i], F_GETFD) != -1;
  for (int i = 0; i < 10; i++) {
    char c;
    open_fds += (fcntl(pipes[i][0], F_GETFD) != -1) + (fcntl(pipes[i][1], F_GETFD) != -1);
    fcntl(pipes[i][0], F_SETFL, O_NONBLOCK);
    empty += read(pipes[i][0], &c, 1) != 1; /* nothing written into it */
  }
  printf("still open %d of 40, pipes with nothing written %d of 10\n", open_fds, empty);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "closefds")) return closefds(argv[2]);
  if (argc > 1 && !strcmp(argv[1], "deep")) {
    deep(300, 300);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[1], "busy")) { /* busy_seventy for MS ms of CPU */
    busy_seventy(atof(argv[2]));
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "kernel")) { /* 100 ms of CPU copying from /dev/zero */
    static char buf[1 << 16];
    int fd = open("/dev/zero", O_RDONLY);
    for (double t0 = cpu_ms(); fd >= 0 && cpu_ms() - t0 < 100;)
      if (read(fd, buf, sizeof buf) < 0) break;
    return fd >= 0 ? 0 : 1;
  }
  if (argc > 1 && !strcmp(argv[1], "sleep")) {
    for (int i = 0; i < 200; i++) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    return 0;
  }
  for (int round = 0; round < 10; round++) {
    loom_range_push("range_a");
    busy_seventy(70);
    loom_range_pop();
    loom_range_push("range_b");
    busy_thirty(30);
    loom_range_pop();
  }
  printf("split done\n");
  return 0;
}
