/*
 * test_report_cpu.c - the report's CPU sample sections on a hand-written
 * trace (data/report/samples.json) whose answers are counted by hand: ten
 * samples on two threads (one without a stack, one on a thread with no
 * slice at that time), nested framework ops and user ranges (two of one
 * name nested), a step, a recursive function, an unnamed frame, OS counters
 * of three threads and a counter that is none of them.  Checks the exact
 * self and total counts overall and inside each op, range and step, the
 * counter totals, the JSON structure, the flame graph's nodes and its SVG;
 * and that a trace without samples has none of these sections.
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

#define DATA LOOM_TESTS_DIR "/data/report/"

typedef struct forms {
  char *text, *json, *html;
  yajl_val doc;
} forms;

static char *written(const loom_report *r, loom_report_format f, const char *ext) {
  char path[512];
  tmp_path(path, sizeof path, ext);
  assert_int_equal(loom_report_write(r, f, path), LOOM_OK);
  size_t n;
  char *s = read_file(path, &n);
  unlink(path);
  assert_non_null(s);
  return s;
}

static void forms_of(const char *trace, forms *f) {
  loom_report_options o = {.struct_size = sizeof o, .top = 20};
  loom_report *r = NULL;
  if (loom_report_open(trace, &o, &r) != LOOM_OK) fail_msg("%s: %s", trace, loom_last_error());
  f->text = written(r, LOOM_REPORT_TEXT, ".txt");
  f->json = written(r, LOOM_REPORT_JSON, ".json");
  f->html = written(r, LOOM_REPORT_HTML, ".html");
  loom_report_free(r);
  char err[256];
  if (!(f->doc = yajl_tree_parse(f->json, err, sizeof err))) fail_msg("JSON does not parse: %s", err);
}

static void forms_free(forms *f) {
  yajl_tree_free(f->doc);
  free(f->text);
  free(f->json);
  free(f->html);
}

static yajl_val find(yajl_val v, const char *key) {
  const char *p[2] = {key, NULL};
  return v ? yajl_tree_get(v, p, yajl_t_any) : NULL;
}

static yajl_val get(yajl_val v, const char *key) {
  yajl_val x = find(v, key);
  if (!x) fail_msg("no \"%s\" in the JSON report", key);
  return x;
}

static yajl_val list(yajl_val v, const char *key, size_t n) {
  yajl_val a = get(v, key);
  if (!YAJL_IS_ARRAY(a)) fail_msg("\"%s\" is no list", key);
  if (a->u.array.len != n) fail_msg("\"%s\": %zu rows, expected %zu", key, a->u.array.len, n);
  return a;
}

static yajl_val row(yajl_val a, size_t i) { return a->u.array.values[i]; }
static double num(yajl_val v, const char *key) { return YAJL_GET_DOUBLE(get(v, key)); }
static const char *str(yajl_val v, const char *key) { return YAJL_GET_STRING(get(v, key)); }

/* Rows of function, self, total (shares of of samples). */
typedef struct fexp { const char *fn; int self, total; } fexp;

static void functions_are(yajl_val rows, const fexp *want, size_t n, double of, const char *what) {
  if (!YAJL_IS_ARRAY(rows) || rows->u.array.len != n)
    fail_msg("%s: %zu functions, expected %zu", what, YAJL_IS_ARRAY(rows) ? rows->u.array.len : 0, n);
  for (size_t i = 0; i < n; i++) {
    yajl_val r = row(rows, i);
    if (strcmp(str(r, "function"), want[i].fn))
      fail_msg("%s: row %zu is %s, expected %s", what, i, str(r, "function"), want[i].fn);
    if (num(r, "self") != want[i].self || num(r, "total") != want[i].total)
      fail_msg("%s: %s self %g total %g, expected %d %d", what, want[i].fn, num(r, "self"), num(r, "total"),
               want[i].self, want[i].total);
    assert_float_equal(num(r, "self_pct"), 100.0 * want[i].self / of, 1e-5);
    assert_float_equal(num(r, "total_pct"), 100.0 * want[i].total / of, 1e-5);
  }
}

