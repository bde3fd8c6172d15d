/*
 * test_report.c - `loom report`'s analysis against answers computed by hand.
 *
 * tests/data/report/synthetic.json is small enough to work out on paper (the
 * figures below are derived in the comments); the same trace as .pftrace and
 * .json.gz must give the same JSON report; a trace sorted through many
 * spilled runs must give the same report as one sorted in memory; the real
 * Kineto traces must report exactly the kernels and copies they contain;
 * broken input must fail with a message naming the file.
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
#include <zlib.h>

#include "loom/loom.h"
#include "testutil.h"

#define SYNTH LOOM_TESTS_DIR "/data/report/synthetic.json"

/* Runs the analysis and returns the report's JSON text (malloc'ed). */
static char *report_text(const char *trace, int include_last, size_t sort_memory) {
  loom_report_options o = {.struct_size = sizeof o, .sort_memory = sort_memory,
                           .hta_include_last_step = include_last};
  loom_report *r = NULL;
  loom_status st = loom_report_open(trace, &o, &r);
  if (st != LOOM_OK) fail_msg("loom_report_open(%s): %s", trace, loom_last_error());
  char out[512];
  tmp_path(out, sizeof out, ".report.json");
  assert_int_equal(loom_report_write(r, LOOM_REPORT_JSON, out), LOOM_OK);
  loom_report_free(r);
  size_t n;
  char *text = read_file(out, &n);
  unlink(out);
  assert_non_null(text);
  return text;
}

static yajl_val parse(const char *text) {
  char err[256];
  yajl_val v = yajl_tree_parse(text, err, sizeof err);
  if (!v) fail_msg("report JSON does not parse: %s", err);
  return v;
}

/* Walks a path: string keys, or "#N" for array element N. */
static yajl_val at(yajl_val v, ...) {
  va_list ap;
  va_start(ap, v);
  const char *k;
  while (v && (k = va_arg(ap, const char *))) {
    if (k[0] == '#') {
      size_t i = strtoul(k + 1, NULL, 10);
      v = YAJL_IS_ARRAY(v) && i < v->u.array.len ? v->u.array.values[i] : NULL;
    } else {
      const char *p[2] = {k, NULL};
      v = yajl_tree_get(v, p, yajl_t_any);
    }
  }
  va_end(ap);
  return v;
}

#define NUM(...) num_of(at(__VA_ARGS__, NULL), #__VA_ARGS__)
static double num_of(yajl_val v, const char *what) {
  if (!v || !YAJL_IS_NUMBER(v)) fail_msg("no number at %s", what);
  return YAJL_GET_DOUBLE(v);
}
#define STR(...) str_of(at(__VA_ARGS__, NULL), #__VA_ARGS__)
static const char *str_of(yajl_val v, const char *what) {
  if (!v || !YAJL_IS_STRING(v)) fail_msg("no string at %s", what);
  return v->u.string;
}

/* The row of array arr whose key equals value. */
static yajl_val row(yajl_val arr, const char *key, const char *value) {
  for (size_t i = 0; arr && YAJL_IS_ARRAY(arr) && i < arr->u.array.len; i++) {
    yajl_val s = at(arr->u.array.values[i], key, NULL);
    if (s && YAJL_IS_STRING(s) && !strcmp(s->u.string, value)) return arr->u.array.values[i];
  }
  fail_msg("no row with %s = %s", key, value);
  return NULL;
}

/*
 * The synthetic trace (us): host thread 1 runs ProfilerStep#1 [0,100) with
 * "forward" [5,55) holding aten::mm [10,30) (launch @12+4, corr 1) and
 * aten::add [35,45) (launch @36+2 corr 2, memcpy call @40+3 corr 3), then
 * ProfilerStep#2 [100,160) with launches @110+5 (corr 4) and @116+2 (corr 5).
 * Device 0: stream 7 gemm [20,50) c1, add [60,70) c2, gemm [120,160) c4;
 * stream 8 HtoD copy [45,65) c3 (2 MB), ncclKernel [130,150) c5.
 * Device 1: "lonely" [10,15) with no launch call.  One event of category
 * "mystery".
 */
