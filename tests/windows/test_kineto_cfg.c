/*
 * test_kineto_cfg.c - Kineto's on-demand keys (`loom trigger --config`):
 * each key's meaning, Kineto's precedence rules, the start step resolved at
 * request time (warmup, round-up), warnings that name every key loom does
 * not act on, errors that name the key and the value, and files.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "../src/ctl/kineto_cfg.h"
#include "loom/loom.h"
#include "testutil.h"

static char warned[4096];
static int nwarn;

static void on_warn(const char *msg, void *ud) {
  (void)ud;
  nwarn++;
  size_t l = strlen(warned);
  snprintf(warned + l, sizeof warned - l, "%s\n", msg);
}

/* Parses text into *r from an empty request; returns the parser's result. */
static int parse(const char *text, loom__ondemand *r, char *err, size_t n) {
  warned[0] = 0;
  nwarn = 0;
  err[0] = 0;
  loom__ondemand_init(r);
  return loom__kineto_parse(text, r, on_warn, NULL, err, n);
}

static void test_time_window(void **state) {
  (void)state;
  loom__ondemand r;
  char err[512];
  assert_int_equal(parse("ACTIVITIES_DURATION_MSECS=750\nACTIVITIES_LOG_FILE=/tmp/x.json\n",
                         &r, err, sizeof err), 0);
  assert_int_equal(r.duration_ns, 750000000LL);
  assert_int_equal(r.steps, 0);
  assert_int_equal(r.start_step, -1);
  assert_string_equal(r.out, "/tmp/x.json");
  assert_int_equal(nwarn, 0);
  /* the two characters "\n" separate lines too (a request on a command line) */
  assert_int_equal(parse("ACTIVITIES_DURATION_SECS = 2\\nACTIVITIES_LOG_FILE = /tmp/y.json",
                         &r, err, sizeof err), 0);
  assert_int_equal(r.duration_ns, 2000000000LL);
  assert_string_equal(r.out, "/tmp/y.json");
  assert_int_equal(r.defaulted, 0);
  /* nothing asked: Kineto's default duration, 500 ms, marked as such (a
   * ring-mode process then dumps all it holds) */
  assert_int_equal(parse("# only a comment\n\n", &r, err, sizeof err), 0);
  assert_int_equal(r.duration_ns, 500000000LL);
  assert_int_equal(r.defaulted, 1);
}

static void test_step_window(void **state) {
  (void)state;
  loom__ondemand r;
  char err[512];
  assert_int_equal(parse("PROFILE_START_ITERATION=40\nACTIVITIES_ITERATIONS=3\n"
                         "ACTIVITIES_WARMUP_ITERATIONS=2", &r, err, sizeof err), 0);
  assert_int_equal(r.steps, 3);
  assert_int_equal(r.start_step, 40);
  assert_int_equal(r.duration_ns, 0);
  /* still ahead (warmup counted): as asked */
  assert_int_equal(loom__ondemand_start(&r, 10), 40);
  assert_int_equal(loom__ondemand_start(&r, 38), 40);
  /* past: next step plus warmup */
  assert_int_equal(loom__ondemand_start(&r, 39), 41);
  assert_int_equal(loom__ondemand_start(&r, 100), 102);
  /* a step window wins over a time window, with a warning naming the key */
  assert_int_equal(parse("ACTIVITIES_DURATION_MSECS=100\nACTIVITIES_ITERATIONS=5", &r, err,
                         sizeof err), 0);
  assert_int_equal(r.steps, 5);
  assert_int_equal(r.duration_ns, 0);
  assert_int_equal(r.start_step, -1);
  assert_int_equal(loom__ondemand_start(&r, 7), -1);
  assert_int_equal(nwarn, 1);
  assert_non_null(strstr(warned, "ACTIVITIES_DURATION_MSECS"));
}

