/*
 * test_memory.c - memory records into the trace model (issue 36): the host
 * calls loom_memory_alloc/free (exact counts and bytes from several threads,
 * a deliberate leak, a free of an address never allocated, the op that
 * allocated, a pool's reserved bytes), a backend's memory records through
 * host->emit (kept with their device; bad ones refused with LOOM_EINVAL and
 * named in the trace's warnings; the op open on the thread as their
 * external id), and windows and ring dumps that start from what was live:
 * allocations made before appear at the start flagged "live_at_start".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* Memory events of a trace, added up. */
typedef struct mem_sum {
  size_t allocs, frees, live_at_start, with_ext, unknown_bytes;
  uint64_t alloc_bytes, free_bytes, live_bytes, reserved_max;
  int64_t first_live_ts, first_other_ts;
  size_t on_device;       /* events whose "device" is d_want */
  size_t named;           /* events named name_want */
} mem_sum;
static int64_t d_want = -2;
static const char *name_want = "[memory]";
static uint64_t ext_want;

static int arg_u(const loom_arg *a, size_t n, const char *key, uint64_t *v) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(a[i].key, key)) {
      *v = a[i].type == LOOM_ARG_INT ? (uint64_t)a[i].v.i : a[i].v.u;
      return 1;
    }
  return 0;
}

static mem_sum sum_memory(const loom_trace *t) {
  mem_sum m = {.first_live_ts = INT64_MAX, .first_other_ts = INT64_MAX};
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind != LOOM_KIND_MEMORY) continue;
    loom_arg a[16];
    size_t n = loom_trace_event_args(t, i, a, 16);
    uint64_t bytes = 0, live = 0, dev = 0, res = 0;
    int has_bytes = arg_u(a, n, "bytes", &bytes);
    assert_true(arg_u(a, n, "addr", &dev));
    assert_int_equal(v.phase, 'i');
    if (arg_u(a, n, "device", &dev) && (int64_t)dev == d_want) m.on_device++;
    if (arg_u(a, n, "reserved", &res) && res > m.reserved_max) m.reserved_max = res;
    arg_u(a, n, "live_at_start", &live);
    m.named += !strcmp(v.name, name_want);
    m.with_ext += ext_want && v.external_id == ext_want;
    if (v.roles & LOOM_RECORD_F_ALLOC) {
      assert_false(v.roles & LOOM_RECORD_F_FREE);
      assert_true(has_bytes);
      m.allocs++;
      m.alloc_bytes += bytes;
    } else {
      assert_true(v.roles & LOOM_RECORD_F_FREE);
      m.frees++;
      m.free_bytes += bytes;
      m.unknown_bytes += !has_bytes;
    }
    if (live) {
      m.live_at_start++;
      m.live_bytes += bytes;
      if (v.start_ns < m.first_live_ts) m.first_live_ts = v.start_ns;
    } else if (v.start_ns < m.first_other_ts) {
      m.first_other_ts = v.start_ns;
    }
  }
  return m;
}

/* Whether trace_processor is set up (LOOM_TP_DIR, as ctest sets it). */
static int tp_available_quiet(void) {
  const char *d = getenv("LOOM_TP_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/trace_processor.wasm", d ? d : "");
  return d && *d && access(path, R_OK) == 0;
}

/* ---- the host calls ------------------------------------------------------ */
enum { THREADS = 3, ALLOCS = 1000 };

/* Thread k allocates ALLOCS blocks of k*1000+i bytes inside op 100+k and
 * frees all but the last (a leak of one block per thread). */
static void *alloc_worker(void *arg) {
  uint64_t k = (uint64_t)(uintptr_t)arg;
  loom_op_begin("alloc_op", 100 + k);
  for (uint64_t i = 0; i < ALLOCS; i++)
    loom_memory_alloc((k << 32) + i * 64, k * 1000 + i, LOOM_MEMORY_HOST, -1, 0);
  loom_op_end();
  for (uint64_t i = 0; i + 1 < ALLOCS; i++)
    loom_memory_free((k << 32) + i * 64, 0, LOOM_MEMORY_HOST, -1, 0);
  return NULL;
}

