/*
 * test_record.c - `loom record --ring SIZE` on a real OpenCL program
 * (tests/windows/stepapp.c on POCL: one upload and one kernel per step,
 * steps marked with loom_step): the trace written at the end holds the last
 * window only: consecutive steps up to the last one, every upload and
 * kernel with the host call that launched it, the overwritten part
 * reported; a program killed by SIGKILL leaves the same window (rebuilt by
 * loom record from shared memory); `loom trigger PID` on it answers with a
 * dump of the ring; trace_processor loads each with exact counts and 0
 * errors.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void test_ring_window(void **state) {
  (void)state;
  tp_require();
  char trace[256], cmd[2048];
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record --ring 32k --devices cpu,opencl -o '%s' -- '%s' 2000 "
           ">/dev/null 2>&1", LOOM_BIN, trace, STEPAPP);
  assert_int_equal(ts_run(cmd, NULL), 0);
  loom_trace *t = ts_load(trace);
  int lo = -1, hi = -1, n = 0, unclosed = 0;
  size_t kernels = 0, copies = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    int k;
    if (!v.projected && v.device == UINT32_MAX && sscanf(v.name, "ProfilerStep#%d", &k) == 1) {
      if (n && k != hi + 1) fail_msg("steps not consecutive: %d after %d", k, hi);
      if (!n) lo = k;
      hi = k;
      n++;
      unclosed += v.unclosed;
    }
    kernels += v.kind == LOOM_KIND_KERNEL;
    copies += v.kind == LOOM_KIND_MEMCPY;
  }
  /* the last window: the last step (open at exit) and those before it */
  assert_int_equal(hi, 1999);
  assert_true(lo > 0 && n > 5);
  assert_true(unclosed <= 1);
  assert_true(kernels > 5 && copies > 5);
  /* device work only with its launch (a flow from the host call each) */
  assert_int_equal(loom_trace_flow_count(t), kernels + copies);
  loom_trace_free(t);
  char *text = read_file(trace, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"ring_overwritten_records\""));
  assert_non_null(strstr(text, "records overwritten (host "));
  free(text);
  char q0[192];
  snprintf(q0, sizeof q0, "select count(*) from slice where name like 'ProfilerStep#%%' "
           "and category = 'user_annotation'"); /* not the projections onto queues */
  const char *q[] = {q0, "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[2];
  tp_ints(trace, q, r, 2);
  assert_int_equal(r[0], n);
  assert_int_equal(r[1], 0);
  unlink(trace);
}

/* Killed (SIGKILL) while recording, once its ring has wrapped (not after a
 * fixed time: a slow machine is still starting then): loom record rebuilds
 * the ring's window from shared memory, with what it overwrote. */
static void test_ring_killed(void **state) {
  (void)state;
  tp_require();
  char trace[256], cmd[2048];
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "sh '%s/ring/kill.sh' '%s' '%s' '%s' 2>&1", LOOM_TESTS_DIR, LOOM_BIN,
           STEPAPP, trace);
  char *out = NULL;
  if (ts_run(cmd, &out) != 0) fail_msg("%s: %s", cmd, out ? out : "");
  free(out);
  loom_trace *t = ts_load(trace);
  int hi = -1, n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    int k;
    if (v.device == UINT32_MAX && sscanf(v.name, "ProfilerStep#%d", &k) == 1) {
      if (n && k != hi + 1) fail_msg("steps not consecutive: %d after %d", k, hi);
      hi = k;
      n++;
    }
  }
  assert_true(n > 5);
  assert_true(hi > n); /* the first steps were overwritten */
  assert_true(ts_warned(t, "records overwritten (host ", NULL));
  assert_true(ts_warned(t, "killed by SIGKILL", NULL));
  loom_trace_free(t);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

/* `loom trigger PID` on a --ring process: a dump of its ring, written
 * while it goes on; the trace at its end is written too. */
static void test_ring_trigger(void **state) {
  (void)state;
  tp_require();
  char trace[256], dump[256], cmd[2048];
  tmp_path(trace, sizeof trace, ".json");
  tmp_path(dump, sizeof dump, ".json");
  snprintf(cmd, sizeof cmd, "sh '%s/ring/trigger.sh' '%s' '%s' '%s' '%s'", LOOM_TESTS_DIR,
           LOOM_BIN, STEPAPP, trace, dump);
  char *out = NULL;
  int st = ts_run(cmd, &out);
  if (st != 0) fail_msg("%s: %s", cmd, out ? out : "");
  free(out);
  char *text = read_file(dump, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"ring_dump_reason\":\"loom trigger: a dump of the ring\""));
  free(text);
  const char *q[] = {"select count(*) > 10 from slice where name like 'ProfilerStep#%'",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[2];
  tp_ints(dump, q, r, 2);
  assert_int_equal(r[0], 1);
  assert_int_equal(r[1], 0);
  assert_int_equal(tp_errors(trace), 0);
  unlink(dump);
  unlink(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ring_window),
                                     cmocka_unit_test(test_ring_killed),
                                     cmocka_unit_test(test_ring_trigger)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