static void test_synthetic_loom_figures(void **state) {
  (void)state;
  char *text = report_text(SYNTH, 0, 0);
  yajl_val r = parse(text);
  assert_string_equal(STR(r, "schema"), "loom-report/2");
  assert_int_equal(NUM(r, "input", "events"), 17);
  yajl_val d = at(r, "devices", "#0", NULL);
  assert_int_equal(NUM(d, "pid"), 0);
  assert_string_equal(STR(d, "name"), "GPU 0");
  assert_int_equal(NUM(d, "work"), 5);
  /* window [20,160) = 140; busy [20,70) + [120,160) = 90 */
  assert_int_equal(NUM(d, "window_ns"), 140000);
  assert_int_equal(NUM(d, "busy_ns"), 90000);
  assert_true(NUM(d, "utilization_pct") > 64.2857 && NUM(d, "utilization_pct") < 64.2858);
  /* gap [70,120): the gemm ending it was launched at 110 -> 40 host, 10 other */
  assert_int_equal(NUM(d, "idle_waiting_for_host_ns"), 40000);
  assert_int_equal(NUM(d, "idle_other_ns"), 10000);
  assert_int_equal(NUM(d, "busy_by_class_ns", "compute"), 80000);
  assert_int_equal(NUM(d, "busy_by_class_ns", "communication"), 20000);
  assert_int_equal(NUM(d, "busy_by_class_ns", "memory"), 20000);
  /* copy [45,65) under gemm [20,50) and add [60,70): 5 + 5; nccl inside gemm */
  assert_int_equal(NUM(d, "overlap_ns", "compute_memory"), 10000);
  assert_int_equal(NUM(d, "overlap_ns", "compute_communication"), 20000);
  assert_int_equal(NUM(d, "overlap_ns", "communication_memory"), 0);
  /* latencies 8, 24, 5, 10, 14 us */
  assert_int_equal(NUM(d, "launch_latency", "count"), 5);
  assert_int_equal(NUM(d, "launch_latency", "mean_ns"), 12200);
  assert_int_equal(NUM(d, "launch_latency", "p50_ns"), 10000);
  assert_int_equal(NUM(d, "launch_latency", "p95_ns"), 22000); /* 14 + 0.8 * (24 - 14) */
  assert_int_equal(NUM(d, "launch_latency", "min_ns"), 5000);
  assert_int_equal(NUM(d, "launch_latency", "max_ns"), 24000);
  /* stream 7: gaps [50,60) (add launched at 36: other) and [70,120) (40 + 10) */
  yajl_val q7 = at(d, "queues", "#0", NULL), q8 = at(d, "queues", "#1", NULL);
  assert_int_equal(NUM(q7, "tid"), 7);
  assert_int_equal(NUM(q7, "busy_ns"), 80000);
  assert_int_equal(NUM(q7, "idle_waiting_for_host_ns"), 40000);
  assert_int_equal(NUM(q7, "idle_other_ns"), 20000);
  /* stream 8: gap [65,130), nccl launched at 116: 51 host, 14 other */
  assert_int_equal(NUM(q8, "busy_ns"), 40000);
  assert_int_equal(NUM(q8, "window_ns"), 105000);
  assert_int_equal(NUM(q8, "idle_waiting_for_host_ns"), 51000);
  assert_int_equal(NUM(q8, "idle_other_ns"), 14000);
  /* device 1: one kernel, nobody launched it */
  assert_int_equal(NUM(r, "devices", "#1", "busy_ns"), 5000);
  assert_int_equal(NUM(r, "not_understood", "device_work_without_launch"), 1);

  /* kernels: gemm 30 + 40, nccl 20, add 10, lonely 5 = 105 */
  assert_int_equal(NUM(r, "kernels", "total_ns"), 105000);
  assert_int_equal(NUM(r, "kernels", "names"), 4);
  yajl_val g = at(r, "kernels", "top", "#0", NULL);
  assert_string_equal(STR(g, "name"), "gemm");
  assert_int_equal(NUM(g, "count"), 2);
  assert_int_equal(NUM(g, "total_ns"), 70000);
  assert_int_equal(NUM(g, "durations", "p50_ns"), 35000);
  assert_int_equal(NUM(g, "durations", "p95_ns"), 39500);
  assert_int_equal(NUM(g, "durations", "max_ns"), 40000);
  assert_true(NUM(g, "share_pct") > 66.666 && NUM(g, "share_pct") < 66.667);
  assert_string_equal(STR(row(at(r, "kernels", "top", NULL), "name", "ncclKernel_AllReduce"), "class"),
                      "communication");
  /* transfers: 2,000,000 bytes in 20 us = 100 GB/s */
  yajl_val c = at(r, "transfers", "#0", NULL);
  assert_string_equal(STR(c, "direction"), "HtoD");
  assert_int_equal(NUM(c, "bytes"), 2000000);
  assert_int_equal(NUM(c, "time_ns"), 20000);
  assert_int_equal(NUM(c, "bandwidth_gbps"), 100);

  /* host: self = own time minus direct children */
  yajl_val ops = at(r, "host", "ops", "top", NULL);
  assert_int_equal(NUM(row(ops, "name", "aten::mm"), "self_ns"), 16000);
  assert_int_equal(NUM(row(ops, "name", "aten::add"), "self_ns"), 5000);
  yajl_val ranges = at(r, "host", "user_ranges", "top", NULL);
  yajl_val fwd = row(ranges, "name", "forward");
  assert_int_equal(NUM(fwd, "total_ns"), 50000);
  assert_int_equal(NUM(fwd, "self_ns"), 20000);
  assert_int_equal(NUM(fwd, "device_time_ns"), 60000); /* gemm 30 + add 10 + copy 20 */
  assert_int_equal(NUM(fwd, "device_work"), 3);
  /* steps are tallied as one row: self 50 + 53, device 60 + 60 */
  yajl_val s2 = row(ranges, "name", "ProfilerStep#*");
  assert_int_equal(NUM(s2, "count"), 2);
  assert_int_equal(NUM(s2, "self_ns"), 103000);
  assert_int_equal(NUM(s2, "device_time_ns"), 120000);
  assert_int_equal(NUM(s2, "device_work"), 5);
  yajl_val calls = at(r, "host", "runtime_calls", "top", NULL);
  assert_int_equal(NUM(row(calls, "name", "cudaLaunchKernel"), "count"), 4);
  assert_int_equal(NUM(row(calls, "name", "cudaLaunchKernel"), "total_ns"), 13000);

  /* steps 100 and 60 us */
  assert_int_equal(NUM(r, "steps", "count"), 2);
  assert_int_equal(NUM(r, "steps", "mean_ns"), 80000);
  assert_int_equal(NUM(r, "steps", "stddev_ns"), 20000);
  assert_string_equal(STR(r, "steps", "slowest", "#0", "name"), "ProfilerStep#1");
  assert_int_equal(NUM(r, "steps", "slowest", "#0", "device_work"), 3);

  yajl_val u = at(r, "not_understood", "categories", "#0", NULL);
  assert_string_equal(STR(u, "category"), "mystery");
  assert_int_equal(NUM(u, "events"), 1);
  yajl_tree_free(r);
  free(text);
}

