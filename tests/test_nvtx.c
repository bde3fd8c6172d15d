/*
 * test_nvtx.c - an unmodified NVTX-instrumented program (tests/integrations/
 * nvtxapp.c) recorded by `loom record`: exactly its ranges (nested push/pop
 * as user ranges on the thread that made them, start/end as ranges with an
 * id) and marks, the domain as category, registered and wide strings, NVTX
 * categories as the "NVTX category" argument (named per domain) and the
 * thread name nvtxNameOsThread gave as the worker's track name; the
 * same output with and without loom; the tool inert without loom; a program
 * that uses no annotation API is unaffected.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void test_ranges_and_marks(void **state) {
  (void)state;
  char trace[256], *out = NULL;
  loom_trace *t = ts_record_program(LOOM_BIN, NVTXAPP, "3", trace, sizeof trace, &out);
  assert_string_equal(out, "nvtxapp: 3 steps\n");
  free(out);
  const char *names[] = {"outer", "step", "read", "wide", "worker", "across", "tick", NULL};
  const char *cats[] = {NULL, NULL, "app.io", NULL, NULL, NULL, NULL, NULL};
  ts_tally c = ts_count_annotations(t, names, cats);
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
  const char *q[] = {
      "select count(*) from slice where name = 'step' and depth = 1",
      "select count(*) from slice where name = 'outer' and depth = 0",
      "select count(*) from slice where name = 'read' and category = 'app.io' and dur > 0",
      /* categories: the default domain's 7 on the steps, app.io's 3 on its
       * range and mark; nothing else has one */
      "select count(*) from slice s join args a using(arg_set_id) where s.name = 'step' "
      "and a.key = 'args.NVTX category' and a.string_value = 'compute'",
      "select count(*) from slice s join args a using(arg_set_id) where s.name = 'read' "
      "and s.category = 'app.io' and a.key = 'args.NVTX category' and a.string_value = 'disk'",
      "select count(*) from slice s join args a using(arg_set_id) where a.key = 'args.NVTX category'",
      /* the worker's name, on the track of its ranges; main keeps its OS name */
      "select count(*) from slice join thread_track on slice.track_id = thread_track.id "
      "join thread using(utid) where slice.name = 'worker' and thread.name like 'thread % (nvtx worker)'",
      "select count(*) from thread where name like 'thread % (nvtxapp)'"};
  long long r[8];
  tp_ints(trace, q, r, 8);
  assert_int_equal(r[0], 3);
  assert_int_equal(r[1], 1);
  assert_int_equal(r[2], 1);
  assert_int_equal(r[3], 3);
  assert_int_equal(r[4], 2);
  assert_int_equal(r[5], 5);
  assert_int_equal(r[6], 2);
  assert_int_equal(r[7], 1);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

/* Ranges nested deeper than the 256 levels kept are counted as lost, with
 * their reason, not dropped without a word; the pops still balance. */
static void test_too_deep(void **state) {
  (void)state;
  char trace[256], *out = NULL;
  loom_trace *t = ts_record_program(LOOM_BIN, NVTXAPP, "1 deep", trace, sizeof trace, &out);
  assert_string_equal(out, "nvtxapp: 1 steps\n");
  free(out);
  const char *names[] = {"level", "outer", NULL}, *cats[] = {NULL, NULL, NULL};
  ts_tally c = ts_count_annotations(t, names, cats);
  assert_int_equal(c.named[0], 256);
  assert_int_equal(c.named[1], 1);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.dropped, 44);
  assert_true(ts_warned(t, "lost 44 records", "user ranges nested deeper than 256 levels"));
  loom_trace_free(t);
  unlink(trace);
}

/* Without loom in the process the tool loads, finds no loom and does nothing. */
static void test_inert_without_loom(void **state) {
  (void)state;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "NVTX_INJECTION64_PATH='%s' '%s' 2", NVTX_PLUGIN, NVTXAPP);
  char *o = NULL;
  assert_int_equal(ts_run(cmd, &o), 0);
  assert_string_equal(o, "nvtxapp: 2 steps\n");
  free(o);
}

/* A program that uses no annotation API: only its own (empty) host track. */
static void test_plain_program_unaffected(void **state) {
  (void)state;
  char trace[256], *out = NULL;
  loom_trace *t = ts_record_program(LOOM_BIN, PLAINAPP, "", trace, sizeof trace, &out);
  assert_string_equal(out, "plainapp: 499999500000\n");
  free(out);
  const char *names[] = {NULL};
  ts_tally c = ts_count_annotations(t, names, names);
  assert_int_equal(c.ranges + c.async + c.instants + c.other_kinds, 0);
  loom_trace_free(t);
  unlink(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranges_and_marks),
      cmocka_unit_test(test_too_deep),
      cmocka_unit_test(test_inert_without_loom),
      cmocka_unit_test(test_plain_program_unaffected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
