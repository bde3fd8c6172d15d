/*
 * clockcount.c - an LD_PRELOAD shim for tests/test_opencl.c: counts the
 * clock_gettime calls on CLOCK_MONOTONIC and CLOCK_MONOTONIC_RAW made from
 * loom's own libraries (the caller's address lies in a file named libloom*)
 * and, at exit, writes the count to the file $CLOCKCOUNT_OUT, in the
 * program named $CLOCKCOUNT_PROG only.  With the time-stamp counter in use
 * an OpenCL call is timed without clock_gettime; with LOOM_NO_TSC it takes
 * two, so the count tells which clock timed them (CLOCK_REALTIME, read
 * mostly for clock sync points, is left out: it only adds noise).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_long from_loom;

int clock_gettime(clockid_t id, struct timespec *ts) {
  static int (*next)(clockid_t, struct timespec *);
  if (!next)
    next = (int (*)(clockid_t, struct timespec *))(uintptr_t)dlsym(RTLD_NEXT, "clock_gettime");
  Dl_info info;
  if ((id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW) &&
      dladdr(__builtin_return_address(0), &info) && info.dli_fname &&
      strstr(info.dli_fname, "/libloom"))
    atomic_fetch_add(&from_loom, 1);
  return next(id, ts);
}

__attribute__((destructor)) static void write_count(void) {
  const char *out = getenv("CLOCKCOUNT_OUT"), *prog = getenv("CLOCKCOUNT_PROG");
  if (!out || !prog || strcmp(program_invocation_short_name, prog)) return;
  FILE *f = fopen(out, "w");
  if (!f) return;
  fprintf(f, "%ld\n", atomic_load(&from_loom));
  fclose(f);
}