/* HTA's rules: by default the last ProfilerStep is left out, and with it
 * every device event whose launch call is not before its start (100). */
static void test_synthetic_hta_last_step_out(void **state) {
  (void)state;
  char *text = report_text(SYNTH, 0, 0);
  yajl_val r = parse(text);
  assert_true(YAJL_IS_TRUE(at(r, "hta", "last_step_left_out", NULL)));
  yajl_val h = at(r, "hta", "temporal_breakdown", NULL);
  /* kept: gemm [20,50), add [60,70), copy [45,65), and "lonely" [10,15),
   * which has no correlation id (HTA keeps those) */
  assert_int_equal(NUM(r, "hta", "events"), 4);
  assert_int_equal(NUM(h, "kernel_time_ns"), 60000);
  assert_int_equal(NUM(h, "idle_time_ns"), 5000);
  assert_int_equal(NUM(h, "compute_time_ns"), 45000);
  assert_int_equal(NUM(h, "non_compute_time_ns"), 10000);
  assert_int_equal(NUM(h, "compute_time_pctg"), 75);
  yajl_tree_free(r);
  free(text);
}

static void test_synthetic_hta_all_steps(void **state) {
  (void)state;
  char *text = report_text(SYNTH, 1, 0);
  yajl_val r = parse(text);
  /* HTA looks at the trace as one rank: "lonely" on device 1 [10,15) joins */
  yajl_val d = at(r, "hta", NULL);
  yajl_val h = at(d, "temporal_breakdown", NULL);
  assert_int_equal(NUM(d, "events"), 6);
  assert_int_equal(NUM(h, "kernel_time_ns"), 150000); /* [10,160) */
  assert_int_equal(NUM(h, "idle_time_ns"), 55000);    /* 150 - (5 + 90) */
  assert_int_equal(NUM(h, "compute_time_ns"), 85000);
  assert_int_equal(NUM(h, "non_compute_time_ns"), 10000);
  assert_true(NUM(h, "idle_time_pctg") == 36.67 && NUM(h, "compute_time_pctg") == 56.67 &&
              NUM(h, "non_compute_time_pctg") == 6.67);
  assert_int_equal(NUM(d, "comp_comm_overlap_pctg"), 100);
  /* exclusive pieces: compute only 50 + 5, compute+comm 20, memory only 10,
   * compute+memory 10 */
  yajl_val kt = at(d, "kernel_types", NULL);
  assert_int_equal(NUM(row(kt, "kernel_type", "COMPUTATION"), "sum_ns"), 55000);
  assert_int_equal(NUM(row(kt, "kernel_type", "COMPUTATION overlapping COMMUNICATION"), "sum_ns"), 20000);
  assert_int_equal(NUM(row(kt, "kernel_type", "MEMORY"), "sum_ns"), 10000);
  assert_int_equal(NUM(row(kt, "kernel_type", "COMPUTATION overlapping MEMORY"), "sum_ns"), 10000);
  assert_true(NUM(row(kt, "kernel_type", "COMPUTATION"), "percentage") == 57.9); /* 55 / 95 */
  /* HTA 0.6.1's launch delay: max(0, device start - call end): 20-16,
   * 60-38, 45-43, 120-115, 130-118 = 4, 22, 2, 5, 12 */
  assert_int_equal(NUM(d, "launch_stats", "launches"), 5);
  assert_int_equal(NUM(d, "launch_stats", "launch_delay", "mean_ns"), 9000);
  assert_int_equal(NUM(d, "launch_stats", "launch_delay", "max_ns"), 22000);
  assert_int_equal(NUM(d, "launch_stats", "launch_delay", "min_ns"), 2000);
  /* stream 7: [50,60) is kernel_wait (< 30 us, launched before), [70,120)
   * host_wait (launched at 110 > 70); stream 8: [65,130) host_wait */
  yajl_val it = at(d, "idle_time_breakdown", NULL);
  int seen = 0;
  for (size_t i = 0; i < it->u.array.len; i++) {
    yajl_val x = it->u.array.values[i];
    long long s = (long long)NUM(x, "stream");
    const char *c = STR(x, "idle_category");
    long long ns = (long long)NUM(x, "idle_time_ns");
    if (s == 7 && !strcmp(c, "host_wait")) assert_int_equal(ns, 50000), seen |= 1;
    if (s == 7 && !strcmp(c, "kernel_wait")) assert_int_equal(ns, 10000), seen |= 2;
    if (s == 8 && !strcmp(c, "host_wait")) assert_int_equal(ns, 65000), seen |= 4;
    if (!strcmp(c, "other")) assert_int_equal(ns, 0);
  }
  assert_int_equal(seen, 7);
  yajl_tree_free(r);
  free(text);
}

