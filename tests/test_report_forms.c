/*
 * test_report_forms.c - the report's three forms show one model: a table's
 * rows and values, read from the JSON report, are the rows of the text
 * report's table and of the HTML page's table of the same title, in the
 * same order, with the same figures (as a reader converts them: ns to ms
 * or us with 3 decimals).  Checked for the devices with their queues and
 * the kernels of the synthetic trace, and for the cross-rank table of the
 * merged 4-rank trace, whose JSON names its own columns and types.
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

static yajl_val get(yajl_val v, const char *key) {
  const char *p[2] = {key, NULL};
  yajl_val x = v ? yajl_tree_get(v, p, yajl_t_any) : NULL;
  if (!x) fail_msg("no \"%s\" in the JSON report", key);
  return x;
}

/* ---- rows as a reader sees them: cells joined by one space ------------------ */
typedef struct rows {
  char *row[64];
  size_t n;
} rows;

static void add_row(rows *r, const char *s, size_t len) {
  char *out = malloc(len + 1), *o = out;
  for (size_t i = 0; i < len; i++) { /* runs of blanks become one space */
    if (s[i] == ' ' || s[i] == '\t') {
      if (o > out && o[-1] != ' ') *o++ = ' ';
    } else *o++ = s[i];
  }
  while (o > out && o[-1] == ' ') o--;
  *o = 0;
  assert_true(r->n < 64);
  r->row[r->n++] = out;
}

static void rows_free(rows *r) {
  for (size_t i = 0; i < r->n; i++) free(r->row[i]);
  r->n = 0;
}

/* The text table whose title starts with title: the lines after its header,
 * up to the blank line that ends it (notes included). */
static void text_rows(const char *text, const char *title, rows *out) {
  char want[256];
  snprintf(want, sizeof want, "\n%s", title);
  const char *p = strstr(text, want);
  if (!p) fail_msg("no table \"%s\" in the text report:\n%s", title, text);
  p = strchr(p + 1, '\n') + 1; /* the header */
  p = strchr(p, '\n') + 1;
  while (*p && *p != '\n') {
    const char *e = strchr(p, '\n');
    add_row(out, p, (size_t)(e - p));
    p = e + 1;
  }
}

/* The HTML table under <h2>title...: each <tr> of cells (headers skipped),
 * then each note of its card. */
static void html_rows(const char *html, const char *title, rows *out) {
  char want[256];
  snprintf(want, sizeof want, "<h2>%s", title);
  const char *p = strstr(html, want);
  if (!p) fail_msg("no table \"%s\" on the HTML page", title);
  const char *end = strstr(p, "</table>"), *card = strstr(p, "</div>");
  for (p = strstr(p, "<tr"); p && p < end; p = strstr(p + 1, "<tr")) {
    const char *e = strstr(p, "</tr>");
    char buf[2048];
    size_t n = 0;
    for (const char *c = p; (c = strstr(c, "<td")) && c < e; c++) {
      const char *v = strchr(c, '>') + 1, *ve = strstr(v, "</td>");
      n += (size_t)snprintf(buf + n, sizeof buf - n, "%.*s ", (int)(ve - v), v);
    }
    if (n) add_row(out, buf, n);
  }
  for (p = end; (p = strstr(p, "<p class=\"note\">")) && p < card; p++) {
    const char *v = p + 16;
    add_row(out, v, (size_t)(strstr(v, "</p>") - v));
  }
}

/* Expected rows are built from the JSON with printf. */
static void expect(rows *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(rows *r, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  add_row(r, buf, (size_t)n);
}

static void same_rows(const rows *want, const rows *got, const char *what) {
  for (size_t i = 0; i < want->n; i++) {
    if (i >= got->n) fail_msg("%s: row %zu missing: want \"%s\"", what, i, want->row[i]);
    if (strcmp(want->row[i], got->row[i]))
      fail_msg("%s: row %zu is \"%s\", the JSON says \"%s\"", what, i, got->row[i], want->row[i]);
  }
  if (got->n != want->n) fail_msg("%s: %zu rows, the JSON has %zu", what, got->n, want->n);
}

static double N(yajl_val row, const char *key) { return YAJL_GET_DOUBLE(get(row, key)); }
static const char *STR(yajl_val row, const char *key) { return YAJL_GET_STRING(get(row, key)); }
#define MS(row, key) (N(row, key) / 1e6)
#define US(row, key) (N(row, key) / 1e3)

/* Devices, each followed by its queues (text: the columns that fit; HTML:
 * all of them, a queue's missing kernels and idle left blank). */
static void test_devices_same_in_all_forms(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "synthetic.json", &f);
  rows wt = {0}, wh = {0}, gt = {0}, gh = {0};
  yajl_val devs = get(f.doc, "devices");
  for (size_t i = 0; i < devs->u.array.len; i++) {
    yajl_val d = devs->u.array.values[i], qs = get(d, "queues");
    expect(&wt, "%.0f %s %.0f %.3f %.3f %.2f %.3f %.3f", N(d, "pid"), STR(d, "name"), N(d, "work"),
           MS(d, "window_ns"), MS(d, "busy_ns"), N(d, "utilization_pct"), MS(d, "idle_waiting_for_host_ns"),
           MS(d, "idle_other_ns"));
    expect(&wh, "%.0f %s %.0f %.0f %.3f %.3f %.3f %.2f %.3f %.3f %.3f", N(d, "pid"), STR(d, "name"), N(d, "work"),
           N(d, "kernels"), MS(d, "start_ns"), MS(d, "window_ns"), MS(d, "busy_ns"), N(d, "utilization_pct"),
           MS(d, "idle_ns"), MS(d, "idle_waiting_for_host_ns"), MS(d, "idle_other_ns"));
    for (size_t k = 0; k < qs->u.array.len; k++) {
      yajl_val q = qs->u.array.values[k];
      expect(&wt, "%.0f %s %.0f %.3f %.3f %.2f %.3f %.3f", N(q, "tid"), STR(q, "name"), N(q, "work"),
             MS(q, "window_ns"), MS(q, "busy_ns"), N(q, "utilization_pct"), MS(q, "idle_waiting_for_host_ns"),
             MS(q, "idle_other_ns"));
      expect(&wh, "%.0f %s %.0f %.3f %.3f %.3f %.2f %.3f %.3f", N(q, "tid"), STR(q, "name"), N(q, "work"),
             MS(q, "start_ns"), MS(q, "window_ns"), MS(q, "busy_ns"), N(q, "utilization_pct"),
             MS(q, "idle_waiting_for_host_ns"), MS(q, "idle_other_ns"));
    }
  }
  assert_int_equal(wt.n, 5); /* 2 devices, 3 queues */
  text_rows(f.text, "Devices and queues", &gt);
  html_rows(f.html, "Devices and queues", &gh);
  same_rows(&wt, &gt, "text devices");
  same_rows(&wh, &gh, "HTML devices");
  rows_free(&wt), rows_free(&wh), rows_free(&gt), rows_free(&gh);
  forms_free(&f);
}

