/*
 * test_itt.c - an unmodified ITT-instrumented program (tests/integrations/
 * ittapp.c, which loads its collector the way ittnotify's static part does)
 * recorded by `loom record`: exactly its tasks (nested, with the domain as
 * category, on the thread that ran them, including a domain and a string
 * handle created before the collector loaded), frames, markers and counter
 * samples; thread names from __itt_thread_set_name as track names; the
 * collector inert without loom.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void test_tasks_frames_markers(void **state) {
  (void)state;
  char trace[256], *out = NULL;
  loom_trace *t = ts_record_program(LOOM_BIN, ITTAPP, "3", trace, sizeof trace, &out);
  assert_string_equal(out, "ittapp: 3 steps, collector loaded\n");
  free(out);
  const char *names[] = {"load", "step", "work", "tick", "app.compute", NULL};
  const char *cats[] = {"pre.domain", "app.compute", "app.compute", "app.compute", NULL, NULL};
  ts_tally c = ts_count_annotations(t, names, cats);
  assert_int_equal(c.ranges, 1 + 3 + 2); /* load, step x3, work x2 (worker thread) */
  assert_int_equal(c.async, 2);          /* 2 frames */
  assert_int_equal(c.instants, 3);       /* tick x3 */
  assert_int_equal(c.named[0], 1);
  assert_int_equal(c.named[1], 3);
  assert_int_equal(c.named[2], 2);
  assert_int_equal(c.named[3], 3);
  assert_int_equal(c.named[4], 2);
  assert_true(c.tid[2] != c.tid[0]);
  /* counter samples of "app.compute/steps" x3, and one of a counter whose
   * name is past 512 bytes, kept whole */
  assert_int_equal(c.other_kinds, 4);
  char want[700] = "\"app.compute/";
  memset(want + strlen(want), 'c', 600);
  strcat(want, "\"");
  assert_true(ts_saved_contains(t, want));
  loom_trace_free(t);
  tp_require();
  const char *q[] = {
      "select count(*) from slice where name = 'step' and depth = 1 and category = 'app.compute'",
      "select count(*) from slice where name = 'load' and depth = 0 and category = 'pre.domain'",
      /* __itt_thread_set_name: each thread's tasks on a track with its name */
      "select count(*) from slice join thread_track on slice.track_id = thread_track.id "
      "join thread using(utid) where slice.name = 'step' and thread.name like 'thread % (main)'",
      "select count(*) from slice join thread_track on slice.track_id = thread_track.id "
      "join thread using(utid) where slice.name = 'work' and thread.name like 'thread % (itt worker)'"};
  long long r[4];
  tp_ints(trace, q, r, 4);
  assert_int_equal(r[0], 3);
  assert_int_equal(r[1], 1);
  assert_int_equal(r[2], 3);
  assert_int_equal(r[3], 2);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

static void test_inert_without_loom(void **state) {
  (void)state;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "INTEL_LIBITTNOTIFY64='%s' '%s' 2", ITT_PLUGIN, ITTAPP);
  char *o = NULL;
  assert_int_equal(ts_run(cmd, &o), 0);
  assert_string_equal(o, "ittapp: 2 steps, collector loaded\n");
  free(o);
  snprintf(cmd, sizeof cmd, "env -u INTEL_LIBITTNOTIFY64 '%s' 2", ITTAPP);
  assert_int_equal(ts_run(cmd, &o), 0);
  assert_string_equal(o, "ittapp: 2 steps, collector absent\n");
  free(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tasks_frames_markers),
      cmocka_unit_test(test_inert_without_loom),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