static void test_roundup(void **state) {
  (void)state;
  loom__ondemand r;
  char err[512];
  /* dynolog's iteration request: ROUNDUP alone means start step 0 */
  assert_int_equal(parse("ACTIVITIES_ITERATIONS=2\nPROFILE_START_ITERATION_ROUNDUP=100\n", &r,
                         err, sizeof err), 0);
  assert_int_equal(r.start_step, 0);
  assert_int_equal(r.roundup, 100);
  assert_int_equal(loom__ondemand_start(&r, 0), 0);
  assert_int_equal(loom__ondemand_start(&r, 1), 100);
  assert_int_equal(loom__ondemand_start(&r, 2010), 2100);
  assert_int_equal(loom__ondemand_start(&r, 2100), 2100);
  /* Kineto's own example: current 9, start 8, warmup 5, roundup 100 -> 100 */
  assert_int_equal(parse("ACTIVITIES_ITERATIONS=1\nPROFILE_START_ITERATION=8\n"
                         "ACTIVITIES_WARMUP_ITERATIONS=5\nPROFILE_START_ITERATION_ROUNDUP=100",
                         &r, err, sizeof err), 0);
  assert_int_equal(loom__ondemand_start(&r, 9), 100);
  /* a start step without a step window: a time window, said so */
  assert_int_equal(parse("PROFILE_START_ITERATION=5", &r, err, sizeof err), 0);
  assert_int_equal(r.start_step, -1);
  assert_int_equal(r.duration_ns, 500000000LL);
  assert_non_null(
      strstr(warned, "PROFILE_START_ITERATION: no effect without ACTIVITIES_ITERATIONS"));
  /* ROUNDUP=0: no effect, as in Kineto, and said so */
  assert_int_equal(parse("ACTIVITIES_ITERATIONS=1\nPROFILE_START_ITERATION_ROUNDUP=0", &r, err,
                         sizeof err), 0);
  assert_int_equal(r.roundup, 0);
  assert_non_null(strstr(warned, "PROFILE_START_ITERATION_ROUNDUP=0"));
}

static void test_activity_types(void **state) {
  (void)state;
  loom__ondemand r;
  char err[512], kinds[256];
  assert_int_equal(parse("ACTIVITY_TYPES = Kernel, gpu_memcpy,cuda_runtime,,user_annotation,cpu_op",
                         &r, err, sizeof err), 0);
  assert_int_equal(r.kinds, LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
                                LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
                                LOOM_KIND_BIT(LOOM_KIND_USER_RANGE) |
                                LOOM_KIND_BIT(LOOM_KIND_CPU_OP));
  loom__kinds_format(r.kinds, kinds, sizeof kinds);
  assert_string_equal(kinds, "kernel,memcpy,runtime,user_range,cpu_op");
  assert_int_equal(nwarn, 0);
  /* a type loom has no kind for: warned by name */
  assert_int_equal(parse("ACTIVITY_TYPES=python_function,gpu_memset", &r, err, sizeof err), 0);
  assert_int_equal(r.kinds, LOOM_KIND_BIT(LOOM_KIND_MEMSET));
  assert_int_equal(nwarn, 1);
  assert_non_null(strstr(warned, "'python_function'"));
  /* every name Kineto's toActivityType accepts (libkineto/include/ActivityType.h) */
  assert_int_equal(parse("ACTIVITY_TYPES=cpu_op,user_annotation,gpu_user_annotation,gpu_memcpy,"
                         "gpu_memset,kernel,external_correlation,cuda_runtime,cuda_driver,"
                         "cpu_instant_event,python_function,overhead,mtia_runtime,mtia_ccp_events,"
                         "mtia_insight,cuda_sync,cuda_event,mtia_counters,glow_runtime,"
                         "cuda_profiler_range,hpu_op,xpu_runtime,xpu_driver,collective_comm,"
                         "privateuse1_runtime,privateuse1_driver,xpu_scope_profiler,xpu_sync,"
                         "hardware_counters", &r, err, sizeof err), 0);
  /* Kineto has no type for markers or CPU samples (the perf backend's): every other kind */
  assert_int_equal(r.kinds, LOOM_KINDS_ALL & ~(LOOM_KIND_BIT(LOOM_KIND_MARKER) |
                                               LOOM_KIND_BIT(LOOM_KIND_SAMPLE)));
  assert_int_equal(nwarn, 5); /* python_function, mtia_ccp_events, mtia_insight,
                                 cuda_profiler_range, xpu_scope_profiler */
  assert_int_equal(parse("ACTIVITY_TYPES=hardware_counters", &r, err, sizeof err), 0);
  assert_int_equal(r.kinds, LOOM_KIND_BIT(LOOM_KIND_COUNTER));
  /* not a type at all: an error naming the key, the value and the word */
  assert_int_equal(parse("ACTIVITY_TYPES=kernel,gpu_memcopy", &r, err, sizeof err), -1);
  assert_string_equal(err, "ACTIVITY_TYPES=kernel,gpu_memcopy: 'gpu_memcopy' is not a Kineto "
                           "activity type");
}

