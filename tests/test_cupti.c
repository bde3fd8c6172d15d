/*
 * test_cupti.c - the CUPTI backend (libloom-cupti.so) on a machine without
 * a GPU: its probe names why CUDA is unusable (no driver; the toolkit's stub
 * driver) while the host recording goes on; fabricated activity records of
 * every supported kind, replayed through the documented test seam
 * (cupti.replay=1, loom_cupti_replay), come out as the right events, flows,
 * external ids, tracks, device properties and times, and load cleanly in
 * trace_processor; memory records (MEMORY2) on their calls' threads with
 * exact bytes and kinds; the activity-buffer memory cap refuses buffers and the
 * refusals reach the trace as dropped records with their reason.
 *
 * Modes (argv[1]): "nodriver" (default) runs everything but the stub check;
 * "stub" runs with LD_LIBRARY_PATH holding libcuda.so.1 -> the stub.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

typedef int (*replay_fn)(const void *, size_t);
typedef void *(*request_fn)(size_t *);
typedef void (*complete_fn)(void *, size_t, size_t);

static const char *mode = "nodriver";

static void *plugin_sym(const char *name) {
  loom_init();
  void *h = dlopen(CUPTI_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h);
  void *f = dlsym(h, name);
  assert_non_null(f);
  return f;
}

static int has_event(const loom_trace *t, const char *name) {
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!strcmp(v.name, name)) return 1;
  }
  return 0;
}

/* A probe failure is a warning naming the device and the reason; the host
 * annotations of the same session are recorded. */
static void check_unavailable(const char *reason) {
  loom_session *s = ts_start("cpu,cuda", NULL);
  loom_range_push("host work");
  loom_range_pop();
  loom_trace *t = ts_finish(s);
  assert_true(ts_warned(t, "device 'cuda'", reason));
  assert_true(has_event(t, "host work"));
  loom_trace_free(t);
}

static void test_no_driver(void **state) {
  (void)state;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    skip(); /* a machine with a CUDA driver */
  }
  check_unavailable("no CUDA driver (libcuda.so.1 not found)");
}

static void test_stub_driver(void **state) {
  (void)state;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) skip(); /* the stub is not set up here */
  dlclose(h);
  check_unavailable("stub");
}

/* A driver that finds no device (tests/plugins/fakecuda.c as libcuda.so.1). */
static void test_no_device(void **state) {
  (void)state;
  check_unavailable("no CUDA device (CUDA_ERROR_NO_DEVICE)");
}

/* ---- fabricated records ------------------------------------------------- */
typedef struct buf { uint8_t *p; size_t n, cap; } buf;

static void *add(buf *b, CUpti_ActivityKind kind, size_t size) {
  if (b->n + size > b->cap) {
    b->cap = (b->n + size) * 2;
    b->p = realloc(b->p, b->cap);
  }
  void *r = b->p + b->n;
  memset(r, 0, size);
  memcpy(r, &kind, sizeof kind);
  b->n += size;
  return r;
}

#define ADD(b, kind, type) ((type *)add((b), (kind), sizeof(type)))

static uint64_t now_realtime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void add_api(buf *b, CUpti_ActivityKind kind, uint32_t cbid, uint32_t corr, uint32_t tid,
                    uint64_t start, uint64_t end) {
  CUpti_ActivityAPI *a = ADD(b, kind, CUpti_ActivityAPI);
  a->cbid = cbid;
  a->correlationId = corr;
  a->threadId = tid;
  a->processId = (uint32_t)getpid();
  a->start = start;
  a->end = end;
}

static void add_kernel(buf *b, const char *name, uint32_t corr, uint32_t graph, uint64_t start,
                       uint64_t end) {
  CUpti_ActivityKernel10 *k = ADD(b, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUpti_ActivityKernel10);
  k->name = name;
  k->correlationId = corr;
  k->deviceId = 0;
  k->contextId = 1;
  k->streamId = 13;
  k->gridX = 256, k->gridY = 1, k->gridZ = 1;
  k->blockX = 128, k->blockY = 1, k->blockZ = 1;
  k->registersPerThread = 32;
  k->staticSharedMemory = 1024;
  k->dynamicSharedMemory = 2048;
  k->graphId = graph;
  k->graphNodeId = graph ? 77 : 0;
  k->start = start;
  k->end = end;
}