/* A temporary trace file: open_trace writes the head, close_trace the end. */
static FILE *open_trace(char *path, size_t n) {
  tmp_path(path, n, ".json");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "{\"traceEvents\":[\n");
  return f;
}

static void close_trace(FILE *f) {
  fprintf(f, "]}\n");
  assert_int_equal(fclose(f), 0);
}

/* The JSON without its "path" value, for comparing reports of copies. */
static char *without_path(char *text) {
  char *p = strstr(text, "\"path\":\"");
  assert_non_null(p);
  char *e = strchr(p + 8, '"');
  memmove(p + 8, e, strlen(e) + 1);
  return text;
}

static void test_same_report_from_every_format(void **state) {
  (void)state;
  char *ref = without_path(report_text(SYNTH, 0, 0));
  loom_trace *t = NULL;
  assert_int_equal(loom_trace_load(SYNTH, &t), LOOM_OK);
  static const char *ext[] = {".pftrace", ".json.gz", ".json"};
  for (size_t i = 0; i < 3; i++) {
    char path[512];
    tmp_path(path, sizeof path, ext[i]);
    assert_int_equal(loom_trace_save(t, path), LOOM_OK);
    char *got = without_path(report_text(path, 0, 0));
    if (strcmp(got, ref)) fail_msg("%s report differs:\n%s\nvs\n%s", ext[i], got, ref);
    free(got);
    unlink(path);
  }
  loom_trace_free(t);
  free(ref);
}