static void test_host_calls(void **state) {
  (void)state;
  loom_memory_alloc(1, 1, LOOM_MEMORY_HOST, -1, 0); /* no session: nothing */
  loom_session *s = ts_start("cpu", "");
  pthread_t th[THREADS];
  for (int k = 0; k < THREADS; k++)
    pthread_create(&th[k], NULL, alloc_worker, (void *)(uintptr_t)(k + 1));
  for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
  loom_memory_free(0xdead0000, 0, LOOM_MEMORY_HOST, -1, 0); /* never allocated */
  loom_op_begin("pool_op", 7);
  loom_memory_alloc(0x5000, 512, LOOM_MEMORY_POOL, 2, 2 << 20);
  loom_memory_free(0x5000, 512, LOOM_MEMORY_POOL, 2, 2 << 20);
  loom_op_end();
  loom_trace *t = ts_finish(s);
  d_want = 2;
  ext_want = 7;
  mem_sum m = sum_memory(t);
  assert_int_equal(m.allocs, THREADS * ALLOCS + 1);
  assert_int_equal(m.frees, THREADS * (ALLOCS - 1) + 2);
  uint64_t want = 512;
  for (uint64_t k = 1; k <= THREADS; k++)
    for (uint64_t i = 0; i < ALLOCS; i++) want += k * 1000 + i;
  assert_int_equal(m.alloc_bytes, want);
  /* frees gave no size: the trace says none (memory processing takes it
   * from the allocation), the pool's gave 512 */
  assert_int_equal(m.free_bytes, 512);
  assert_int_equal(m.unknown_bytes, THREADS * (ALLOCS - 1) + 1);
  assert_int_equal(m.on_device, 2);
  assert_int_equal(m.with_ext, 2);
  assert_int_equal(m.reserved_max, 2 << 20);
  assert_int_equal(m.named, m.allocs + m.frees);
  assert_int_equal(m.live_at_start, 0);
  /* each thread's allocations carry its op */
  size_t in_op = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    in_op += v.kind == LOOM_KIND_MEMORY && v.external_id >= 101 && v.external_id <= 100 + THREADS;
  }
  assert_int_equal(in_op, THREADS * ALLOCS);
  assert_int_equal(loom_trace_warning_count(t), 0);
  /* written and read by trace_processor: every memory event, no error */
  if (tp_available_quiet()) {
    char path[256];
    tmp_path(path, sizeof path, ".json");
    assert_int_equal(loom_trace_save(t, path), LOOM_OK);
    assert_int_equal(tp_int(path, "select count(*) from slice where name = '[memory]'"),
                     m.allocs + m.frees);
    assert_int_equal(tp_errors(path), 0);
    unlink(path);
  }
  loom_trace_free(t);
}

/* A session that does not ask for memory records keeps none. */
static void test_kind_filter(void **state) {
  (void)state;
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .name = "k",
                             .kinds = LOOM_KIND_BIT(LOOM_KIND_CPU_OP)};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  loom_op_begin("op", 1);
  loom_memory_alloc(0x10, 16, LOOM_MEMORY_HOST, -1, 0);
  loom_op_end();
  loom_trace *t = ts_finish(s);
  assert_int_equal(sum_memory(t).allocs, 0);
  assert_int_equal(loom_trace_event_count(t), 1);
  loom_trace_free(t);
}

/* ---- a backend's memory records ----------------------------------------- */
static loom_status bk_mem(unsigned flags, uint64_t addr, int64_t bytes, int64_t dev,
                          const char *kind, uint64_t ext) {
  loom_arg a[4];
  uint32_t n = 0;
  a[n++] = (loom_arg){.key = "addr", .type = LOOM_ARG_UINT, .v.u = addr};
  if (bytes >= 0) a[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = (uint64_t)bytes};
  if (dev >= 0) a[n++] = (loom_arg){.key = "device", .type = LOOM_ARG_UINT, .v.u = (uint64_t)dev};
  if (kind) a[n++] = (loom_arg){.key = "memory_kind", .type = LOOM_ARG_STRING, .v.s = kind};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY, .device = LOOM_DEVICE_HOST,
                   .flags = flags, .external_id = ext, .args = a, .nargs = n};
  return fake_emit(0, flags & LOOM_RECORD_F_FREE ? "fakeFree" : "fakeAlloc", &r);
}

