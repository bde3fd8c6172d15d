/*
 * test_vulkan.c - an unmodified Vulkan compute program (tests/vulkan/vkapp.c)
 * recorded by `loom record --devices cpu,vulkan` on Mesa's lavapipe: exactly
 * the dispatches, copies (by direction), fills, barriers, labels and
 * submissions it made, one flow from each submission's vkQueueSubmit to each
 * piece of its device work, every piece inside its submission's bracket
 * after clock conversion, a command buffer submitted again timed again, a
 * secondary command buffer's dispatch, the device's properties in the trace
 * and in `loom report`, every vkAllocateMemory and vkFreeMemory with its
 * bytes, heap and memory kind, no errors in trace_processor, and the
 * program's output unchanged.  Without a Vulkan driver, asking for vulkan warns why
 * and records the rest.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static int record_app(const char *env, const char *devices, const char *app, const char *args,
                      const char *trace, char **out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s '%s' record --devices %s -o '%s' -- '%s' %s 2>%s.err", env, LOOM_BIN,
           devices, trace, app, args, trace);
  return ts_run(cmd, out);
}

static int record(const char *env, const char *args, const char *trace, char **out) {
  return record_app(env, "cpu,vulkan", VKAPP, args, trace, out);
}

static void unlink_err(const char *trace) {
  char err[300];
  snprintf(err, sizeof err, "%s.err", trace);
  unlink(err);
}

typedef struct counts {
  size_t kernels, htod, dtoh, fills, barriers, submits, labels, submit_calls, named[3];
  int inside;   /* every device record with an id lies in its submission's bracket */
  int distinct; /* the rounds' dispatches each have their own times */
} counts;

/* The layer's bracket of a submission: a device range named "submit". */
static int is_submit(const loom_event_view *e) {
  return e->device != UINT32_MAX && e->kind == LOOM_KIND_USER_RANGE && !strcmp(e->name, "submit");
}

static counts inspect(const loom_trace *t) {
  counts c = {.inside = 1, .distinct = 1};
  static const char *const kn[3] = {"scale", "offset", "mix"};
  size_t n = loom_trace_event_count(t);
  loom_event_view *v = calloc(n + 1, sizeof *v);
  for (size_t i = 0; i < n; i++) {
    v[i].struct_size = sizeof v[i];
    loom_trace_event(t, i, &v[i]);
    const loom_event_view *e = &v[i];
    int dev = e->device != UINT32_MAX;
    if (dev && e->kind == LOOM_KIND_KERNEL) {
      c.kernels++;
      for (int k = 0; k < 3; k++) c.named[k] += !strcmp(e->name, kn[k]);
    }
    c.fills += dev && e->kind == LOOM_KIND_MEMSET;
    c.barriers += dev && !strcmp(e->category, "vulkan_sync");
    int range = dev && e->kind == LOOM_KIND_USER_RANGE && !e->projected;
    c.submits += range && is_submit(e);
    c.labels += range && !is_submit(e);
    c.submit_calls += !dev && !strncmp(e->name, "vkQueueSubmit", 13); /* and vkQueueSubmit2 */
  }
  for (size_t i = 0; i < n; i++) {
    const loom_event_view *e = &v[i];
    if (e->device == UINT32_MAX || !e->correlation || is_submit(e)) continue;
    size_t found = 0;
    for (size_t k = 0; k < n; k++) {
      const loom_event_view *s = &v[k];
      if (!is_submit(s) || s->correlation != e->correlation) continue;
      found++;
      if (e->start_ns < s->start_ns || e->start_ns + e->dur_ns > s->start_ns + s->dur_ns) c.inside = 0;
    }
    if (found != 1) c.inside = 0;
    for (size_t k = 0; k < i; k++)
      if (v[k].device != UINT32_MAX && !strcmp(v[k].name, e->name) && v[k].start_ns == e->start_ns)
        c.distinct = 0;
  }
  free(v);
  return c;
}

