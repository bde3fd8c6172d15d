/*
 * test_active.c - loom.h's inline idle check (loom_active_v1): a program
 * compiled with it records exactly what one calling libloom directly
 * records (plain.c, LOOM_NO_INLINE_CHECK), in every state the flag covers:
 * no session, a session recording the host, ring mode, a window waiting for
 * its steps and recording them (steps counted and the ledger of live
 * allocations kept while nothing records), and a session waiting for
 * `loom trigger`.  The flag's exact value in each state, and that the
 * header's calls really test it (with the flag cleared they record
 * nothing, while the exported functions still do).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#ifndef loom_range_push
#error "loom.h without its inline check"
#endif
#define WORKLOAD workload_inline
#define WORKLOAD_FMT fmt_inline
#define WORKLOAD_STEP step_inline
#include "active/workload.h"

uint64_t workload_plain(loom_string_id id, unsigned round);
void step_plain(void);

enum { ROUNDS = 10 };
#define HOST LOOM_ACTIVE_HOST
#define STEPS LOOM_ACTIVE_STEPS
#define MEMORY LOOM_ACTIVE_MEMORY

static uint32_t flag(void) { return __atomic_load_n(&loom_active_v1, __ATOMIC_RELAXED); }

typedef struct tally {
  size_t ranges, async, ops, instants, counters, mem, steps, other;
} tally;

static tally count(const loom_trace *t) {
  tally c = {0};
  for (size_t i = 0; t && i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    if (!strncmp(v.name, "ProfilerStep#", 13)) c.steps++;
    else if (v.kind == LOOM_KIND_USER_RANGE && v.phase == 'X') c.ranges++;
    else if (v.kind == LOOM_KIND_USER_RANGE && v.phase == 'b') c.async++;
    else if (v.kind == LOOM_KIND_CPU_OP) c.ops++;
    else if (v.kind == LOOM_KIND_INSTANT) c.instants++;
    else if (v.kind == LOOM_KIND_COUNTER) c.counters++;
    else if (v.kind == LOOM_KIND_MEMORY) c.mem++;
    else c.other++;
  }
  return c;
}

/* n rounds of the workload recorded, and steps ProfilerStep# ranges. */
static void expect(tally c, size_t n, size_t steps) {
  assert_int_equal(c.ranges, 3 * n);
  assert_int_equal(c.async, n);
  assert_int_equal(c.ops, 4 * n);
  assert_int_equal(c.instants, n);
  assert_int_equal(c.counters, n);
  assert_int_equal(c.mem, 2 * n);
  assert_int_equal(c.steps, steps);
}

static loom_string_id the_id(void) {
  loom_string_id id = loom_string_id_of("range_id");
  assert_int_not_equal(id, 0);
  return id;
}

/* Both kinds of program, ROUNDS rounds each; the op id each saw. */
static void both(uint64_t want_current) {
  for (unsigned r = 0; r < ROUNDS; r++) {
    assert_int_equal(workload_inline(the_id(), r), want_current);
    assert_int_equal(workload_plain(the_id(), r), want_current);
  }
}

static void test_idle(void **state) {
  (void)state;
  assert_int_equal(flag(), 0);
  both(0);
  step_inline();
  step_plain();
  assert_int_equal(flag(), 0);
  /* nothing of it reaches the next session */
  loom_session *s = ts_start("cpu", NULL);
  loom_trace *t = ts_finish(s);
  assert_int_equal(loom_trace_event_count(t), 0);
  loom_trace_free(t);
  assert_int_equal(flag(), 0);
}

static void recorded(const char *options, uint32_t want_flag) {
  loom_session *s = ts_start("cpu", options);
  assert_int_equal(flag(), want_flag);
  both(7);
  for (int i = 0; i < 3; i++) {
    step_inline();
    step_plain();
  }
  loom_trace *t = ts_finish(s);
  assert_int_equal(flag(), 0);
  expect(count(t), 2 * ROUNDS, 6);
  loom_trace_free(t);
}

static void test_session(void **state) {
  (void)state;
  recorded(NULL, HOST);
}

static void test_ring(void **state) {
  (void)state;
  recorded("mode=ring,ring_size=4m", HOST | MEMORY);
}

/* ---- a window waiting for its steps, then recording them ------------------- */
static tally win;
static size_t live_a, freed_a, nwin;
enum { ADDR_A = 0xa000 };