static void test_top_functions(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "samples.json", &f);
  yajl_val cpu = get(f.doc, "cpu");
  assert_int_equal((int)num(cpu, "samples"), 10);
  assert_int_equal((int)num(cpu, "threads"), 2);
  assert_int_equal((int)num(cpu, "functions"), 7);
  assert_int_equal((int)num(cpu, "no_stack"), 1);
  /* gemm's two sites (under conv, under forward) are one function; main
   * never ran itself, so it is no row by self */
  static const fexp self[] = {{"gemm", 4, 4}, {"forward", 1, 6}, {"conv", 1, 4},
                              {"a_very_long_helper_function_name", 1, 1}, {"libx.so+0x40", 1, 1}, {"rec", 1, 1}};
  functions_are(get(cpu, "by_self"), self, 6, 10, "by self");
  /* rec calls itself: once per stack */
  static const fexp total[] = {{"main", 0, 9}, {"forward", 1, 6}, {"gemm", 4, 4}, {"conv", 1, 4},
                               {"a_very_long_helper_function_name", 1, 1}, {"libx.so+0x40", 1, 1}, {"rec", 1, 1}};
  functions_are(get(cpu, "by_total"), total, 7, 10, "by total");
  assert_string_equal(str(row(get(cpu, "by_total"), 2), "module"), "/lib/libm.so");
  assert_string_equal(str(row(get(cpu, "by_total"), 5), "module"), "/lib/libx.so");
  assert_non_null(strstr(f.text, "Functions by self samples"));
  assert_non_null(strstr(f.text, "Functions by total samples"));
  forms_free(&f);
}

static void test_inside_slices(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "samples.json", &f);
  yajl_val cpu = get(f.doc, "cpu");
  /* aten::conv2d [1000, 2000) us on thread 1: the samples at 1050..1800
   * (its child aten::convolution's too); the one at 1300 on thread 2 is not */
  yajl_val ops = list(cpu, "ops", 2);
  assert_string_equal(str(row(ops, 0), "name"), "aten::conv2d");
  assert_int_equal((int)num(row(ops, 0), "total_ns"), 1100000);
  assert_int_equal((int)num(row(ops, 0), "samples"), 5);
  static const fexp conv2d[] = {{"gemm", 3, 3}, {"conv", 1, 3}, {"rec", 1, 1}, {"main", 0, 5}, {"forward", 0, 4}};
  functions_are(get(row(ops, 0), "functions"), conv2d, 5, 5, "aten::conv2d");
  /* [1200, 1800): the sample at 1800 is past its end */
  assert_string_equal(str(row(ops, 1), "name"), "aten::convolution");
  assert_int_equal((int)num(row(ops, 1), "samples"), 3);
  static const fexp convolution[] = {{"gemm", 2, 2}, {"conv", 1, 2}, {"forward", 0, 3}, {"main", 0, 3}};
  functions_are(get(row(ops, 1), "functions"), convolution, 4, 3, "aten::convolution");
  /* ranges: the step, and fwd [900, 2400) with a nested fwd: each sample once */
  yajl_val ranges = list(cpu, "user_ranges", 2);
  assert_string_equal(str(row(ranges, 0), "name"), "ProfilerStep#*");
  assert_int_equal((int)num(row(ranges, 0), "samples"), 7);
  assert_string_equal(str(row(ranges, 1), "name"), "fwd");
  assert_int_equal((int)num(row(ranges, 1), "samples"), 6);
  static const fexp fwd[] = {{"gemm", 3, 3}, {"forward", 1, 5}, {"conv", 1, 3}, {"rec", 1, 1}, {"main", 0, 6}};
  functions_are(get(row(ranges, 1), "functions"), fwd, 5, 6, "fwd");
  /* the step [500, 3000): the unnamed frame at 2500 too */
  yajl_val steps = list(cpu, "steps", 1);
  assert_string_equal(str(row(steps, 0), "name"), "ProfilerStep#1");
  assert_int_equal((int)num(row(steps, 0), "start_ns"), 500000);
  assert_int_equal((int)num(row(steps, 0), "dur_ns"), 2500000);
  assert_int_equal((int)num(row(steps, 0), "samples"), 7);
  static const fexp step[] = {{"gemm", 3, 3}, {"forward", 1, 5},      {"conv", 1, 3},
                              {"libx.so+0x40", 1, 1}, {"rec", 1, 1}, {"main", 0, 7}};
  functions_are(get(row(steps, 0), "functions"), step, 6, 7, "ProfilerStep#1");
  /* functions in order of self samples, then total: main, on every stack, last */
  /* text: the functions indented under their op */
  const char *t = strstr(f.text, "Functions inside framework ops");
  assert_non_null(t);
  assert_non_null(strstr(t, "\n  aten::conv2d "));
  assert_non_null(strstr(t, "\n    gemm "));
  assert_non_null(strstr(t, "a sample counts for every slice it falls in"));
  forms_free(&f);
}

