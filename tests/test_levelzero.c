/*
 * test_levelzero.c - the Level Zero backend (libloom-levelzero.so) without an
 * Intel GPU: the REAL loader (libze_loader) and its tracing layer, with a
 * fake driver (tests/levelzero/fakedriver.c) loaded through
 * ZE_ENABLE_ALT_DRIVERS.  Modes:
 *   record    `loom record` of an unmodified program (tests/levelzero/zeapp.c):
 *             exactly its kernels (names, group counts and sizes), copies
 *             (bytes, direction), fills, barriers and runtime calls, a flow
 *             per command, device times (offset + 500 ppm drift, 32-bit
 *             kernel timestamps) inside their host brackets within 1 us,
 *             named queue/list tracks, its device buffer's allocation and
 *             free ([memory] events), trace_processor counts, no errors;
 *             identical program output with and without loom.
 *   late      "xpu" asked for with the plug-in absent (the warning says how
 *             to load plug-ins), then the plug-in dlopen()ed during a session
 *             registers itself and the NEXT session records this process's
 *             own Level Zero work.
 *             The regular list run three times: every run recorded.
 *   memory    this process's own allocations in a session: device, host and
 *             shared memory (with and without a device) as memory records
 *             with exact addresses, bytes, kinds and device; frees with the
 *             size and kind the driver knew, also of memory allocated before
 *             the session; a failed allocation gives its call and no record.
 *   nodriver  the plug-in loaded, no driver: unavailable, with zeInit's result.
 *   notracing a driver but no ZE_ENABLE_TRACING_LAYER: unavailable, saying so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <level_zero/ze_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

typedef struct counts {
  size_t kernels, scale, square, copies, fills, barriers, calls, syncs, flows;
  size_t allocs, frees; /* memory events */
  uint64_t alloc_bytes;
  size_t inside_call, after_call; /* device work within its call / after it */
  int brackets_ok;
  int marks_ok; /* append calls are marked for loom report by what they append */
} counts;

static counts inspect(loom_trace *t) {
  counts c = {0};
  c.brackets_ok = 1;
  c.marks_ok = 1;
  int64_t last_host_end = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind == LOOM_KIND_KERNEL) {
      c.kernels++;
      c.scale += !strcmp(v.name, "scale");
      c.square += !strcmp(v.name, "square");
    }
    if (v.kind == LOOM_KIND_MEMORY) {
      loom_arg a[16];
      size_t na = loom_trace_event_args(t, i, a, 16);
      for (size_t k = 0; k < na && k < 16; k++)
        if (!strcmp(a[k].key, "bytes") && (v.roles & LOOM_RECORD_F_ALLOC)) c.alloc_bytes += a[k].v.u;
      c.allocs += (v.roles & LOOM_RECORD_F_ALLOC) && !strcmp(v.name, "zeMemAllocDevice");
      c.frees += (v.roles & LOOM_RECORD_F_FREE) && !strcmp(v.name, "zeMemFree");
    }
    c.copies += v.kind == LOOM_KIND_MEMCPY;
    c.fills += v.kind == LOOM_KIND_MEMSET;
    c.barriers += v.kind == LOOM_KIND_SYNC && v.device != UINT32_MAX;
    if (!strcmp(v.category, "xpu_runtime")) c.calls++;
    if (!strcmp(v.category, "xpu_sync") && v.device == UINT32_MAX) c.syncs++;
    if ((!strcmp(v.category, "xpu_runtime") || !strcmp(v.category, "xpu_sync")) &&
        v.start_ns + v.dur_ns > last_host_end)
      last_host_end = v.start_ns + v.dur_ns;
  }
  c.flows = loom_trace_flow_count(t);
  for (size_t i = 0; i < c.flows; i++) {
    loom_event_view call, work;
    ts_flow(t, i, &call, &work);
    /* Work starts after its append call began and ends before the host's
     * last call returned: 1 us of slack for the clock conversion. */
    if (work.start_ns < call.start_ns - 1000 || work.start_ns + work.dur_ns > last_host_end + 1000 ||
        strcmp(call.category, "xpu_runtime") || work.device == UINT32_MAX || work.dur_ns < 1000) {
      fprintf(stderr, "bracket: %s [%lld +%lld] from %s [%lld +%lld], last host end %lld\n", work.name,
              (long long)work.start_ns, (long long)work.dur_ns, call.name, (long long)call.start_ns,
              (long long)call.dur_ns, (long long)last_host_end);
      c.brackets_ok = 0;
    }
    unsigned want = work.kind == LOOM_KIND_KERNEL ? LOOM_RECORD_F_LAUNCH
                  : work.kind == LOOM_KIND_MEMCPY || work.kind == LOOM_KIND_MEMSET ? LOOM_RECORD_F_MEMORY : 0;
    if (call.roles != want || work.roles) c.marks_ok = 0;
    if (work.start_ns >= call.start_ns - 1000 && work.start_ns + work.dur_ns <= call.start_ns + call.dur_ns + 1000)
      c.inside_call++;
    else if (work.start_ns >= call.start_ns + call.dur_ns)
      c.after_call++;
  }
  return c;
}

