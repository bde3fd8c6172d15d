/*
 * split.c - a CPU-bound program for the sampling tests: it spends about 70%
 * of its time in busy_seventy (inside the user range "range_a") and 30% in
 * busy_thirty (inside "range_b"), in deterministic loops timed by the CPU
 * time of the thread, so the shares do not depend on the machine's load.
 * With "sleep" as argument it instead sleeps 1 ms 200 times (context
 * switches); with "deep", it works 300 ms at the bottom of a recursion 300
 * calls deep (stacks past the frames a sample keeps); with "kernel", it spends
 * 100 ms of CPU in the kernel (reads of /dev/zero), so samples land there.  Built with -fno-omit-frame-pointer off: the default, so
 * unwinding has to use DWARF through libc's start code.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv) {
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