static void test_os_counters(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "samples.json", &f);
  yajl_val c = list(get(f.doc, "cpu"), "os_counters", 3); /* "heap" is no OS counter */
  static const struct { int tid; const char *name; int cs, pf, mig; } want[] = {
      {1, "main", 5, 12, 2}, {2, "worker", 1, 1, 0}, {3, NULL, -1, 7, -1}};
  for (size_t i = 0; i < 3; i++) {
    yajl_val r = row(c, i);
    assert_int_equal((int)num(r, "pid"), 1);
    assert_int_equal((int)num(r, "tid"), want[i].tid);
    if (want[i].name) assert_string_equal(str(r, "thread"), want[i].name);
    const char *keys[3] = {"context_switches", "page_faults", "cpu_migrations"};
    int v[3] = {want[i].cs, want[i].pf, want[i].mig};
    for (int k = 0; k < 3; k++)
      if (v[k] < 0) assert_true(YAJL_IS_NULL(get(r, keys[k])));
      else assert_int_equal((int)num(r, keys[k]), v[k]);
  }
  assert_non_null(strstr(f.text, "OS counters per thread"));
  forms_free(&f);
}

static size_t count(const char *s, const char *end, const char *what) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, what)) && p < end; p += strlen(what)) n++;
  return n;
}

static void test_flame_graph(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "samples.json", &f);
  /* nodes: stacks merged by function, depth first, most samples first */
  static const struct { int depth, start, n; const char *fn; } want[] = {
      {1, 0, 9, "main"}, {2, 0, 6, "forward"}, {3, 0, 4, "conv"}, {4, 0, 3, "gemm"}, {3, 4, 1, "gemm"},
      {2, 6, 1, "a_very_long_helper_function_name"}, {2, 7, 1, "libx.so+0x40"}, {2, 8, 1, "rec"}, {3, 8, 1, "rec"}};
  yajl_val fl = list(get(f.doc, "cpu"), "flame", 9);
  for (size_t i = 0; i < 9; i++) {
    yajl_val r = row(fl, i);
    assert_int_equal((int)num(r, "depth"), want[i].depth);
    assert_int_equal((int)num(r, "start"), want[i].start);
    assert_int_equal((int)num(r, "samples"), want[i].n);
    assert_string_equal(str(r, "function"), want[i].fn);
    assert_float_equal(num(r, "pct"), 10.0 * want[i].n, 1e-9);
  }
  /* the page: one SVG, a rect per node, a <title> each, labels cut to fit */
  const char *svg = strstr(f.html, "<svg role=\"img\" class=\"flame\"");
  assert_non_null(svg);
  const char *end = strstr(svg, "</svg>");
  assert_non_null(end);
  assert_int_equal(count(svg, end, "<rect"), 9);
  assert_int_equal(count(svg, end, "<title>"), 9);
  assert_non_null(strstr(svg, "<rect width=\"990.00\" height=\"16\""));
  assert_non_null(strstr(svg, "<title>main: 9 samples, 90.00%</title>"));
  assert_non_null(strstr(svg, "<title>gemm: 3 samples, 30.00%</title>"));
  assert_non_null(strstr(svg, ">main</text>"));
  assert_non_null(strstr(svg, ">libx.so+0x40</text>"));
  /* 110 px hold 15 characters: 14 and an ellipsis */
  assert_non_null(strstr(svg, ">a_very_long_he&hellip;</text>"));
  assert_null(strstr(f.html, "<script"));
  assert_null(strstr(f.text, "Flame graph")); /* the page's only */
  forms_free(&f);
}

