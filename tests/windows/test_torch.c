/*
 * test_torch.c - an unmodified /usr/bin/python3 PyTorch loop whose
 * steps are torch.profiler's ProfilerStep#N ranges (tests/windows/
 * torch_steps.py) under `loom record --start-step 5 --steps 3`: the PyTorch
 * adapter hands the step numbers to the window controller, and the trace
 * holds exactly ProfilerStep#5..7, their train_step ranges and their matmuls
 * (trace_processor, 0 errors); a schedule gives one file per cycle.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void record(const char *opts, const char *trace) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' record %s -o '%s' -- '%s' '%s' 20 >/dev/null 2>&1", LOOM_BIN,
           opts, trace, PYTHON, TORCH_STEPS);
  assert_int_equal(ts_run(cmd, NULL), 0);
}

/* The window holds steps first..first+n-1 and nothing else of the loop. */
static void expect_steps(const char *trace, int first, int n) {
  char want[256];
  size_t k = 0;
  for (int i = 0; i < n; i++)
    k += (size_t)snprintf(want + k, sizeof want - k, "%s'ProfilerStep#%d'", i ? "," : "", first + i);
  char q0[512];
  snprintf(q0, sizeof q0, "select count(*) from slice where name in (%s)", want);
  const char *q[] = {q0,
                     "select count(*) from slice where name like 'ProfilerStep#%'",
                     "select count(*) from slice where name = 'train_step'",
                     "select count(*) from slice where name = 'aten::mm'",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[5];
  tp_ints(trace, q, r, 5);
  assert_int_equal(r[0], n);
  assert_int_equal(r[1], n);
  assert_int_equal(r[2], n);
  assert_int_equal(r[3], n);
  assert_int_equal(r[4], 0);
}

static void test_start_step(void **state) {
  (void)state;
  tp_require();
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  record("--start-step 5 --steps 3", trace);
  expect_steps(trace, 5, 3);
  unlink(trace);
}

static void test_schedule(void **state) {
  (void)state;
  tp_require();
  char trace[256], f[300];
  tmp_path(trace, sizeof trace, ".json");
  record("--wait 1 --warmup 1 --active 2 --repeat 3", trace); /* 2-3, 6-7, 10-11 */
  for (int i = 1; i <= 3; i++) {
    snprintf(f, sizeof f, "%.*s-%d.json", (int)(strlen(trace) - 5), trace, i);
    expect_steps(f, 4 * (i - 1) + 2, 2);
    unlink(f);
  }
  snprintf(f, sizeof f, "%.*s-4.json", (int)(strlen(trace) - 5), trace);
  assert_int_not_equal(access(f, F_OK), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_start_step),
      cmocka_unit_test(test_schedule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