static void test_record(void **state) {
  (void)state;
  char trace[256], cmd[2048], *plain = NULL, *recorded = NULL;
  tmp_path(trace, sizeof trace, ".json");
  /* 150 ms before and after the work: 500 ppm of drift is 75 us there, so
   * only the sync points at start and stop keep the work inside its calls. */
  snprintf(cmd, sizeof cmd, "'%s' 3 150", ZEAPP);
  assert_int_equal(ts_run(cmd, &plain), 0);
  snprintf(cmd, sizeof cmd, "'%s' record --devices cpu,xpu -o '%s' -- '%s' 3 150", LOOM_BIN, trace, ZEAPP);
  assert_int_equal(ts_run(cmd, &recorded), 0);
  assert_string_equal(plain, recorded); /* the program sees no difference */
  free(plain);
  free(recorded);

  loom_trace *t = ts_load(trace);
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    fprintf(stderr, "warning: %s\n", loom_trace_warning(t, i));
  counts c = inspect(t);
  /* immediate: copy, 3 x scale, fill, barrier, copy;
   * regular: copy, square, scale (own event), fill, barrier, copy */
  assert_int_equal(c.kernels, 5);
  assert_int_equal(c.scale, 4);
  assert_int_equal(c.square, 1);
  assert_int_equal(c.copies, 4);
  assert_int_equal(c.fills, 2);
  assert_int_equal(c.barriers, 2);
  assert_int_equal(c.flows, 13);
  assert_int_equal(c.syncs, 2); /* zeEventHostSynchronize, zeCommandQueueSynchronize */
  /* its one device buffer: allocated and freed */
  assert_int_equal(c.allocs, 1);
  assert_int_equal(c.frees, 1);
  assert_int_equal(c.alloc_bytes, 16384);
  /* every traced call zeapp makes (zeInit, zeDriverGet and zeDeviceGet are
   * not traced by this backend; the two host syncs are xpu_sync) */
  assert_int_equal(c.calls, 39);
  assert_true(c.brackets_ok);
  assert_true(c.marks_ok);
  /* The fake device runs immediate commands inside their append call, so
   * after the conversion (7e12 offset, 500 ppm drift, 32-bit kernel
   * timestamps) each lies inside its call within 1 us; the regular list's 6
   * run later, at zeCommandQueueExecuteCommandLists. */
  assert_int_equal(c.inside_call, 7);
  assert_int_equal(c.after_call, 6);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.devices, 1);
  assert_int_equal(s.dropped, 0);
  assert_int_equal(loom_trace_warning_count(t), 0);

  const char *q[] = {
      "select count(*) from slice",
      "select count(*) from flow",
      "select count(*) from slice where category = 'kernel'",
      "select count(*) from thread where name like 'immediate list %'",
      "select count(*) from thread where name like 'command queue %'",
      "select count(*) from slice join args using(arg_set_id) where slice.name = 'scale' and "
      "args.key = 'args.group count' and args.display_value = '[64, 1, 1]'",
      "select count(*) from slice join args using(arg_set_id) where slice.name = 'scale' and "
      "args.key = 'args.group size' and args.display_value = '[64, 1, 1]'",
      "select count(*) from slice join args using(arg_set_id) where slice.name = 'square' and "
      "args.key = 'args.group size' and args.display_value = '[32, 2, 1]'",
      "select count(*) from slice join args using(arg_set_id) where slice.category = 'gpu_memcpy' "
      "and args.key = 'args.bytes' and args.int_value = 16384",
      "select count(*) from slice join args using(arg_set_id) where slice.category = 'gpu_memcpy' "
      "and args.key = 'args.direction' and args.display_value = 'HtoD'",
      "select count(*) from slice join args using(arg_set_id) where slice.category = 'gpu_memcpy' "
      "and args.key = 'args.direction' and args.display_value = 'DtoH'",
      "select count(*) from slice join args using(arg_set_id) where slice.category = 'gpu_memset' "
      "and args.key = 'args.bytes' and args.int_value in (1024, 512)",
      "select count(*) from slice where category = 'xpu_runtime'",
      "select count(*) from stats where value > 0 and severity in ('error','data_loss')",
      "select count(*) from slice join args using(arg_set_id) where slice.name = '[memory]' and "
      "args.key = 'args.Bytes' and args.int_value in (16384, -16384)",
      "select count(*) from slice join args using(arg_set_id) where slice.name = '[memory]' and "
      "args.key = 'args.loom_call' and args.display_value in ('zeMemAllocDevice', 'zeMemFree')"};
  long long r[16];
  tp_ints(trace, q, r, 16);
  assert_int_equal(r[0], (long long)loom_trace_event_count(t) + 1);
  assert_int_equal(r[1], 13);
  assert_int_equal(r[2], 5);
  assert_int_equal(r[3], 1);
  assert_int_equal(r[4], 1);
  assert_int_equal(r[5], 4);
  assert_int_equal(r[6], 4);
  assert_int_equal(r[7], 1);
  assert_int_equal(r[8], 4);
  assert_int_equal(r[9], 2);
  assert_int_equal(r[10], 2);
  assert_int_equal(r[11], 2);
  assert_int_equal(r[12], 39);
  assert_int_equal(r[13], 0);
  assert_int_equal(r[14], 2); /* Kineto's [memory]: +16384, then -16384 */
  assert_int_equal(r[15], 2);
  loom_trace_free(t);
  unlink(trace);
}

