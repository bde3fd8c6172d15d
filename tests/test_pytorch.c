/*
 * test_pytorch.c - an unmodified /usr/bin/python3 running a small PyTorch
 * model (tests/integrations/torch_model.py: Conv2d, Linear, SGD, a
 * record_function region per step) recorded by `loom record`, which preloads
 * the PyTorch adapter: inside the script's "workload" region the trace holds
 * exactly as many cpu_op records and user ranges as PyTorch's own profiler
 * reports for the same run (the script runs under both at once: comparing
 * two runs is not exact, PyTorch executes slightly different ops when its
 * profiler is on), every op nested on its thread; the script's output is
 * unchanged.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void test_ops_match_profiler(void **state) {
  (void)state;
  char trace[256], cmd[2048], line[256] = "";
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' '%s' profile 2>/dev/null", LOOM_BIN, trace,
           PYTHON, TORCH_MODEL);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  if (!fgets(line, sizeof line, p)) line[0] = 0;
  assert_int_equal(pclose(p), 0);
  int ops = -1, user = -1;
  assert_int_equal(sscanf(line, "profiler ops %d user %d", &ops, &user), 2);
  assert_true(ops > 100);
  loom_trace *t = NULL;
  if (loom_trace_load(trace, &t) != LOOM_OK) fail_msg("%s", loom_last_error());
  int64_t ws = 0, we = 0, wtid = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!strcmp(v.name, "workload") && v.kind == LOOM_KIND_USER_RANGE) {
      ws = v.start_ns, we = v.start_ns + v.dur_ns, wtid = v.tid;
    }
  }
  assert_true(we > ws);
  int lops = 0, luser = 0, other_thread = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.start_ns < ws || v.start_ns > we || !strcmp(v.name, "workload")) continue;
    if (v.kind == LOOM_KIND_CPU_OP) lops++;
    else if (v.kind == LOOM_KIND_USER_RANGE && v.phase == 'X') luser++;
    else continue;
    other_thread += v.tid != wtid;
  }
  print_message("profiler: %d ops, %d user ranges; loom: %d cpu_op, %d user_annotation (%d off the main thread)\n",
                ops, user, lops, luser, other_thread);
  assert_int_equal(lops, ops);
  assert_int_equal(luser, user);
  loom_trace_free(t);
  tp_require();
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops_match_profiler),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