/* Every supported kind, with times from base (REALTIME ns).  Returns the
 * buffer (caller frees), its size in *n. */
static uint8_t *fabricate(uint64_t base, uint32_t tid, size_t *n) {
  buf b = {0};
  CUpti_ActivityDevice5 *d = ADD(&b, CUPTI_ACTIVITY_KIND_DEVICE, CUpti_ActivityDevice5);
  d->id = 0;
  d->name = "NVIDIA Replay GPU";
  d->numMultiprocessors = 132;
  d->globalMemorySize = 80ull << 30;
  d->computeCapabilityMajor = 9;
  d->computeCapabilityMinor = 0;
  d->maxThreadsPerBlock = 1024;
  d->numThreadsPerWarp = 32;
  CUpti_ActivityExternalCorrelation *x =
      ADD(&b, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUpti_ActivityExternalCorrelation);
  x->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  x->externalId = 42;
  x->correlationId = 7;
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 7, tid,
          base + 1000, base + 6000);
  add_kernel(&b, "_Z6vecAddPfS_S_i", 7, 0, base + 10000, base + 50000);
  add_kernel(&b, "graphKernel", 9, 5, base + 60000, base + 70000);
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 8, tid,
          base + 7000, base + 9000);
  CUpti_ActivityMemcpy6 *m = ADD(&b, CUPTI_ACTIVITY_KIND_MEMCPY, CUpti_ActivityMemcpy6);
  m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m->bytes = 4096;
  m->correlationId = 8;
  m->contextId = 1;
  m->streamId = 13;
  m->start = base + 80000;
  m->end = base + 84096;
  CUpti_ActivityMemset4 *ms = ADD(&b, CUPTI_ACTIVITY_KIND_MEMSET, CUpti_ActivityMemset4);
  ms->bytes = 512;
  ms->value = 0;
  ms->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  ms->correlationId = 10;
  ms->contextId = 1;
  ms->streamId = 13;
  ms->start = base + 90000;
  ms->end = base + 91000;
  CUpti_ActivitySynchronization2 *s =
      ADD(&b, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUpti_ActivitySynchronization2);
  s->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s->correlationId = 11;
  s->contextId = 1;
  s->streamId = 13;
  s->start = base + 92000;
  s->end = base + 95000;
  CUpti_ActivityOverhead3 *o = ADD(&b, CUPTI_ACTIVITY_KIND_OVERHEAD, CUpti_ActivityOverhead3);
  o->overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o->objectId.pt.processId = (uint32_t)getpid();
  o->objectId.pt.threadId = tid;
  o->start = base + 96000;
  o->end = base + 97000;
  *n = b.n;
  return b.p;
}

typedef struct found {
  size_t kinds[LOOM_KIND_COUNT_];
  loom_event_view kernel, graph_kernel, launch, memcpy_, memset_, sync;
} found;

static found collect(const loom_trace *t) {
  found f;
  memset(&f, 0, sizeof f);
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind < LOOM_KIND_COUNT_) f.kinds[v.kind]++;
    if (v.kind == LOOM_KIND_KERNEL && v.correlation == 7) f.kernel = v;
    if (v.kind == LOOM_KIND_KERNEL && v.correlation == 9) f.graph_kernel = v;
    if (v.kind == LOOM_KIND_RUNTIME && v.correlation == 7) f.launch = v;
    if (v.kind == LOOM_KIND_MEMCPY) f.memcpy_ = v;
    if (v.kind == LOOM_KIND_MEMSET) f.memset_ = v;
    if (v.kind == LOOM_KIND_SYNC) f.sync = v;
  }
  return f;
}

static void assert_near(int64_t got, uint64_t want) {
  int64_t d = got - (int64_t)want;
  assert_true(d >= -1000 && d <= 1000);
}