static void test_kernels_same_in_all_forms(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "synthetic.json", &f);
  rows wt = {0}, wh = {0}, gt = {0}, gh = {0};
  yajl_val top = get(get(f.doc, "kernels"), "top");
  for (size_t i = 0; i < top->u.array.len; i++) {
    yajl_val k = top->u.array.values[i], d = get(k, "durations");
    expect(&wt, "%s %.0f %.3f %.1f %.3f %.3f %.3f %.3f %.3f", STR(k, "name"), N(k, "count"), US(k, "total_ns"),
           N(k, "share_pct"), US(d, "mean_ns"), US(d, "p50_ns"), US(d, "p95_ns"), US(d, "min_ns"), US(d, "max_ns"));
    expect(&wh, "%s %s %.0f %.3f %.1f %.3f %.3f %.3f %.3f %.3f %.3f %s", STR(k, "name"), STR(k, "class"),
           N(k, "count"), US(k, "total_ns"), N(k, "share_pct"), US(k, "stddev_ns"), US(d, "mean_ns"),
           US(d, "p50_ns"), US(d, "p95_ns"), US(d, "min_ns"), US(d, "max_ns"),
           YAJL_IS_TRUE(get(d, "exact")) ? "yes" : "no");
  }
  assert_int_equal(wt.n, 4);
  text_rows(f.text, "Kernels (4 names", &gt);
  html_rows(f.html, "Kernels (4 names", &gh);
  same_rows(&wt, &gt, "text kernels");
  same_rows(&wh, &gh, "HTML kernels");
  rows_free(&wt), rows_free(&wh), rows_free(&gt), rows_free(&gh);
  forms_free(&f);
}

/* A cell by the JSON table's own column type: ns in ms, null "-". */
static int cell(char *buf, size_t cap, yajl_val v, const char *type) {
  if (!v || YAJL_IS_NULL(v)) return snprintf(buf, cap, "-");
  if (YAJL_IS_STRING(v)) return snprintf(buf, cap, "%s", v->u.string);
  if (!strcmp(type, "ns")) return snprintf(buf, cap, "%.3f", YAJL_GET_DOUBLE(v) / 1e6);
  return snprintf(buf, cap, "%lld", (long long)YAJL_GET_INTEGER(v));
}

/* The cross-rank table: every column the JSON lists, then its notes. */
static void test_ranks_same_in_all_forms(void **state) {
  (void)state;
  forms f;
  forms_of(DATA "ranks/merged.json", &f);
  yajl_val t = get(get(get(f.doc, "ranks"), "tables"), "ranks"), cols = get(t, "columns"), rs = get(t, "rows");
  yajl_val notes = get(t, "notes");
  rows want = {0}, gt = {0}, gh = {0};
  for (size_t i = 0; i < rs->u.array.len; i++) {
    char buf[2048];
    size_t n = 0;
    for (size_t c = 0; c < cols->u.array.len; c++) {
      yajl_val col = cols->u.array.values[c];
      n += (size_t)cell(buf + n, sizeof buf - n, get(rs->u.array.values[i], STR(col, "key")), STR(col, "type"));
      n += (size_t)snprintf(buf + n, sizeof buf - n, " ");
    }
    add_row(&want, buf, n);
  }
  for (size_t i = 0; i < notes->u.array.len; i++) expect(&want, "%s", notes->u.array.values[i]->u.string);
  assert_int_equal(rs->u.array.len, 4);
  assert_true(notes->u.array.len >= 2);
  const char *title = YAJL_GET_STRING(get(t, "title"));
  text_rows(f.text, title, &gt);
  html_rows(f.html, "Ranks: step time", &gh);
  same_rows(&want, &gt, "text ranks");
  same_rows(&want, &gh, "HTML ranks");
  rows_free(&want), rows_free(&gt), rows_free(&gh);
  forms_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_devices_same_in_all_forms),
                                     cmocka_unit_test(test_kernels_same_in_all_forms),
                                     cmocka_unit_test(test_ranks_same_in_all_forms)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