static size_t copies(const char *trace, const char *dir) {
  char q[256];
  snprintf(q, sizeof q, "select count(*) from slice join args using(arg_set_id) where slice.category = "
           "'gpu_memcpy' and args.key = 'args.direction' and args.string_value = '%s'", dir);
  return (size_t)tp_int(trace, q);
}

static void test_recorded(void **state) {
  (void)state;
  tp_require();
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record("", "3", trace, NULL), 0);
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  /* 1 + 2 per round + 1 (the secondary), 1 copy up and 1 down per round + 1 */
  assert_int_equal(c.kernels, 8);
  assert_int_equal(c.named[0], 2);
  assert_int_equal(c.named[1], 3);
  assert_int_equal(c.named[2], 3);
  assert_int_equal(c.fills, 1);
  assert_int_equal(c.barriers, 8);
  assert_int_equal(c.submits, 5);
  assert_int_equal(c.submit_calls, 5);
  assert_int_equal(c.labels, 5); /* upload, scale, round x3 */
  assert_true(c.inside);
  assert_true(c.distinct);
  /* every piece of device work and every bracket has its flow */
  assert_int_equal(loom_trace_flow_count(t), 8 + 5 + 1 + 8 + 5);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.devices, 1);
  assert_int_equal(s.dropped, 0);
  assert_int_equal(loom_trace_warning_count(t), 0);
  assert_true(ts_saved_contains(t, "calibrated timestamps"));
  assert_true(ts_saved_contains(t, "llvmpipe"));
  loom_trace_free(t);
  const char *q[] = {"select count(*) from flow",
                     "select count(*) from slice where category = 'kernel'",
                     "select count(*) from slice where category = 'gpu_memset'",
                     "select count(*) from slice where category = 'gpu_user_annotation' and name = 'submit'",
                     "select count(*) from thread where name = 'queue 0.0'",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[6];
  tp_ints(trace, q, r, 6);
  assert_int_equal(r[0], 27);
  assert_int_equal(r[1], 8);
  assert_int_equal(r[2], 1);
  assert_int_equal(r[3], 5);
  assert_int_equal(r[4], 1);
  assert_int_equal(r[5], 0);
  assert_int_equal(copies(trace, "HtoD"), 1);
  assert_int_equal(copies(trace, "DtoH"), 4);
  /* loom report names the device like any other */
  char cmd[1024], *out = NULL;
  snprintf(cmd, sizeof cmd, "'%s' report '%s'", LOOM_BIN, trace);
  assert_int_equal(ts_run(cmd, &out), 0);
  assert_non_null(strstr(out, "   0 vulkan 0 "));
  assert_non_null(strstr(out, "   1   queue 0.0 "));
  assert_non_null(strstr(out, "  scale      2 "));
  assert_non_null(strstr(out, "  DtoH          4 65536 "));
  free(out);
  unlink_err(trace);
  unlink(trace);
}

/* More instances and devices than the layer's table has slots (64), alive
 * at once and each used: the program runs as without loom (the layer once
 * forgot the 65th and the program crashed in its next call), and the real
 * work after them is recorded exactly. */
static void test_many_instances_and_devices(void **state) {
  (void)state;
  char trace[256], cmd[1024], *plain = NULL, *recorded = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' 3 churn", VKAPP);
  assert_int_equal(ts_run(cmd, &plain), 0);
  if (strstr(plain, "no Vulkan")) skip();
  assert_int_equal(record("", "3 churn", trace, &recorded), 0);
  assert_string_equal(plain, recorded);
  assert_non_null(strstr(plain, "churned 70 instances and 70 devices"));
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  assert_int_equal(c.kernels, 8);
  assert_int_equal(c.submits, 5);
  assert_true(c.inside);
  loom_trace_free(t);
  free(plain);
  free(recorded);
  unlink_err(trace);
  unlink(trace);
}

static void test_same_output(void **state) {
  (void)state;
  char trace[256], cmd[1024], *plain = NULL, *recorded = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' 5", VKAPP);
  assert_int_equal(ts_run(cmd, &plain), 0);
  assert_int_equal(record("", "5", trace, &recorded), 0);
  assert_string_equal(plain, recorded);
  assert_non_null(strstr(plain, "final:"));
  free(plain);
  free(recorded);
  unlink_err(trace);
  unlink(trace);
}

