/*
 * test_backends.c - the backends of a session: a device with no backend is
 * a warning, backends that fail probe, configure or start are warnings and
 * left out (the rest records), the backend list with unavailable reasons,
 * a backend's losses by reason, a plug-in's failures asked by option.  Runs
 * with LOOM_PLUGINS naming libloom-sim.so.
 */
#include "session.h"

static void test_missing_device_warns(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu, cuda", NULL);
  /* Said at stop: a backend for it may still register while recording. */
  assert_int_equal(loom_session_warning_count(s), 0);
  loom_range_push("still recorded");
  loom_range_pop();
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "user_annotation", "still recorded"), 1);
  assert_true(ts_warned(t, "device 'cuda' requested", "no backend"));
  assert_true(ts_saved_contains(t, "\"loom_warnings\":[\"device 'cuda' requested"));
  loom_trace_free(t);
}

static void test_failing_backends(void **state) {
  (void)state;
  assert_int_equal(fake_register(0, "fakeA", "fakea", 0), LOOM_OK);
  assert_int_equal(fake_register(1, "failp", "failp", FAKE_FAIL_PROBE), LOOM_OK);
  assert_int_equal(fake_register(2, "failc", "failc", FAKE_FAIL_CONFIGURE), LOOM_OK);
  assert_int_equal(fake_register(3, "fails", "fails", FAKE_FAIL_START), LOOM_OK);
  /* Registering the same table again is harmless. */
  assert_int_equal(loom_host_get(LOOM_ABI_MAJOR)->backend_register(fake_ops(0), NULL), LOOM_OK);
  loom_session *s = ts_start("cpu,fakea,failp,failc,fails", NULL);
  fake_launch(0, 0, "kernelA", 5000);
  fake_launch(3, 0, "never", 5000);
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "kernel", "kernelA"), 1);
  assert_int_equal(count(t, "kernel", "never"), 0);
  assert_true(ts_warned(t, "device 'failp'", "no fake device 1 here"));
  assert_true(ts_warned(t, "backend 'failc' error", "fake configure failure"));
  assert_true(ts_warned(t, "device 'failc'", "failed to configure"));
  assert_true(ts_warned(t, "backend 'fails' error", "fake start failure"));
  assert_true(ts_warned(t, "device 'fails'", "failed to start"));
  fake_calls c = fake_get_calls(3);
  assert_int_equal(c.start, 1);
  assert_int_equal(c.stop, 0); /* never started, never stopped */
  assert_int_equal(c.destroy, 1);
  loom_trace_free(t);
}

typedef struct seen { int sim, failp; char reason[256]; } seen;
static void visit(const loom_backend_info *b, void *user) {
  seen *s = user;
  if (!strcmp(b->name, "sim") && strstr(b->origin, "libloom-sim.so")) s->sim = 1;
  if (!strcmp(b->name, "failp") && b->state == LOOM_BACKEND_UNAVAILABLE) {
    s->failp = 1;
    snprintf(s->reason, sizeof s->reason, "%s", b->reason);
  }
}

/* A backend's losses by reason: the first four named with their counts,
 * any more counted with the fourth, which then says so (the total right,
 * no count put under a reason that is not its own). */
static void test_lost_reasons(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fakea", NULL);
  static const char *why[] = {"ring full", "driver dropped", "clock lost", "late", "other one", "third"};
  for (int i = 0; i < 6; i++) fake_lost(0, (uint64_t)i + 1, why[i]);
  fake_lost(0, 10, "ring full");
  loom_trace *t = ts_finish(s);
  assert_true(ts_warned(t, "backend 'fakeA' lost 31 records",
                        "(11: ring full; 2: driver dropped; 3: clock lost; 15: late and other reasons)"));
  loom_trace_free(t);
}

static void test_backend_list(void **state) {
  (void)state;
  seen s = {0};
  assert_true(loom_backends_list(visit, &s) >= 5);
  assert_true(s.sim);
  assert_true(s.failp);
  assert_string_equal(s.reason, "no fake device 1 here");
}

/* Session options reach the backend from probe on; a backend that fails
 * leaves a warning, and its device leaves the trace. */
static void test_plugin_failures_by_option(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,sim", "sim.fail=probe");
  loom_trace *t = ts_finish(s);
  assert_true(ts_warned(t, "device 'sim': backend 'sim' is unavailable", "sim.fail=probe"));
  loom_trace_free(t);
  s = ts_start("cpu,sim", "sim.fail=start");
  loom_instant("rest of the trace");
  t = ts_finish(s);
  assert_true(ts_warned(t, "backend 'sim' error", "device busy (sim.fail=start)"));
  assert_true(ts_warned(t, "device 'sim': backend 'sim' failed to start", NULL));
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  assert_int_equal(sum.devices, 0);
  assert_int_equal(count(t, "cpu_instant_event", "rest of the trace"), 1);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_device_warns),
      cmocka_unit_test(test_failing_backends),
      cmocka_unit_test(test_backend_list),
      cmocka_unit_test(test_lost_reasons),
      cmocka_unit_test(test_plugin_failures_by_option),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
