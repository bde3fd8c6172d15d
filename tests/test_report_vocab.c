/*
 * test_report_vocab.c - `loom report` understands a runtime whose names loom
 * does not know, from the marks its backend gives (LOOM_RECORD_F_*) and the
 * reserved copy arguments ("bytes", "direction"), through the API trace and
 * after a round trip through every format.
 *
 * The backend below is registered by the test: its calls ("fooEnqueueKernel",
 * "fooEnqueueCopy", "fooAllReduce") and its work ("fooGemm", "fooCopy",
 * "fooRingReduce") appear in no report-names.def, so without the marks the
 * report would show its launches as 0, its copies as direction "other" and
 * no communication.  The answers are worked out by hand below.
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
#include <dlfcn.h>
#include <yajl/yajl_tree.h>

#include "loom/loom.h"
#include "simrt.h"
#include "testutil.h"

static const loom_host *host;
static loom_backend *foo_b;
static loom_clock foo_clk;
static uint32_t foo_dev, foo_q[2];
static uint64_t base; /* REALTIME ns at start; the script is relative to it */

static loom_status foo_probe(loom_backend *b, char *why, size_t n) {
  (void)why, (void)n;
  foo_b = b;
  return LOOM_OK;
}

static loom_status foo_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  loom_device_info d = {.struct_size = sizeof d, .name = "Foo Accelerator", .vendor = "foo",
                        .type = "accelerator"};
  if (host->clock_declare(b, LOOM_CLOCK_REALTIME, "realtime", &foo_clk) ||
      host->device_add(b, &d, &foo_dev) || host->resource_add(b, foo_dev, "foo queue 1", 1, &foo_q[0]) ||
      host->resource_add(b, foo_dev, "foo queue 2", 2, &foo_q[1]))
    return LOOM_EBACKEND;
  return LOOM_OK;
}

static loom_status foo_start(loom_backend *b) {
  (void)b;
  base = host->clock_now(LOOM_CLOCK_REALTIME) + 10000;
  return LOOM_OK;
}

static loom_status foo_stop(loom_backend *b) { (void)b; return LOOM_OK; }

/* One record; times in us after base. */
static void rec(uint16_t kind, uint16_t flags, int dev_q, double t0, double t1, const char *name,
                uint64_t corr, const loom_arg *args, uint32_t nargs) {
  loom_record r = {.struct_size = sizeof r, .kind = kind, .flags = flags, .clock = foo_clk,
                   .device = dev_q < 0 ? LOOM_DEVICE_HOST : foo_dev,
                   .resource = dev_q < 0 ? host->thread_id() : foo_q[dev_q],
                   .start = base + (uint64_t)(t0 * 1000), .end = base + (uint64_t)(t1 * 1000),
                   .name = host->intern(foo_b, name, SIZE_MAX), .correlation = corr,
                   .nargs = nargs, .args = args};
  assert_int_equal(host->emit(foo_b, &r), LOOM_OK);
}

/*
 * The script (us after base).  Host calls:
 *   fooEnqueueKernel [10,14) c1 LAUNCH, fooEnqueueKernel [20,22) c2 LAUNCH,
 *   fooEnqueueCopy [30,33) c3 MEMORY, fooEnqueueCopy [40,41) c4 MEMORY,
 *   fooAllReduce [50,52) c5 LAUNCH, fooQuery [60,61) no mark, no work.
 * Device work (queue 1 / queue 2):
 *   q1 fooGemm [16,26) c1, q1 fooAdd [30,35) c2, q2 fooCopy [36,46) c3
 *   (1 MB, HtoD), q2 fooCopy [47,49) c4 (4000 B, DtoH), q1 fooRingReduce
 *   [55,75) c5 marked COMM.
 */