/* Default devices (xpu is in them where ZE_ENABLE_ALT_DRIVERS names a driver).
 * The regular list executed three times (the program resets its own event
 * between runs): every run's commands, each with its flow. */
static void test_rerun(void **state) {
  (void)state;
  char trace[256], cmd[2048];
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' 2 0 3", LOOM_BIN, trace, ZEAPP);
  assert_int_equal(ts_run(cmd, NULL), 0);
  loom_trace *t = ts_load(trace);
  counts c = inspect(t);
  assert_int_equal(c.kernels, 2 + 2 * 3);
  assert_int_equal(c.copies, 2 + 2 * 3);
  assert_int_equal(c.fills, 1 + 3);
  assert_int_equal(c.barriers, 1 + 3);
  assert_int_equal(c.flows, 6 + 6 * 3);
  assert_int_equal(c.syncs, 2 * 3);
  assert_true(c.brackets_ok);
  assert_true(c.marks_ok);
  assert_int_equal(c.inside_call, 6);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.dropped, 0);
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
  unlink(trace);
}

/* This process's own Level Zero work (immediate list: copy, kernel). */
static void own_work(void) {
  assert_int_equal(zeInit(0), ZE_RESULT_SUCCESS);
  uint32_t n = 1;
  ze_driver_handle_t drv;
  assert_int_equal(zeDriverGet(&n, &drv), ZE_RESULT_SUCCESS);
  ze_device_handle_t dev;
  n = 1;
  assert_int_equal(zeDeviceGet(drv, &n, &dev), ZE_RESULT_SUCCESS);
  ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
  ze_context_handle_t ctx;
  assert_int_equal(zeContextCreate(drv, &cd, &ctx), ZE_RESULT_SUCCESS);
  ze_module_desc_t md = {.stype = ZE_STRUCTURE_TYPE_MODULE_DESC};
  ze_module_handle_t mod;
  assert_int_equal(zeModuleCreate(ctx, dev, &md, &mod, NULL), ZE_RESULT_SUCCESS);
  ze_kernel_desc_t kd = {.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC, .pKernelName = "late_kernel"};
  ze_kernel_handle_t k;
  assert_int_equal(zeKernelCreate(mod, &kd, &k), ZE_RESULT_SUCCESS);
  ze_command_queue_desc_t qd = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                .mode = ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS};
  ze_command_list_handle_t imm;
  assert_int_equal(zeCommandListCreateImmediate(ctx, dev, &qd, &imm), ZE_RESULT_SUCCESS);
  char a[256] = "x", b[256];
  assert_int_equal(zeCommandListAppendMemoryCopy(imm, b, a, sizeof a, NULL, 0, NULL), ZE_RESULT_SUCCESS);
  ze_group_count_t g = {2, 1, 1};
  assert_int_equal(zeCommandListAppendLaunchKernel(imm, k, &g, NULL, 0, NULL), ZE_RESULT_SUCCESS);
  assert_int_equal(zeCommandListDestroy(imm), ZE_RESULT_SUCCESS);
  assert_int_equal(zeKernelDestroy(k), ZE_RESULT_SUCCESS);
  assert_int_equal(zeModuleDestroy(mod), ZE_RESULT_SUCCESS);
  assert_int_equal(zeContextDestroy(ctx), ZE_RESULT_SUCCESS);
}

