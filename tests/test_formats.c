/*
 * test_formats.c - trace files: the same recorded trace as .json, .json.gz
 * and .pftrace gives identical counts in trace_processor; JSON -> pftrace ->
 * JSON keeps every event, time (ns), name and argument; the real Kineto
 * traces (tests/data/kineto, written by PyTorch) read and convert with the
 * same slice count; corrupt or truncated input gives an error naming the
 * file and offset; a full disk leaves no file and the trace can be saved
 * elsewhere afterwards; a .pftrace whose first packet length reads as
 * '{' is still protobuf; counter events that Perfetto's series could not
 * keep apart come back apart; a kind the category does not imply (oneDNN's
 * ITT tasks as user ranges) survives every format, said by "loom_kind" on
 * exactly the events that need it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static loom_trace *recorded(void) {
  static int registered;
  if (!registered++) assert_int_equal(fake_register(0, "fakea", "fakea", 0), LOOM_OK);
  loom_session *s = ts_start("cpu,fakea", NULL);
  loom_step();
  loom_range_push("outer \"quoted\"\n name");
  loom_op_begin("aten::mm", 11);
  fake_launch(0, 0, "gemm<float, 128>", 20000);
  fake_launch(0, 1, "copy_kernel", 3000);
  loom_op_end();
  loom_range_push_str("bad utf8 \xff end");
  fake_launch(0, 0, "relu", 5000);
  loom_range_pop();
  loom_range_pop();
  loom_counter("loss", 0.25);
  loom_counter("loss", 0.125);
  loom_instant("checkpoint");
  loom_range_begin(9, "async load");
  loom_range_end(9);
  loom_step();
  return ts_finish(s);
}

static const char *count_sql[] = {
    "select count(*) from slice",
    "select count(*) from flow",
    "select count(*) from counter",
    "select count(*) from counter_track",
    "select count(*) from thread where name is not null and name != 'swapper'",
    "select count(*) from process where name is not null and name != 'swapper'",
    "select count(*) from slice where name = 'outer \"quoted\"' || char(10) || ' name'",
    "select count(*) from stats where value > 0 and severity in ('error','data_loss')",
};
enum { NQ = sizeof count_sql / sizeof count_sql[0] };

static void test_same_counts_in_every_format(void **state) {
  (void)state;
  tp_require();
  loom_trace *t = recorded();
  const char *ext[] = {".json", ".json.gz", ".pftrace", ".pftrace.gz"};
  long long r[4][NQ];
  for (int f = 0; f < 4; f++) {
    char path[256];
    tmp_path(path, sizeof path, ext[f]);
    assert_int_equal(loom_trace_save(t, path), LOOM_OK);
    tp_ints(path, count_sql, r[f], NQ);
    if (getenv("LOOM_TEST_KEEP")) printf("kept %s\n", path);
    else unlink(path);
  }
  /* host: 2 steps, outer, bad utf8, aten::mm, 3 launches, instant, async;
   * device: 3 kernels + 4 projections (outer x2 queues, bad utf8, step);
   * "outer ..." is the range and its 2 projections;
   * window end */
  long long expect[NQ] = {19, 3, 2, 1, 3, 2, 3, 0};
  for (int f = 0; f < 4; f++)
    for (int q = 0; q < NQ; q++) {
      if (r[f][q] != expect[q])
        fail_msg("%s: '%s' gave %lld, expected %lld", ext[f], count_sql[q], r[f][q], expect[q]);
    }
  loom_trace_free(t);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char **)a, *(char **)b); }

/* The event lines of a JSON trace written by loom, sorted. */
static char **event_lines(const char *path, size_t *n) {
  char *s = read_file(path, NULL);
  assert_non_null(s);
  char *p = strstr(s, "\"traceEvents\":[\n");
  assert_non_null(p);
  p += 16;
  char **lines = NULL;
  size_t cap = 0;
  *n = 0;
  for (char *nl; (nl = strchr(p, '\n')) && *p == '{'; p = nl + 1) {
    size_t len = (size_t)(nl - p);
    if (len && p[len - 1] == ',') len--;
    char *l = strndup(p, len);
    if (*n == cap) lines = realloc(lines, (cap = cap ? cap * 2 : 64) * sizeof *lines);
    lines[(*n)++] = l;
  }
  free(s);
  qsort(lines, *n, sizeof *lines, cmp_str);
  return lines;
}

static void test_json_pftrace_json_round_trip(void **state) {
  (void)state;
  loom_trace *t = recorded();
  char j1[256], pf[256], j2[256];
  tmp_path(j1, sizeof j1, ".json");
  tmp_path(pf, sizeof pf, ".pftrace");
  tmp_path(j2, sizeof j2, ".json");
  assert_int_equal(loom_trace_save(t, j1), LOOM_OK);
  loom_trace *a = NULL, *b = NULL;
  assert_int_equal(loom_trace_load(j1, &a), LOOM_OK);
  assert_int_equal(loom_trace_save(a, pf), LOOM_OK);
  assert_int_equal(loom_trace_load(pf, &b), LOOM_OK);
  assert_int_equal(loom_trace_save(b, j2), LOOM_OK);
  assert_int_equal(loom_trace_event_count(b), loom_trace_event_count(t));
  assert_int_equal(loom_trace_flow_count(b), loom_trace_flow_count(t));
  size_t n1, n2;
  char **l1 = event_lines(j1, &n1), **l2 = event_lines(j2, &n2);
  assert_int_equal(n1, n2);
  for (size_t i = 0; i < n1; i++) {
    if (strcmp(l1[i], l2[i])) fail_msg("%s and %s differ:\n  %s\n  %s", j1, j2, l1[i], l2[i]);
    free(l1[i]);
    free(l2[i]);
  }
  free(l1);
  free(l2);
  /* Times to the nanosecond, through the public view too. */
  int64_t sum_t = 0, sum_b = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v}, w = {.struct_size = sizeof w};
    loom_trace_event(t, i, &v);
    loom_trace_event(b, i, &w);
    sum_t += v.start_ns % 1000 + v.dur_ns;
    sum_b += w.start_ns % 1000 + w.dur_ns;
  }
  assert_true(sum_t == sum_b);
  unlink(j1);
  unlink(pf);
  unlink(j2);
  loom_trace_free(a);
  loom_trace_free(b);
  loom_trace_free(t);
}

