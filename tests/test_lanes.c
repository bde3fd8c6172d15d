/*
 * test_lanes.c - device work that overlaps on one queue goes on lanes of it,
 * whatever backend recorded it, so nothing is dropped by trace_processor
 * (which drops JSON slices that overlap without nesting) and `loom report`
 * still shows one queue.
 *
 * The backend below has one queue, "bar q", and emits (us after base):
 *   work A [10,30) c1, C [12,18) c2, B [20,40) c3, D [30,35) c4;
 *   a debug label L [50,70) (a user range on the device) holding E [52,60)
 *   c5 and F [58,66) c6;
 *   K1 [100,110) c7, K2 [115,120) c8, K3 [130,140) c9, K4 [145,150) c10,
 *   launched by calls inside host ranges R1 [1,4) (K1, K3) and R2 [5,8)
 *   (K2, K4), whose projections onto the queue, [100,140) and [115,150),
 *   cross.
 * Worked by hand: "bar q" keeps A, D, L, E, K1-K4 and R1's projection;
 * "bar q lane 2" gets C (inside A, but work is not inside work), B (crosses
 * A) and F (crosses E); R2's projection crosses R1's and goes on a lane of
 * its own, "bar q lane 3".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "loom/loom.h"
#include "loom/plugin.h"
#include "testutil.h"

static const loom_host *host;
static loom_backend *bar_b;
static loom_clock bar_clk;
static uint32_t bar_dev, bar_q;
static uint64_t base; /* REALTIME ns at start; the script is relative to it */

static loom_status bar_probe(loom_backend *b, char *why, size_t n) {
  (void)why, (void)n;
  bar_b = b;
  return LOOM_OK;
}

static loom_status bar_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  loom_device_info d = {.struct_size = sizeof d, .name = "Bar Engine", .vendor = "bar",
                        .type = "accelerator"};
  if (host->clock_declare(b, LOOM_CLOCK_REALTIME, "realtime", &bar_clk) ||
      host->device_add(b, &d, &bar_dev) || host->resource_add(b, bar_dev, "bar q", 7, &bar_q))
    return LOOM_EBACKEND;
  return LOOM_OK;
}

static loom_status bar_start(loom_backend *b) {
  (void)b;
  base = host->clock_now(LOOM_CLOCK_REALTIME) + 10000;
  return LOOM_OK;
}

static loom_status bar_stop(loom_backend *b) { (void)b; return LOOM_OK; }

static void rec(uint16_t kind, int device, double t0, double t1, const char *name, uint64_t corr) {
  uint16_t flags = kind == LOOM_KIND_RUNTIME ? LOOM_RECORD_F_LAUNCH : 0;
  loom_record r = {.struct_size = sizeof r, .kind = kind, .flags = flags, .clock = bar_clk,
                   .device = device ? bar_dev : LOOM_DEVICE_HOST,
                   .resource = device ? bar_q : host->thread_id(),
                   .start = base + (uint64_t)(t0 * 1000), .end = base + (uint64_t)(t1 * 1000),
                   .name = host->intern(bar_b, name, SIZE_MAX), .correlation = corr};
  assert_int_equal(host->emit(bar_b, &r), LOOM_OK);
}

static const struct { const char *name; double t0, t1; } work[] = {
    {"A", 10, 30},  {"C", 12, 18},  {"B", 20, 40},  {"D", 30, 35},   {"E", 52, 60},
    {"F", 58, 66},  {"K1", 100, 110}, {"K2", 115, 120}, {"K3", 130, 140}, {"K4", 145, 150}};
enum { NWORK = sizeof work / sizeof work[0] };

