/*
 * test_hostile.c - the inputs the fuzzers stopped at (issue 20), kept in
 * tests/data/fuzz/regress/ one file per defect, replayed by the ordinary
 * build.  Each is loaded and reported, and the outcome checked: exact event
 * counts, times and argument values kept, every bad value named in one
 * warning per kind with its count, the same kinds in the report's "not
 * understood" values; converted traces carry the warning and load in
 * trace_processor with the same slice count and no error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "loom/loom.h"
#include "testutil.h"

#define REGRESS LOOM_TESTS_DIR "/data/fuzz/regress/"
#define LIMIT 3000000000000000000ll /* LOOM__TIME_LIMIT: the largest time kept, ns */

static loom_trace *load(const char *name) {
  loom_trace *t = NULL;
  char path[512];
  snprintf(path, sizeof path, REGRESS "%s", name);
  if (loom_trace_load(path, &t) != LOOM_OK) fail_msg("%s: %s", name, loom_last_error());
  return t;
}

static loom_event_view event_named(const loom_trace *t, const char *name) {
  loom_event_view v = {.struct_size = sizeof v};
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    if (!strcmp(v.name, name)) return v;
  }
  fail_msg("no event %s", name);
  return v;
}

/* The one warning that names what; none other mentions it. */
static void warned_once(const loom_trace *t, const char *what) {
  int n = 0;
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    if (strstr(loom_trace_warning(t, i), what)) n++;
  if (n != 1) fail_msg("%d warnings name \"%s\"", n, what);
}

/* The report of name as parsed JSON. */
static yajl_val report_json(const char *name) {
  char path[512], out[512];
  snprintf(path, sizeof path, REGRESS "%s", name);
  loom_report_options o = {.struct_size = sizeof o, .top = 20};
  loom_report *r = NULL;
  if (loom_report_open(path, &o, &r) != LOOM_OK) fail_msg("%s: %s", name, loom_last_error());
  tmp_path(out, sizeof out, ".json");
  assert_int_equal(loom_report_write(r, LOOM_REPORT_JSON, out), LOOM_OK);
  loom_report_free(r);
  char *s = read_file(out, NULL), err[256];
  unlink(out);
  assert_non_null(s);
  yajl_val doc = yajl_tree_parse(s, err, sizeof err);
  free(s);
  if (!doc) fail_msg("report JSON does not parse: %s", err);
  return doc;
}

static yajl_val at(yajl_val v, const char *a, const char *b) {
  const char *p[] = {a, b, NULL};
  yajl_val x = yajl_tree_get(v, p, yajl_t_any);
  if (!x) fail_msg("report has no %s.%s", a, b ? b : "");
  return x;
}

/* The report's "not understood" values: count of kind (0 when absent) and
 * how many kinds there are. */
static long long bad_count(yajl_val doc, const char *kind, size_t *kinds) {
  yajl_val vals = at(at(doc, "not_understood", NULL), "values", NULL);
  assert_true(YAJL_IS_ARRAY(vals));
  *kinds = vals->u.array.len;
  for (size_t i = 0; i < vals->u.array.len; i++) {
    const char *k[] = {"kind", NULL}, *c[] = {"count", NULL};
    yajl_val e = vals->u.array.values[i];
    const char *s = YAJL_GET_STRING(yajl_tree_get(e, k, yajl_t_string));
    if (s && !strcmp(s, kind))
      return YAJL_GET_INTEGER(yajl_tree_get(e, c, yajl_t_number));
  }
  return 0;
}

static void report_bad(const char *name, const char *kind, long long count, long long events) {
  yajl_val doc = report_json(name);
  size_t kinds;
  assert_int_equal(bad_count(doc, kind, &kinds), count);
  assert_int_equal(kinds, count ? 1 : 0);
  assert_int_equal(YAJL_GET_INTEGER(at(doc, "input", "events")), events);
  yajl_tree_free(doc);
}

/* trace_processor is set up (or required: then its absence fails). */
static int have_tp(void) {
  const char *d = getenv("LOOM_TP_DIR");
  char p[1024];
  snprintf(p, sizeof p, "%s/trace_processor.wasm", d ? d : "");
  if (d && *d && access(p, R_OK) == 0) return 1;
  if (getenv("LOOM_TP_REQUIRED")) tp_require();
  return 0;
}

/* name converted to JSON: the output carries the warning about what and
 * trace_processor reads slices slices from it without error. */