/* A trace bigger than the sort budget: 20 spilled runs must merge into the
 * same order (and so the same report) as one in-memory sort. */
static void test_spilled_sort_same_report(void **state) {
  (void)state;
  char path[512];
  FILE *f = open_trace(path, sizeof path);
  unsigned seed = 7;
  long long ts = 1000;
  for (int i = 1; i <= 10000; i++) {
    seed = seed * 1103515245u + 12345u;
    int dur = 1 + (int)(seed >> 16) % 50, lat = 2 + (int)(seed >> 8) % 30;
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op%d\",\"pid\":1,\"tid\":%d,\"ts\":%lld,"
               "\"dur\":%d},\n", i % 7, 1 + i % 2, ts, 6);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
               "\"tid\":%d,\"ts\":%lld,\"dur\":3,\"args\":{\"correlation\":%d}},\n", 1 + i % 2, ts + 1, i);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k%d\",\"pid\":0,\"tid\":%d,\"ts\":%lld,"
               "\"dur\":%d,\"args\":{\"correlation\":%d}}%s\n", i % 13, 7 + i % 3, ts + lat, dur, i,
            i == 10000 ? "" : ",");
    ts += 4 + (seed >> 20) % 9;
  }
  close_trace(f);
  char *mem = report_text(path, 0, 0);
  char *spilled = report_text(path, 0, 1536 * sizeof(double) * 6); /* 1536 records a run */
  assert_string_equal(spilled, mem);
  yajl_val r = parse(mem);
  assert_int_equal(NUM(r, "input", "events"), 30000);
  assert_int_equal(NUM(r, "devices", "#0", "launch_latency", "count"), 10000);
  assert_int_equal(NUM(r, "not_understood", "device_work_without_launch"), 0);
  yajl_tree_free(r);
  free(mem);
  free(spilled);
  unlink(path);
}

/* One kernel name with 10000 launches of 1, 2, ..., 10000 us (shuffled):
 * past 8192 samples the percentiles come from the log histogram, within
 * 0.2%; count, mean, min and max stay exact.  Up to 8192 they are exact. */
static void test_percentiles_past_exact_limit(void **state) {
  (void)state;
  char path[512];
  FILE *f = open_trace(path, sizeof path);
  long long ts = 0;
  for (int i = 0; i < 10000; i++) {
    int d = 1 + (int)(((long long)i * 2654435761LL) % 10000); /* a permutation of 1..10000 */
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,\"tid\":7,\"ts\":%lld,"
               "\"dur\":%d},\n", "k", ts, d);
    ts += 11000;
  }
  for (int i = 0; i < 8192; i++) { /* 8192 of 1..8192: still exact */
    int d = 1 + (int)(((long long)i * 2654435761LL) % 8192);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"e\",\"pid\":0,\"tid\":8,\"ts\":%lld,"
               "\"dur\":%d}%s\n", ts, d, i == 8191 ? "" : ",");
    ts += 9000;
  }
  close_trace(f);
  char *text = report_text(path, 0, 0);
  yajl_val r = parse(text);
  yajl_val q = at(row(at(r, "kernels", "top", NULL), "name", "k"), "durations", NULL);
  assert_int_equal(NUM(q, "count"), 10000);
  assert_true(YAJL_IS_FALSE(at(q, "exact", NULL)));
  assert_int_equal(NUM(q, "mean_ns"), 5000500);
  assert_int_equal(NUM(q, "min_ns"), 1000);
  assert_int_equal(NUM(q, "max_ns"), 10000000);
  double p50 = NUM(q, "p50_ns"), p95 = NUM(q, "p95_ns");
  if (p50 < 5000500 * 0.998 || p50 > 5000500 * 1.002 || p95 < 9500050 * 0.998 || p95 > 9500050 * 1.002)
    fail_msg("p50 %.0f (exact 5000500), p95 %.0f (exact 9500050): beyond 0.2%%", p50, p95);
  q = at(row(at(r, "kernels", "top", NULL), "name", "e"), "durations", NULL);
  assert_true(YAJL_IS_TRUE(at(q, "exact", NULL)));
  assert_int_equal(NUM(q, "p50_ns"), 4096500);     /* (4096 + 4097) / 2 us */
  assert_int_equal(NUM(q, "p95_ns"), 7782450);     /* 1 + 0.95 * 8191 = 7782.45 us */
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* Launch calls stay known after their work started, and once more than
 * 65536 are, the oldest go until half are left: work finds its call while
 * fewer than 32768 launches came after it.  70000 launches, each followed
 * by its kernel; then a kernel of launch 1 (forgotten: work without a
 * launch) and one of launch 69000 (still known). */
