/*
 * test_memory_oom.c - a program that grows until RLIMIT_AS stops it
 * (tests/memory/grow.c: malloc fails, it aborts) under `loom record`: the
 * trace loom rebuilds from the dead process's shared memory holds every
 * allocation and free it told loom up to its death (exact counts and
 * bytes, against what it printed), each with the op that made it; and
 * loom record's summary names the peak and the ops that held it (the same
 * lines as for a trace the program saved, tools.h memory_lines).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static void test_grow_until_death(void **state) {
  (void)state;
  char trace[256], cmd[2048], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' 96 2>'%s.err'", LOOM_BIN, trace, GROW,
           trace);
  int st = ts_run(cmd, &out);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 134); /* SIGABRT, passed through */
  long allocated = 0, freed = 0;
  for (const char *p = out; (p = strstr(p, "allocated ")); p++) allocated = atol(p + 10);
  for (const char *p = out; (p = strstr(p, "freed ")); p++) freed++;
  free(out);
  assert_true(allocated > 40); /* 96 MiB of room, 1 MiB at a time */
  char err[300];
  snprintf(err, sizeof err, "%s.err", trace);
  FILE *f = fopen(err, "r");
  assert_non_null(f);
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  assert_non_null(strstr(buf, "loom rebuilt its trace from shared memory"));
  /* live after allocation n: 64 MiB + n blocks - the (n-1)/8 freed before it */
  long grow = allocated - (allocated - 1) / 8;
  char want[256];
  snprintf(want, sizeof want, "loom:   memory host (host): peak %ld.00 MiB at ", 64 + grow);
  assert_non_null(strstr(buf, want));
  /* the holders at the peak, the largest first: "grow" (its last block
   * falls at the end the rebuild gave the op it died in, outside it: the
   * walk's ranges are half-open) and "setup" */
  assert_non_null(strstr(buf, "; held at the peak by grow "));
  assert_non_null(strstr(buf, ", setup 64.00 MiB"));
  loom_trace *t = ts_load(trace);
  long allocs = 0, frees = 0, in_grow = 0;
  unsigned long long bytes = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!(v.roles & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE))) continue;
    if (v.roles & LOOM_RECORD_F_FREE) {
      frees++;
      continue;
    }
    allocs++;
    in_grow += v.external_id == 2;
    loom_arg a[16];
    size_t k = loom_trace_event_args(t, i, a, 16);
    for (size_t j = 0; j < k && j < 16; j++)
      if (!strcmp(a[j].key, "bytes"))
        bytes += a[j].type == LOOM_ARG_INT ? (unsigned long long)a[j].v.i : a[j].v.u;
  }
  loom_trace_free(t);
  print_message("grew to %ld blocks of 1 MiB (%ld freed) before RLIMIT_AS; the rebuilt trace: "
                "%ld allocations, %ld frees\n", allocated, freed, allocs, frees);
  assert_int_equal(allocs, allocated + 1); /* + the 64 MiB block of "setup" */
  assert_int_equal(in_grow, allocated);
  assert_int_equal(frees, freed);
  assert_int_equal(bytes, (64ull + (unsigned long long)allocated) << 20);
  unlink(trace);
  unlink(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_grow_until_death)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