static loom_status foo_flush(loom_backend *b) {
  (void)b;
  rec(LOOM_KIND_RUNTIME, LOOM_RECORD_F_LAUNCH, -1, 10, 14, "fooEnqueueKernel", 1, NULL, 0);
  rec(LOOM_KIND_RUNTIME, LOOM_RECORD_F_LAUNCH, -1, 20, 22, "fooEnqueueKernel", 2, NULL, 0);
  rec(LOOM_KIND_RUNTIME, LOOM_RECORD_F_MEMORY, -1, 30, 33, "fooEnqueueCopy", 3, NULL, 0);
  rec(LOOM_KIND_RUNTIME, LOOM_RECORD_F_MEMORY, -1, 40, 41, "fooEnqueueCopy", 4, NULL, 0);
  rec(LOOM_KIND_RUNTIME, LOOM_RECORD_F_LAUNCH, -1, 50, 52, "fooAllReduce", 5, NULL, 0);
  rec(LOOM_KIND_RUNTIME, 0, -1, 60, 61, "fooQuery", 0, NULL, 0);
  rec(LOOM_KIND_KERNEL, 0, 0, 16, 26, "fooGemm", 1, NULL, 0);
  rec(LOOM_KIND_KERNEL, 0, 0, 30, 35, "fooAdd", 2, NULL, 0);
  loom_arg h2d[2] = {{.key = "bytes", .type = LOOM_ARG_UINT, .v.u = 1000000},
                     {.key = "direction", .type = LOOM_ARG_STRING, .v.s = "HtoD"}};
  loom_arg d2h[2] = {{.key = "bytes", .type = LOOM_ARG_UINT, .v.u = 4000},
                     {.key = "direction", .type = LOOM_ARG_STRING, .v.s = "DtoH"}};
  rec(LOOM_KIND_MEMCPY, 0, 1, 36, 46, "fooCopy", 3, h2d, 2);
  rec(LOOM_KIND_MEMCPY, 0, 1, 47, 49, "fooCopy", 4, d2h, 2);
  rec(LOOM_KIND_KERNEL, LOOM_RECORD_F_COMM, 0, 55, 75, "fooRingReduce", 5, NULL, 0);
  return LOOM_OK;
}

static const loom_backend_ops foo_ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "foo", .device_type = "foo", .kinds = LOOM_KINDS_ALL,
    .runtime_category = "foo_runtime", .probe = foo_probe, .configure = foo_configure,
    .start = foo_start, .stop = foo_stop, .flush = foo_flush};

static loom_trace *record_foo(void) {
  host = loom_host_get(LOOM_ABI_MAJOR);
  assert_non_null(host);
  assert_int_equal(host->backend_register(&foo_ops, "tests"), LOOM_OK);
  loom_session *s = ts_start("foo", NULL);
  struct timespec ms = {0, 2000000};
  nanosleep(&ms, NULL); /* the script's 75 us lie inside the session */
  return ts_finish(s);
}

/* ---- reading the report ---------------------------------------------------- */
static char *report_text(const char *trace) {
  loom_report_options o = {.struct_size = sizeof o};
  loom_report *r = NULL;
  if (loom_report_open(trace, &o, &r) != LOOM_OK)
    fail_msg("loom_report_open(%s): %s", trace, loom_last_error());
  char out[512];
  tmp_path(out, sizeof out, ".report.json");
  assert_int_equal(loom_report_write(r, LOOM_REPORT_JSON, out), LOOM_OK);
  loom_report_free(r);
  size_t n;
  char *text = read_file(out, &n);
  unlink(out);
  assert_non_null(text);
  char *p = strstr(text, "\"path\":\""); /* reports of copies differ only there */
  assert_non_null(p);
  char *e = strchr(p + 8, '"');
  memmove(p + 8, e, strlen(e) + 1);
  return text;
}

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
static long long num_of(yajl_val v, const char *what) {
  if (!v || !YAJL_IS_NUMBER(v)) fail_msg("no number at %s", what);
  return (long long)YAJL_GET_DOUBLE(v);
}