static void test_backend_records(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fake", "");
  int64_t dev = fake_device(0);
  loom_op_begin("model_op", 55);
  for (int i = 0; i < 10; i++)
    assert_int_equal(bk_mem(LOOM_RECORD_F_ALLOC, 0x1000 + (uint64_t)i, 4096, dev, NULL, 0),
                     LOOM_OK);
  loom_op_end();
  for (int i = 0; i < 9; i++)
    assert_int_equal(bk_mem(LOOM_RECORD_F_FREE, 0x1000 + (uint64_t)i, -1, dev, NULL, 9), LOOM_OK);
  assert_int_equal(bk_mem(LOOM_RECORD_F_ALLOC, 0x9000, 100, -1, "host_pinned", 0), LOOM_OK);
  /* refused, each named: no mark, both marks, no addr, no bytes, a device
   * that is not the backend's, a kind loom does not know */
  assert_int_equal(bk_mem(0, 0x1, 1, -1, NULL, 0), LOOM_EINVAL);
  assert_int_equal(bk_mem(LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE, 0x1, 1, -1, NULL, 0),
                   LOOM_EINVAL);
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY,
                   .device = LOOM_DEVICE_HOST, .flags = LOOM_RECORD_F_FREE};
  assert_int_equal(fake_emit(0, "fakeFree", &r), LOOM_EINVAL);
  assert_int_equal(bk_mem(LOOM_RECORD_F_ALLOC, 0x2, -1, dev, NULL, 0), LOOM_EINVAL);
  assert_int_equal(bk_mem(LOOM_RECORD_F_ALLOC, 0x3, 8, dev + 7, NULL, 0), LOOM_EINVAL);
  assert_int_equal(bk_mem(LOOM_RECORD_F_ALLOC, 0x4, 8, -1, "vram", 0), LOOM_EINVAL);
  loom_trace *t = ts_finish(s);
  d_want = dev;
  ext_want = 55;
  name_want = "fakeAlloc";
  mem_sum m = sum_memory(t);
  name_want = "[memory]";
  assert_int_equal(m.allocs, 11);
  assert_int_equal(m.frees, 9);
  assert_int_equal(m.alloc_bytes, 10 * 4096 + 100);
  assert_int_equal(m.unknown_bytes, 9);
  assert_int_equal(m.on_device, 19);
  assert_int_equal(m.with_ext, 10); /* the op open on the thread (process.c) */
  assert_int_equal(m.named, 11);
  size_t kinds_ok = 0, ext9 = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind != LOOM_KIND_MEMORY) continue;
    assert_int_equal(v.device, UINT32_MAX); /* on the host thread */
    assert_string_equal(v.category, "cpu_instant_event");
    ext9 += v.external_id == 9;
    loom_arg a[8];
    size_t n = loom_trace_event_args(t, i, a, 8);
    for (size_t k = 0; k < n; k++) {
      if (!strcmp(a[k].key, "device")) assert_int_equal(a[k].type, LOOM_ARG_INT);
      if (strcmp(a[k].key, "memory_kind")) continue;
      uint64_t d;
      kinds_ok += !strcmp(a[k].v.s, arg_u(a, n, "device", &d) ? "device" : "host_pinned");
    }
  }
  assert_int_equal(kinds_ok, 20);
  assert_int_equal(ext9, 9); /* a backend's own external id is kept */
  assert_true(ts_warned(t, "lost 6 records", "exactly one of LOOM_RECORD_F_ALLOC"));
  assert_true(ts_warned(t, "has no \"addr\"", "an allocation without \"bytes\""));
  assert_true(ts_warned(t, "not one of the backend's devices", NULL));
  loom_trace_free(t);
}

/* The same through host->memory (ABI 1.6): the host record way (fast) and
 * emit's (a clock not in the recorder's domain), with the same result. */