static void test_bad_values(void **state) {
  (void)state;
  loom__ondemand r;
  char err[512];
  assert_int_equal(parse("ACTIVITIES_DURATION_MSECS=abc", &r, err, sizeof err), -1);
  assert_string_equal(err, "ACTIVITIES_DURATION_MSECS=abc: not a whole number");
  assert_int_equal(parse("ACTIVITIES_ITERATIONS=0", &r, err, sizeof err), -1);
  assert_string_equal(err, "ACTIVITIES_ITERATIONS=0: out of range (1 to 2147483647)");
  assert_int_equal(parse("ACTIVITIES_ITERATIONS=3\nACTIVITIES_WARMUP_ITERATIONS=-2", &r, err,
                         sizeof err), -1);
  assert_string_equal(err, "ACTIVITIES_WARMUP_ITERATIONS=-2: out of range (0 to 2147483647)");
  assert_int_equal(parse("PROFILE_START_ITERATION=99999999999", &r, err, sizeof err), -1);
  assert_string_equal(err, "PROFILE_START_ITERATION=99999999999: out of range (-1 to 2147483647)");
  assert_int_equal(parse("ACTIVITIES_LOG_FILE=", &r, err, sizeof err), -1);
  assert_string_equal(err, "ACTIVITIES_LOG_FILE=: empty file name");
  assert_int_equal(parse("ACTIVITIES_ITERATIONS 3", &r, err, sizeof err), -1);
  assert_string_equal(err, "line 1 'ACTIVITIES_ITERATIONS 3': not KEY=VALUE");
}

static void test_unknown_keys(void **state) {
  (void)state;
  loom__ondemand r;
  char err[512];
  assert_int_equal(parse("ACTIVITIES_DURATION_MSECS=10\nREQUEST_TRACE_ID=123\n"
                         "ACTIVITIES_DURATON_MSECS=20\n", &r, err, sizeof err), 0);
  assert_int_equal(nwarn, 2);
  assert_non_null(strstr(warned, "REQUEST_TRACE_ID: a Kineto key loom does not use (ignored)"));
  assert_non_null(strstr(warned, "ACTIVITIES_DURATON_MSECS: unknown key (ignored"));
  /* the misspelt key changed nothing */
  assert_int_equal(r.duration_ns, 10000000LL);
}

static void test_file(void **state) {
  (void)state;
  char path[] = "/tmp/loom-kcfg-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "# a dynolog request\nACTIVITIES_ITERATIONS=4\nPROFILE_START_ITERATION=12\n"
                     "ACTIVITIES_LOG_FILE=/tmp/steps.json\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  loom__ondemand r;
  loom__ondemand_init(&r);
  char err[512] = "";
  assert_int_equal(loom__kineto_load(path, &r, on_warn, NULL, err, sizeof err), 0);
  assert_int_equal(r.steps, 4);
  assert_int_equal(r.start_step, 12);
  assert_string_equal(r.out, "/tmp/steps.json");
  unlink(path);
  /* a path that is not there, and no '=': says which */
  loom__ondemand_init(&r);
  assert_int_equal(loom__kineto_load(path, &r, on_warn, NULL, err, sizeof err), -1);
  assert_non_null(strstr(err, path));
  assert_non_null(strstr(err, "No such file"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_time_window),   cmocka_unit_test(test_step_window),
      cmocka_unit_test(test_roundup),       cmocka_unit_test(test_activity_types),
      cmocka_unit_test(test_bad_values),    cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