/* Saves the trace at in as JSON and returns its sorted event lines. */
static char **lines_of(const char *in, size_t *n) {
  loom_trace *t = NULL;
  if (loom_trace_load(in, &t) != LOOM_OK) fail_msg("%s", loom_last_error());
  char j[256];
  tmp_path(j, sizeof j, ".json");
  assert_int_equal(loom_trace_save(t, j), LOOM_OK);
  char **l = event_lines(j, n);
  size_t k = 0; /* process and thread sort indices: not carried by .pftrace */
  for (size_t i = 0; i < *n; i++) {
    if (strstr(l[i], "_sort_index\"")) free(l[i]);
    else l[k++] = l[i];
  }
  *n = k;
  unlink(j);
  loom_trace_free(t);
  return l;
}

/* .pftrace files of loom's first layout (tests/data/pftrace-v1) read to
 * the events of their source. */
static void test_old_layout_pftrace(void **state) {
  (void)state;
  const char *files[][2] = {{"kineto/libkineto_unit_test_trace.json", "libkineto_unit_test_trace"},
                            {"kineto/hta_gpu_simple_add.json.gz", "hta_gpu_simple_add"},
                            {"report/samples.json", "samples"},
                            {"report/variants.json", "variants"}};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char src[512], old[512];
    snprintf(src, sizeof src, "%s/data/%s", LOOM_TESTS_DIR, files[i][0]);
    snprintf(old, sizeof old, "%s/data/pftrace-v1/%s.pftrace", LOOM_TESTS_DIR, files[i][1]);
    size_t n1, n2;
    char **l1 = lines_of(src, &n1), **l2 = lines_of(old, &n2);
    if (n1 != n2) fail_msg("%s: %zu events, its source %zu", old, n2, n1);
    for (size_t k = 0; k < n1; k++) {
      if (strcmp(l1[k], l2[k])) fail_msg("%s differs from its source:\n  %s\n  %s", old, l1[k], l2[k]);
      free(l1[k]);
      free(l2[k]);
    }
    free(l1);
    free(l2);
  }
}

static void test_real_kineto_traces(void **state) {
  (void)state;
  tp_require();
  const char *files[] = {"hta_cpu_only_rank34.json.gz", "hta_gpu_simple_add.json.gz",
                         "hta_trace_compare_base.json.gz", "hta_triton_example.json.gz",
                         "libkineto_unit_test_trace.json"};
  /* kernels in each file, counted independently (zcat | grep -c '"cat": "kernel"') */
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char in[512], out[256];
    snprintf(in, sizeof in, "%s/data/kineto/%s", LOOM_TESTS_DIR, files[i]);
    loom_trace *t = NULL;
    if (loom_trace_load(in, &t) != LOOM_OK) fail_msg("%s", loom_last_error());
    assert_true(loom_trace_event_count(t) > 0);
    tmp_path(out, sizeof out, ".pftrace");
    assert_int_equal(loom_trace_save(t, out), LOOM_OK);
    /* the .pftrace keeps the slices trace_processor drops from the JSON
     * (those overlapping their parent without nesting, on tracks of their
     * own): the JSON's slices and its count of dropped ones */
    const char *q[] = {"select count(*) from slice",
                       "select coalesce(sum(value), 0) from stats "
                       "where name = 'slice_drop_overlapping_complete_event'"};
    long long a[2], b[2];
    tp_ints(in, q, a, 2);
    tp_ints(out, q, b, 2);
    if (a[0] + a[1] != b[0])
      fail_msg("%s: %lld slices as JSON (%lld dropped as overlapping), %lld as pftrace", files[i],
               a[0], a[1], b[0]);
    assert_int_equal(b[1], 0);
    assert_int_equal(tp_errors(out), 0);
    unlink(out);
    loom_trace_free(t);
  }
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fwrite(p, 1, n, f);
  fclose(f);
}

static void expect_error(const char *path, loom_status want, const char *needle) {
  loom_trace *t = (loom_trace *)1;
  loom_status st = loom_trace_load(path, &t);
  if (st != want) fail_msg("%s: status %d, expected %d", needle ? needle : path, st, want);
  assert_null(t);
  const char *e = loom_last_error();
  if (!strstr(e, path) || (needle && !strstr(e, needle)))
    fail_msg("error '%s' should name %s and say '%s'", e, path, needle ? needle : "");
}

static void test_corrupt_inputs(void **state) {
  (void)state;
  loom_trace *t = recorded();
  char json[256], gz[256], pf[256], bad[256];
  tmp_path(json, sizeof json, ".json");
  tmp_path(gz, sizeof gz, ".json.gz");
  tmp_path(pf, sizeof pf, ".pftrace");
  tmp_path(bad, sizeof bad, ".bin");
  assert_int_equal(loom_trace_save(t, json), LOOM_OK);
  assert_int_equal(loom_trace_save(t, gz), LOOM_OK);
  assert_int_equal(loom_trace_save(t, pf), LOOM_OK);
  size_t n;
  char *s = read_file(json, &n);
  write_bytes(bad, s, n / 2);
  expect_error(bad, LOOM_EFORMAT, "truncated JSON");
  memcpy(strstr(s, "\"traceEvents\"") + 15, "@", 1); /* a stray byte between tokens */
  write_bytes(bad, s, n);
  expect_error(bad, LOOM_EFORMAT, "offset");
  free(s);
  s = read_file(gz, &n);
  write_bytes(bad, s, n - 20);
  expect_error(bad, LOOM_EFORMAT, "offset");
  free(s);
  s = read_file(pf, &n);
  write_bytes(bad, s, n - 7);
  expect_error(bad, LOOM_EFORMAT, "offset");
  free(s);
  unsigned char noise[4096];
  for (size_t i = 0; i < sizeof noise; i++) noise[i] = (unsigned char)(i * 7919 + 13);
  write_bytes(bad, noise, sizeof noise);
  expect_error(bad, LOOM_EFORMAT, "offset");
  write_bytes(bad, "", 0);
  expect_error(bad, LOOM_EFORMAT, "empty");
  expect_error("/nonexistent/trace.json", LOOM_EIO, "No such file");
  unlink(json);
  unlink(gz);
  unlink(pf);
  unlink(bad);
  loom_trace_free(t);
}

