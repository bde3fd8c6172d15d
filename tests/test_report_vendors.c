/*
 * test_report_vendors.c - every vendor's device work understood by `loom
 * report`, by category or by structure, and HTA 0.6.1's rules on hand-made
 * traces whose answers are worked out in the comments.
 *
 * Each vendor trace has one host thread and one device with a kernel and a
 * copy, written as that vendor's producer writes them: Kineto's CUDA, ROCm
 * (HIP names under Kineto's categories), XPU, MTIA (its own categories,
 * device work linked by correlation or only by a flow), and loom's own
 * OpenCL, Level Zero and sim backends (their categories, marks and
 * "direction").  Times in us.
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

static char *report_of(const char *trace, int include_last) {
  loom_report_options o = {.struct_size = sizeof o, .hta_include_last_step = include_last};
  loom_report *r = NULL;
  if (loom_report_open(trace, &o, &r) != LOOM_OK) fail_msg("loom_report_open(%s): %s", trace, loom_last_error());
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

static size_t len_of(yajl_val v) { return v && YAJL_IS_ARRAY(v) ? v->u.array.len : 0; }

static yajl_val row(yajl_val arr, const char *key, const char *value) {
  for (size_t i = 0; i < len_of(arr); i++) {
    yajl_val s = at(arr->u.array.values[i], key, NULL);
    if (s && YAJL_IS_STRING(s) && !strcmp(s->u.string, value)) return arr->u.array.values[i];
  }
  fail_msg("no row with %s = %s", key, value);
  return NULL;
}

static void write_trace(char *path, size_t n, const char *events) {
  tmp_path(path, n, ".json");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "{\"traceEvents\":[\n%s\n]}\n", events);
  assert_int_equal(fclose(f), 0);
}

/* A vendor's trace: launch call @100+4 (corr 1) -> kernel [110,130); copy
 * call @140+2 (corr 2) -> copy [150,160).  %s are the runtime category,
 * the launch and copy call names, the kernel's category, the copy's
 * category and the copy's extra arguments. */
typedef struct vendor {
  const char *what, *rt_cat, *launch, *copy, *k_cat, *c_cat, *k_args, *c_args, *c_name;
  int hta_launches; /* launches by HTA's name list */
  int loom;         /* loom's own trace: the calls carry its marks */
} vendor;

static const vendor vendors[] = {
    {"CUDA (Kineto)", "cuda_runtime", "cudaLaunchKernel", "cudaMemcpyAsync", "kernel", "gpu_memcpy",
     ",\"stream\":7", ",\"stream\":7", "Memcpy HtoD (Pageable -> Device)", 2, 0},
    {"ROCm/HIP (Kineto)", "cuda_runtime", "hipLaunchKernel", "hipMemcpyWithStream", "kernel", "gpu_memcpy",
     ",\"stream\":0", ",\"stream\":0", "Memcpy HtoD (Host -> Device)", 0, 0},
    {"XPU (Kineto)", "xpu_runtime", "urEnqueueKernelLaunch", "urEnqueueUSMMemcpy", "kernel", "gpu_memcpy",
     "", "", "Memcpy M2D", 0, 0},
    {"MTIA (Kineto)", "mtia_runtime", "runFunction - job_prep_and_submit_for_execution", "copyToDevice",
     "mtia_ccp_events", "mtia_ccp_events", ",\"stream\":1", ",\"stream\":1,\"direction\":\"HOST_TO_DEVICE\"",
     "dma_request", 1, 0},
    {"OpenCL (loom)", "opencl_runtime", "clEnqueueNDRangeKernel", "clEnqueueWriteBuffer", "kernel",
     "gpu_memcpy", "", ",\"direction\":\"HtoD\",\"bytes\":4096", "clEnqueueWriteBuffer", 0, 1},
    {"Level Zero (loom)", "xpu_runtime", "zeCommandListAppendLaunchKernel", "zeCommandListAppendMemoryCopy",
     "kernel", "gpu_memcpy", "", ",\"direction\":\"HtoD\",\"bytes\":4096", "zeCommandListAppendMemoryCopy", 0, 1},
    {"sim (loom plug-in)", "sim_runtime", "simLaunch", "simCopy", "kernel", "gpu_memcpy", "",
     ",\"direction\":\"HtoD\",\"bytes\":4096", "sim copy", 0, 1},
};