static void backend_service(int fast) {
  loom_session *s = ts_start("cpu,fake", "");
  uint32_t dev = fake_device(0);
  loom_op_begin("model_op", 55);
  for (int i = 0; i < 10; i++) {
    loom_memory_event m = {.flags = LOOM_RECORD_F_ALLOC, .kind = LOOM_MEMORY_DEVICE,
                           .device = dev, .addr = 0x1000 + (uint64_t)i, .bytes = 4096};
    assert_int_equal(fake_memory(0, "fakeAlloc", fast, &m), LOOM_OK);
  }
  loom_op_end();
  for (int i = 0; i < 9; i++) {
    loom_memory_event m = {.flags = LOOM_RECORD_F_FREE, .kind = LOOM_MEMORY_DEVICE,
                           .device = dev, .addr = 0x1000 + (uint64_t)i};
    assert_int_equal(fake_memory(0, "fakeFree", fast, &m), LOOM_OK);
  }
  loom_memory_event m = {.flags = LOOM_RECORD_F_ALLOC, .kind = LOOM_MEMORY_HOST_PINNED,
                         .device = LOOM_DEVICE_HOST, .heap = 3, .addr = 0x9000, .bytes = 100};
  assert_int_equal(fake_memory(0, "fakeAlloc", fast, &m), LOOM_OK);
  m = (loom_memory_event){.flags = LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE, .addr = 1};
  assert_int_equal(fake_memory(0, "fakeAlloc", fast, &m), LOOM_EINVAL);
  /* a device not the backend's: refused by emit, left out by the trace */
  m = (loom_memory_event){.flags = LOOM_RECORD_F_ALLOC, .device = dev + 7, .addr = 3, .bytes = 8};
  assert_int_equal(fake_memory(0, "fakeAlloc", fast, &m), fast ? LOOM_OK : LOOM_EINVAL);
  loom_trace *t = ts_finish(s);
  d_want = dev;
  ext_want = 55;
  name_want = "fakeAlloc";
  mem_sum ms = sum_memory(t);
  name_want = "[memory]";
  assert_int_equal(ms.allocs, 11);
  assert_int_equal(ms.frees, 9);
  assert_int_equal(ms.alloc_bytes, 10 * 4096 + 100);
  assert_int_equal(ms.unknown_bytes, 9);
  assert_int_equal(ms.on_device, 19);
  assert_int_equal(ms.with_ext, 10);
  assert_int_equal(ms.named, 11);
  size_t pinned = 0, heap = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind != LOOM_KIND_MEMORY) continue;
    assert_int_equal(v.device, UINT32_MAX);
    assert_string_equal(v.category, "cpu_instant_event");
    loom_arg a[8];
    size_t n = loom_trace_event_args(t, i, a, 8);
    uint64_t h;
    for (size_t k = 0; k < n; k++)
      pinned += !strcmp(a[k].key, "memory_kind") && !strcmp(a[k].v.s, "host_pinned");
    heap += arg_u(a, n, "heap", &h) && h == 2;
  }
  assert_int_equal(pinned, 1);
  assert_int_equal(heap, 1);
  assert_true(ts_warned(t, fast ? "named a device that is not their backend's"
                                : "not one of the backend's devices", NULL));
  loom_trace_free(t);
}

static void test_backend_service(void **state) {
  (void)state;
  backend_service(1);
  backend_service(0);
}

/* ---- windows and ring dumps start from what was live ------------------------ */
static mem_sum win_sum;
static int64_t win_start;
static int nwin;

static void on_window(loom_trace *t, const char *out, unsigned seq, void *ud) {
  (void)out, (void)seq, (void)ud;
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  win_start = s.start_ns;
  d_want = -2;
  ext_want = 0;
  win_sum = sum_memory(t);
  nwin++;
}

static void test_window_live_at_start(void **state) {
  (void)state;
  nwin = 0;
  loom_window_callback_set(on_window, NULL);
  loom_session *s = ts_start("cpu", "start_step=2,steps=1,output=/tmp/loom-mem-w.json");
  /* before the window: 5 blocks (one freed before it, one inside it) */
  for (uint64_t i = 0; i < 5; i++) loom_memory_alloc(0x100 * (i + 1), 1000 + i, 0, -1, 0);
  loom_memory_free(0x100, 0, LOOM_MEMORY_HOST, -1, 0);
  loom_step(); /* step 0 */
  loom_step(); /* step 1 */
  loom_step(); /* step 2: the window */
  loom_memory_free(0x200, 0, LOOM_MEMORY_HOST, -1, 0);
  loom_memory_alloc(0x9000, 77, LOOM_MEMORY_HOST, -1, 0);
  loom_step(); /* ends it */
  loom_memory_alloc(0xa000, 5, LOOM_MEMORY_HOST, -1, 0); /* after it */
  assert_int_equal(loom_session_stop(s, NULL), LOOM_OK);
  loom_session_destroy(s);
  loom_window_callback_set(NULL, NULL);
  assert_int_equal(nwin, 1);
  /* 0x200..0x500 were live at its start (1001+1002+1003+1004 bytes) */
  assert_int_equal(win_sum.live_at_start, 4);
  assert_int_equal(win_sum.live_bytes, 1001 + 1002 + 1003 + 1004);
  assert_int_equal(win_sum.allocs, 5);
  assert_int_equal(win_sum.frees, 1);
  assert_int_equal(win_sum.free_bytes, 1001); /* the ledger knew its size */
  assert_int_equal(win_sum.first_live_ts, win_start);
  assert_true(win_sum.first_other_ts > win_start);
}