/* A .pftrace starts with 0x0a (a newline) and its first packet's length,
 * which is '{' or '[' for some process names: every first length from 1 to
 * 400 bytes must still read as protobuf, and JSON led by newlines as JSON
 * (the fuzzer found a 110-byte process name read as broken JSON). */
static void test_format_detection(void **state) {
  (void)state;
  char json[256], pf[256];
  tmp_path(json, sizeof json, ".json");
  tmp_path(pf, sizeof pf, ".pftrace");
  for (int len = 1; len <= 400; len++) {
    char name[512], text[1024];
    memset(name, 'p', (size_t)len);
    name[len] = 0;
    int n = snprintf(text, sizeof text, "\n\r\n \t{\"traceEvents\":[{\"ph\":\"M\",\"name\":"
                     "\"process_name\",\"pid\":1,\"args\":{\"name\":\"%s\"}},{\"ph\":\"X\","
                     "\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}]}", name);
    write_bytes(json, text, (size_t)n);
    loom_trace *a = NULL, *b = NULL;
    if (loom_trace_load(json, &a) != LOOM_OK) fail_msg("name of %d: %s", len, loom_last_error());
    assert_int_equal(loom_trace_save(a, pf), LOOM_OK);
    if (loom_trace_load(pf, &b) != LOOM_OK) fail_msg("name of %d: %s", len, loom_last_error());
    assert_int_equal(loom_trace_event_count(b), loom_trace_event_count(a));
    loom_trace_free(a);
    loom_trace_free(b);
  }
  unlink(json);
  unlink(pf);
}

/* Perfetto counters are a track per series: a counter event whose series
 * repeat a key, or that follows another of the same counter at the same
 * time, would come back as a different number of events; they go as marked
 * instants instead, and every event and value comes back (found by CI's
 * merge fuzzer). */
static void test_counters_kept_apart(void **state) {
  (void)state;
  static const char text[] =
      "{\"traceEvents\":["
      "{\"ph\":\"C\",\"name\":\"c1\",\"pid\":1,\"tid\":1,\"ts\":10,\"args\":{\"a\":1,\"a\":2}},"
      "{\"ph\":\"C\",\"name\":\"c2\",\"pid\":1,\"tid\":1,\"ts\":20,\"args\":{\"x\":1}},"
      "{\"ph\":\"C\",\"name\":\"c2\",\"pid\":1,\"tid\":1,\"ts\":20,\"args\":{\"y\":2}},"
      "{\"ph\":\"C\",\"name\":\"c2\",\"pid\":1,\"tid\":1,\"ts\":30,\"args\":{\"x\":3}}]}";
  char json[256], pf[256];
  tmp_path(json, sizeof json, ".json");
  tmp_path(pf, sizeof pf, ".pftrace");
  write_bytes(json, text, sizeof text - 1);
  loom_trace *a = NULL, *b = NULL;
  assert_int_equal(loom_trace_load(json, &a), LOOM_OK);
  assert_int_equal(loom_trace_event_count(a), 4);
  assert_int_equal(loom_trace_save(a, pf), LOOM_OK);
  if (loom_trace_load(pf, &b) != LOOM_OK) fail_msg("%s", loom_last_error());
  assert_int_equal(loom_trace_event_count(b), 4);
  for (size_t i = 0; i < 4; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(b, i, &v), LOOM_OK);
    assert_int_equal(v.phase, 'C');
  }
  assert_int_equal(loom_trace_save(b, json), LOOM_OK); /* every value, once */
  size_t n;
  char *out = read_file(json, &n);
  const char *want[] = {"\"a\":1,\"a\":2}", "\"x\":1}", "\"y\":2}", "\"x\":3}"};
  for (size_t i = 0; i < 4; i++)
    if (!strstr(out, want[i])) fail_msg("%s lost %s:\n%s", pf, want[i], out);
  free(out);
  loom_trace_free(a);
  loom_trace_free(b);
  unlink(json);
  unlink(pf);
}

/* An event with 300 arguments keeps every one, in order, through every
 * format (both readers once kept the first 64 and dropped the rest without
 * a word). */
static void test_many_arguments(void **state) {
  (void)state;
  enum { N = 300 };
  char *text = malloc(N * 24 + 256), *p = text;
  assert_non_null(text);
  p += sprintf(p, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"big\",\"cat\":\"cpu_op\",\"pid\":1,"
                  "\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{");
  for (int i = 0; i < N; i++) p += sprintf(p, "%s\"a%d\":%d", i ? "," : "", i, i * 7);
  p += sprintf(p, ",\"s\":\"last\"}}]}");
  char json[256], other[256];
  tmp_path(json, sizeof json, ".json");
  write_bytes(json, text, (size_t)(p - text));
  free(text);
  static const char *const ext[] = {".json", ".json.gz", ".pftrace", ".pftrace.gz"};
  for (size_t k = 0; k < 4; k++) {
    loom_trace *a = ts_load(json);
    tmp_path(other, sizeof other, ext[k]);
    assert_int_equal(loom_trace_save(a, other), LOOM_OK);
    loom_trace *b = ts_load(other);
    char back[256];
    tmp_path(back, sizeof back, ".json");
    assert_int_equal(loom_trace_save(b, back), LOOM_OK);
    char *out = read_file(back, NULL);
    const char *at = out;
    for (int i = 0; i <= N; i++) {
      char want[32];
      if (i < N) snprintf(want, sizeof want, "\"a%d\":%d", i, i * 7);
      else snprintf(want, sizeof want, "\"s\":\"last\"");
      const char *f = strstr(at, want);
      if (!f) fail_msg("%s: argument %d (%s) lost or out of order", ext[k], i, want);
      at = f + strlen(want);
    }
    free(out);
    loom_trace_free(a);
    loom_trace_free(b);
    unlink(other);
    unlink(back);
  }
  /* 200 JSON values (nested, literals) stay JSON through .pftrace: the list
   * of which arguments are JSON once stopped at 256 characters */
  text = malloc(200 * 32 + 256), p = text;
  assert_non_null(text);
  p += sprintf(p, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"j\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{");
  for (int i = 0; i < 200; i++) p += sprintf(p, "%s\"j%d\":%s", i ? "," : "", i, i % 2 ? "[1,{\"x\":null}]" : "true");
  p += sprintf(p, "}}]}");
  write_bytes(json, text, (size_t)(p - text));
  free(text);
  loom_trace *j = ts_load(json);
  tmp_path(other, sizeof other, ".pftrace");
  assert_int_equal(loom_trace_save(j, other), LOOM_OK);
  loom_trace *j2 = ts_load(other);
  assert_true(ts_saved_contains(j2, "\"j198\":true,\"j199\":[1,{\"x\":null}]}"));
  assert_true(ts_saved_contains(j2, "\"j0\":true,\"j1\":[1,{\"x\":null}],"));
  loom_trace_free(j);
  loom_trace_free(j2);
  unlink(other);
  /* past what an event holds (65535): the rest left out, counted, warned */
  enum { HUGE = 70000 };
  text = malloc(HUGE * 24 + 256), p = text;
  assert_non_null(text);
  p += sprintf(p, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"huge\",\"pid\":1,\"tid\":1,\"ts\":1,"
                  "\"dur\":2,\"args\":{");
  for (int i = 0; i < HUGE; i++) p += sprintf(p, "%s\"k%d\":%d", i ? "," : "", i, i);
  p += sprintf(p, "}}]}");
  write_bytes(json, text, (size_t)(p - text));
  free(text);
  loom_trace *h = ts_load(json);
  assert_true(ts_warned(h, "4465 arguments past 65535 on one event", "k65535"));
  tmp_path(other, sizeof other, ".pftrace");
  assert_int_equal(loom_trace_save(h, other), LOOM_OK);
  loom_trace *h2 = ts_load(other);
  /* the 65535 kept all came back: no warning but the one carried over */
  assert_int_equal(loom_trace_warning_count(h2), loom_trace_warning_count(h));
  assert_true(ts_saved_contains(h2, "\"k65534\":65534}"));
  loom_trace_free(h);
  loom_trace_free(h2);
  unlink(other);
  unlink(json);
}