static yajl_val row(yajl_val arr, const char *key, const char *value) {
  for (size_t i = 0; arr && YAJL_IS_ARRAY(arr) && i < arr->u.array.len; i++) {
    yajl_val s = at(arr->u.array.values[i], key, NULL);
    if (s && YAJL_IS_STRING(s) && !strcmp(s->u.string, value)) return arr->u.array.values[i];
  }
  fail_msg("no row with %s = %s", key, value);
  return NULL;
}

/* Marks per role among the events of t: [launch, memory, comm, none]. */
static void count_roles(const loom_trace *t, size_t n[4]) {
  memset(n, 0, 4 * sizeof *n);
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    if (v.roles == LOOM_RECORD_F_LAUNCH) n[0]++;
    else if (v.roles == LOOM_RECORD_F_MEMORY) n[1]++;
    else if (v.roles == LOOM_RECORD_F_COMM) n[2]++;
    else if (!v.roles) n[3]++;
    else fail_msg("event %s has roles %u", v.name, v.roles);
  }
}

static void check_figures(const char *text) {
  char err[256];
  yajl_val r = yajl_tree_parse(text, err, sizeof err);
  if (!r) fail_msg("report JSON does not parse: %s", err);
  /* copies by their direction argument, though both are named "fooCopy" */
  yajl_val tr = at(r, "transfers", NULL);
  assert_int_equal(tr->u.array.len, 2);
  assert_int_equal(NUM(row(tr, "direction", "HtoD"), "count"), 1);
  assert_int_equal(NUM(row(tr, "direction", "HtoD"), "bytes"), 1000000);
  assert_int_equal(NUM(row(tr, "direction", "HtoD"), "time_ns"), 10000);
  assert_int_equal(NUM(row(tr, "direction", "DtoH"), "count"), 1);
  assert_int_equal(NUM(row(tr, "direction", "DtoH"), "bytes"), 4000);
  assert_int_equal(NUM(row(tr, "direction", "DtoH"), "time_ns"), 2000);
  yajl_val d = at(r, "devices", "#0", NULL);
  assert_int_equal(NUM(d, "work"), 5);
  assert_int_equal(NUM(d, "kernels"), 3);
  /* compute [16,26) + [30,35); communication [55,75); memory [36,46) + [47,49) */
  assert_int_equal(NUM(d, "busy_by_class_ns", "compute"), 15000);
  assert_int_equal(NUM(d, "busy_by_class_ns", "communication"), 20000);
  assert_int_equal(NUM(d, "busy_by_class_ns", "memory"), 12000);
  /* latencies 16-10, 30-20, 36-30, 47-40, 55-50 = 6, 10, 6, 7, 5 us */
  assert_int_equal(NUM(d, "launch_latency", "count"), 5);
  assert_int_equal(NUM(d, "launch_latency", "mean_ns"), 6800);
  assert_int_equal(NUM(d, "launch_latency", "p50_ns"), 6000);
  assert_int_equal(NUM(d, "launch_latency", "min_ns"), 5000);
  assert_int_equal(NUM(d, "launch_latency", "max_ns"), 10000);
  assert_int_equal(NUM(r, "not_understood", "device_work_without_launch"), 0);
  yajl_val k = row(at(r, "kernels", "top", NULL), "name", "fooRingReduce");
  assert_string_equal(at(k, "class", NULL)->u.string, "communication");
  /* HTA-style: the five marked calls; delay = max(0, start - call end):
   * 16-14, 30-22, 36-33, 47-41, 55-52 = 2, 8, 3, 6, 3 us.  A recording's
   * times are fractional us, so HTA rounds each event to whole us (start
   * up, end down): each delay then grows by less than 1 us. */
  yajl_val h = at(r, "hta", NULL);
  assert_int_equal(NUM(h, "launch_stats", "launches"), 5);
  long long up = YAJL_IS_TRUE(at(h, "rounded_to_us", NULL)) ? 1000 : 0;
  long long mean = NUM(h, "launch_stats", "launch_delay", "mean_ns");
  long long lo = NUM(h, "launch_stats", "launch_delay", "min_ns");
  long long hi = NUM(h, "launch_stats", "launch_delay", "max_ns");
  if (mean < 4400 || mean > 4400 + up || lo < 2000 || lo > 2000 + up || hi < 8000 || hi > 8000 + up)
    fail_msg("HTA launch delay mean %lld min %lld max %lld (rounded: %d)", mean, lo, hi, up != 0);
  /* the communication kernel overlaps no computation */
  yajl_val ov = at(h, "comp_comm_overlap_pctg", NULL);
  assert_true(ov && YAJL_IS_NUMBER(ov) && YAJL_GET_DOUBLE(ov) == 0.0);
  yajl_val kt = at(h, "kernel_types", NULL);
  /* rounded, each event loses less than 1 us at each end */
  static const struct { const char *type; long long ns, events; } want[] = {
      {"COMMUNICATION", 20000, 1}, {"MEMORY", 12000, 2}, {"COMPUTATION", 15000, 2}};
  for (size_t i = 0; i < 3; i++) {
    long long got = NUM(row(kt, "kernel_type", want[i].type), "sum_ns");
    if (got > want[i].ns || got < want[i].ns - 2 * up * want[i].events)
      fail_msg("HTA kernel type %s: %lld ns, want %lld (rounded: %d)", want[i].type, got, want[i].ns, up != 0);
  }
  yajl_tree_free(r);
}