static void converted(loom_trace *t, const char *what, long long slices) {
  char out[512];
  tmp_path(out, sizeof out, ".json");
  assert_int_equal(loom_trace_save(t, out), LOOM_OK);
  loom_trace *back = NULL;
  assert_int_equal(loom_trace_load(out, &back), LOOM_OK);
  assert_int_equal(loom_trace_event_count(back), loom_trace_event_count(t));
  if (what) warned_once(back, what);
  loom_trace_free(back);
  if (have_tp()) {
    const char *sql[] = {"select count(*) from slice",
                         "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
    long long v[2];
    tp_ints(out, sql, v, 2); /* one trace_processor run */
    assert_int_equal(v[0], slices);
    assert_int_equal(v[1], 0);
  }
  unlink(out);
}

/* 1. Integers of 19+ digits: past 64 bits they are kept as their text and
 * named; up to 64 bits (either sign) exactly. */
static void int_past_64_bits(void **state) {
  (void)state;
  loom_trace *t = load("json_int_past_64_bits.json");
  assert_int_equal(loom_trace_event_count(t), 2);
  warned_once(t, ": 3 integers past 64 bits (first: big = 123456789012345678901234 (event \"a\"))");
  assert_int_equal(loom_trace_warning_count(t), 1);
  assert_true(ts_saved_contains(t, "\"big\":\"123456789012345678901234\""));
  assert_true(ts_saved_contains(t, "\"neg\":\"-9223372036854775809\""));
  assert_true(ts_saved_contains(t, "\"umax\":18446744073709551615"));
  assert_true(ts_saved_contains(t, "\"imin\":-9223372036854775808"));
  loom_event_view b = event_named(t, "b"); /* pid past 64 bits: a process of its own */
  loom_event_view a = event_named(t, "a");
  assert_int_equal(a.pid, 1);
  assert_true(b.pid != 1);
  converted(t, "3 integers past 64 bits", 2);
  loom_trace_free(t);
  report_bad("json_int_past_64_bits.json", "integers past 64 bits", 3, 2);
}

/* 2. Infinity and NaN: times at the limit (NaN at 0), an argument as its
 * text, the rest of the trace exact. */
static void infinite_time(void **state) {
  (void)state;
  loom_trace *t = load("json_infinite_time.json");
  assert_int_equal(loom_trace_event_count(t), 4);
  warned_once(t, ": 3 infinite or NaN numbers (first: ts = 1e400 (event \"inf\"))");
  assert_int_equal(event_named(t, "inf").start_ns, LIMIT);
  assert_int_equal(event_named(t, "nan").start_ns, 0);
  assert_int_equal(event_named(t, "ok").start_ns, 7000);
  assert_int_equal(event_named(t, "ok").dur_ns, 1000);
  assert_true(ts_saved_contains(t, "\"x\":\"-1e400\""));
  converted(t, "3 infinite or NaN numbers", 4);
  loom_trace_free(t);
  report_bad("json_infinite_time.json", "infinite or NaN numbers", 3, 4);
}

/* 3. Streamed events without arguments (the report streams). */
static void stream_without_args(void **state) {
  (void)state;
  yajl_val doc = report_json("stream_events_without_args.json");
  assert_int_equal(YAJL_GET_INTEGER(at(doc, "input", "events")), 2);
  assert_int_equal(YAJL_GET_INTEGER(at(doc, "not_understood", "unclosed_ranges")), 1);
  size_t kinds;
  assert_int_equal(bad_count(doc, "", &kinds), 0);
  assert_int_equal(kinds, 0);
  yajl_tree_free(doc);
}

/* 4. A packet field of the wrong wire type (it left a view of a freed
 * buffer): skipped and named; the packets before it are all kept. */
static void pftrace_wire_type(void **state) {
  (void)state;
  loom_trace *t = load("pftrace_interned_wire_type.pftrace");
  assert_int_equal(loom_trace_event_count(t), 3);
  assert_int_equal(event_named(t, "a").dur_ns, 4000);
  warned_once(t, ": 1 packet fields with a wire type they cannot have were skipped (the first in "
                 "the packet at byte offset ");
  assert_int_equal(loom_trace_warning_count(t), 1);
  converted(t, "packet fields with a wire type", 3); /* the instant is a slice there */
  loom_trace_free(t);
  yajl_val doc = report_json("pftrace_interned_wire_type.pftrace");
  assert_int_equal(YAJL_GET_INTEGER(at(doc, "input", "events")), 3);
  yajl_tree_free(doc);
}

/* 5. A kernel on pid -1 is device work of device -1. */
static void kernel_pid_minus_1(void **state) {
  (void)state;
  yajl_val doc = report_json("kernel_pid_minus_1.json");
  yajl_val devs = at(doc, "devices", NULL);
  assert_int_equal(devs->u.array.len, 1);
  const char *pid[] = {"pid", NULL}, *k[] = {"kernels", NULL}, *busy[] = {"busy_ns", NULL};
  assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(devs->u.array.values[0], pid, yajl_t_number)), -1);
  assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(devs->u.array.values[0], k, yajl_t_number)), 1);
  assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(devs->u.array.values[0], busy, yajl_t_number)), 5000);
  yajl_tree_free(doc);
  loom_trace *t = load("kernel_pid_minus_1.json");
  loom_event_view v = event_named(t, "k");
  assert_int_equal(v.pid, -1);
  assert_true(v.device != LOOM_DEVICE_HOST);
  loom_trace_free(t);
}