/* An E's arguments join its B's (an E's value replacing the B's of the
 * same name), as trace_processor shows them; events loom cannot read (a
 * phase it does not read, an E or e that closes nothing, no "ph") are
 * left out, counted in one warning that names the first; the same through
 * a streaming read (loom report). */
static void test_end_arguments_and_left_out(void **state) {
  (void)state;
  static const char text[] =
      "{\"traceEvents\":["
      "{\"ph\":\"B\",\"name\":\"outer\",\"pid\":1,\"tid\":1,\"ts\":10,\"args\":{\"a\":1,\"k\":5}},"
      "{\"ph\":\"B\",\"name\":\"inner\",\"pid\":1,\"tid\":1,\"ts\":11},"
      "{\"ph\":\"n\",\"name\":\"odd one\",\"id\":1,\"pid\":1,\"tid\":1,\"ts\":12},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":13,\"args\":{\"ret\":\"ok\"}},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":14,\"args\":{\"b\":2,\"k\":6}},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":15},"
      "{\"ph\":\"e\",\"name\":\"x\",\"cat\":\"c\",\"id\":7,\"pid\":1,\"tid\":1,\"ts\":16},"
      "{\"name\":\"no phase\",\"pid\":1,\"tid\":1,\"ts\":17}]}";
  char json[256], back[256];
  tmp_path(json, sizeof json, ".json");
  tmp_path(back, sizeof back, ".json");
  write_bytes(json, text, sizeof text - 1);
  loom_trace *t = ts_load(json);
  assert_int_equal(loom_trace_event_count(t), 2);
  assert_true(ts_warned(t, "2 events of a phase loom does not read", "ph = n on pid 1 tid 1 (event \"odd one\")"));
  assert_true(ts_warned(t, "2 ends that close nothing", "ph = E on pid 1 tid 2"));
  assert_true(ts_saved_contains(t, "\"args\":{\"a\":1,\"k\":6,\"b\":2}"));
  assert_true(ts_saved_contains(t, "\"args\":{\"ret\":\"ok\"}"));
  loom_trace_free(t);
  /* a streaming read says it too */
  loom_report_options o = {.struct_size = sizeof o};
  loom_report *r = NULL;
  assert_int_equal(loom_report_open(json, &o, &r), LOOM_OK);
  assert_int_equal(loom_report_write(r, LOOM_REPORT_JSON, back), LOOM_OK);
  loom_report_free(r);
  char *out = read_file(back, NULL);
  if (!strstr(out, "{\"kind\":\"events of a phase loom does not read\",\"count\":2,") ||
      !strstr(out, "{\"kind\":\"ends that close nothing"))
    fail_msg("the report does not say what was left out:\n%s", out);
  free(out);
  tp_require();
  char v[64];
  tp_str(json, "select group_concat(a.key || '=' || a.display_value, ',') from slice s join args a using(arg_set_id) "
               "where s.name = 'outer'", v, sizeof v);
  assert_string_equal(v, "args.a=1,args.k=6,args.b=2");
  unlink(json);
  unlink(back);
}

/* CPU samples' frames keep their whole names (C++ template names run to
 * kilobytes; they were cut at 2047 bytes, and two sharing their first 4 KiB
 * became one frame) through every format. */
static void test_long_frame_names(void **state) {
  (void)state;
  enum { LEN = 5000 };
  char *a = malloc(LEN + 1), *b = malloc(LEN + 1), *text = malloc(4 * LEN + 2048);
  assert_non_null(a), assert_non_null(b), assert_non_null(text);
  for (int i = 0; i < LEN; i++) a[i] = b[i] = (char)('a' + i % 26);
  a[LEN] = b[LEN] = 0;
  a[LEN - 1] = 'A', b[LEN - 1] = 'B'; /* the same but for the last byte */
  int n = sprintf(text, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":9}],"
                  "\"stackFrames\":{\"1\":{\"name\":\"main\",\"loom_function\":\"main\",\"loom_module\":\"/p\","
                  "\"loom_offset\":\"0x1\"},\"2\":{\"name\":\"%s\",\"parent\":\"1\",\"loom_function\":\"%s\","
                  "\"loom_module\":\"/p\",\"loom_offset\":\"0x2\"},\"3\":{\"name\":\"%s\",\"parent\":\"1\","
                  "\"loom_function\":\"%s\",\"loom_module\":\"/p\",\"loom_offset\":\"0x2\"}},\"samples\":["
                  "{\"pid\":1,\"tid\":1,\"ts\":2,\"name\":\"cpu-clock\",\"weight\":1,\"sf\":\"2\"},"
                  "{\"pid\":1,\"tid\":1,\"ts\":3,\"name\":\"cpu-clock\",\"weight\":1,\"sf\":\"3\"}]}",
                  a, a, b, b);
  char json[256], other[256];
  tmp_path(json, sizeof json, ".json");
  write_bytes(json, text, (size_t)n);
  static const char *const ext[] = {".json", ".pftrace"};
  for (int k = 0; k < 2; k++) {
    loom_trace *t = ts_load(json);
    tmp_path(other, sizeof other, ext[k]);
    assert_int_equal(loom_trace_save(t, other), LOOM_OK);
    loom_trace_free(t);
    t = ts_load(other);
    char *want = malloc(LEN + 64);
    snprintf(want, LEN + 64, "\"loom_function\":\"%s\"", a);
    if (!ts_saved_contains(t, want)) fail_msg("%s: the first long name is not whole", ext[k]);
    snprintf(want, LEN + 64, "\"loom_function\":\"%s\"", b);
    if (!ts_saved_contains(t, want)) fail_msg("%s: the second long name is not whole, or became the first", ext[k]);
    free(want);
    loom_trace_free(t);
    unlink(other);
  }
  unlink(json);
  free(a), free(b), free(text);
}