static void check_flows(const loom_trace *t) {
  assert_int_equal(loom_trace_flow_count(t), 2);
  int to_kernel = 0, to_memcpy = 0;
  for (size_t i = 0; i < loom_trace_flow_count(t); i++) {
    loom_event_view a, b;
    ts_flow(t, i, &a, &b);
    assert_int_equal(a.kind, LOOM_KIND_RUNTIME);
    to_kernel += b.kind == LOOM_KIND_KERNEL && b.correlation == 7;
    to_memcpy += b.kind == LOOM_KIND_MEMCPY && b.correlation == 8;
  }
  assert_int_equal(to_kernel, 1);
  assert_int_equal(to_memcpy, 1);
}

static void check_in_trace_processor(const loom_trace *t) {
  tp_require();
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  const char *q[] = {"select count(*) from slice",
                     "select count(*) from flow",
                     "select count(*) from slice where category = 'kernel'",
                     "select count(*) from slice where category = 'cuda_runtime'",
                     "select count(*) from thread where name = 'stream 13'",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[6];
  tp_ints(path, q, r, 6);
  assert_int_equal(r[0], (long long)loom_trace_event_count(t) + 1);
  assert_int_equal(r[1], 2);
  assert_int_equal(r[2], 2);
  assert_int_equal(r[3], 2);
  assert_int_equal(r[4], 1);
  assert_int_equal(r[5], 0);
  unlink(path);
}

static void test_replay(void **state) {
  (void)state;
  replay_fn replay = (replay_fn)(uintptr_t)plugin_sym("loom_cupti_replay");
  uint32_t tid = (uint32_t)syscall(SYS_gettid);
  loom_session *s = ts_start("cpu,cuda", "cupti.replay=1");
  uint64_t base = now_realtime();
  size_t n = 0;
  uint8_t *b = fabricate(base, tid, &n);
  assert_int_equal(replay(b, n), 10); /* every record decoded */
  uint32_t bogus[4] = {12345, 0, 0, 0};
  assert_int_equal(replay(bogus, sizeof bogus), -1); /* an unknown kind */
  free(b);
  usleep(2000); /* every record ends inside the session window */
  loom_trace *t = ts_finish(s);
  assert_int_equal(loom_trace_warning_count(t), 0);
  found f = collect(t);
  assert_int_equal(f.kinds[LOOM_KIND_KERNEL], 2);
  assert_int_equal(f.kinds[LOOM_KIND_MEMCPY], 1);
  assert_int_equal(f.kinds[LOOM_KIND_MEMSET], 1);
  assert_int_equal(f.kinds[LOOM_KIND_RUNTIME], 2);
  assert_int_equal(f.kinds[LOOM_KIND_DRIVER], 0);
  assert_int_equal(f.kinds[LOOM_KIND_SYNC], 1);
  assert_int_equal(f.kinds[LOOM_KIND_OVERHEAD], 1);
  assert_int_equal(loom_trace_event_count(t), 8);
  /* the kernel: demangled, on stream 13 of the device, linked to op 42 */
  assert_string_equal(f.kernel.name, "vecAdd(float*, float*, float*, int)");
  assert_int_not_equal(f.kernel.device, UINT32_MAX);
  assert_int_equal(f.kernel.tid, 13);
  assert_int_equal(f.kernel.pid, f.memcpy_.pid);
  assert_int_equal(f.kernel.external_id, 42);
  assert_near(f.kernel.start_ns, base + 10000);
  assert_near(f.kernel.start_ns + f.kernel.dur_ns, base + 50000);
  assert_string_equal(f.graph_kernel.name, "graphKernel");
  /* the launch: on this thread, named from the cbid, op 42 */
  assert_string_equal(f.launch.name, "cudaLaunchKernel");
  assert_string_equal(f.launch.category, "cuda_runtime");
  assert_int_equal(f.launch.device, UINT32_MAX);
  assert_int_equal(f.launch.tid, tid);
  assert_int_equal(f.launch.external_id, 42);
  assert_near(f.launch.start_ns, base + 1000);
  /* marks for loom report: the launch call, no mark on the kernel */
  assert_int_equal(f.launch.roles, LOOM_RECORD_F_LAUNCH);
  assert_int_equal(f.kernel.roles, 0);
  assert_true(ts_saved_contains(t, "\"direction\":\"HtoD\""));
  assert_string_equal(f.memcpy_.name, "Memcpy HtoD (Pageable -> Device)");
  assert_string_equal(f.memset_.name, "Memset (Device)");
  assert_string_equal(f.sync.name, "Stream Sync");
  assert_int_equal(f.sync.tid, 13);
  check_flows(t);
  assert_true(ts_saved_contains(t, "\"SM count\""));
  assert_true(ts_saved_contains(t, "NVIDIA Replay GPU"));
  assert_true(ts_saved_contains(t, "\"compute capability\": \"9.0\"") ||
              ts_saved_contains(t, "\"compute capability\":\"9.0\""));
  assert_true(ts_saved_contains(t, "\"bytes\": 4096") || ts_saved_contains(t, "\"bytes\":4096"));
  assert_true(ts_saved_contains(t, "\"graph id\": 5") || ts_saved_contains(t, "\"graph id\":5"));
  check_in_trace_processor(t);
  loom_trace_free(t);
}

/* Past cupti.memory_cap a buffer request gets nothing and is counted. */
static void test_buffer_cap(void **state) {
  (void)state;
  request_fn request = (request_fn)(uintptr_t)plugin_sym("loom_cupti_request_buffer_for_test");
  complete_fn complete = (complete_fn)(uintptr_t)plugin_sym("loom_cupti_complete_buffer_for_test");
  loom_session *s =
      ts_start("cpu,cuda", "cupti.replay=1,cupti.buffer_size=65536,cupti.memory_cap=196608");
  void *got[5];
  size_t size[5];
  for (int i = 0; i < 5; i++) got[i] = request(&size[i]);
  for (int i = 0; i < 3; i++) {
    assert_non_null(got[i]);
    assert_int_equal(size[i], 65536);
  }
  for (int i = 3; i < 5; i++) {
    assert_null(got[i]);
    assert_int_equal(size[i], 0);
  }
  complete(got[0], size[0], 0); /* completing one makes room for one */
  got[0] = request(&size[0]);
  assert_non_null(got[0]);
  for (int i = 0; i < 3; i++) complete(got[i], size[i], 0);
  loom_trace *t = ts_finish(s);
  loom_trace_summary sum = {.struct_size = sizeof sum};
  assert_int_equal(loom_trace_summarize(t, &sum), LOOM_OK);
  assert_int_equal(sum.dropped, 2);
  assert_true(ts_warned(t, "lost 2 records", "cupti.memory_cap"));
  loom_trace_free(t);
}

/* Correlation ids are kept in a bounded table that rolls over (4M ids; 8
 * here through the test seam): a context synchronization whose call came
 * just before a roll over stays on that call's thread (the table was
 * cleared, and it went to the device), and the kernel keeps its op. */
static void test_correlations_roll_over(void **state) {
  (void)state;
  replay_fn replay = (replay_fn)(uintptr_t)plugin_sym("loom_cupti_replay");
  uint32_t tid = (uint32_t)syscall(SYS_gettid);
  setenv("LOOM_TEST_CUPTI_MAP_LIMIT", "8", 1);
  loom_session *s = ts_start("cpu,cuda", "cupti.replay=1");
  unsetenv("LOOM_TEST_CUPTI_MAP_LIMIT");
  uint64_t base = now_realtime();
  buf b = {0};
  CUpti_ActivityExternalCorrelation *x =
      ADD(&b, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUpti_ActivityExternalCorrelation);
  x->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, x->externalId = 42, x->correlationId = 7;
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 7, tid,
          base + 1000, base + 2000);
  for (uint32_t i = 0; i < 10; i++) { /* 10 more ids: the table rolls over once */
    x = ADD(&b, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUpti_ActivityExternalCorrelation);
    x->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, x->externalId = 1000 + i;
    x->correlationId = 100 + i;
  }
  add_kernel(&b, "late_kernel", 7, 0, base + 10000, base + 20000);
  /* a context synchronization of that call: on its host thread, which
   * only the table knows */
  CUpti_ActivitySynchronization2 *y =
      ADD(&b, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUpti_ActivitySynchronization2);
  y->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  y->correlationId = 7, y->contextId = 1, y->streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  y->start = base + 21000, y->end = base + 22000;
  assert_int_equal(replay(b.p, b.n), 14);
  free(b.p);
  usleep(2000);
  loom_trace *t = ts_finish(s);
  found f = collect(t);
  assert_string_equal(f.kernel.name, "late_kernel");
  assert_int_equal(f.kernel.external_id, 42);
  assert_int_equal(f.launch.external_id, 42);
  assert_int_equal(f.sync.device, UINT32_MAX); /* the host */
  assert_int_equal(f.sync.tid, tid);
  assert_int_equal(loom_trace_flow_count(t), 1);
  loom_trace_free(t);
}

