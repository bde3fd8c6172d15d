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
static int random_script; /* test_random_work: the flush emits random work instead */

/* test_random_work's script: N pieces of work at random on the queue (some
 * at once, some inside others, some touching), each launched by a call
 * inside one of R host ranges, and a few labels.  Times in ns after base. */
enum { RN = 3000, RR = 40, RL = 30 };
static struct { uint64_t t0, t1; } rw[RN], rl[RL];
static unsigned rnd_state = 12345;
static unsigned rnd(unsigned n) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (rnd_state >> 8) % n;
}

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

static void rec_ns(uint16_t kind, int device, uint64_t t0, uint64_t t1, const char *name, uint64_t corr) {
  uint16_t flags = kind == LOOM_KIND_RUNTIME ? LOOM_RECORD_F_LAUNCH : 0;
  loom_record r = {.struct_size = sizeof r, .kind = kind, .flags = flags, .clock = bar_clk,
                   .device = device ? bar_dev : LOOM_DEVICE_HOST,
                   .resource = device ? bar_q : host->thread_id(), .start = base + t0, .end = base + t1,
                   .name = host->intern(bar_b, name, SIZE_MAX), .correlation = corr};
  assert_int_equal(host->emit(bar_b, &r), LOOM_OK);
}

static void flush_random(void) {
  for (uint64_t r = 0; r < RR; r++) rec_ns(LOOM_KIND_USER_RANGE, 0, r * 1000, r * 1000 + 900, "R", 0);
  for (size_t i = 0; i < RN; i++) {
    uint64_t call = (i % RR) * 1000 + 100 + (i / RR) * 5; /* inside range i % RR */
    rec_ns(LOOM_KIND_RUNTIME, 0, call, call + 2, "barLaunch", i + 1);
    uint64_t t0 = 100000 + rnd(200000), len = rnd(4) ? rnd(2000) : rnd(20000);
    if (i && !rnd(8)) t0 = rw[i - 1].t1; /* touching the one before */
    rw[i].t0 = t0, rw[i].t1 = t0 + len;
    rec_ns(LOOM_KIND_KERNEL, 1, rw[i].t0, rw[i].t1, "k", i + 1);
  }
  for (size_t i = 0; i < RL; i++) {
    rl[i].t0 = 100000 + rnd(200000), rl[i].t1 = rl[i].t0 + rnd(30000);
    rec_ns(LOOM_KIND_USER_RANGE, 1, rl[i].t0, rl[i].t1, "label", 0);
  }
}

static loom_status bar_flush(loom_backend *b) {
  (void)b;
  if (random_script) {
    flush_random();
    return LOOM_OK;
  }
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

/* Random work on one queue: every piece of work and every label is still
 * there with its own times, on the queue or one of its lanes; on every
 * track, slices either nest or are apart, and work is never inside work;
 * each piece keeps its flow; each host range is projected onto every track
 * holding some of its work; trace_processor keeps them all with no error;
 * and the lanes are at least as many as work ever ran at once. */
static void test_random_work(void **state) {
  (void)state;
  random_script = 1;
  loom_trace *t = record_bar();
  random_script = 0;
  size_t n = loom_trace_event_count(t), nwork = 0, labels = 0, proj = 0, pairs = 0;
  loom_event_view *v = calloc(n, sizeof *v);
  for (size_t i = 0; i < n; i++) {
    v[i].struct_size = sizeof v[i];
    assert_int_equal(loom_trace_event(t, i, &v[i]), LOOM_OK);
    if (v[i].device == UINT32_MAX) continue;
    nwork += v[i].kind == LOOM_KIND_KERNEL;
    labels += v[i].kind == LOOM_KIND_USER_RANGE && !v[i].projected;
    proj += v[i].projected;
  }
  assert_int_equal(nwork, RN);
  assert_int_equal(labels, RL);
  /* a host range is projected onto each track (the queue, a lane) holding
   * some of its work: kernel i+1's range is i % RR */
  for (size_t i = 0; i < n; i++) {
    if (v[i].device == UINT32_MAX || v[i].kind != LOOM_KIND_KERNEL) continue;
    int first = 1;
    for (size_t k = 0; k < i && first; k++)
      first = !(v[k].device != UINT32_MAX && v[k].kind == LOOM_KIND_KERNEL && v[k].tid == v[i].tid &&
                (v[k].correlation - 1) % RR == (v[i].correlation - 1) % RR);
    pairs += first;
  }
  assert_int_equal(proj, pairs);
  assert_int_equal(loom_trace_flow_count(t), RN);
  /* per track (events are in track, then start order): a stack of open slices */
  size_t bad = 0, lanes = 0;
  int64_t *end = calloc(n, sizeof *end);
  int *is_work = calloc(n, sizeof *is_work);
  size_t depth = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i].device == UINT32_MAX || v[i].phase != 'X') continue;
    if (!i || v[i - 1].tid != v[i].tid || v[i - 1].device != v[i].device) depth = 0, lanes++;
    int64_t s = v[i].start_ns, e = s + v[i].dur_ns;
    while (depth && end[depth - 1] <= s) depth--;
    if (depth && (end[depth - 1] < e || is_work[depth - 1])) {
      if (bad < 5) print_message("crossing on tid %lld: [%lld, %lld) %s%s, open until %lld (%s)\n", (long long)v[i].tid,
                                 (long long)(s - (int64_t)base), (long long)(e - (int64_t)base), v[i].name,
                                 v[i].projected ? " (projected)" : "", (long long)(end[depth - 1] - (int64_t)base),
                                 is_work[depth - 1] ? "work" : "range");
      bad++;
    }
    end[depth] = e, is_work[depth] = v[i].kind == LOOM_KIND_KERNEL, depth++;
  }
  assert_int_equal(bad, 0);
  /* the most work ever running at once */
  int64_t most = 0;
  for (size_t i = 0; i < RN; i++) {
    int64_t at = 0;
    for (size_t k = 0; k < RN; k++) at += rw[k].t0 <= rw[i].t0 && rw[k].t1 > rw[i].t0;
    if (at > most) most = at;
  }
  assert_true(lanes >= (size_t)most);
  free(end);
  free(is_work);
  free(v);
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(loom_trace_save(t, trace), LOOM_OK);
  const char *sql[] = {"select count(*) from slice where category = 'kernel'", "select count(*) from flow"};
  long long r[2];
  tp_ints(trace, sql, r, 2);
  assert_int_equal(r[0], RN);
  assert_int_equal(r[1], RN);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_overlapping_work_goes_on_lanes),
      cmocka_unit_test(test_random_work),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
