/*
 * test_keep.c - what a triggered window or ring dump keeps of its trace
 * (src/window/keep.c, loom__trace_keep): the kinds asked (ACTIVITY_TYPES),
 * and a dump's last seconds, device work going with the call that
 * launched it; flows renumbered or dropped with an end; memory live at
 * the cut reappears there (live_at_start).  Links the
 * internal archive: the trace's structure is not public.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

static int64_t arg_of(const loom_trace *t, const loom__ev *e, const char *key) {
  for (uint32_t k = 0; k < e->nargs; k++)
    if (!strcmp(loom__trace_cstr(t, t->args[e->args_off + k].key), key))
      return t->args[e->args_off + k].v.i;
  return -1;
}

/* A dump's last seconds start from the memory live at the cut: of two
 * allocations before it, the one freed before it is gone, the other one
 * reappears at the cut with its time; its free after the cut is kept. */
static void test_keep_memory(void **state) {
  (void)state;
  loom_trace *t = loom__trace_new();
  assert_non_null(t);
  const struct { int64_t ts; uint64_t addr, bytes; unsigned role; } ev[] = {
      {10, 1, 100, LOOM_RECORD_F_ALLOC}, {20, 2, 200, LOOM_RECORD_F_ALLOC},
      {30, 1, 100, LOOM_RECORD_F_FREE},  {60, 3, 50, LOOM_RECORD_F_ALLOC},
      {70, 2, 200, LOOM_RECORD_F_FREE}};
  for (size_t i = 0; i < 5; i++) {
    loom__ev e = {.ts = ev[i].ts, .kind = LOOM_KIND_MEMORY, .ph = LOOM__PH_INSTANT,
                  .flags = (uint16_t)(ev[i].role << LOOM__EV_ROLE_SHIFT)};
    loom__targ a = {.key = loom__trace_str(t, "addr"), .type = LOOM_ARG_UINT, .v.u = ev[i].addr};
    loom__targ b = {.key = loom__trace_str(t, "bytes"), .type = LOOM_ARG_UINT, .v.u = ev[i].bytes};
    assert_int_equal(loom__trace_add_ev(t, &e), 0);
    assert_int_equal(loom__trace_add_arg(t, &a), 0);
    assert_int_equal(loom__trace_add_arg(t, &b), 0);
  }
  uint64_t gone = 0;
  assert_int_equal(loom__trace_keep(t, 0, 50, &gone), 0);
  assert_int_equal(gone, 3);
  assert_int_equal(t->nev, 3);
  assert_int_equal(t->ev[0].ts, 50); /* in time order again */
  assert_int_equal(arg_of(t, &t->ev[0], "addr"), 2);
  assert_int_equal(arg_of(t, &t->ev[0], "bytes"), 200);
  assert_int_equal(arg_of(t, &t->ev[0], "live_at_start"), 1);
  assert_int_equal(arg_of(t, &t->ev[0], "allocated_at_ns"), 20);
  assert_int_equal(LOOM__EV_ROLE_OF(&t->ev[0]), LOOM_RECORD_F_ALLOC);
  assert_int_equal(t->ev[1].ts, 60);
  assert_int_equal(arg_of(t, &t->ev[1], "live_at_start"), -1);
  assert_int_equal(t->ev[2].ts, 70);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_keep),
                                     cmocka_unit_test(test_keep_memory)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