/* ---- memory --------------------------------------------------------------- */
static void add_memory(buf *b, int alloc, CUpti_ActivityMemoryKind kind, uint32_t corr,
                       uint64_t addr, uint64_t bytes, uint64_t ts, uint64_t pool_size) {
  CUpti_ActivityMemory4 *m = ADD(b, CUPTI_ACTIVITY_KIND_MEMORY2, CUpti_ActivityMemory4);
  m->memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                 : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  m->memoryKind = kind;
  m->correlationId = corr;
  m->address = addr;
  m->bytes = bytes;
  m->timestamp = ts;
  m->processId = (uint32_t)getpid();
  m->deviceId = 0;
  m->contextId = 1;
  if (pool_size) {
    m->isAsync = 1;
    m->memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    m->memoryPoolConfig.pool.size = pool_size;
  }
}

typedef struct memev {
  const char *name, *kind;
  uint64_t addr, bytes, reserved, ext;
  int has_device;
  int64_t tid;
} memev;

static size_t memory_events(const loom_trace *t, memev *out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t) && n < max; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind != LOOM_KIND_MEMORY) continue;
    memev m = {.name = v.name, .kind = "", .tid = v.tid, .ext = v.external_id};
    loom_arg a[16];
    size_t na = loom_trace_event_args(t, i, a, 16);
    for (size_t k = 0; k < na && k < 16; k++) {
      if (!strcmp(a[k].key, "addr")) m.addr = a[k].v.u;
      if (!strcmp(a[k].key, "bytes")) m.bytes = a[k].v.u;
      if (!strcmp(a[k].key, "reserved")) m.reserved = a[k].v.u;
      if (!strcmp(a[k].key, "memory_kind")) m.kind = a[k].v.s;
      if (!strcmp(a[k].key, "device")) m.has_device = 1;
    }
    out[n++] = m;
  }
  return n;
}