static void test_late(void **state) {
  (void)state;
  /* "xpu" without the plug-in: the warning tells how to load plug-ins. */
  loom_session *s = ts_start("cpu,xpu", NULL);
  loom_trace *t = ts_finish(s);
  assert_true(ts_warned(t, "device 'xpu' requested but no backend", "LOOM_PLUGINS"));
  assert_true(ts_warned(t, "LOOM_PLUGIN_PATH", NULL));
  loom_trace_free(t);
  /* Loaded while a session records, it joins that session at once (and
   * takes part in the next one too). */
  s = ts_start("cpu,xpu", NULL);
  void *h = dlopen(LEVELZERO_PLUGIN, RTLD_NOW | RTLD_LOCAL); /* constructor registers */
  assert_non_null(h);
  own_work();
  t = ts_finish(s);
  assert_false(ts_warned(t, "device 'xpu' requested", NULL));
  assert_int_equal(inspect(t).kernels, 1);
  assert_true(ts_saved_contains(t, "joined the session at"));
  loom_trace_free(t);
  s = ts_start("cpu,xpu", NULL);
  own_work();
  t = ts_finish(s);
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    fprintf(stderr, "warning: %s\n", loom_trace_warning(t, i));
  assert_int_equal(loom_trace_warning_count(t), 0);
  counts c = inspect(t);
  assert_int_equal(c.kernels, 1);
  assert_int_equal(c.copies, 1);
  assert_int_equal(c.flows, 2);
  assert_true(c.brackets_ok);
  assert_true(c.marks_ok);
  assert_int_equal(c.inside_call, 2);
  size_t named = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    named += v.kind == LOOM_KIND_KERNEL && !strcmp(v.name, "late_kernel");
  }
  assert_int_equal(named, 1);
  loom_trace_free(t);
}

/* ---- memory ---------------------------------------------------------------- */
typedef struct memrec {
  const char *name, *kind;
  uint64_t addr, bytes;
  int has_device;
  int64_t device, tid;
} memrec;

/* The memory records of t in time order (at most max). */
static size_t memory_records(const loom_trace *t, memrec *out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t) && n < max; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind != LOOM_KIND_MEMORY) continue;
    memrec m = {.name = v.name, .kind = "", .tid = v.tid};
    loom_arg a[16];
    size_t na = loom_trace_event_args(t, i, a, 16);
    for (size_t k = 0; k < na && k < 16; k++) {
      if (!strcmp(a[k].key, "addr")) m.addr = a[k].v.u;
      if (!strcmp(a[k].key, "bytes")) m.bytes = a[k].v.u;
      if (!strcmp(a[k].key, "memory_kind")) m.kind = a[k].v.s;
      if (!strcmp(a[k].key, "device")) m.has_device = 1, m.device = a[k].v.i;
    }
    out[n++] = m;
  }
  return n;
}

static const memrec *find_mem(const memrec *m, size_t n, const char *name, const void *p) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(m[i].name, name) && m[i].addr == (uint64_t)(uintptr_t)p) return &m[i];
  return NULL;
}

static void check_mem(const memrec *m, const char *kind, uint64_t bytes, int has_device) {
  assert_non_null(m);
  assert_string_equal(m->kind, kind);
  assert_int_equal(m->bytes, bytes);
  assert_int_equal(m->has_device, has_device);
  assert_int_equal(m->tid, (int64_t)syscall(SYS_gettid));
}

