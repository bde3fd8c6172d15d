/*
 * storm.c - the programs of tests/stress/stress.sh, which checks that loom
 * record stays exact and leaves nothing behind under many processes.
 *
 *   storm fork N SELF   N children, 16 alive at a time: child i records
 *                       i % 7 + 1 instants "child" and then, by i % 4,
 *                       ends with _exit (0), is killed by SIGKILL (1),
 *                       execs SELF leaf (2: 3 instants "leaf" after exec),
 *                       or returns from a fork of a fork (3: its own child
 *                       records 2 instants "grandchild").  Before and after
 *                       it prints its descriptors and resident KiB, for the
 *                       script to compare.
 *   storm leaf          3 instants "leaf"
 *   storm concurrent N  N children at once, each 1000 ranges "busy" while
 *                       the others record
 *   storm execfail      2 instants "pre", an exec that fails, 3 "post":
 *                       recording goes on after a failed exec
 *   storm steps         a step every 10 ms (loom_step), until killed;
 *                       each step a range "work"
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"

static void instants(const char *name, int n) {
  for (int k = 0; k < n; k++) loom_instant(name);
}

static int fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n - 1; /* the one opendir holds */
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
  if (f) fclose(f);
  return v;
}

static void child(int i, const char *self) {
  instants("child", i % 7 + 1);
  switch (i % 4) {
  case 1: raise(SIGKILL); break;
  case 2: execl(self, self, "leaf", (char *)NULL); _exit(127);
  case 3: {
    pid_t g = fork();
    if (g == 0) {
      instants("grandchild", 2);
      _exit(0);
    }
    waitpid(g, NULL, 0);
    break;
  }
  }
  _exit(0);
}

static int storm(int n, const char *self) {
  printf("before fds=%d rss=%ld\n", fds(), rss_kib());
  int alive = 0;
  for (int i = 0; i < n; i++) {
    if (alive == 16) {
      wait(NULL);
      alive--;
    }
    pid_t c = fork();
    if (c < 0) return 1;
    if (c == 0) child(i, self);
    alive++;
  }
  while (wait(NULL) > 0) {
  }
  printf("after fds=%d rss=%ld\n", fds(), rss_kib());
  return 0;
}

static int concurrent(int n) {
  for (int i = 0; i < n; i++) {
    if (fork() == 0) {
      for (int k = 0; k < 1000; k++) {
        loom_range_push("busy");
        loom_range_pop();
      }
      _exit(0);
    }
  }
  while (wait(NULL) > 0) {
  }
  return 0;
}

static int steps(void) __attribute__((noreturn));
static int steps(void) {
  for (;;) {
    loom_step();
    loom_range_push("work");
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    loom_range_pop();
  }
}

int main(int argc, char **argv) {
  if (argc > 3 && !strcmp(argv[1], "fork")) return storm(atoi(argv[2]), argv[3]);
  if (argc > 1 && !strcmp(argv[1], "leaf")) {
    instants("leaf", 3);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[1], "concurrent")) return concurrent(atoi(argv[2]));
  if (argc > 1 && !strcmp(argv[1], "steps")) return steps();
  if (argc > 1 && !strcmp(argv[1], "execfail")) {
    instants("pre", 2);
    execl("/nonexistent/loom-stress", "x", (char *)NULL);
    instants("post", 3);
    return 0;
  }
  return 2;
}