static void test_no_driver(void **state) {
  (void)state;
  char trace[256], err[300], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record("VK_ICD_FILENAMES=/nonexistent/icd.json", "2", trace, &out), 0);
  assert_non_null(strstr(out, "no Vulkan"));
  free(out);
  loom_trace *t = ts_load(trace);
  assert_true(ts_warned(t, "backend 'vulkan' is unavailable", "VK_ICD_FILENAMES=/nonexistent/icd.json"));
  counts c = inspect(t);
  assert_int_equal(c.kernels + c.submits, 0);
  loom_trace_free(t);
  snprintf(err, sizeof err, "%s.err", trace);
  char *msg = read_file(err, NULL);
  assert_non_null(msg);
  assert_non_null(strstr(msg, "no Vulkan driver"));
  free(msg);
  unlink(err);
  unlink(trace);
}

/* The "images" submission: each transfer that touches an image, with its
 * bytes (64x64 RGBA8: 16384; the blit writes 32x32: 4096), texels and
 * direction, as trace_processor reads them; one flow from the submit to
 * each; loom report's transfers count them by direction; the program's
 * output unchanged. */
/* The memory records of a trace against what vkapp says it allocated per
 * heap and memory kind ("memory heap H KIND: N allocations, B bytes, all
 * freed"): the same allocations and frees, the same bytes, on the host
 * thread, each with its device; trace_processor reads as many. */
static void check_memory(const char *trace, const char *out) {
  unsigned long long want[8][3][2] = {{{0}}}, got[8][3][4] = {{{0}}}, total = 0, bytes = 0;
  static const char *const kinds[3] = {"device", "host_pinned", "shared"};
  for (const char *p = strstr(out, "memory heap "); p; p = strstr(p + 1, "memory heap ")) {
    unsigned h;
    char kind[16];
    unsigned long long n, b;
    assert_int_equal(sscanf(p, "memory heap %u %15[a-z_]: %llu allocations, %llu bytes", &h, kind,
                            &n, &b), 4);
    for (int k = 0; k < 3; k++)
      if (h < 8 && !strcmp(kind, kinds[k])) want[h][k][0] = n, want[h][k][1] = b;
    total += n, bytes += b;
  }
  assert_int_equal(total, 5); /* three buffers, two images */
  loom_trace *t = ts_load(trace);
  size_t others = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    loom_arg a[8];
    size_t na = loom_trace_event_args(t, i, a, 8);
    long long heap = -1, b = -1, device = -1;
    int k = -1;
    for (size_t j = 0; j < na && j < 8; j++) {
      long long x = a[j].type == LOOM_ARG_INT ? a[j].v.i : (long long)a[j].v.u;
      if (!strcmp(a[j].key, "heap")) heap = x;
      if (!strcmp(a[j].key, "bytes")) b = x;
      if (!strcmp(a[j].key, "device")) device = x;
      for (int m = 0; m < 3 && !strcmp(a[j].key, "memory_kind"); m++)
        if (!strcmp(a[j].v.s, kinds[m])) k = m;
    }
    if (v.kind != LOOM_KIND_MEMORY) continue;
    int is_free = !strcmp(v.name, "vkFreeMemory");
    if (k < 0 || heap < 0 || heap >= 8 || b < 0 || device < 0 || v.device != UINT32_MAX ||
        (!is_free && strcmp(v.name, "vkAllocateMemory"))) {
      others++;
      continue;
    }
    got[heap][k][is_free * 2]++;
    got[heap][k][is_free * 2 + 1] += (unsigned long long)b;
  }
  loom_trace_free(t);
  assert_int_equal(others, 0);
  for (int h = 0; h < 8; h++)
    for (int k = 0; k < 3; k++)
      if (got[h][k][0] != want[h][k][0] || got[h][k][1] != want[h][k][1] ||
          got[h][k][2] != want[h][k][0] || got[h][k][3] != want[h][k][1])
        fail_msg("heap %d %s: %llu allocations of %llu bytes and %llu frees of %llu, not %llu "
                 "of %llu", h, kinds[k], got[h][k][0], got[h][k][1], got[h][k][2], got[h][k][3],
                 want[h][k][0], want[h][k][1]);
  const char *q[] = {
      "select count(*) from slice s join args c on c.arg_set_id = s.arg_set_id and c.key = "
      "'args.loom_call' and c.string_value = 'vkAllocateMemory' join args h on h.arg_set_id = "
      "s.arg_set_id and h.key = 'args.heap' where s.name = '[memory]'",
      "select count(*) from slice s join args c on c.arg_set_id = s.arg_set_id and c.key = "
      "'args.loom_call' and c.string_value = 'vkFreeMemory' join args h on h.arg_set_id = "
      "s.arg_set_id and h.key = 'args.heap' where s.name = '[memory]'",
      ("select sum(b.int_value) from slice s join args b on b.arg_set_id = s.arg_set_id and "
       "b.key = 'args.Bytes' where s.name = '[memory]' and b.int_value > 0")};
  long long r[3];
  tp_ints(trace, q, r, 3);
  assert_int_equal(r[0], 5);
  assert_int_equal(r[1], 5);
  assert_int_equal(r[2], (long long)bytes);
}

