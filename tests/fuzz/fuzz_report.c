/*
 * fuzz_report.c - the report pipeline on whatever loads: loom_report_open
 * and every writer (text, JSON, HTML).  Parts of the input between
 * LOOM_FUZZ_SEP lines are further ranks (more_traces); the input's length
 * picks a sort budget small enough to spill and a table size.  The report
 * opens exactly when the first trace loads; every writer succeeds; the JSON
 * report is JSON with its schema named; the text and HTML are not empty.
 * One input in three is also analysed with the streaming read's sinks on a
 * second thread (export/pipe.h, small batches): the same status, and the
 * same JSON report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include <loom/loom.h>

#include "export/pipe.h"
#include "fuzz.h"

static void check_json(const char *path) {
  size_t n;
  char *s = loom_fuzz_read(path, &n);
  if (!s) loom_fuzz_fail(__FILE__, __LINE__, "s", "no JSON report written");
  char err[256];
  yajl_val v = yajl_tree_parse(s, err, sizeof err);
  FUZZ_CHECK(v && YAJL_IS_OBJECT(v), "the JSON report is not a JSON object: %s", err);
  const char *key[] = {"schema", NULL};
  yajl_val sc = yajl_tree_get(v, key, yajl_t_string);
  const char *name = sc ? YAJL_GET_STRING(sc) : NULL;
  FUZZ_CHECK(name && !strncmp(name, "loom-report/", 12), "no schema loom-report/N");
  yajl_tree_free(v);
  free(s);
}

static void check_nonempty(const char *path, const char *what) {
  size_t n;
  char *s = loom_fuzz_read(path, &n);
  FUZZ_CHECK(s && n > 0, "the %s report is empty", what);
  FUZZ_CHECK(strlen(s) == n, "the %s report has a NUL byte at %zu of %zu", what, strlen(s), n);
  free(s);
}

/* The JSON report of the trace through the pipe, in batches of batch
 * events, equals the one without (in path). */
static void check_piped(const char *trace, const loom_report_options *o, loom_status st,
                        const char *path, size_t batch) {
  size_t keep_min = loom__pipe_min, keep_batch = loom__pipe_batch;
  loom__pipe_min = 0, loom__pipe_batch = batch;
  loom_report *r = NULL;
  loom_status pst = loom_report_open(trace, o, &r);
  loom__pipe_min = keep_min, loom__pipe_batch = keep_batch;
  FUZZ_CHECK(pst == st, "through the pipe the report says %d, without it %d", (int)pst, (int)st);
  if (pst != LOOM_OK) return;
  char out[512];
  snprintf(out, sizeof out, "%s", loom_fuzz_path("piped.json"));
  FUZZ_CHECK(loom_report_write(r, LOOM_REPORT_JSON, out) == LOOM_OK, "JSON report (pipe)");
  loom_report_free(r);
  size_t n, m;
  char *a = loom_fuzz_read(out, &n), *b = loom_fuzz_read(path, &m);
  FUZZ_CHECK(a && b && n == m && !memcmp(a, b, n), "the report differs through the pipe");
  free(a);
  free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *part[4];
  size_t len[4];
  size_t k = loom_fuzz_split(data, size, part, len, 4);
  char names[4][512];
  const char *more[3];
  for (size_t i = 0; i < k; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "rank%zu.json", i);
    const char *p = loom_fuzz_file(nm, part[i], len[i]);
    if (!p) return 0;
    snprintf(names[i], sizeof names[i], "%s", p);
    if (i) more[i - 1] = names[i];
  }
  loom_report_options o = {.struct_size = sizeof o, .top = size % 3, .more_traces = more,
                           .nmore_traces = k - 1, .sort_memory = size % 2 ? 4096 : 1 << 20};
  loom_report *r = NULL;
  loom_status st = loom_report_open(names[0], &o, &r);
  if (k == 1) {
    long n = loom_fuzz_count(names[0]);
    FUZZ_CHECK((st == LOOM_OK) == (n >= 0), "the report says %d, loom_trace_load %s", (int)st,
               n >= 0 ? "loads it" : "does not");
  }
  if (st != LOOM_OK) {
    FUZZ_CHECK(!r && *loom_last_error(), "failed report (%d) without a message", (int)st);
    if (size % 3 == 1) check_piped(names[0], &o, st, NULL, 1 + size % 7);
    return 0;
  }
  char out[512];
  snprintf(out, sizeof out, "%s", loom_fuzz_path("report.txt"));
  FUZZ_CHECK(loom_report_write(r, LOOM_REPORT_TEXT, out) == LOOM_OK, "text report");
  check_nonempty(out, "text");
  snprintf(out, sizeof out, "%s", loom_fuzz_path("report.html"));
  FUZZ_CHECK(loom_report_write(r, LOOM_REPORT_HTML, out) == LOOM_OK, "HTML report");
  check_nonempty(out, "HTML");
  snprintf(out, sizeof out, "%s", loom_fuzz_path("report.json"));
  FUZZ_CHECK(loom_report_write(r, LOOM_REPORT_JSON, out) == LOOM_OK, "JSON report");
  check_json(out);
  loom_report_free(r);
  if (size % 3 == 1) check_piped(names[0], &o, st, out, 1 + size % 7);
  return 0;
}
