/*
 * die.c - programs that die while `loom record` records them, for the
 * survival tests (tests/survive/survive.sh).
 *   die kill N      N ranges "step" (literal names), N ranges through
 *                   loom_range_push_str ("interned"), a range "open" left
 *                   open, then SIGKILL to itself
 *   die oom N       the same records, then RLIMIT_AS at what it uses and
 *                   allocations until one fails; then abort(), as a C++
 *                   program does when new throws and nobody catches it
 *   die child N     forks a child that records the same and waits; the
 *                   parent kills it with SIGKILL and exits without reaping
 *                   it (loom record does, and learns how it died)
 *   die thread N    a second thread records N ranges "worker" and exits;
 *                   the main thread records N ranges "step" and SIGKILLs
 *                   itself
 *   die dlopen N LIB  loads LIB while recording, N ranges from it (its
 *                   literal names), waits 1.5 s (loom notices new mappings
 *                   once a second), SIGKILL
 *   die heap N      N ranges "step", one range named by a heap buffer (not
 *                   readable once the process is gone), SIGKILL
 *   die race N      4 threads record ranges "busy" as fast as they can; the
 *                   main thread SIGKILLs the process mid-write after N ms
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loom/loom.h"

static void records(int n) {
  for (int i = 0; i < n; i++) {
    loom_range_push("step");
    loom_range_pop();
  }
  char name[32];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "interned"); /* a buffer: interned by content */
    loom_range_push_str(name);
    loom_range_pop();
  }
  loom_range_push("open");
}

static void *worker(void *arg) {
  int n = *(int *)arg;
  for (int i = 0; i < n; i++) {
    loom_range_push("worker");
    loom_range_pop();
  }
  return NULL;
}

static void *busy(void *arg) {
  (void)arg;
  for (;;) {
    loom_range_push("busy");
    loom_range_pop();
  }
  return NULL;
}

static void out_of_memory(void) {
  struct rlimit r;
  getrlimit(RLIMIT_AS, &r);
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f && fscanf(f, "%lu", &pages) != 1) pages = 0;
  if (f) fclose(f);
  r.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (8u << 20);
  if (setrlimit(RLIMIT_AS, &r) != 0) perror("setrlimit");
  for (size_t size = 1u << 20;;) {
    char *p = malloc(size);
    if (!p) {
      if (size > 64) {
        size /= 2;
        continue;
      }
      abort();
    }
    memset(p, 1, size);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int n = atoi(argv[2]);
  if (!strcmp(argv[1], "kill")) {
    records(n);
    raise(SIGKILL);
  } else if (!strcmp(argv[1], "oom")) {
    records(n);
    out_of_memory();
  } else if (!strcmp(argv[1], "child")) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t c = fork();
    if (c == 0) {
      records(n);
      char b = 1;
      if (write(fds[1], &b, 1) != 1) _exit(1);
      for (;;) pause();
    }
    char b;
    if (c < 0 || read(fds[0], &b, 1) != 1) return 1;
    kill(c, SIGKILL);
    return 0; /* not reaped here: loom record is the subreaper */
  } else if (!strcmp(argv[1], "thread")) {
    pthread_t th;
    pthread_create(&th, NULL, worker, &n);
    pthread_join(th, NULL);
    for (int i = 0; i < n; i++) {
      loom_range_push("step");
      loom_range_pop();
    }
    raise(SIGKILL);
  } else if (!strcmp(argv[1], "dlopen") && argc > 3) {
    void *h = dlopen(argv[3], RTLD_NOW);
    void (*f)(int) = h ? (void (*)(int))dlsym(h, "die_lib_ranges") : NULL;
    if (!f) return 3;
    f(n);
    struct timespec ts = {1, 500000000};
    nanosleep(&ts, NULL);
    raise(SIGKILL);
  } else if (!strcmp(argv[1], "heap")) {
    for (int i = 0; i < n; i++) {
      loom_range_push("step");
      loom_range_pop();
    }
    char *name = strdup("on the heap");
    loom_range_push(name); /* valid until stop, as loom.h asks; not after death */
    loom_range_pop();
    raise(SIGKILL);
  } else if (!strcmp(argv[1], "race")) {
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, busy, NULL);
    struct timespec ts = {n / 1000, (long)(n % 1000) * 1000000};
    nanosleep(&ts, NULL);
    raise(SIGKILL);
  }
  return 2;
}