static void test_image_transfers(void **state) {
  (void)state;
  tp_require();
  char trace[256], cmd[1024], *plain = NULL, *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' 1 images", VKAPP);
  assert_int_equal(ts_run(cmd, &plain), 0);
  assert_int_equal(record("", "1 images", trace, &out), 0);
  assert_string_equal(plain, out);
  assert_non_null(strstr(out, "images:"));
  free(plain);
  char *printed = out; /* what it allocated, for check_memory */
  char copy2[32];
  loom_trace *t = ts_load(trace);
  snprintf(copy2, sizeof copy2, "%s", ts_saved_contains(t, "\"Vulkan version\":\"1.3") ? "vkCmdCopyImage2"
                                                                                      : "vkCmdCopyImage");
  loom_trace_free(t);
  static const struct { const char *name, *cat, *dir; long long bytes, texels; } want[] = {
      {"vkCmdClearColorImage", "gpu_memset", "DtoD", 16384, 4096},
      {"vkCmdCopyBufferToImage", "gpu_memcpy", "HtoD", 16384, 4096},
      {NULL, "gpu_memcpy", "DtoD", 16384, 4096}, /* copy2 */
      {"vkCmdBlitImage", "gpu_memcpy", "DtoD", 4096, 1024},
      {"vkCmdCopyImageToBuffer", "gpu_memcpy", "DtoH", 16384, 4096}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *name = want[i].name ? want[i].name : copy2;
    char q[3][512];
    const char *qs[3] = {q[0], q[1], q[2]};
    snprintf(q[0], sizeof q[0], "select count(*) from slice where name = '%s' and category = '%s'", name,
             want[i].cat);
    snprintf(q[1], sizeof q[1], "select count(*) from slice join args using(arg_set_id) where name = '%s' and "
             "((args.key = 'args.bytes' and args.int_value = %lld) or (args.key = 'args.texels' and "
             "args.int_value = %lld) or (args.key = 'args.direction' and args.string_value = '%s'))",
             name, want[i].bytes, want[i].texels, want[i].dir);
    snprintf(q[2], sizeof q[2], "select count(*) from flow join slice on flow.slice_in = slice.id where "
             "slice.name = '%s'", name);
    long long r[3];
    tp_ints(trace, qs, r, 3);
    if (r[0] != 1 || r[1] != 3 || r[2] != 1) fail_msg("%s: %lld slices, %lld of its 3 arguments right, %lld flows",
                                                      name, r[0], r[1], r[2]);
  }
  assert_int_equal(tp_errors(trace), 0);
  check_memory(trace, printed);
  free(printed);
  snprintf(cmd, sizeof cmd, "'%s' report '%s'", LOOM_BIN, trace);
  assert_int_equal(ts_run(cmd, &out), 0);
  /* buffer copies: 1 HtoD, 2 DtoH (a round and the last); the images add 1
   * HtoD (buffer to image), 2 DtoD (the copy, the blit) and 1 DtoH */
  assert_non_null(strstr(out, "  HtoD          2 32768 "));
  assert_non_null(strstr(out, "  DtoH          3 49152 "));
  assert_non_null(strstr(out, "  DtoD          2 20480 "));
  free(out);
  unlink_err(trace);
  unlink(trace);
}

