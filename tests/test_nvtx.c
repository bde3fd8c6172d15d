/*
 * test_nvtx.c - an unmodified NVTX-instrumented program (tests/integrations/
 * nvtxapp.c) recorded by `loom record`: exactly its ranges (nested push/pop
 * as user ranges on the thread that made them, start/end as ranges with an
 * id) and marks, the domain as category, registered and wide strings; the
 * same output with and without loom; the tool inert without loom; a program
 * that uses no annotation API is unaffected.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char *run_cmd(const char *cmd, int *status) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  buf[n] = 0;
  *status = pclose(p);
  return strdup(buf);
}

static loom_trace *record(const char *app, const char *args, char *trace, size_t n, char **out) {
  char cmd[2048];
  tmp_path(trace, n, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' %s 2>/dev/null", LOOM_BIN, trace, app, args);
  int st;
  char *o = run_cmd(cmd, &st);
  assert_int_equal(st, 0);
  if (out) *out = o;
  else free(o);
  loom_trace *t = NULL;
  if (loom_trace_load(trace, &t) != LOOM_OK) fail_msg("%s", loom_last_error());
  return t;
}

typedef struct tally {
  size_t ranges, async, instants, other_kinds;
  size_t named[8];
  int64_t tid[8];
} tally;

static tally count(loom_trace *t, const char *const *names, const char *const *cats) {
  tally c = {0};
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    /* (by phase: read back from JSON, a range whose category is a domain
     * name reads back as a marker, not as a user range) */
    if (!strcmp(v.category, "marker")) continue; /* the window end */
    if (v.phase == 'X') c.ranges++;
    else if (v.phase == 'b') c.async++;
    else if (v.phase == 'i') c.instants++;
    else c.other_kinds++;
    for (int k = 0; names[k]; k++)
      if (!strcmp(v.name, names[k]) && (!cats[k] || !strcmp(v.category, cats[k]))) {
        c.named[k]++;
        c.tid[k] = v.tid;
      }
  }
  return c;
}

static void test_ranges_and_marks(void **state) {
  (void)state;
  char trace[256], *out = NULL;
  loom_trace *t = record(NVTXAPP, "3", trace, sizeof trace, &out);
  assert_string_equal(out, "nvtxapp: 3 steps\n");
  free(out);
  const char *names[] = {"outer", "step", "read", "wide", "worker", "across", "tick", NULL};
  const char *cats[] = {NULL, NULL, "app.io", NULL, NULL, NULL, NULL, NULL};
  tally c = count(t, names, cats);
  assert_int_equal(c.ranges, 1 + 3 + 1 + 1 + 2); /* outer, steps, read, wide, worker x2 */
  assert_int_equal(c.async, 1);                  /* across (begun on main, ended on worker) */
  assert_int_equal(c.instants, 3 + 1);           /* tick x3, the domain's read mark */
  assert_int_equal(c.named[0], 1);
  assert_int_equal(c.named[1], 3);
  assert_int_equal(c.named[2], 2); /* range and mark, both with the domain as category */
  assert_int_equal(c.named[3], 1);
  assert_int_equal(c.named[4], 2);
  assert_int_equal(c.named[6], 3);
  assert_true(c.tid[4] != c.tid[0]); /* the worker's ranges are on its own thread */
  loom_trace_free(t);
  /* trace_processor reads it without errors and sees the nesting */
  tp_require();
  const char *q[] = {"select count(*) from slice where name = 'step' and depth = 1",
                     "select count(*) from slice where name = 'outer' and depth = 0",
                     "select count(*) from slice where name = 'read' and category = 'app.io' and dur > 0"};
  long long r[3];
  tp_ints(trace, q, r, 3);
  assert_int_equal(r[0], 3);
  assert_int_equal(r[1], 1);
  assert_int_equal(r[2], 1);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

/* Without loom in the process the tool loads, finds no loom and does nothing. */
static void test_inert_without_loom(void **state) {
  (void)state;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "NVTX_INJECTION64_PATH='%s' '%s' 2", NVTX_PLUGIN, NVTXAPP);
  int st;
  char *o = run_cmd(cmd, &st);
  assert_int_equal(st, 0);
  assert_string_equal(o, "nvtxapp: 2 steps\n");
  free(o);
}

/* A program that uses no annotation API: only its own (empty) host track. */
static void test_plain_program_unaffected(void **state) {
  (void)state;
  char trace[256], *out = NULL;
  loom_trace *t = record(PLAINAPP, "", trace, sizeof trace, &out);
  assert_string_equal(out, "plainapp: 499999500000\n");
  free(out);
  const char *names[] = {NULL};
  tally c = count(t, names, names);
  assert_int_equal(c.ranges + c.async + c.instants + c.other_kinds, 0);
  loom_trace_free(t);
  unlink(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranges_and_marks),
      cmocka_unit_test(test_inert_without_loom),
      cmocka_unit_test(test_plain_program_unaffected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