/* 6. 20,000 ranges never closed: every one counted (the bench measures
 * the time: bench_hostile). */
static void unclosed_20k(void **state) {
  (void)state;
  yajl_val doc = report_json("unclosed_begin_20k.json.gz");
  assert_int_equal(YAJL_GET_INTEGER(at(doc, "input", "events")), 20000);
  assert_int_equal(YAJL_GET_INTEGER(at(doc, "not_understood", "unclosed_ranges")), 20000);
  yajl_tree_free(doc);
  loom_trace *t = load("unclosed_begin_20k.json.gz");
  assert_int_equal(loom_trace_event_count(t), 20000);
  assert_int_equal(event_named(t, "b19999").start_ns, 19999000);
  loom_trace_free(t);
}

/* 7. 9300000000000000 us does not fit int64 ns: clamped to the limit, named. */
static void ts_overflow(void **state) {
  (void)state;
  loom_trace *t = load("ts_overflow_ns.json");
  assert_int_equal(loom_trace_event_count(t), 2);
  warned_once(t, ": 1 times that overflow 64-bit nanoseconds (first: ts = 9300000000000000 (event \"far\"))");
  assert_int_equal(event_named(t, "far").start_ns, LIMIT);
  assert_int_equal(event_named(t, "far").dur_ns, 1000);
  assert_int_equal(event_named(t, "ok").start_ns, 10000);
  converted(t, "1 times that overflow", 2);
  loom_trace_free(t);
  report_bad("ts_overflow_ns.json", "times that overflow 64-bit nanoseconds", 1, 2);
}

/* 8. Negative durations: an X's, an E before its B: kept at 0, counted. */
static void negative_duration(void **state) {
  (void)state;
  loom_trace *t = load("negative_duration.json");
  assert_int_equal(loom_trace_event_count(t), 3);
  warned_once(t, ": 2 negative durations (first: dur = -5000 ns (event \"neg\")): kept with duration 0");
  assert_int_equal(event_named(t, "neg").dur_ns, 0);
  assert_int_equal(event_named(t, "neg").start_ns, 10000);
  assert_int_equal(event_named(t, "late_end").dur_ns, 0);
  assert_int_equal(event_named(t, "ok").dur_ns, 1000);
  converted(t, "2 negative durations", 3);
  loom_trace_free(t);
  report_bad("negative_duration.json", "negative durations", 2, 3);
}

/* Async ranges close the latest open one of the same id and category,
 * whatever order they close in (they are matched through a map). */
static void async_matching(void **state) {
  (void)state;
  char path[512];
  tmp_path(path, sizeof path, ".json");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"traceEvents\":["
        "{\"ph\":\"b\",\"cat\":\"x\",\"name\":\"outer\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":1},"
        "{\"ph\":\"b\",\"cat\":\"y\",\"name\":\"other_cat\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":2},"
        "{\"ph\":\"b\",\"cat\":\"x\",\"name\":\"two\",\"id\":2,\"pid\":1,\"tid\":1,\"ts\":2},"
        "{\"ph\":\"b\",\"cat\":\"x\",\"name\":\"inner\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":3},"
        "{\"ph\":\"e\",\"cat\":\"x\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":4},"
        "{\"ph\":\"e\",\"cat\":\"x\",\"id\":2,\"pid\":1,\"tid\":1,\"ts\":5},"
        "{\"ph\":\"e\",\"cat\":\"x\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":6},"
        "{\"ph\":\"e\",\"cat\":\"x\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":9}]}", f);
  fclose(f);
  loom_trace *t = NULL;
  assert_int_equal(loom_trace_load(path, &t), LOOM_OK);
  unlink(path);
  assert_int_equal(loom_trace_event_count(t), 4);
  assert_int_equal(event_named(t, "inner").dur_ns, 1000);
  assert_int_equal(event_named(t, "two").dur_ns, 3000);
  assert_int_equal(event_named(t, "outer").dur_ns, 5000);
  assert_true(event_named(t, "other_cat").unclosed); /* its category never closes */
  assert_false(event_named(t, "outer").unclosed);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(int_past_64_bits), cmocka_unit_test(infinite_time),
      cmocka_unit_test(stream_without_args), cmocka_unit_test(pftrace_wire_type),
      cmocka_unit_test(kernel_pid_minus_1), cmocka_unit_test(unclosed_20k),
      cmocka_unit_test(ts_overflow), cmocka_unit_test(negative_duration),
      cmocka_unit_test(async_matching)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