static void test_old_launches_forgotten(void **state) {
  (void)state;
  char path[512];
  FILE *f = open_trace(path, sizeof path);
  long long ts = 0;
  for (int i = 1; i <= 70000; i++, ts += 10) {
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
               "\"tid\":1,\"ts\":%lld,\"dur\":1,\"args\":{\"correlation\":%d}},\n", ts, i);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":%lld,"
               "\"dur\":1,\"args\":{\"correlation\":%d}},\n", ts + 2, i);
  }
  fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":%lld,"
             "\"dur\":1,\"args\":{\"correlation\":1}},\n", ts + 5);
  fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":%lld,"
             "\"dur\":1,\"args\":{\"correlation\":69000}}\n", ts + 8);
  close_trace(f);
  char *text = report_text(path, 0, 0);
  yajl_val r = parse(text);
  assert_int_equal(NUM(r, "not_understood", "device_work_without_launch"), 1);
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* Device time goes to every user range a launch runs in, however deep the
 * nesting: 100 distinct names, each inside the one before, around one
 * launch of a 10 us kernel; the same name twice on the stack counts once. */
static void test_deep_user_ranges(void **state) {
  (void)state;
  char path[512];
  FILE *f = open_trace(path, sizeof path);
  for (int i = 0; i < 100; i++)
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"r%d\",\"pid\":1,\"tid\":1,"
               "\"ts\":%d,\"dur\":%d},\n", i, 1000 + i, 1000 - 2 * i);
  fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"r7\",\"pid\":1,\"tid\":1,"
             "\"ts\":1450,\"dur\":100},\n");
  fprintf(f, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
             "\"tid\":1,\"ts\":1500,\"dur\":1,\"args\":{\"correlation\":1}},\n");
  fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1505,"
             "\"dur\":10,\"args\":{\"correlation\":1}}\n");
  close_trace(f);
  char *text = report_text(path, 0, 0);
  yajl_val r = parse(text);
  yajl_val ranges = at(r, "host", "user_ranges", "top", NULL);
  for (int i = 0; i < 100; i++) {
    char name[16];
    snprintf(name, sizeof name, "r%d", i);
    yajl_val g = row(ranges, "name", name);
    if (NUM(g, "device_time_ns") != 10000 || NUM(g, "device_work") != 1)
      fail_msg("%s: device time %g ns, %g works (10000, 1 expected)", name, NUM(g, "device_time_ns"),
               NUM(g, "device_work"));
  }
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* A queue whose commands ran at once is written as lanes ("queue 1 lane 2"
 * beside "queue 1", docs/writing-a-backend.md): the report counts them as
 * one queue, busy for the union of their work.  A name that only looks
 * like a lane ("queue 1 lane 2x"), or a lane of a queue the device does not
 * have ("queue 9 lane 2"), stays a queue of its own. */
