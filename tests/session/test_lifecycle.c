/*
 * test_lifecycle.c - a session's life through the public API: version and
 * error strings, malformed options refused (and nothing left behind), one
 * session recording at a time, stop and start in the wrong state, save
 * errors; backends emitting from many threads at once, and a stop while
 * they emit.  Runs with LOOM_PLUGINS naming libloom-sim.so.
 */
#include "session.h"

/* The fake backend "fakeA" (tests/testutil.c) the tests below record with. */
static int register_fake(void **state) {
  (void)state;
  return fake_register(0, "fakeA", "fakea", 0) != LOOM_OK;
}

static void test_version_and_errors(void **state) {
  (void)state;
  assert_int_equal(loom_version(), LOOM_VERSION_HEX);
  assert_string_equal(loom_version_string(), "0.1.0");
  for (int st = LOOM_OK; st <= LOOM_EFORMAT; st++)
    assert_string_not_equal(loom_strerror((loom_status)st), "unknown status");
  assert_string_equal(loom_strerror((loom_status)999), "unknown status");
  assert_string_equal(loom_kind_name(LOOM_KIND_KERNEL), "kernel");
  assert_null(loom_kind_name(LOOM_KIND_COUNT_));
}

static void test_bad_options(void **state) {
  (void)state;
  loom_session *s = NULL;
  loom_session_config cfg = {.struct_size = sizeof cfg, .options = "buffer_size=lots"};
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_EINVAL);
  assert_null(s);
  assert_non_null(strstr(loom_last_error(), "buffer_size"));
  cfg.options = "memory_cap=1m, justakey";
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_EINVAL);
  assert_non_null(strstr(loom_last_error(), "justakey"));
  /* A failed create leaves nothing behind: the next one works. */
  cfg.options = "memory_cap=1m; sim.skew_ppm = 3";
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  loom_session_destroy(s);
}

static void test_one_session_at_a_time(void **state) {
  (void)state;
  loom_session *a = NULL, *b = NULL;
  loom_session_config cfg = {.struct_size = sizeof cfg};
  assert_int_equal(loom_session_create(&cfg, &a), LOOM_OK);
  assert_int_equal(loom_session_create(&cfg, &b), LOOM_EBUSY);
  assert_int_equal(loom_session_stop(a, NULL), LOOM_ESTATE); /* not started */
  assert_int_equal(loom_session_start(a), LOOM_OK);
  assert_int_equal(loom_session_start(a), LOOM_ESTATE);
  loom_session_destroy(a); /* destroying a recording session stops it */
  assert_int_equal(loom_session_create(&cfg, &b), LOOM_OK);
  loom_session_destroy(b);
}

enum { LAUNCHERS = 4, LAUNCHES = 2000 };
static atomic_int keep_going;

static void *launcher(void *arg) {
  int forever = arg != NULL;
  for (int i = 0; forever ? atomic_load(&keep_going) : i < LAUNCHES; i++)
    fake_launch(0, i % 2, "concurrent", 100);
  return NULL;
}

/* Backends emit from many threads at once: nothing is lost or mixed up. */
static void test_concurrent_emit(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fakea", NULL);
  pthread_t th[LAUNCHERS];
  for (int i = 0; i < LAUNCHERS; i++) pthread_create(&th[i], NULL, launcher, NULL);
  for (int i = 0; i < LAUNCHERS; i++) pthread_join(th[i], NULL);
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "kernel", "concurrent"), LAUNCHERS * LAUNCHES);
  assert_int_equal(count(t, "fakea_runtime", NULL), LAUNCHERS * LAUNCHES);
  assert_int_equal(loom_trace_flow_count(t), LAUNCHERS * LAUNCHES);
  loom_trace_free(t);
}

/* Stopping while backends emit from other threads neither crashes nor
 * blocks; late records are refused. */
static void test_stop_while_emitting(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fakea", NULL);
  atomic_store(&keep_going, 1);
  pthread_t th[LAUNCHERS];
  for (int i = 0; i < LAUNCHERS; i++) pthread_create(&th[i], NULL, launcher, (void *)1);
  sleep_ms(20);
  loom_trace *t = ts_finish(s);
  atomic_store(&keep_going, 0);
  for (int i = 0; i < LAUNCHERS; i++) pthread_join(th[i], NULL);
  assert_true(count(t, "kernel", "concurrent") > 0);
  assert_true(loom_trace_flow_count(t) <= count(t, "kernel", "concurrent"));
  loom_trace_free(t);
}

static void test_save_errors(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", NULL);
  loom_instant("x");
  loom_trace *t = ts_finish(s);
  assert_int_equal(loom_trace_save(t, "/nonexistent-dir/trace.json"), LOOM_EIO);
  assert_non_null(strstr(loom_last_error(), "/nonexistent-dir/trace.json"));
  assert_int_equal(loom_trace_save(t, "/tmp/trace.unknownext"), LOOM_EUNSUPPORTED);
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK); /* still savable */
  unlink(path);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_and_errors),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_one_session_at_a_time),
      cmocka_unit_test(test_concurrent_emit),
      cmocka_unit_test(test_stop_while_emitting),
      cmocka_unit_test(test_save_errors),
  };
  return cmocka_run_group_tests(tests, register_fake, NULL);
}