/* CPU samples' stacks however deep (a 10000-frame chain keeps its root), and
 * stackFrames that name a parent it lacks, loop back, or a sample whose
 * frame is not there: each stack ends there, counted as a bad value with a
 * warning; the good samples keep their stacks. */
static void test_deep_and_broken_frames(void **state) {
  (void)state;
  enum { DEEP = 10000 };
  size_t cap = (size_t)DEEP * 96 + 4096, n = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  n += (size_t)sprintf(text + n, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x\",\"pid\":1,\"tid\":1,\"ts\":1,"
                                 "\"dur\":99}],\"stackFrames\":{\"0\":{\"name\":\"root_of_deep\",\"category\":\"m\"}");
  for (int i = 1; i < DEEP; i++)
    n += (size_t)sprintf(text + n, ",\"%d\":{\"name\":\"f%d\",\"category\":\"m\",\"parent\":\"%d\"}", i, i, i - 1);
  n += (size_t)sprintf(text + n,
                       ",\"lost\":{\"name\":\"orphan\",\"category\":\"m\",\"parent\":\"nowhere\"}"
                       ",\"a\":{\"name\":\"loop_a\",\"category\":\"m\",\"parent\":\"b\"}"
                       ",\"b\":{\"name\":\"loop_b\",\"category\":\"m\",\"parent\":\"a\"}},\"samples\":["
                       "{\"pid\":1,\"tid\":1,\"ts\":2,\"name\":\"cpu-clock\",\"weight\":1,\"sf\":\"%d\"},"
                       "{\"pid\":1,\"tid\":1,\"ts\":3,\"name\":\"cpu-clock\",\"weight\":1,\"sf\":\"lost\"},"
                       "{\"pid\":1,\"tid\":1,\"ts\":4,\"name\":\"cpu-clock\",\"weight\":1,\"sf\":\"a\"},"
                       "{\"pid\":1,\"tid\":1,\"ts\":5,\"name\":\"cpu-clock\",\"weight\":1,\"sf\":\"gone\"}]}",
                       DEEP - 1);
  char json[256], other[256];
  tmp_path(json, sizeof json, ".json");
  write_bytes(json, text, n);
  free(text);
  loom_trace *t = ts_load(json);
  assert_int_equal(loom_trace_event_count(t), 5);
  /* the orphan's parent, the loop and the sample's frame: 3, one warning */
  assert_true(ts_warned(t, "3 stack frames missing or in a loop", "first: missing frame = "));
  static const char *const ext[] = {".json", ".pftrace"};
  for (int k = 0; k < 2; k++) {
    tmp_path(other, sizeof other, ext[k]);
    assert_int_equal(loom_trace_save(t, other), LOOM_OK);
    loom_trace *u = ts_load(other);
    if (!ts_saved_contains(u, "\"name\":\"root_of_deep\"")) fail_msg("%s: the deep stack lost its root", ext[k]);
    if (!ts_saved_contains(u, "\"name\":\"f9999\"")) fail_msg("%s: the deep stack lost its leaf", ext[k]);
    if (!ts_saved_contains(u, "\"name\":\"orphan\"")) fail_msg("%s: the orphan frame is gone", ext[k]);
    if (!ts_saved_contains(u, "\"name\":\"loop_a\"") || !ts_saved_contains(u, "\"name\":\"loop_b\""))
      fail_msg("%s: a frame of the loop is gone", ext[k]);
    loom_trace_free(u);
    unlink(other);
  }
  loom_trace_free(t);
  unlink(json);
}

/* A sample whose frame is a number stackFrames lacks: counted and named in
 * the warning (its key was read back from a buffer gone by then). */
static void test_missing_numeric_frame(void **state) {
  (void)state;
  static const char text[] = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":9}],"
                             "\"stackFrames\":{\"1\":{\"name\":\"a\"}},"
                             "\"samples\":[{\"pid\":1,\"tid\":1,\"ts\":2,\"sf\":777}]}";
  char json[256];
  tmp_path(json, sizeof json, ".json");
  write_bytes(json, text, sizeof text - 1);
  loom_trace *t = ts_load(json);
  assert_int_equal(loom_trace_event_count(t), 2);
  assert_true(ts_warned(t, "1 stack frames missing or in a loop", "first: missing frame = 777"));
  loom_trace_free(t);
  unlink(json);
}