static void test_ring_dump_live_at_start(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", "mode=ring,buffer_size=1k,ring_size=4160");
  for (uint64_t i = 0; i < 3; i++) loom_memory_alloc(0x7000 + i, 10, 0, -1, 0);
  for (int i = 0; i < 2000; i++) loom_instant("filler"); /* overwrites them */
  loom_memory_free(0x7000, 0, LOOM_MEMORY_HOST, -1, 0);
  loom_trace *d = NULL;
  assert_int_equal(loom_session_dump(s, "test", &d), LOOM_OK);
  d_want = -2;
  ext_want = 0;
  mem_sum m = sum_memory(d);
  assert_int_equal(m.live_at_start, 3);
  assert_int_equal(m.allocs, 3);
  assert_int_equal(m.frees, 1);
  assert_int_equal(m.free_bytes, 10);
  loom_trace_free(d);
  loom_trace *t = ts_finish(s);
  loom_trace_free(t);
}

/* The same for a backend's records through host->memory (host records, in
 * the threads' ring): the dump starts from its allocations live then, named
 * after the backend's call, on its device; a free knows the size. */
static void test_service_ring_live_at_start(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fake", "mode=ring,buffer_size=1k,ring_size=4160");
  uint32_t dev = fake_device(0);
  for (uint64_t i = 0; i < 3; i++) {
    loom_memory_event m = {.flags = LOOM_RECORD_F_ALLOC, .kind = LOOM_MEMORY_DEVICE,
                           .device = dev, .addr = 0x7000 + i, .bytes = 10 + i};
    assert_int_equal(fake_memory(0, "fakeAlloc", 1, &m), LOOM_OK);
  }
  for (int i = 0; i < 2000; i++) loom_instant("filler"); /* overwrites them */
  loom_memory_event f = {.flags = LOOM_RECORD_F_FREE, .kind = LOOM_MEMORY_DEVICE, .device = dev,
                         .addr = 0x7000};
  assert_int_equal(fake_memory(0, "fakeFree", 1, &f), LOOM_OK);
  loom_trace *d = NULL;
  assert_int_equal(loom_session_dump(s, "test", &d), LOOM_OK);
  d_want = dev;
  ext_want = 0;
  name_want = "fakeAlloc";
  mem_sum m = sum_memory(d);
  name_want = "[memory]";
  assert_int_equal(m.live_at_start, 3);
  assert_int_equal(m.allocs, 3);
  assert_int_equal(m.frees, 1);
  assert_int_equal(m.free_bytes, 10);
  assert_int_equal(m.live_bytes, 10 + 11 + 12); /* 0x7000 too: freed inside, made before */
  assert_int_equal(m.on_device, 4);
  assert_int_equal(m.named, 3);
  loom_trace_free(d);
  loom_trace_free(ts_finish(s));
}

/* A backend's ring drops its oldest records: the allocations among them
 * that no record freed are live at the dump's start. */
static void test_backend_ring_live_at_start(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fake", "mode=ring,ring_size=64k,backend_memory_cap=16k");
  int64_t dev = fake_device(0);
  for (uint64_t i = 0; i < 4; i++)
    assert_int_equal(bk_mem(LOOM_RECORD_F_ALLOC, 0xb000 + i, 1000 + (int64_t)i, dev, NULL, 0),
                     LOOM_OK);
  assert_int_equal(bk_mem(LOOM_RECORD_F_FREE, 0xb000, -1, dev, NULL, 0), LOOM_OK);
  for (int i = 0; i < 2000; i++) fake_launch(0, 0, "k", 100); /* the ring drops them */
  assert_int_equal(bk_mem(LOOM_RECORD_F_FREE, 0xb001, -1, dev, NULL, 0), LOOM_OK);
  loom_trace *d = NULL;
  assert_int_equal(loom_session_dump(s, "test", &d), LOOM_OK);
  d_want = dev;
  ext_want = 0;
  name_want = "fakeAlloc";
  mem_sum m = sum_memory(d);
  name_want = "[memory]";
  assert_int_equal(m.live_at_start, 3); /* 0xb001..0xb003 */
  assert_int_equal(m.live_bytes, 1001 + 1002 + 1003);
  assert_int_equal(m.allocs, 3);
  assert_int_equal(m.frees, 1);
  assert_int_equal(m.on_device, 4);
  assert_true(m.first_live_ts <= m.first_other_ts);
  loom_trace_free(d);
  loom_trace_free(ts_finish(s));
}

int main(void) {
  assert_int_equal(fake_register(0, "fakemem", "fake", 0), LOOM_OK);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_calls),
      cmocka_unit_test(test_kind_filter),
      cmocka_unit_test(test_backend_records),
      cmocka_unit_test(test_backend_service),
      cmocka_unit_test(test_window_live_at_start),
      cmocka_unit_test(test_ring_dump_live_at_start),
      cmocka_unit_test(test_backend_ring_live_at_start),
      cmocka_unit_test(test_service_ring_live_at_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
