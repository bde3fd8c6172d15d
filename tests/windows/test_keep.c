/*
 * test_keep.c - what a triggered window or ring dump keeps of its trace
 * (src/window/keep.c, loom__trace_keep): the kinds asked (ACTIVITY_TYPES),
 * and a dump's last seconds, device work going with the call that
 * launched it; flows renumbered or dropped with an end.  Links the
 * internal archive: the trace's structure is not public.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "trace/trace.h"
#include "window/trigger.h"

/* What a window or dump keeps (keep.c): kinds, and a ring dump's last
 * seconds with device work going with its launch. */
static void test_keep(void **state) {
  (void)state;
  loom_trace *t = loom__trace_new();
  assert_non_null(t);
  /* 0: a range from 100, 1: a launch at 150, 2: its kernel at 300,
   * 3: a launch at 250, 4: its kernel at 400, 5: an op at 260 */
  const struct { int64_t ts; uint8_t kind; } ev[] = {
      {100, LOOM_KIND_USER_RANGE}, {150, LOOM_KIND_RUNTIME}, {300, LOOM_KIND_KERNEL},
      {250, LOOM_KIND_RUNTIME},    {400, LOOM_KIND_KERNEL},  {260, LOOM_KIND_CPU_OP}};
  for (size_t i = 0; i < 6; i++) {
    loom__ev e = {.ts = ev[i].ts, .dur = 10, .kind = ev[i].kind, .ph = LOOM__PH_COMPLETE};
    assert_int_equal(loom__trace_add_ev(t, &e), 0);
  }
  t->flows = calloc(2, sizeof *t->flows);
  assert_non_null(t->flows);
  t->flows[0] = (loom__flow){1, 2, 7};
  t->flows[1] = (loom__flow){3, 4, 8};
  t->nflows = t->cap_flows = 2;
  uint64_t gone = 0;
  /* from 200 on: the range and the first launch go, its kernel with it */
  assert_int_equal(loom__trace_keep(t, 0, 200, &gone), 0);
  assert_int_equal(gone, 3);
  assert_int_equal(t->nev, 3);
  assert_int_equal(t->ev[0].ts, 250);
  assert_int_equal(t->ev[1].ts, 400);
  assert_int_equal(t->ev[2].ts, 260);
  assert_int_equal(t->nflows, 1);
  assert_int_equal(t->flows[0].from, 0);
  assert_int_equal(t->flows[0].to, 1);
  assert_int_equal(t->flows[0].id, 8);
  /* kernels only: the launch and the op go, and the flow with the launch */
  assert_int_equal(loom__trace_keep(t, LOOM_KIND_BIT(LOOM_KIND_KERNEL), INT64_MIN, &gone), 0);
  assert_int_equal(gone, 2);
  assert_int_equal(t->nev, 1);
  assert_int_equal(t->ev[0].kind, LOOM_KIND_KERNEL);
  assert_int_equal(t->nflows, 0);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_keep)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