static void test_memory(void **state) {
  (void)state;
  assert_int_equal(zeInit(0), ZE_RESULT_SUCCESS);
  uint32_t n = 1;
  ze_driver_handle_t drv;
  assert_int_equal(zeDriverGet(&n, &drv), ZE_RESULT_SUCCESS);
  ze_device_handle_t dev;
  n = 1;
  assert_int_equal(zeDeviceGet(drv, &n, &dev), ZE_RESULT_SUCCESS);
  ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
  ze_context_handle_t ctx;
  assert_int_equal(zeContextCreate(drv, &cd, &ctx), ZE_RESULT_SUCCESS);
  ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
  ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
  void *before, *d1, *d2, *h1, *h2, *s1, *s2, *fail = NULL;
  assert_int_equal(zeMemAllocDevice(ctx, &dd, 2048, 64, dev, &before), ZE_RESULT_SUCCESS);
  loom_session *s = ts_start("cpu,xpu", NULL);
  assert_int_equal(zeMemAllocDevice(ctx, &dd, 4096, 64, dev, &d1), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemAllocDevice(ctx, &dd, 8192, 64, dev, &d2), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemAllocHost(ctx, &hd, 1000, 64, &h1), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemAllocHost(ctx, &hd, 3000, 64, &h2), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemAllocShared(ctx, &dd, &hd, 12288, 64, dev, &s1), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemAllocShared(ctx, &dd, &hd, 20480, 64, NULL, &s2), ZE_RESULT_SUCCESS);
  assert_int_not_equal(zeMemAllocDevice(ctx, &dd, 1ull << 33, 64, dev, &fail), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemFree(ctx, d1), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemFree(ctx, h1), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemFree(ctx, s1), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemFree(ctx, s2), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemFree(ctx, before), ZE_RESULT_SUCCESS);
  loom_trace *t = ts_finish(s);
  assert_int_equal(zeMemFree(ctx, d2), ZE_RESULT_SUCCESS);
  assert_int_equal(zeMemFree(ctx, h2), ZE_RESULT_SUCCESS);
  assert_int_equal(zeContextDestroy(ctx), ZE_RESULT_SUCCESS);

  memrec m[64];
  size_t nm = memory_records(t, m, 64), allocs = 0, frees = 0;
  uint64_t abytes = 0, fbytes = 0;
  for (size_t i = 0; i < nm; i++) {
    int is_free = !strcmp(m[i].name, "zeMemFree");
    allocs += !is_free, frees += is_free;
    if (is_free) fbytes += m[i].bytes;
    else abytes += m[i].bytes;
  }
  assert_int_equal(allocs, 6); /* the failed one gives none */
  assert_int_equal(frees, 5);
  assert_int_equal(abytes, 4096 + 8192 + 1000 + 3000 + 12288 + 20480);
  assert_int_equal(fbytes, 4096 + 1000 + 12288 + 20480 + 2048);
  check_mem(find_mem(m, nm, "zeMemAllocDevice", d1), "device", 4096, 1);
  check_mem(find_mem(m, nm, "zeMemAllocDevice", d2), "device", 8192, 1);
  check_mem(find_mem(m, nm, "zeMemAllocHost", h1), "host_pinned", 1000, 0);
  check_mem(find_mem(m, nm, "zeMemAllocHost", h2), "host_pinned", 3000, 0);
  check_mem(find_mem(m, nm, "zeMemAllocShared", s1), "shared", 12288, 1);
  check_mem(find_mem(m, nm, "zeMemAllocShared", s2), "shared", 20480, 0);
  check_mem(find_mem(m, nm, "zeMemFree", d1), "device", 4096, 1);
  check_mem(find_mem(m, nm, "zeMemFree", h1), "host_pinned", 1000, 0);
  check_mem(find_mem(m, nm, "zeMemFree", s1), "shared", 12288, 1);
  check_mem(find_mem(m, nm, "zeMemFree", s2), "shared", 20480, 0);
  check_mem(find_mem(m, nm, "zeMemFree", before), "device", 2048, 1);
  /* one device: every record that names one names the same */
  for (size_t i = 0; i < nm; i++)
    if (m[i].has_device) assert_int_equal(m[i].device, find_mem(m, nm, "zeMemAllocDevice", d1)->device);
  /* each call keeps its runtime record, the failed one too */
  size_t calls = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    calls += v.kind == LOOM_KIND_RUNTIME && !strncmp(v.name, "zeMem", 5);
  }
  assert_int_equal(calls, 7 + 5);
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
}

static const char *expect_why = "zeInit failed: ZE_RESULT_ERROR_UNINITIALIZED";

static void test_no_driver(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,xpu", NULL);
  loom_op_begin("host::work", 1);
  loom_op_end();
  loom_trace *t = ts_finish(s);
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    fprintf(stderr, "warning: %s\n", loom_trace_warning(t, i));
  assert_true(ts_warned(t, "backend 'levelzero' is unavailable", expect_why));
  size_t ops = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    ops += v.kind == LOOM_KIND_CPU_OP;
  }
  assert_int_equal(ops, 1); /* the rest of the session goes on */
  loom_trace_free(t);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "record";
  if (!strcmp(mode, "late")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_late)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (!strcmp(mode, "memory")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_memory)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (!strcmp(mode, "notracing")) expect_why = "set ZE_ENABLE_TRACING_LAYER=1 before the program starts";
  if (!strcmp(mode, "nodriver") || !strcmp(mode, "notracing")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_driver)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_record), cmocka_unit_test(test_rerun)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