/* ---- a .pftrace as other producers write it (Perfetto's SDK) ------------ */
typedef struct pbuf { uint8_t b[4096]; size_t n; } pbuf;
static void pb_var(pbuf *p, uint64_t v) {
  while (v >= 0x80) p->b[p->n++] = (uint8_t)(v | 0x80), v >>= 7;
  p->b[p->n++] = (uint8_t)v;
}
static void pb_int(pbuf *p, unsigned f, uint64_t v) { pb_var(p, (uint64_t)f << 3), pb_var(p, v); }
static void pb_bytes(pbuf *p, unsigned f, const void *d, size_t n) {
  pb_var(p, (uint64_t)f << 3 | 2), pb_var(p, n);
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
static void pb_str(pbuf *p, unsigned f, const char *s) { pb_bytes(p, f, s, strlen(s)); }
static void pb_msg(pbuf *p, unsigned f, const pbuf *m) { pb_bytes(p, f, m->b, m->n); }
/* One TracePacket of sequence 1 (timestamp 0: none) with field f = m. */
static void packet(FILE *out, uint64_t ts, unsigned f, const pbuf *m) {
  pbuf pk = {.n = 0}, top = {.n = 0};
  if (ts) pb_int(&pk, 8, ts);
  pb_int(&pk, 10, 1);
  pb_msg(&pk, f, m);
  pb_msg(&top, 1, &pk);
  fwrite(top.b, 1, top.n, out);
}
/* A DebugAnnotation named name, with the fields in v already written. */
static void annotation_of(pbuf *into, unsigned f, const char *name, const pbuf *v) {
  pbuf a = {.n = 0};
  if (name) pb_str(&a, 10, name);
  memcpy(a.b + a.n, v->b, v->n);
  a.n += v->n;
  pb_msg(into, f, &a);
}

/* Debug annotations that are not one scalar (dicts, arrays, the older
 * NestedValue, legacy JSON, pointers) become JSON arguments as the JSON
 * reader keeps nested values; one of no type loom reads is counted; events
 * on a process's own track (not a thread's) are kept on a track of their
 * own, named as it is; nothing trace_processor reads is lost. */
static void test_other_producers_pftrace(void **state) {
  (void)state;
  char path[256], back[256];
  tmp_path(path, sizeof path, ".pftrace");
  tmp_path(back, sizeof back, ".json");
  FILE *out = fopen(path, "wb");
  assert_non_null(out);
  pbuf td = {.n = 0}, sub = {.n = 0}, te, v, w, x;
  pb_int(&td, 1, 10), pb_int(&sub, 1, 42), pb_str(&sub, 6, "app"), pb_msg(&td, 3, &sub);
  packet(out, 0, 60, &td); /* process 42 */
  td.n = sub.n = 0;
  pb_int(&td, 1, 11), pb_int(&td, 5, 10), pb_int(&sub, 1, 42), pb_int(&sub, 2, 43), pb_str(&sub, 5, "main");
  pb_msg(&td, 4, &sub);
  packet(out, 0, 60, &td); /* its thread 43 */
  td.n = 0;
  pb_int(&td, 1, 12), pb_int(&td, 5, 10), pb_str(&td, 2, "async lane");
  packet(out, 0, 60, &td); /* a track of the process */
  te.n = 0;
  pb_int(&te, 9, 1), pb_int(&te, 11, 11), pb_str(&te, 23, "work");
  /* d = {"a": 1, "b": [true, "x"]} */
  v.n = w.n = x.n = 0;
  pb_int(&x, 4, 1), annotation_of(&v, 11, "a", &x);
  x.n = 0, pb_int(&x, 2, 1), annotation_of(&w, 12, NULL, &x);
  x.n = 0, pb_str(&x, 6, "x"), annotation_of(&w, 12, NULL, &x);
  annotation_of(&v, 11, "b", &w);
  annotation_of(&te, 4, "d", &v);
  v.n = 0, pb_int(&v, 7, 0x1234), annotation_of(&te, 4, "p", &v);
  v.n = 0, pb_str(&v, 9, "{\"k\":[1,2]}"), annotation_of(&te, 4, "j", &v);
  /* n = NestedValue dict {"q": 7} */
  v.n = w.n = x.n = 0;
  pb_int(&w, 1, 1), pb_str(&w, 2, "q"), pb_int(&x, 5, 7), pb_msg(&w, 3, &x), pb_msg(&v, 8, &w);
  annotation_of(&te, 4, "n", &v);
  v.n = 0, pb_str(&v, 14, "\x08\x01"), annotation_of(&te, 4, "odd", &v); /* a proto_value */
  packet(out, 1000, 11, &te);
  te.n = 0, pb_int(&te, 9, 2), pb_int(&te, 11, 11);
  packet(out, 2000, 11, &te);
  te.n = 0, pb_int(&te, 9, 1), pb_int(&te, 11, 12), pb_str(&te, 23, "async work");
  packet(out, 1500, 11, &te);
  te.n = 0, pb_int(&te, 9, 2), pb_int(&te, 11, 12);
  packet(out, 1800, 11, &te);
  fclose(out);
  loom_trace *t = ts_load(path);
  assert_int_equal(loom_trace_event_count(t), 2);
  assert_true(ts_saved_contains(t, "\"args\":{\"d\":{\"a\":1,\"b\":[true,\"x\"]},\"p\":\"0x1234\","
                                   "\"j\":{\"k\":[1,2]},\"n\":{\"q\":7},\"odd\":null}"));
  assert_true(ts_warned(t, "1 debug annotation values of no type loom reads", "odd = (a value loom does not read)"));
  size_t async = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view e = {.struct_size = sizeof e};
    loom_trace_event(t, i, &e);
    if (!strcmp(e.name, "async work")) {
      async++;
      assert_int_equal(e.pid, 42);
      assert_int_equal(e.dur_ns, 300);
    }
  }
  assert_int_equal(async, 1);
  assert_true(ts_saved_contains(t, "\"name\":\"thread_name\",\"pid\":42,\"tid\":1000000000,\"ts\":0,\"args\":{\"name\":\"async lane\"}"));
  assert_int_equal(loom_trace_save(t, back), LOOM_OK);
  loom_trace_free(t);
  tp_require();
  assert_int_equal(tp_int(path, "select count(*) from slice"), 2);
  assert_int_equal(tp_int(back, "select count(*) from slice"), 2);
  assert_int_equal(tp_errors(back), 0);
  unlink(path);
  unlink(back);
}

/* Metadata and device property names keep their whole text (keys were cut
 * at 255 bytes, and two sharing those became one entry). */
static void test_long_keys(void **state) {
  (void)state;
  char a[301], b[301], *text = malloc(4096);
  assert_non_null(text);
  memset(a, 'k', 300), memset(b, 'k', 300);
  a[300] = b[300] = 0;
  a[299] = 'A', b[299] = 'B';
  int n = snprintf(text, 4096, "{\"%s\":\"first\",\"%s\":\"second\",\"deviceProperties\":[{\"id\":0,"
                   "\"name\":\"gpu\",\"%s\":7}],\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x\",\"pid\":1,"
                   "\"tid\":1,\"ts\":1,\"dur\":1}]}", a, b, a);
  char json[256];
  tmp_path(json, sizeof json, ".json");
  write_bytes(json, text, (size_t)n);
  loom_trace *t = ts_load(json);
  char want[400];
  snprintf(want, sizeof want, "\"%s\":\"first\"", a);
  assert_true(ts_saved_contains(t, want));
  snprintf(want, sizeof want, "\"%s\":\"second\"", b);
  assert_true(ts_saved_contains(t, want));
  snprintf(want, sizeof want, "\"%s\":7", a);
  assert_true(ts_saved_contains(t, want));
  loom_trace_free(t);
  unlink(json);
  free(text);
}