static void test_unknown_runtime_every_format(void **state) {
  (void)state;
  loom_trace *t = record_foo();
  size_t n[4];
  count_roles(t, n);
  assert_int_equal(n[0], 3); /* the API trace keeps the marks */
  assert_int_equal(n[1], 2);
  assert_int_equal(n[2], 1);
  char js[512];
  tmp_path(js, sizeof js, ".json");
  assert_int_equal(loom_trace_save(t, js), LOOM_OK);
  char *ref = report_text(js);
  check_figures(ref);
  static const char *ext[] = {".json.gz", ".pftrace"};
  for (size_t i = 0; i < 2; i++) {
    char path[512];
    tmp_path(path, sizeof path, ext[i]);
    assert_int_equal(loom_trace_save(t, path), LOOM_OK);
    char *got = report_text(path);
    if (strcmp(got, ref)) fail_msg("%s report differs:\n%s\nvs\n%s", ext[i], got, ref);
    free(got);
    /* the whole-trace readers give the marks back too */
    loom_trace *back = ts_load(path);
    size_t m[4];
    count_roles(back, m);
    assert_memory_equal(m, n, sizeof n);
    loom_trace_free(back);
    unlink(path);
  }
  loom_trace *back = ts_load(js);
  size_t m[4];
  count_roles(back, m);
  assert_memory_equal(m, n, sizeof n);
  loom_trace_free(back);
  free(ref);
  unlink(js);
  loom_trace_free(t);
}

/* A role word loom does not know is a warning in the trace; the known words
 * of the same value still count. */