static void test_queue_lanes(void **state) {
  (void)state;
  char path[512];
  FILE *f = open_trace(path, sizeof path);
  static const char *names[] = {"queue 1", "queue 1 lane 2", "queue 9 lane 2", "queue 1 lane 2x"};
  for (int i = 0; i < 4; i++)
    fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":%d,"
               "\"args\":{\"name\":\"%s\"}},\n", i + 1, names[i]);
  static const int kern[][3] = {{1, 0, 10}, {2, 5, 10}, {2, 16, 2}, {4, 20, 10}, {3, 40, 5}};
  for (int i = 0; i < 5; i++)
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":%d,"
               "\"ts\":%d,\"dur\":%d}%s\n", kern[i][0], kern[i][1], kern[i][2], i == 4 ? "" : ",");
  close_trace(f);
  char *text = report_text(path, 0, 0);
  yajl_val r = parse(text);
  yajl_val qs = at(r, "devices", "#0", "queues", NULL);
  assert_non_null(qs);
  assert_int_equal(YAJL_GET_ARRAY(qs)->len, 3);
  yajl_val q1 = row(qs, "name", "queue 1");
  assert_int_equal(NUM(q1, "work"), 3);
  assert_int_equal(NUM(q1, "busy_ns"), 17000); /* [0,15) and [16,18) */
  assert_int_equal(NUM(row(qs, "name", "queue 1 lane 2x"), "work"), 1);
  assert_int_equal(NUM(row(qs, "name", "queue 9 lane 2"), "work"), 1);
  assert_int_equal(NUM(r, "devices", "#0", "busy_ns"), 32000);
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* Counts events of a category in a (possibly gzip'ed) Kineto file. */
static size_t count_cat(const char *path, const char *cat) {
  gzFile g = gzopen(path, "rb");
  assert_non_null(g);
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap);
  int k;
  while ((k = gzread(g, buf + n, (unsigned)(cap - n - 1))) > 0) {
    n += (size_t)k;
    if (cap - n < 2) buf = realloc(buf, cap *= 2);
  }
  gzclose(g);
  buf[n] = 0;
  yajl_val v = parse(buf);
  const char *p[] = {"traceEvents", NULL};
  yajl_val evs = yajl_tree_get(v, p, yajl_t_array);
  size_t count = 0;
  for (size_t i = 0; evs && i < evs->u.array.len; i++) {
    yajl_val c = at(evs->u.array.values[i], "cat", NULL), ph = at(evs->u.array.values[i], "ph", NULL);
    if (c && YAJL_IS_STRING(c) && !strcmp(c->u.string, cat) && ph && YAJL_IS_STRING(ph) &&
        !strcmp(ph->u.string, "X"))
      count++;
  }
  yajl_tree_free(v);
  free(buf);
  return count;
}

static void test_real_kineto_traces(void **state) {
  (void)state;
  static const char *files[] = {"hta_gpu_simple_add.json.gz", "hta_trace_compare_base.json.gz",
                                "hta_triton_example.json.gz", "hta_cpu_only_rank34.json.gz",
                                "libkineto_unit_test_trace.json"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char in[512];
    snprintf(in, sizeof in, "%s/data/kineto/%s", LOOM_TESTS_DIR, files[i]);
    char *text = report_text(in, 0, 0);
    yajl_val r = parse(text);
    size_t kernels = 0, copies = 0;
    yajl_val top = at(r, "kernels", "top", NULL);
    for (size_t k = 0; k < top->u.array.len; k++) kernels += (size_t)NUM(top->u.array.values[k], "count");
    yajl_val tr = at(r, "transfers", NULL);
    for (size_t k = 0; k < tr->u.array.len; k++) copies += (size_t)NUM(tr->u.array.values[k], "count");
    size_t want_k = count_cat(in, "kernel"), want_c = count_cat(in, "gpu_memcpy");
    if (kernels != want_k || copies != want_c)
      fail_msg("%s: report has %zu kernels and %zu copies, the file %zu and %zu", files[i], kernels,
               copies, want_k, want_c);
    yajl_val devs = at(r, "devices", NULL);
    for (size_t k = 0; k < devs->u.array.len; k++) {
      yajl_val d = devs->u.array.values[k];
      assert_true(NUM(d, "busy_ns") <= NUM(d, "window_ns"));
      assert_true(NUM(d, "utilization_pct") >= 0 && NUM(d, "utilization_pct") <= 100);
      assert_int_equal(NUM(d, "idle_waiting_for_host_ns") + NUM(d, "idle_other_ns"), NUM(d, "idle_ns"));
    }
    if (want_k) assert_true(devs->u.array.len > 0);
    printf("  %s: %zu kernels, %zu copies, %zu devices\n", files[i], kernels, copies, devs->u.array.len);
    yajl_tree_free(r);
    free(text);
  }
}

/* Another runtime's vocabulary (XPU's ur* calls, HIP's hip* calls and
 * CopyHostToDevice), missing optional fields (stream, device, bytes, cat,
 * dur) and a category nobody knows: analysed by correlation, the rest
 * listed. */