/* loom's own traces carry the marks of its backends ("loom_role"). */
static void vendor_trace(const vendor *v, char *path, size_t n) {
  char ev[4096];
  const char *rt = v->rt_cat;
  const char *mark_l = v->loom ? ",\"loom_role\":\"launch\"" : "";
  const char *mark_c = v->loom ? ",\"loom_role\":\"memory\"" : "";
  snprintf(ev, sizeof ev,
           "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":5,\"args\":{\"name\":\"device 5\"}},\n"
           "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":10,\"tid\":10,\"ts\":100,\"dur\":4,"
           "\"args\":{\"correlation\":1%s}},\n"
           "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"gemm\",\"pid\":5,\"tid\":1,\"ts\":110,\"dur\":20,"
           "\"args\":{\"correlation\":1%s}},\n"
           "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":10,\"tid\":10,\"ts\":140,\"dur\":2,"
           "\"args\":{\"correlation\":2%s}},\n"
           "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":5,\"tid\":1,\"ts\":150,\"dur\":10,"
           "\"args\":{\"correlation\":2%s}}",
           rt, v->launch, mark_l, v->k_cat, v->k_args, rt, v->copy, mark_c, v->c_cat, v->c_name, v->c_args);
  write_trace(path, n, ev);
}

/* Every vendor: one device, 2 work items, busy 30 of a window of 50, a
 * launch latency for each (10 and 10), idle [130,150) of which 10 waited
 * for the host (the copy's call began at 140), nothing left not understood. */
static void test_every_vendor(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof vendors / sizeof vendors[0]; i++) {
    const vendor *v = &vendors[i];
    char path[512];
    vendor_trace(v, path, sizeof path);
    char *text = report_of(path, 0);
    yajl_val r = parse(text);
    printf("  %s\n", v->what);
    assert_int_equal(len_of(at(r, "devices", NULL)), 1);
    yajl_val d = at(r, "devices", "#0", NULL);
    assert_int_equal(NUM(d, "pid"), 5);
    assert_int_equal(NUM(d, "work"), 2);
    assert_int_equal(NUM(d, "window_ns"), 50000);
    assert_int_equal(NUM(d, "busy_ns"), 30000);
    assert_int_equal(NUM(d, "idle_waiting_for_host_ns"), 10000);
    assert_int_equal(NUM(d, "idle_other_ns"), 10000);
    assert_int_equal(NUM(d, "launch_latency", "count"), 2);
    assert_int_equal(NUM(d, "launch_latency", "mean_ns"), 10000);
    assert_int_equal(NUM(r, "not_understood", "device_work_without_launch"), 0);
    assert_int_equal(len_of(at(r, "not_understood", "categories", NULL)), 0);
    assert_int_equal(NUM(r, "kernels", "top", "#0", "count"), 1);
    /* HTA counts the events with a stream (loom's own and Kineto's known
     * kinds join on their queue); its launch list names CUDA's and MTIA's
     * calls, and loom's marks stand for it in loom's traces */
    int has_stream = strstr(v->k_args, "stream") != NULL, known = !strcmp(v->k_cat, "kernel");
    assert_int_equal(NUM(r, "hta", "events"), has_stream || known ? 2 : 0);
    if (has_stream || known) {
      assert_int_equal(NUM(r, "hta", "temporal_breakdown", "kernel_time_ns"), 50000);
      assert_int_equal(NUM(r, "hta", "temporal_breakdown", "idle_time_ns"), 20000);
      int launches = v->loom ? 2 : v->hta_launches;
      assert_int_equal(NUM(r, "hta", "launch_stats", "launches"), launches);
    }
    yajl_tree_free(r);
    free(text);
    unlink(path);
  }
}

/* MTIA device work linked only by Kineto's flow (no correlation argument,
 * no stream), on a process nothing marks a device: found by the flow that
 * starts in the runtime call (corr 7) and ends on it; its latency 20. */
