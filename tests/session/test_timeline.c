/*
 * test_timeline.c - two backends on one timeline (libloom-sim.so with a
 * skewed device clock and the fake backend): flows from every launch to its
 * device work, external ids, device clock conversion into the launch call,
 * ranges projected onto the queues, and the written trace checked by
 * trace_processor.  Runs with LOOM_PLUGINS naming libloom-sim.so.
 */
#include "session.h"

/* The fake backend "fakeA" (tests/testutil.c) the tests below record with. */
static int register_fake(void **state) {
  (void)state;
  return fake_register(0, "fakeA", "fakea", 0) != LOOM_OK;
}

/* Two backends (sim with a skewed device clock, fake on CLOCK_REALTIME) in
 * one session, with framework ops and ranges around the launches. */
static loom_trace *two_backend_trace(void) {
  load_sim();
  loom_session *s = ts_start("cpu,sim,fakea", "sim.skew_ppm=500,sim.offset_ns=86400000000000");
  loom_range_push("outer");
  loom_op_begin("aten::mm", 77);
  sim_launch(0, "sim_gemm", 20000, 64, 128);
  fake_launch(0, 0, "fake_gemm", 20000);
  loom_op_end();
  loom_range_push("inner");
  sim_launch(0, "sim_relu", 5000, 64, 128);
  sim_launch(1, "sim_add", 5000, 64, 128);
  loom_range_pop();
  loom_range_pop();
  sleep_ms(40);
  sim_memcpy(1, SIMRT_D2H, 4096);
  loom_counter("loss", 0.5);
  loom_instant("checkpoint");
  sleep_ms(40);
  sim_launch(0, "sim_late", 1000, 1, 1);
  return ts_finish(s);
}

static void test_two_backends_flows(void **state) {
  (void)state;
  loom_trace *t = two_backend_trace();
  assert_int_equal(count(t, "kernel", NULL), 5);
  assert_int_equal(count(t, "gpu_memcpy", "Memcpy DtoH"), 1);
  assert_int_equal(count(t, "sim_runtime", NULL), 5);
  assert_int_equal(count(t, "fakea_runtime", "fakeLaunch"), 1);
  /* Every device op is linked to the call that launched it. */
  assert_int_equal(loom_trace_flow_count(t), 6);
  for (size_t i = 0; i < loom_trace_flow_count(t); i++) {
    loom_event_view a, b;
    ts_flow(t, i, &a, &b);
    assert_int_equal(a.kind, LOOM_KIND_RUNTIME);
    assert_int_equal(a.device, UINT32_MAX);
    assert_int_not_equal(b.device, UINT32_MAX);
    assert_true(a.correlation == b.correlation);
    /* Device work starts after its launch call began (one timeline). */
    assert_true(b.start_ns >= a.start_ns - 1000);
  }
  /* External id: the op around the launches, on calls and kernels alike. */
  assert_int_equal(find(t, "kernel", "sim_gemm", 0).external_id, 77);
  assert_int_equal(find(t, "kernel", "fake_gemm", 0).external_id, 77);
  assert_int_equal(find(t, "fakea_runtime", "fakeLaunch", 0).external_id, 77);
  assert_int_equal(find(t, "kernel", "sim_relu", 0).external_id, 0);
  fake_calls c = fake_get_calls(0);
  assert_true(c.push >= 1 && c.push == c.pop);
  loom_trace_free(t);
}

/* The sim device clock runs 500 ppm fast from an origin a day away; each
 * kernel on an idle queue starts at the device time matching the end of its
 * launch call, so after conversion it must land inside the call (1 us). */
static void test_device_clock_conversion(void **state) {
  (void)state;
  loom_trace *t = two_backend_trace();
  const char *names[] = {"sim_gemm", "sim_late"};
  for (int i = 0; i < 2; i++) {
    loom_event_view k = find(t, "kernel", names[i], 0);
    int64_t corr = (int64_t)k.correlation;
    loom_event_view call = {0};
    for (int j = 0; j < 5; j++) {
      call = find(t, "sim_runtime", NULL, j);
      if ((int64_t)call.correlation == corr) break;
    }
    assert_int_equal((int64_t)call.correlation, corr);
    assert_true(k.start_ns >= call.start_ns - 1000);
    assert_true(k.start_ns <= call.start_ns + call.dur_ns + 1000);
  }
  loom_trace_free(t);
}

static void test_projection(void **state) {
  (void)state;
  loom_trace *t = two_backend_trace();
  /* outer: on sim queue 0 (gemm, relu), sim queue 1 (add) and fake stream 7;
   * inner: on sim queue 0 (relu) and queue 1 (add). */
  assert_int_equal(count(t, "gpu_user_annotation", "outer"), 3);
  assert_int_equal(count(t, "gpu_user_annotation", "inner"), 2);
  loom_event_view gemm = find(t, "kernel", "sim_gemm", 0);
  loom_event_view relu = find(t, "kernel", "sim_relu", 0);
  int found = 0;
  for (int k = 0; k < 3; k++) {
    loom_event_view p = find(t, "gpu_user_annotation", "outer", k);
    assert_true(p.projected);
    if (p.pid == gemm.pid && p.tid == gemm.tid) {
      assert_true(p.start_ns == gemm.start_ns);
      assert_true(p.start_ns + p.dur_ns == relu.start_ns + relu.dur_ns);
      found = 1;
    }
  }
  assert_true(found);
  loom_trace_free(t);
}

static void test_trace_in_trace_processor(void **state) {
  (void)state;
  tp_require();
  loom_trace *t = two_backend_trace();
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  const char *q[] = {
      "select count(*) from slice",
      "select count(*) from flow",
      "select count(*) from counter",
      "select count(*) from process where name is not null",
      "select count(*) from thread where name is not null",
      "select count(*) from slice where name = 'gpu_user_annotation' or category = 'gpu_user_annotation'",
      "select count(*) from stats where value > 0 and severity in ('error','data_loss')",
      "select count(*) from thread where name like 'queue %'",
  };
  long long r[8];
  tp_ints(path, q, r, 8);
  /* host: outer, inner, aten::mm, 6 runtime calls, instant = 10;
   * device: 5 kernels + 1 memcpy + 5 projections = 11; window end = 1. */
  assert_int_equal(r[0], 22);
  assert_int_equal(r[1], 6);
  assert_int_equal(r[2], 1);
  assert_int_equal(r[3], 3);  /* host process, sim 0, fakea 1 */
  assert_int_equal(r[4], 4);  /* main thread, queue 0, queue 1, stream 7 */
  assert_int_equal(r[5], 5);
  assert_int_equal(r[6], 0);
  assert_int_equal(r[7], 2);
  unlink(path);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_backends_flows),
      cmocka_unit_test(test_device_clock_conversion),
      cmocka_unit_test(test_projection),
      cmocka_unit_test(test_trace_in_trace_processor),
  };
  return cmocka_run_group_tests(tests, register_fake, NULL);
}