static const memev *mem_named(const memev *m, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(m[i].name, name)) return &m[i];
  fail_msg("no memory record named %s", name);
  return NULL;
}

static void check_memev(const memev *m, const char *kind, uint64_t addr, uint64_t bytes,
                        int has_device, int64_t tid) {
  assert_string_equal(m->kind, kind);
  assert_int_equal(m->addr, addr);
  assert_int_equal(m->bytes, bytes);
  assert_int_equal(m->has_device, has_device);
  assert_int_equal(m->tid, tid);
}

/* MEMORY2 records: each on the thread of its API call (whose record comes
 * after it, or before), named after that call, with the call's op; one whose
 * call never comes lands on the main thread at flush.  Pool memory
 * (cudaMallocAsync) carries the pool's size as reserved bytes. */
static void test_memory(void **state) {
  (void)state;
  replay_fn replay = (replay_fn)(uintptr_t)plugin_sym("loom_cupti_replay");
  uint32_t tid = (uint32_t)syscall(SYS_gettid) + 1000000; /* a thread not this one */
  loom_session *s = ts_start("cpu,cuda", "cupti.replay=1");
  uint64_t base = now_realtime();
  buf b = {0};
  CUpti_ActivityExternalCorrelation *x =
      ADD(&b, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUpti_ActivityExternalCorrelation);
  x->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, x->externalId = 77;
  x->correlationId = 20;
  add_memory(&b, 1, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 20, 0x7f0000000000, 1 << 20, base + 1500, 0);
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 20, tid,
          base + 1000, base + 2000);
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, 21, tid,
          base + 3000, base + 4000);
  add_memory(&b, 1, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 21, 0x200000000, 4096, base + 3500, 0);
  add_memory(&b, 1, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 22, 0x7e0000000000, 65536, base + 5500, 0);
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000, 22,
          tid, base + 5000, base + 6000);
  add_memory(&b, 1, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 23, 0x7d0000000000, 2048, base + 7500,
             32 << 20);
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, 23,
          tid, base + 7000, base + 8000);
  add_memory(&b, 0, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 24, 0x7f0000000000, 1 << 20, base + 9500, 0);
  add_api(&b, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 24, tid,
          base + 9000, base + 10000);
  /* its call's record never comes */
  add_memory(&b, 0, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 25, 0x200000000, 4096, base + 11500, 0);
  assert_int_equal(replay(b.p, b.n), 12);
  free(b.p);
  usleep(2000);
  loom_trace *t = ts_finish(s);
  memev m[16];
  size_t n = memory_events(t, m, 16), allocs = 0, frees = 0;
  uint64_t abytes = 0, fbytes = 0;
  for (size_t i = 0; i < n; i++) {
    int is_free = strstr(m[i].name, "Free") || strstr(m[i].name, "release");
    allocs += !is_free, frees += is_free;
    if (is_free) fbytes += m[i].bytes;
    else abytes += m[i].bytes;
  }
  assert_int_equal(allocs, 4);
  assert_int_equal(frees, 2);
  assert_int_equal(abytes, (1 << 20) + 4096 + 65536 + 2048);
  assert_int_equal(fbytes, (1 << 20) + 4096);
  const memev *a = mem_named(m, n, "cudaMalloc");
  check_memev(a, "device", 0x7f0000000000, 1 << 20, 1, tid);
  assert_int_equal(a->ext, 77);
  check_memev(mem_named(m, n, "cudaMallocHost"), "host_pinned", 0x200000000, 4096, 0, tid);
  check_memev(mem_named(m, n, "cudaMallocManaged"), "shared", 0x7e0000000000, 65536, 1, tid);
  const memev *p = mem_named(m, n, "cudaMallocAsync");
  check_memev(p, "pool", 0x7d0000000000, 2048, 1, tid);
  assert_int_equal(p->reserved, 32 << 20);
  check_memev(mem_named(m, n, "cudaFree"), "device", 0x7f0000000000, 1 << 20, 1, tid);
  check_memev(mem_named(m, n, "CUDA memory release"), "host_pinned", 0x200000000, 4096, 0,
              getpid());
  assert_int_equal(loom_trace_warning_count(t), 0);
  /* written as Kineto's [memory] instants and read back: the same events */
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  loom_trace *back = ts_load(path);
  memev mb[16];
  assert_int_equal(memory_events(back, mb, 16), 6);
  check_memev(mem_named(mb, 6, "cudaMallocAsync"), "pool", 0x7d0000000000, 2048, 1, tid);
  assert_int_equal(mem_named(mb, 6, "cudaMallocAsync")->reserved, 32 << 20);
  check_memev(mem_named(mb, 6, "cudaFree"), "device", 0x7f0000000000, 1 << 20, 1, tid);
  loom_trace_free(back);
  unlink(path);
  loom_trace_free(t);
}

/* The CUDA driver's injection entry point registers (again) harmlessly. */
/* CUDA_INJECTION64_PATH: the driver calls InitializeInjection in cuInit;
 * here it returns 1 (loom is in the process, the plug-in registered).  In a
 * process that loaded the plug-in before loom (tests/plugins/cuda_injector.c
 * plays the driver), it is the call that registers the backend. */
static void test_injection_entry(void **state) {
  (void)state;
  int (*inject)(void) = (int (*)(void))(uintptr_t)plugin_sym("InitializeInjection");
  assert_int_equal(inject(), 1);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "env -u LOOM_PLUGINS -u LOOM_PLUGIN_PATH '%s' '%s' '%s'", CUDA_INJECTOR,
           CUPTI_PLUGIN, LIBLOOM);
  assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv) {
  mode = argc > 1 ? argv[1] : "nodriver";
  if (!strcmp(mode, "stub")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_stub_driver)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (!strcmp(mode, "nodevice")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_device)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_driver),
      cmocka_unit_test(test_replay),
      cmocka_unit_test(test_buffer_cap),
      cmocka_unit_test(test_correlations_roll_over),
      cmocka_unit_test(test_memory),
      cmocka_unit_test(test_injection_entry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