static void test_vendor_variants(void **state) {
  (void)state;
  char *text = report_text(LOOM_TESTS_DIR "/data/report/variants.json", 0, 0);
  yajl_val r = parse(text);
  yajl_val d0 = at(r, "devices", "#0", NULL), d1 = at(r, "devices", "#1", NULL);
  assert_int_equal(NUM(d0, "work"), 2);
  assert_int_equal(NUM(d0, "launch_latency", "count"), 2); /* 110-100, 130-105 */
  assert_int_equal(NUM(d0, "launch_latency", "max_ns"), 25000);
  assert_int_equal(NUM(d1, "launch_latency", "count"), 2); /* 230-200, 260-250 */
  /* "future event" [320,322), of a category nobody knows, lies on the
   * device's process: device work by structure (no launch call) */
  assert_int_equal(NUM(d1, "busy_ns"), 25000);
  /* gap [245,260): the copy's call began at 250 -> 5 waiting for the host;
   * gap [268,320) before the event without a call: other */
  assert_int_equal(NUM(d1, "idle_waiting_for_host_ns"), 5000);
  assert_int_equal(NUM(d1, "idle_other_ns"), 62000);
  assert_int_equal(NUM(row(at(r, "transfers", NULL), "direction", "HtoD"), "bytes"), 8000);
  assert_int_equal(NUM(row(at(r, "transfers", NULL), "direction", "other"), "count"), 1);
  /* HTA's kernel type goes by name in a trace without marks: "CopyHostToDevice"
   * has no "Memcpy", so it is COMPUTATION as in HTA (20 + 15 + 8); MEMORY is
   * "Memcpy M2D" alone (10). */
  assert_int_equal(NUM(r, "hta", "temporal_breakdown", "compute_time_ns"), 43000);
  assert_int_equal(NUM(row(at(r, "hta", "kernel_types", NULL), "kernel_type", "MEMORY"), "sum_ns"), 10000);
  assert_int_equal(NUM(r, "not_understood", "device_work_without_launch"), 1);
  yajl_val cats = at(r, "not_understood", "categories", NULL);
  assert_int_equal(cats->u.array.len, 1);
  assert_string_equal(STR(cats, "#0", "category"), "");
  yajl_tree_free(r);
  free(text);
}

static void test_bad_input(void **state) {
  (void)state;
  loom_report *r = NULL;
  assert_int_equal(loom_report_open("/nonexistent/trace.json", NULL, &r), LOOM_EIO);
  assert_null(r);
  assert_non_null(strstr(loom_last_error(), "/nonexistent/trace.json"));
  /* a trace cut in the middle of its event list */
  size_t n;
  char *text = read_file(SYNTH, &n);
  char path[512];
  tmp_path(path, sizeof path, ".json");
  FILE *f = fopen(path, "w");
  fwrite(text, 1, n / 2, f);
  fclose(f);
  assert_int_equal(loom_report_open(path, NULL, &r), LOOM_EFORMAT);
  assert_non_null(strstr(loom_last_error(), path));
  assert_non_null(strstr(loom_last_error(), "truncated"));
  /* garbage */
  f = fopen(path, "w");
  fputs("this is not a trace\n", f);
  fclose(f);
  assert_int_equal(loom_report_open(path, NULL, &r), LOOM_EFORMAT);
  unlink(path);
  free(text);
  /* options from a future version are refused, not misread */
  loom_report_options o = {.struct_size = 2};
  assert_int_equal(loom_report_open(SYNTH, &o, &r), LOOM_EINVAL);
}

static void test_html_page(void **state) {
  (void)state;
  loom_report *r = NULL;
  assert_int_equal(loom_report_open(SYNTH, NULL, &r), LOOM_OK);
  char path[512];
  tmp_path(path, sizeof path, ".html");
  assert_int_equal(loom_report_write(r, LOOM_REPORT_HTML, path), LOOM_OK);
  loom_report_free(r);
  size_t n;
  char *html = read_file(path, &n);
  assert_true(!strncmp(html, "<!DOCTYPE html>", 15));
  assert_non_null(strstr(html, "<svg"));
  assert_non_null(strstr(html, "gemm"));
  assert_null(strstr(html, "<script"));
  assert_null(strstr(html, "http://"));
  assert_null(strstr(html, "https://"));
  assert_non_null(strstr(html, "</html>"));
  free(html);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_synthetic_loom_figures), cmocka_unit_test(test_synthetic_hta_last_step_out),
      cmocka_unit_test(test_synthetic_hta_all_steps), cmocka_unit_test(test_same_report_from_every_format),
      cmocka_unit_test(test_spilled_sort_same_report), cmocka_unit_test(test_percentiles_past_exact_limit),
      cmocka_unit_test(test_old_launches_forgotten),   cmocka_unit_test(test_deep_user_ranges),   cmocka_unit_test(test_queue_lanes),
      cmocka_unit_test(test_real_kineto_traces),
      cmocka_unit_test(test_vendor_variants),       cmocka_unit_test(test_bad_input),             cmocka_unit_test(test_html_page),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