static loom_status bar_flush(loom_backend *b) {
  (void)b;
  for (size_t i = 0; i < NWORK; i++) {
    /* the launch calls: K1, K3 inside R1 [1,4), K2, K4 inside R2 [5,8) */
    double at = i < 6 ? 0.1 * (double)i : (i == 6 || i == 8) ? 1.5 + 0.5 * (double)(i - 6) : 5.5 + 0.5 * (double)(i - 7);
    rec(LOOM_KIND_RUNTIME, 0, at, at + 0.05, "barLaunch", i + 1);
    rec(LOOM_KIND_KERNEL, 1, work[i].t0, work[i].t1, work[i].name, i + 1);
  }
  rec(LOOM_KIND_USER_RANGE, 1, 50, 70, "L", 0);
  rec(LOOM_KIND_USER_RANGE, 0, 1, 4, "R1", 0);
  rec(LOOM_KIND_USER_RANGE, 0, 5, 8, "R2", 0);
  return LOOM_OK;
}

static const loom_backend_ops bar_ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "bar", .device_type = "bar", .kinds = LOOM_KINDS_ALL,
    .runtime_category = "bar_runtime", .probe = bar_probe, .configure = bar_configure,
    .start = bar_start, .stop = bar_stop, .flush = bar_flush};

static loom_trace *record_bar(void) {
  host = loom_host_get(LOOM_ABI_MAJOR);
  assert_non_null(host);
  assert_int_equal(host->backend_register(&bar_ops, "tests"), LOOM_OK);
  loom_session *s = ts_start("bar", NULL);
  struct timespec ms = {0, 2000000};
  nanosleep(&ms, NULL); /* the script's 150 us lie inside the session */
  return ts_finish(s);
}

static int64_t tid_of(const loom_trace *t, const char *name, int projected) {
  loom_event_view v = {.struct_size = sizeof v};
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    if (!strcmp(v.name, name) && v.device != UINT32_MAX && v.projected == (unsigned)projected)
      return v.tid;
  }
  fail_msg("no device event %s", name);
  return -1;
}

static void test_overlapping_work_goes_on_lanes(void **state) {
  (void)state;
  loom_trace *t = record_bar();
  int64_t q = tid_of(t, "A", 0);
  assert_int_equal(q, 7);
  const char *base_q[] = {"A", "D", "L", "E", "K1", "K2", "K3", "K4"};
  for (size_t i = 0; i < sizeof base_q / sizeof *base_q; i++) assert_int_equal(tid_of(t, base_q[i], 0), q);
  int64_t lane2 = tid_of(t, "C", 0);
  assert_true(lane2 != q);
  assert_int_equal(tid_of(t, "B", 0), lane2);
  assert_int_equal(tid_of(t, "F", 0), lane2);
  assert_int_equal(tid_of(t, "R1", 1), q);
  int64_t lane3 = tid_of(t, "R2", 1);
  assert_true(lane3 != q && lane3 != lane2);
  /* the API's order holds: by track, then start */
  loom_event_view a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
  for (size_t i = 1; i < loom_trace_event_count(t); i++) {
    loom_trace_event(t, i - 1, &a);
    loom_trace_event(t, i, &b);
    if (a.pid == b.pid && a.tid == b.tid) assert_true(a.start_ns <= b.start_ns);
  }
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(loom_trace_save(t, trace), LOOM_OK);
  /* every event and flow is there for a real consumer, with no error */
  const char *sql[] = {
      "select count(*) from slice join thread_track on slice.track_id = thread_track.id "
      "join thread using (utid) where thread.name like 'bar q%'",
      "select count(*) from flow",
      "select group_concat(name, ',') from (select distinct thread.name from thread "
      "where thread.name like 'bar q%' order by thread.name)"};
  long long r[2];
  tp_ints(trace, sql, r, 2);
  assert_int_equal(r[0], NWORK + 3); /* the work, the label, two projections */
  assert_int_equal(r[1], NWORK);
  char names[256];
  tp_str(trace, sql[2], names, sizeof names);
  assert_string_equal(names, "bar q,bar q lane 2,bar q lane 3");
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_overlapping_work_goes_on_lanes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