#ifdef VKAPP_CL
/* OpenCL work before and after the Vulkan part of one process: both devices
 * in one trace, in that order on the one timeline. */
static void test_opencl_and_vulkan(void **state) {
  (void)state;
  char trace[256], *plain = NULL, *out = NULL, cmd[1024];
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' 2", VKAPP_CL);
  assert_int_equal(ts_run(cmd, &plain), 0);
  assert_int_equal(record_app("", "cpu,opencl,vulkan", VKAPP_CL, "2", trace, &out), 0);
  assert_string_equal(plain, out);
  free(plain);
  free(out);
  loom_trace *t = ts_load(trace);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.devices, 2);
  assert_int_equal(loom_trace_warning_count(t), 0);
  int64_t cl_start[2] = {0, 0}, cl_end[2] = {0, 0}, vk_first = INT64_MAX, vk_last = 0;
  size_t ncl = 0, nvk = 0;
  uint32_t cl_dev = UINT32_MAX, vk_dev = UINT32_MAX;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.device == UINT32_MAX || v.kind != LOOM_KIND_KERNEL) continue;
    if (!strcmp(v.name, "twice")) {
      if (ncl < 2) cl_start[ncl] = v.start_ns, cl_end[ncl] = v.start_ns + v.dur_ns;
      ncl++;
      cl_dev = v.device;
    } else {
      nvk++;
      vk_dev = v.device;
      if (v.start_ns < vk_first) vk_first = v.start_ns;
      if (v.start_ns + v.dur_ns > vk_last) vk_last = v.start_ns + v.dur_ns;
    }
  }
  assert_int_equal(ncl, 2);
  assert_int_equal(nvk, 6); /* 1 + 2 per round + 1 */
  assert_true(cl_dev != vk_dev);
  if (cl_start[0] > cl_start[1]) { /* events are ordered by track first */
    int64_t a = cl_start[0], b = cl_end[0];
    cl_start[0] = cl_start[1], cl_end[0] = cl_end[1], cl_start[1] = a, cl_end[1] = b;
  }
  assert_true(cl_end[0] < vk_first);
  assert_true(vk_last < cl_start[1]);
  /* each runtime's memory on its own device: the OpenCL buffer of each
   * step (made and released), the three Vulkan buffers */
  size_t cl_mem = 0, vk_mem = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    loom_arg a[8];
    size_t na = loom_trace_event_args(t, i, a, 8);
    for (size_t j = 0; j < na && j < 8; j++)
      if (!strcmp(a[j].key, "device") && v.device == UINT32_MAX) {
        cl_mem += !strncmp(v.name, "cl", 2) && a[j].v.i == (int64_t)cl_dev;
        vk_mem += !strncmp(v.name, "vk", 2) && a[j].v.i == (int64_t)vk_dev;
      }
  }
  assert_int_equal(cl_mem, 4);
  assert_int_equal(vk_mem, 6);
  loom_trace_free(t);
  assert_int_equal(tp_errors(trace), 0);
  unlink_err(trace);
  unlink(trace);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recorded),
      cmocka_unit_test(test_same_output), cmocka_unit_test(test_many_instances_and_devices),
      cmocka_unit_test(test_no_driver),
      cmocka_unit_test(test_image_transfers),
#ifdef VKAPP_CL
      cmocka_unit_test(test_opencl_and_vulkan),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