static void on_window(loom_trace *t, const char *out, unsigned seq, void *ud) {
  (void)out, (void)seq, (void)ud;
  win = count(t);
  nwin++;
  live_a = freed_a = 0;
}

static int mem_visit(const loom_memory_view *v, void *user) {
  (void)user;
  if (v->addr != ADDR_A) return 0;
  live_a += v->live_at_start;
  freed_a += v->is_free && v->bytes == -4096; /* its size from the ledger */
  return 0;
}

static void on_window_mem(loom_trace *t, const char *out, unsigned seq, void *ud) {
  on_window(t, out, seq, ud);
  assert_int_equal(loom_trace_memory(t, mem_visit, NULL), LOOM_OK);
}

/* Steps 0..5, the window records steps 2 and 3.  While it waits nothing
 * records, yet steps are counted (or it would never begin) and the ledger
 * keeps A, allocated before it and freed inside it. */
static void window(int plain) {
  uint64_t (*work)(loom_string_id, unsigned) = plain ? workload_plain : workload_inline;
  void (*step)(void) = plain ? step_plain : step_inline;
  nwin = 0;
  loom_window_callback_set(on_window_mem, NULL);
  loom_session *s = ts_start("cpu", "start_step=2,steps=2,output=/tmp/loom-active-{seq}.json");
  assert_int_equal(flag(), STEPS | MEMORY);
  if (plain) (loom_memory_alloc)(ADDR_A, 4096, LOOM_MEMORY_HOST, -1, 0);
  else loom_memory_alloc(ADDR_A, 4096, LOOM_MEMORY_HOST, -1, 0);
  for (unsigned i = 0; i < 6; i++) {
    step();
    int in = i == 2 || i == 3;
    assert_int_equal(flag(), (in ? HOST : 0) | STEPS | MEMORY);
    assert_int_equal(work(the_id(), i), in ? 7 : 0);
    if (i == 2 && plain) (loom_memory_free)(ADDR_A, 0, LOOM_MEMORY_HOST, -1, 0);
    else if (i == 2) loom_memory_free(ADDR_A, 0, LOOM_MEMORY_HOST, -1, 0);
  }
  loom_trace *t = (loom_trace *)1;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  assert_null(t);
  loom_session_destroy(s);
  loom_window_callback_set(NULL, NULL);
  assert_int_equal(flag(), 0);
  assert_int_equal(nwin, 1);
  /* 2 rounds, A's free (and A, live at the window's start) */
  win.mem -= 2;
  expect(win, 2, 2);
  assert_int_equal(live_a, 1);
  assert_int_equal(freed_a, 1);
}

static void test_window_inline(void **state) {
  (void)state;
  window(0);
}

static void test_window_plain(void **state) {
  (void)state;
  window(1);
}

/* Waiting for `loom trigger` (windows=on): steps counted, nothing recorded. */
static void test_waiting_for_trigger(void **state) {
  (void)state;
  nwin = 0;
  loom_window_callback_set(on_window, NULL);
  loom_session *s = ts_start("cpu", "windows=on,output=/tmp/loom-active-t.json");
  assert_int_equal(flag(), STEPS | MEMORY);
  both(0);
  step_inline();
  step_plain();
  loom_trace *t = (loom_trace *)1;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  assert_null(t);
  loom_session_destroy(s);
  loom_window_callback_set(NULL, NULL);
  assert_int_equal(nwin, 0);
  assert_int_equal(flag(), 0);
}

/* The header's calls test the flag in the program, the exported functions
 * do not: with the flag cleared under a recording session only the plain
 * round records. */
static void test_check_is_inline(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", NULL);
  __atomic_store_n(&loom_active_v1, 0, __ATOMIC_RELAXED);
  assert_int_equal(workload_inline(the_id(), 0), 0);
  assert_int_equal(workload_plain(the_id(), 1), 7);
  __atomic_store_n(&loom_active_v1, HOST, __ATOMIC_RELAXED);
  loom_trace *t = ts_finish(s);
  expect(count(t), 1, 0);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idle),
      cmocka_unit_test(test_session),
      cmocka_unit_test(test_ring),
      cmocka_unit_test(test_window_inline),
      cmocka_unit_test(test_window_plain),
      cmocka_unit_test(test_waiting_for_trigger),
      cmocka_unit_test(test_check_is_inline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