static void test_device_work_by_flow(void **state) {
  (void)state;
  char path[512];
  write_trace(path, sizeof path,
              "{\"ph\":\"X\",\"cat\":\"mtia_runtime\",\"name\":\"runFunction - x\",\"pid\":10,\"tid\":10,"
              "\"ts\":100,\"dur\":5,\"args\":{\"correlation\":7}},\n"
              "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":7,\"pid\":10,\"tid\":10,\"ts\":100},\n"
              "{\"ph\":\"f\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":7,\"pid\":9,\"tid\":801,\"ts\":120,\"bp\":\"e\"},\n"
              "{\"ph\":\"X\",\"cat\":\"mtia_ccp_events\",\"name\":\"job_exe\",\"pid\":9,\"tid\":801,\"ts\":120,"
              "\"dur\":30,\"args\":{\"sqid\":1}},\n"
              "{\"ph\":\"X\",\"cat\":\"mtia_ccp_events\",\"name\":\"stray\",\"pid\":10,\"tid\":12,\"ts\":200,"
              "\"dur\":1}");
  char *text = report_of(path, 0);
  yajl_val r = parse(text);
  yajl_val d = at(r, "devices", "#0", NULL);
  assert_int_equal(NUM(d, "pid"), 9);
  assert_int_equal(NUM(d, "work"), 1);
  assert_int_equal(NUM(d, "busy_ns"), 30000);
  assert_int_equal(NUM(d, "launch_latency", "count"), 1);
  assert_int_equal(NUM(d, "launch_latency", "max_ns"), 20000);
  /* the event on a host thread with nothing linking it stays not understood */
  assert_int_equal(NUM(row(at(r, "not_understood", "categories", NULL), "category", "mtia_ccp_events"), "events"),
                   1);
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* HTA 0.6.1's rules on a trace with fractional timestamps, where rounding
 * every event to whole us (start up, end down) changes every answer:
 *   A  kernel [10.6, 15.6) -> [11, 15)   launched @9.1+0.5 -> [10, 9)
 *   B  kernel [15.4, 17.6) -> [16, 17)   launched @14.7+0.2 -> [15, 14)
 *   S  "Context Sync" on the stream [20.2, 22.9) -> [21, 22): OTHER
 * kernel_time 22 - 11 = 11; union 4 + 1 + 1 = 6, idle 5; compute (A, B) 5;
 * non-compute 11 - 5 - 5 = 1 (the sync).  Idle on stream 7 (kernels only,
 * the sync is no kernel): B's gap 16 - 15 = 1, its call began at 15, not
 * after 15: kernel_wait 1.  Launch delays max(0, start - call end):
 * A 11 - 9 = 2, B 16 - 14 = 2.  Unrounded (loom's own sections) the
 * kernels overlap: busy [10.6, 17.6) = 7 us. */
static void test_hta_rounding_and_syncs(void **state) {
  (void)state;
  char path[512];
  write_trace(path, sizeof path,
              "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":10,\"tid\":10,"
              "\"ts\":9.1,\"dur\":0.5,\"args\":{\"correlation\":1}},\n"
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"A\",\"pid\":0,\"tid\":7,\"ts\":10.6,\"dur\":5.0,"
              "\"args\":{\"correlation\":1,\"stream\":7}},\n"
              "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":10,\"tid\":10,"
              "\"ts\":14.7,\"dur\":0.2,\"args\":{\"correlation\":2}},\n"
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"B\",\"pid\":0,\"tid\":7,\"ts\":15.4,\"dur\":2.2,"
              "\"args\":{\"correlation\":2,\"stream\":7}},\n"
              "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"Context Sync\",\"pid\":0,\"tid\":7,\"ts\":20.2,"
              "\"dur\":2.7,\"args\":{\"stream\":7}}");
  char *text = report_of(path, 0);
  yajl_val r = parse(text);
  yajl_val h = at(r, "hta", "temporal_breakdown", NULL);
  assert_int_equal(NUM(h, "kernel_time_ns"), 11000);
  assert_int_equal(NUM(h, "idle_time_ns"), 5000);
  assert_int_equal(NUM(h, "compute_time_ns"), 5000);
  assert_int_equal(NUM(h, "non_compute_time_ns"), 1000);
  yajl_val kt = at(r, "hta", "kernel_types", NULL);
  assert_int_equal(len_of(kt), 1); /* the sync is OTHER: in no kernel type */
  assert_int_equal(NUM(row(kt, "kernel_type", "COMPUTATION"), "sum_ns"), 5000);
  yajl_val it = at(r, "hta", "idle_time_breakdown", NULL);
  assert_int_equal(len_of(it), 2); /* stream 7: other (the first row), kernel_wait */
  assert_int_equal(NUM(row(it, "idle_category", "kernel_wait"), "idle_time_ns"), 1000);
  assert_int_equal(NUM(r, "hta", "launch_stats", "launches"), 2);
  assert_int_equal(NUM(r, "hta", "launch_stats", "launch_delay", "min_ns"), 2000);
  assert_int_equal(NUM(r, "hta", "launch_stats", "launch_delay", "max_ns"), 2000);
  assert_int_equal(NUM(r, "devices", "#0", "busy_ns"), 7000);
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* Two steps: by default HTA leaves the last out; with it in, device work
 * whose correlation id no kept call has is still left out (HTA keeps only
 * device events matched to a host event), while work without an id stays.
 *   step 1 [0,50): launch @10+2 (c1) -> k1 [20,30)
 *   step 2 [50,100): launch @60+2 (c2) -> k2 [70,80)
 *   k3 [85,90) c9 (no call), k4 [92,95) (no id) */
static void test_hta_last_step(void **state) {
  (void)state;
  char path[512];
  write_trace(path, sizeof path,
              "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":10,\"tid\":10,\"ts\":0,\"dur\":50},\n"
              "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":10,\"tid\":10,\"ts\":50,\"dur\":50},\n"
              "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":10,\"tid\":10,\"ts\":10,\"dur\":2,"
              "\"args\":{\"correlation\":1}},\n"
              "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":10,\"tid\":10,\"ts\":60,\"dur\":2,"
              "\"args\":{\"correlation\":2}},\n"
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k1\",\"pid\":0,\"tid\":7,\"ts\":20,\"dur\":10,\"args\":{\"correlation\":1,\"stream\":7}},\n"
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k2\",\"pid\":0,\"tid\":7,\"ts\":70,\"dur\":10,\"args\":{\"correlation\":2,\"stream\":7}},\n"
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k3\",\"pid\":0,\"tid\":7,\"ts\":85,\"dur\":5,\"args\":{\"correlation\":9,\"stream\":7}},\n"
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k4\",\"pid\":0,\"tid\":7,\"ts\":92,\"dur\":3,\"args\":{\"stream\":7}}");
  char *text = report_of(path, 0);
  yajl_val r = parse(text);
  assert_int_equal(NUM(r, "hta", "events"), 2); /* k1, k4 */
  yajl_tree_free(r);
  free(text);
  text = report_of(path, 1);
  r = parse(text);
  assert_int_equal(NUM(r, "hta", "events"), 3); /* k1, k2, k4: not k3 */
  assert_int_equal(NUM(r, "devices", "#0", "work"), 4); /* loom's own sections keep all */
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* A queue that holds only syncs has no work, so no start (null, not minus
 * the trace's start); a device of only syncs likewise. */
static void test_sync_only_queue(void **state) {
  (void)state;
  char path[512];
  write_trace(path, sizeof path,
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1694039968933321,\"dur\":10},\n"
              "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"Stream Sync\",\"pid\":0,\"tid\":9,\"ts\":1694039968933325,\"dur\":3}");
  char *text = report_of(path, 0);
  yajl_val r = parse(text);
  yajl_val qs = at(r, "devices", "#0", "queues", NULL);
  assert_int_equal(len_of(qs), 2);
  int nulls = 0;
  for (size_t i = 0; i < len_of(qs); i++) {
    yajl_val q = qs->u.array.values[i], s = at(q, "start_ns", NULL);
    if (NUM(q, "work") == 0) assert_true(s && YAJL_IS_NULL(s)), nulls++;
    else assert_true(NUM(q, "start_ns") >= 0);
  }
  assert_int_equal(nulls, 1);
  yajl_tree_free(r);
  free(text);
  unlink(path);
}

/* JSON that is valid but no trace gives the promised error, not a report. */
static void test_not_a_trace(void **state) {
  (void)state;
  static const char *const bodies[][2] = {
      {"{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[{\"name\":\"[pytorch|profiler|execution_trace|thread]\","
       "\"id\":2}]}", "no \"traceEvents\""},
      {"[[-1, 1, 37888, 7], [-1, 1, 512, 7]]", "holds lists"}};
  for (size_t i = 0; i < 2; i++) {
    char path[512];
    tmp_path(path, sizeof path, ".json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(bodies[i][0], f);
    assert_int_equal(fclose(f), 0);
    loom_report *r = NULL;
    assert_int_equal(loom_report_open(path, NULL, &r), LOOM_EFORMAT);
    assert_null(r);
    const char *e = loom_last_error();
    if (!strstr(e, path) || !strstr(e, "not a trace") || !strstr(e, bodies[i][1]))
      fail_msg("error for %s: %s", path, e);
    unlink(path);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_vendor),       cmocka_unit_test(test_device_work_by_flow),
      cmocka_unit_test(test_hta_rounding_and_syncs), cmocka_unit_test(test_hta_last_step),
      cmocka_unit_test(test_sync_only_queue),    cmocka_unit_test(test_not_a_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