static int same(yajl_val a, yajl_val b) {
  if (!a || !b || a->type != b->type) return 0;
  if (YAJL_IS_STRING(a)) return !strcmp(a->u.string, b->u.string);
  if (YAJL_IS_NUMBER(a)) return !strcmp(a->u.number.r, b->u.number.r);
  if (YAJL_IS_ARRAY(a)) {
    if (a->u.array.len != b->u.array.len) return 0;
    for (size_t i = 0; i < a->u.array.len; i++)
      if (!same(a->u.array.values[i], b->u.array.values[i])) return 0;
    return 1;
  }
  if (YAJL_IS_OBJECT(a)) {
    if (a->u.object.len != b->u.object.len) return 0;
    for (size_t i = 0; i < a->u.object.len; i++)
      if (strcmp(a->u.object.keys[i], b->u.object.keys[i]) || !same(a->u.object.values[i], b->u.object.values[i]))
        return 0;
    return 1;
  }
  return 1; /* true, false, null */
}

/* The samples, stacks, slices and counters travel through loom's formats:
 * the same section from the trace saved as .pftrace and as JSON. */
static void test_same_after_conversion(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "samples.json", &f);
  loom_trace *t = NULL;
  assert_int_equal(loom_trace_load(DATA "samples.json", &t), LOOM_OK);
  const char *ext[] = {".pftrace", ".json"};
  for (size_t i = 0; i < 2; i++) {
    char path[512];
    tmp_path(path, sizeof path, ext[i]);
    assert_int_equal(loom_trace_save(t, path), LOOM_OK);
    forms g;
    forms_of(path, &g);
    unlink(path);
    if (!same(get(f.doc, "cpu"), get(g.doc, "cpu"))) fail_msg("the cpu section differs after saving as %s", ext[i]);
    forms_free(&g);
  }
  loom_trace_free(t);
  forms_free(&f);
}

/* `loom merge` (and `loom record` of several processes) streams the
 * samples and writes them as "stackFrames" and "samples" at the end: the
 * same cpu section as the trace it merged. */
static void test_same_after_merge(void **state) {
  (void)state;
  forms f, g;
  forms_of(DATA "samples.json", &f);
  char path[512];
  tmp_path(path, sizeof path, ".json");
  const char *in[] = {DATA "samples.json"};
  loom_merge_config mc = {.struct_size = sizeof mc, .ninputs = 1, .inputs = in, .output = path};
  loom_merge_result mr = {.struct_size = sizeof mr};
  assert_int_equal(loom_merge(&mc, &mr), LOOM_OK);
  char *text = read_file(path, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"stackFrames\":{"));
  assert_non_null(strstr(text, "\"samples\":["));
  assert_null(strstr(text, "\"cat\":\"cpu_sample\"")); /* not as instants */
  free(text);
  forms_of(path, &g);
  unlink(path);
  if (!same(get(f.doc, "cpu"), get(g.doc, "cpu"))) fail_msg("the cpu section differs after loom merge");
  forms_free(&g);
  forms_free(&f);
}

/* Samples as instants carrying their stack text (what loom merge wrote
 * before; any producer may): the report streams them with their stacks
 * (it once counted them all as samples without a stack), the same as the
 * trace saved by loom. */
static void test_stack_arguments(void **state) {
  (void)state;
  forms f, g;
  forms_of(DATA "samples-as-instants.json", &f);
  yajl_val cpu = get(f.doc, "cpu");
  assert_int_equal((int)num(cpu, "samples"), 4);
  assert_int_equal((int)num(cpu, "no_stack"), 0);
  static const fexp self[] = {{"busy", 3, 3}, {"idle", 1, 1}};
  functions_are(get(cpu, "by_self"), self, 2, 4, "by self");
  loom_trace *t = NULL;
  assert_int_equal(loom_trace_load(DATA "samples-as-instants.json", &t), LOOM_OK);
  char path[512];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  loom_trace_free(t);
  forms_of(path, &g);
  unlink(path);
  if (!same(cpu, get(g.doc, "cpu"))) fail_msg("the cpu section differs from the saved trace's");
  forms_free(&g);
  forms_free(&f);
}

static void test_absent_without_samples(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "synthetic.json", &f);
  assert_null(find(f.doc, "cpu"));
  assert_null(strstr(f.text, "CPU samples"));
  assert_null(strstr(f.text, "OS counters"));
  assert_null(strstr(f.html, "class=\"flame\""));
  forms_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_top_functions), cmocka_unit_test(test_inside_slices),
                                     cmocka_unit_test(test_os_counters), cmocka_unit_test(test_flame_graph),
                                     cmocka_unit_test(test_same_after_conversion),
                                     cmocka_unit_test(test_same_after_merge),
                                     cmocka_unit_test(test_stack_arguments),
                                     cmocka_unit_test(test_absent_without_samples)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