static int leftovers(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
  closedir(d);
  return n;
}

static void test_full_disk(void **state) {
  (void)state;
  loom_trace *t = recorded();
  char dir[] = "/tmp/loomfull-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[300];
  const char *ext[] = {"trace.json", "trace.json.gz", "trace.pftrace"};
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, small = {600, 600};
  getrlimit(RLIMIT_FSIZE, &old);
  small.rlim_max = old.rlim_max;
  for (int f = 0; f < 3; f++) {
    snprintf(path, sizeof path, "%s/%s", dir, ext[f]);
    setrlimit(RLIMIT_FSIZE, &small); /* the file cannot grow past 600 bytes */
    loom_status st = loom_trace_save(t, path);
    setrlimit(RLIMIT_FSIZE, &old);
    assert_int_equal(st, LOOM_EIO);
    assert_non_null(strstr(loom_last_error(), path));
    assert_int_equal(leftovers(dir, "trace"), 0); /* nothing partial */
    assert_int_equal(loom_trace_save(t, path), LOOM_OK); /* still savable */
    unlink(path);
  }
  rmdir(dir);
  loom_trace_free(t);
}

/* ---- kinds the category does not imply ("loom_kind", docs/formats.md) ---- */
typedef struct kind_case {
  const char *name, *cat;
  uint16_t kind, flags;
  int instant, needs; /* needs: the writers must say the kind ("loom_kind") */
} kind_case;

static const kind_case kind_cases[] = {
    {"dnnl conv", "dnnl::primitive::execute", LOOM_KIND_USER_RANGE, 0, 0, 1},
    {"plain range", NULL, LOOM_KIND_USER_RANGE, 0, 0, 0},
    {"mpi recv", "mpi", LOOM_KIND_INSTANT, LOOM_RECORD_F_COMM | LOOM_RECORD_F_RECV, 1, 0},
    {"mpi send", "mpi", LOOM_KIND_RUNTIME, LOOM_RECORD_F_SEND | LOOM_RECORD_F_WAIT, 0, 0},
    {"mpi allreduce", "mpi", LOOM_KIND_COLLECTIVE, LOOM_RECORD_F_COMM | LOOM_RECORD_F_NXN, 0, 0},
    {"mpi unmarked", "mpi", LOOM_KIND_RUNTIME, 0, 0, 1},
    {"mpi irecv", "mpi", LOOM_KIND_COLLECTIVE, LOOM_RECORD_F_POST, 0, 1},
    {"dnnl op", "dnnl", LOOM_KIND_CPU_OP, 0, 0, 1},
    {"instant as kernel", "kernel", LOOM_KIND_INSTANT, 0, 1, 1},
    {"mpi marker", "mpi", LOOM_KIND_MARKER, 0, 1, 1},
    {"itt overhead", "itt", LOOM_KIND_OVERHEAD, 0, 0, 1},
    {"ze sync", "level_zero_sync", LOOM_KIND_SYNC, 0, 0, 0},
};
enum { NKIND_CASES = sizeof kind_cases / sizeof kind_cases[0], KIND_NEEDS = 7 };

static loom_trace *kinds_recorded(void) {
  static int registered;
  if (!registered++) assert_int_equal(fake_register(1, "fakek", "fakek", 0), LOOM_OK);
  loom_session *s = ts_start("fakek", NULL);
  usleep(2000); /* the records lie in the window: from 1.5 ms back, 10 us apart */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t t0 = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec - 1500000;
  for (int i = 0; i < NKIND_CASES; i++) {
    const kind_case *c = &kind_cases[i];
    uint64_t start = t0 + (uint64_t)i * 10000;
    loom_record r = {.struct_size = sizeof r, .kind = c->kind, .flags = c->flags,
                     .device = LOOM_DEVICE_HOST, .start = start,
                     .end = start + (c->instant ? 0 : 5000), .category = c->cat};
    assert_int_equal(fake_emit(1, c->name, &r), LOOM_OK);
  }
  fake_launch(1, 0, "k", 1000);
  return ts_finish(s);
}

/* Event i's argument named key as text ("" when it has none). */
static const char *event_arg(const loom_trace *t, size_t i, const char *key) {
  loom_arg a[16];
  size_t n = loom_trace_event_args(t, i, a, 16);
  for (size_t k = 0; k < n && k < 16; k++)
    if (!strcmp(a[k].key, key)) return a[k].type == LOOM_ARG_STRING ? a[k].v.s : "?";
  return "";
}

/* Every event of a has one of b's kind (events named apart), and no
 * "loom_kind" argument is left in b. */
static void same_kinds(const loom_trace *a, const loom_trace *b, const char *what) {
  assert_int_equal(loom_trace_event_count(a), loom_trace_event_count(b));
  for (size_t i = 0; i < loom_trace_event_count(a); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(a, i, &v);
    int found = 0;
    for (size_t j = 0; j < loom_trace_event_count(b) && !found; j++) {
      loom_event_view w = {.struct_size = sizeof w};
      loom_trace_event(b, j, &w);
      if (strcmp(v.name, w.name) || v.start_ns != w.start_ns) continue;
      found = 1;
      if (v.kind != w.kind)
        fail_msg("%s: %s: kind %s, was %s", what, v.name, loom_kind_name(w.kind),
                 loom_kind_name(v.kind));
      assert_string_equal(event_arg(b, j, "loom_kind"), "");
    }
    if (!found) fail_msg("%s: %s is gone", what, v.name);
  }
}

static size_t count_of(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) n++;
  return n;
}

