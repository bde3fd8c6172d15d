/*
 * test_clock_shift.c - the test-only session option test_clock_shift
 * (OFFSET_NS:PPM) that the MPI tests use to simulate a second host: the
 * whole session timeline reads real + OFFSET + PPM*1e-6*(real - start).
 * Checked on a fake backend's REALTIME records and on a kernel on its
 * device clock; malformed values are refused with the option's name.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../testutil.h"

static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_bad_values(void **state) {
  (void)state;
  const char *bad[] = {"test_clock_shift=abc", "test_clock_shift=5:", "test_clock_shift=5:x",
                       "test_clock_shift=1.5", "test_clock_shift=5:2000000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    loom_session *s = NULL;
    loom_session_config cfg = {.struct_size = sizeof cfg, .options = bad[i]};
    assert_int_equal(loom_session_create(&cfg, &s), LOOM_EINVAL);
    assert_null(s);
    assert_non_null(strstr(loom_last_error(), "test_clock_shift"));
  }
}

/* The launch records (in CLOCK_REALTIME) and the kernel of each, shifted by
 * OFFSET plus PPM of the real time since the session started. */
static void test_shift_and_skew(void **state) {
  (void)state;
  const int64_t off = 250000000;
  const double ppm = 100000; /* 10 %: visible over 100 ms */
  int64_t s0 = real_ns();
  loom_session *s = ts_start("fakes", "test_clock_shift=250000000:100000");
  int64_t s1 = real_ns();
  int64_t r[2][2];
  for (int k = 0; k < 2; k++) {
    if (k) nanosleep(&(struct timespec){0, 100000000}, NULL);
    r[k][0] = real_ns();
    fake_launch(0, 0, "k", 1000);
    r[k][1] = real_ns();
  }
  loom_trace *t = ts_finish(s);
  int seen = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view e = {.struct_size = sizeof e};
    assert_int_equal(loom_trace_event(t, i, &e), LOOM_OK);
    int launch = !strcmp(e.name, "fakeLaunch");
    if (!launch && strcmp(e.name, "k")) continue;
    int k = seen++ % 2; /* each kind in start order */
    double lo = (double)r[k][0] + off + ppm * 1e-6 * (double)(r[k][0] - s1) - 1000;
    double hi = (double)r[k][1] + off + ppm * 1e-6 * (double)(r[k][1] - s0) + 1000 +
                (launch ? 0 : 1.2 * 1000 + 1000); /* the kernel starts 1 us later */
    if (!(e.start_ns >= lo && e.start_ns <= hi))
      fail_msg("%s %d at %lld, expected [%.0f, %.0f]", e.name, k, (long long)e.start_ns, lo, hi);
  }
  assert_int_equal(seen, 4);
  loom_trace_free(t);
}

int main(void) {
  fake_register(0, "fake_shift", "fakes", 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_shift_and_skew),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