static void test_unknown_role_word(void **state) {
  (void)state;
  char path[512];
  tmp_path(path, sizeof path, ".json");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"bar_runtime\",\"name\":\"barGo\",\"pid\":1,"
        "\"tid\":1,\"ts\":10,\"dur\":2,\"args\":{\"correlation\":1,\"loom_role\":\"launch,teleport\"}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,\"ts\":13,\"dur\":1,"
        "\"args\":{\"correlation\":1}}]}\n", f);
  assert_int_equal(fclose(f), 0);
  loom_trace *t = ts_load(path);
  size_t n[4];
  count_roles(t, n);
  assert_int_equal(n[0], 1);
  assert_true(ts_warned(t, "loom_role", "ignored"));
  loom_trace_free(t);
  char *text = report_text(path);
  char err[256];
  yajl_val r = yajl_tree_parse(text, err, sizeof err);
  assert_non_null(r);
  assert_int_equal(NUM(r, "hta", "launch_stats", "launches"), 1);
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* Perfetto reads the marks as an ordinary argument, without errors. */
static void test_perfetto_reads_marks(void **state) {
  (void)state;
  tp_require();
  loom_trace *t = record_foo();
  char path[512];
  tmp_path(path, sizeof path, ".pftrace");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  static const char *const q[] = {
      "select count(*) from slice join args using(arg_set_id) where args.key = "
      "'debug.loom_role' and args.string_value = 'launch'",
      "select count(*) from slice join args using(arg_set_id) where args.key = "
      "'debug.loom_role' and args.string_value = 'comm' and slice.name = 'fooRingReduce'"};
  long long v[2];
  tp_ints(path, q, v, 2);
  assert_int_equal(v[0], 3);
  assert_int_equal(v[1], 1);
  assert_int_equal(tp_errors(path), 0);
  unlink(path);
  char js[512];
  tmp_path(js, sizeof js, ".json");
  assert_int_equal(loom_trace_save(t, js), LOOM_OK);
  assert_int_equal(tp_int(js, "select count(*) from slice join args using(arg_set_id) where "
                              "args.key = 'args.loom_role' and args.string_value = 'memory'"), 2);
  assert_int_equal(tp_errors(js), 0);
  unlink(js);
  loom_trace_free(t);
}

/* The example plug-in (examples/plugin-sim, loaded through LOOM_PLUGINS):
 * "simLaunchKernel", "simMemcpyAsync" and "simMemsetAsync" are in no
 * report-names.def; its marks make them 4 launches, 3 copies, 1 fill. */
static void test_sim_plugin_launches(void **state) {
  (void)state;
  loom_session *s = ts_start("sim", NULL);
  void *h = dlopen(SIM_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  if (!h) fail_msg("the sim plug-in is not loaded (LOOM_PLUGINS)");
  uint64_t (*launch)(int, const char *, uint64_t, uint32_t, uint32_t) =
      (uint64_t(*)(int, const char *, uint64_t, uint32_t, uint32_t))dlsym(h, "simrt_launch");
  uint64_t (*copy)(int, enum simrt_copy, size_t) =
      (uint64_t(*)(int, enum simrt_copy, size_t))dlsym(h, "simrt_memcpy");
  uint64_t (*fill)(int, size_t) = (uint64_t(*)(int, size_t))dlsym(h, "simrt_memset");
  uint64_t (*sync)(int) = (uint64_t(*)(int))dlsym(h, "simrt_synchronize");
  assert_true(launch && copy && fill && sync);
  for (int i = 0; i < 4; i++) launch(i % 2, "simKernel", 2000, 1, 1);
  copy(0, SIMRT_H2D, 1000);
  copy(0, SIMRT_H2D, 3000);
  copy(1, SIMRT_D2H, 500);
  fill(1, 64);
  sync(0);
  sync(1);
  loom_trace *t = ts_finish(s);
  char js[512];
  tmp_path(js, sizeof js, ".json");
  assert_int_equal(loom_trace_save(t, js), LOOM_OK);
  loom_trace_free(t);
  char *text = report_text(js);
  char err[256];
  yajl_val r = yajl_tree_parse(text, err, sizeof err);
  assert_non_null(r);
  /* every launch, copy and fill call: 4 + 3 + 1 (the syncs are not) */
  assert_int_equal(NUM(r, "hta", "launch_stats", "launches"), 8);
  assert_int_equal(NUM(r, "devices", "#0", "launch_latency", "count"), 8);
  yajl_val tr = at(r, "transfers", NULL);
  assert_int_equal(NUM(row(tr, "direction", "HtoD"), "count"), 2);
  assert_int_equal(NUM(row(tr, "direction", "HtoD"), "bytes"), 4000);
  assert_int_equal(NUM(row(tr, "direction", "DtoH"), "bytes"), 500);
  yajl_tree_free(r);
  free(text);
  unlink(js);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_unknown_runtime_every_format),
                                     cmocka_unit_test(test_unknown_role_word),
                                     cmocka_unit_test(test_sim_plugin_launches),
                                     cmocka_unit_test(test_perfetto_reads_marks)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