static void test_kinds_categories_do_not_imply(void **state) {
  (void)state;
  loom_trace *t = kinds_recorded();
  assert_int_equal(loom_trace_event_count(t), NKIND_CASES + 2);
  for (size_t i = 0; i < NKIND_CASES; i++) { /* as emitted, before any file */
    loom_event_view v = {.struct_size = sizeof v};
    for (size_t j = 0; j < loom_trace_event_count(t); j++)
      if (loom_trace_event(t, j, &v) == LOOM_OK && !strcmp(v.name, kind_cases[i].name)) break;
    assert_string_equal(v.name, kind_cases[i].name);
    assert_int_equal(v.kind, kind_cases[i].kind);
  }
  /* .json -> .pftrace -> .json.gz -> .json: every hop keeps every kind */
  const char *ext[] = {".json", ".pftrace", ".json.gz", ".json"};
  char path[4][256];
  loom_trace *prev = t;
  for (int f = 0; f < 4; f++) {
    tmp_path(path[f], sizeof path[f], ext[f]);
    assert_int_equal(loom_trace_save(prev, path[f]), LOOM_OK);
    loom_trace *back = ts_load(path[f]);
    same_kinds(t, back, path[f]);
    assert_int_equal(loom_trace_warning_count(back), loom_trace_warning_count(t));
    if (prev != t) loom_trace_free(prev);
    prev = back;
  }
  loom_trace_free(prev);
  size_t n;
  char *text = read_file(path[0], &n);
  assert_non_null(text);
  assert_int_equal(count_of(text, "\"loom_kind\":"), KIND_NEEDS);
  assert_int_equal(count_of(text, "\"loom_kind\":\"user_range\""), 1);
  free(text);
  text = read_file(path[3], &n); /* the same bytes after the trip */
  assert_int_equal(count_of(text, "\"loom_kind\":"), KIND_NEEDS);
  free(text);
  if (getenv("LOOM_TP_DIR")) { /* shown as an argument where the kind is said, no error */
    assert_int_equal(tp_int(path[0], "select count(*) from args where key = 'args.loom_kind'"),
                     KIND_NEEDS);
    assert_int_equal(tp_int(path[1], "select count(*) from args where key = 'debug.loom_kind'"),
                     KIND_NEEDS);
    assert_int_equal(tp_errors(path[0]), 0);
    assert_int_equal(tp_errors(path[1]), 0);
  }
  for (int f = 0; f < 4; f++) unlink(path[f]);
  loom_trace_free(t);
}

/* A file's loom_kind values: known ones are the kinds; an unknown one
 * leaves the kind the category gives, is kept as an argument, and is said
 * once, naming the file, in JSON and in .pftrace. */
static void test_kind_values_read(void **state) {
  (void)state;
  static const char text[] =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"dnnl::primitive::execute\",\"name\":\"convolution\",\"pid\":1,"
      "\"tid\":1,\"ts\":10,\"dur\":5,\"args\":{\"loom_kind\":\"user_range\"}},\n"
      "{\"ph\":\"X\",\"cat\":\"dnnl::primitive::execute\",\"name\":\"reorder\",\"pid\":1,"
      "\"tid\":1,\"ts\":20,\"dur\":1},\n"
      "{\"ph\":\"X\",\"cat\":\"mpi\",\"name\":\"MPI_Send\",\"pid\":1,\"tid\":1,\"ts\":30,"
      "\"dur\":2,\"args\":{\"loom_role\":\"comm,send\",\"loom_kind\":\"collective\"}},\n"
      "{\"ph\":\"i\",\"cat\":\"mpi\",\"name\":\"MPI_Recv\",\"pid\":1,\"tid\":1,\"ts\":40,"
      "\"s\":\"t\",\"args\":{\"loom_role\":\"comm,recv\",\"loom_kind\":\"marker\"}},\n"
      "{\"ph\":\"X\",\"cat\":\"nccl\",\"name\":\"future\",\"pid\":1,\"tid\":1,\"ts\":50,"
      "\"dur\":3,\"args\":{\"loom_kind\":\"hologram\"}}]}\n";
  static const struct { const char *name; loom_kind kind; const char *arg; } want[] = {
      {"convolution", LOOM_KIND_USER_RANGE, ""}, {"reorder", LOOM_KIND_MARKER, ""},
      {"MPI_Send", LOOM_KIND_COLLECTIVE, ""}, {"MPI_Recv", LOOM_KIND_MARKER, ""},
      {"future", LOOM_KIND_MARKER, "hologram"}};
  char in[256], pf[256];
  tmp_path(in, sizeof in, ".json");
  tmp_path(pf, sizeof pf, ".pftrace");
  FILE *f = fopen(in, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  loom_trace *t = ts_load(in);
  assert_int_equal(loom_trace_save(t, pf), LOOM_OK);
  loom_trace *b = ts_load(pf);
  for (int k = 0; k < 2; k++) {
    loom_trace *x = k ? b : t;
    assert_int_equal(loom_trace_event_count(x), 5);
    for (size_t i = 0; i < 5; i++) {
      loom_event_view v = {.struct_size = sizeof v};
      loom_trace_event(x, i, &v);
      size_t w = 0;
      while (w < 5 && strcmp(want[w].name, v.name)) w++;
      assert_true(w < 5);
      assert_int_equal(v.kind, want[w].kind);
      assert_string_equal(event_arg(x, i, "loom_kind"), want[w].arg);
    }
    assert_true(ts_warned(x, k ? pf : in, "\"loom_kind\" values this loom does not know"));
    assert_int_equal(loom_trace_warning_count(x), 1 + k); /* the JSON's travels */
  }
  unlink(in);
  unlink(pf);
  loom_trace_free(t);
  loom_trace_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_counts_in_every_format),
      cmocka_unit_test(test_json_pftrace_json_round_trip),
      cmocka_unit_test(test_real_kineto_traces),
      cmocka_unit_test(test_old_layout_pftrace),
      cmocka_unit_test(test_corrupt_inputs),
      cmocka_unit_test(test_format_detection),
      cmocka_unit_test(test_counters_kept_apart),
      cmocka_unit_test(test_many_arguments), cmocka_unit_test(test_end_arguments_and_left_out), cmocka_unit_test(test_long_frame_names), cmocka_unit_test(test_deep_and_broken_frames), cmocka_unit_test(test_missing_numeric_frame), cmocka_unit_test(test_other_producers_pftrace), cmocka_unit_test(test_long_keys),
      cmocka_unit_test(test_full_disk),
      cmocka_unit_test(test_kinds_categories_do_not_imply),
      cmocka_unit_test(test_kind_values_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
