/*
 * test_json_par.c - the Chrome JSON writer formats a large trace's events on
 * two threads (src/export/chrome_json.c: even chunks on the writing thread,
 * odd ones by a helper): the file is byte for byte the one a single thread
 * writes, for traces of a few chunks of every event type (ops with
 * arguments, ranges, instants, counters, async ranges, memory events with
 * their counters, calls with flows) and for one just past two chunks.  Run
 * under ThreadSanitizer too (scripts/test.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "export/export.h"
#include "loom/loom.h"
#include "trace/trace.h"

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static void add_arg(loom_trace *t, const char *key, uint8_t type, uint64_t v, const char *s) {
  loom__targ a = {.key = loom__trace_str(t, key), .type = type};
  if (type == LOOM_ARG_STRING) a.v.s = loom__trace_str(t, s);
  else a.v.u = v;
  assert_int_equal(loom__trace_add_arg(t, &a), 0);
}

/* An event of each sort in turn, on 3 host tracks, rising times. */
static void add_one(loom_trace *t, size_t i, uint64_t *seed, const uint32_t *tracks) {
  static const char *names[] = {"aten::add", "aten::mm \"quoted\"", "step", "x\\y\n"};
  loom__ev e = {.ts = 1000000 + (int64_t)i * 700, .track = tracks[i % 3],
                .name = loom__trace_str(t, names[rnd(seed) % 4]),
                .cat = loom__trace_str(t, "cpu_op")};
  switch (i % 6) {
  case 0: e.kind = LOOM_KIND_CPU_OP, e.ph = LOOM__PH_COMPLETE, e.dur = 500, e.external_id = i; break;
  case 1: e.kind = LOOM_KIND_USER_RANGE, e.ph = LOOM__PH_COMPLETE, e.dur = 300; break;
  case 2: e.kind = LOOM_KIND_INSTANT, e.ph = LOOM__PH_INSTANT; break;
  case 3: e.kind = LOOM_KIND_COUNTER, e.ph = LOOM__PH_COUNTER; break;
  case 4: e.kind = LOOM_KIND_USER_RANGE, e.ph = LOOM__PH_ASYNC, e.dur = 900, e.correlation = i; break;
  default:
    e.kind = LOOM_KIND_MEMORY, e.ph = LOOM__PH_INSTANT, e.name = loom__trace_str(t, "[memory]");
    e.cat = loom__trace_str(t, "cpu_instant_event");
    e.flags = (uint16_t)((i % 12 == 5 ? LOOM_RECORD_F_ALLOC : LOOM_RECORD_F_FREE)
                         << LOOM__EV_ROLE_SHIFT);
  }
  assert_int_equal(loom__trace_add_ev(t, &e), 0);
  if (e.kind == LOOM_KIND_MEMORY) {
    add_arg(t, "addr", LOOM_ARG_UINT, 0x1000 + (i / 12) * 64, NULL);
    add_arg(t, "bytes", LOOM_ARG_UINT, 64, NULL);
  } else if (e.kind == LOOM_KIND_CPU_OP) {
    add_arg(t, "Sequence number", LOOM_ARG_INT, i, NULL);
    add_arg(t, "Input Dims", LOOM_ARG_STRING, 0, "[[8, 3, 32, 32]]");
  } else if (e.kind == LOOM_KIND_COUNTER) {
    add_arg(t, "value", LOOM_ARG_UINT, rnd(seed) % 1000, NULL);
  }
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc(*n + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

static void same_text(size_t nev) {
  loom_trace *t = loom__trace_new();
  assert_non_null(t);
  uint32_t tracks[3];
  for (int k = 0; k < 3; k++)
    assert_int_equal(loom__trace_track(t, 42, 42 + k, "thread", LOOM_DEVICE_HOST, &tracks[k]), 0);
  uint64_t seed = 0x51ed ^ nev;
  for (size_t i = 0; i < nev; i++) add_one(t, i, &seed, tracks);
  t->start_ns = 1000000;
  t->end_ns = 1000000 + (int64_t)nev * 700 + 1000;
  char one[64], two[64];
  snprintf(one, sizeof one, "/tmp/loom-json-par-1-%d.json", (int)getpid());
  snprintf(two, sizeof two, "/tmp/loom-json-par-2-%d.json", (int)getpid());
  loom__json_one_thread = 1;
  assert_int_equal(loom__write_chrome_json(t, one, -1), LOOM_OK);
  loom__json_one_thread = 0;
  assert_int_equal(loom__write_chrome_json(t, two, -1), LOOM_OK);
  size_t n1, n2;
  char *a = slurp(one, &n1), *b = slurp(two, &n2);
  assert_int_equal(n1, n2);
  for (size_t i = 0; i < n1; i++)
    if (a[i] != b[i]) fail_msg("%zu events: first difference at byte %zu of %zu", nev, i, n1);
  assert_true(n1 > nev * 60); /* every event written */
  free(a);
  free(b);
  unlink(one);
  unlink(two);
  loom_trace_free(t);
}

static void test_two_threads_same_text(void **st) {
  (void)st;
  same_text(2 * 8192 + 1); /* just past two chunks: the helper's first */
  same_text(5 * 8192 + 77);
  same_text(100000);
}

static void test_small(void **st) {
  (void)st;
  same_text(1);
  same_text(2 * 8192); /* two chunks: one thread */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_threads_same_text),
      cmocka_unit_test(test_small),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
