/*
 * test_kinds_cl.c - Kineto's ACTIVITY_TYPES on a real OpenCL program
 * (tests/windows/stepapp.c on POCL: one upload and one kernel per step)
 * under `loom record --on-demand`: a 3-step window with ACTIVITY_TYPES=kernel
 * holds exactly its 3 kernels and nothing else, one with cpu_op no kernels,
 * uploads or steps, and the next window without it every kind (3 steps, 3
 * kernels, 3 uploads, their 6 flows); 0 errors in trace_processor each.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../testutil.h"

static void counts(const char *dir, const char *name, const long long *want) {
  static const char *const q[] = {
      "select count(*) from stats where value > 0 and severity in ('error','data_loss')",
      "select count(*) from slice where name like 'ProfilerStep#%' and category = 'user_annotation'",
      "select count(*) from slice where category = 'kernel'",
      "select count(*) from slice where category = 'gpu_memcpy'",
      "select count(*) from slice where category like '%runtime%'",
      "select count(*) from flow",
  };
  char file[700];
  snprintf(file, sizeof file, "%s/%s", dir, name);
  long long v[6];
  tp_ints(file, q, v, 6);
  for (int i = 0; i < 6; i++)
    if (want[i] >= 0 && v[i] != want[i])
      fail_msg("%s: %s gave %lld, expected %lld", name, q[i], v[i], want[i]);
  if (want[4] < 0 && v[4] == 0) fail_msg("%s: no runtime calls", name);
}

static void test_kinds_cl(void **state) {
  (void)state;
  tp_require();
  char dir[512], cmd[2048], *out = NULL;
  tmp_path(dir, sizeof dir, "-kindscl");
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(cmd, sizeof cmd, "sh '%s/windows/kinds_cl.sh' '%s' '%s' '%s' 2>&1", LOOM_TESTS_DIR,
           LOOM_BIN, STEPAPP, dir);
  if (ts_run(cmd, &out) != 0) fail_msg("%s: %s", cmd, out ? out : "");
  free(out);
  /* errors, steps, kernels, uploads, runtime calls (-1: some), flows (a
   * kernel's or upload's from its launch: none without the launches) */
  const long long k[] = {0, 0, 3, 0, 0, 0}, c[] = {0, 0, 0, 0, 0, 0}, a[] = {0, 3, 3, 3, -1, 6};
  counts(dir, "k.json", k);
  counts(dir, "c.json", c);
  counts(dir, "a.json", a);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_kinds_cl)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
