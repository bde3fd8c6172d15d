/*
 * decode.c - turns CUPTI activity records into loom records.  One function
 * per record kind; two walkers share them: one over buffers CUPTI completed
 * (cuptiActivityGetNextRecord, which knows every kind's size) and one over
 * buffers laid out back to back with this build's struct sizes (tests and
 * loom_cupti_replay, without libcupti).
 *
 * Per session it keeps: CUPTI device id -> loom device (added from a DEVICE
 * record, or as "CUDA device N" on first use), stream id -> loom resource
 * ("stream N", native id N), context id -> device (for synchronisation
 * records, which carry no device), and correlation id -> (external id, host
 * thread, API name) from EXTERNAL_CORRELATION and API records.  All
 * timestamps are CLOCK_REALTIME ns (cuptiGetTimestamp), the clock
 * cupti_clock declares.
 *
 * Memory (MEMORY2 records: an allocation or a release with its address,
 * bytes, memory kind and device) becomes LOOM_KIND_MEMORY records on the
 * host thread of the API call with the same correlation id, named after that
 * call.  The API record usually comes after the memory record (CUPTI writes
 * it when the call returns), so a memory record whose call is not known yet
 * waits (up to PENDING_MAX of them) until that call's record is decoded;
 * the ones whose call never comes (a call 65536 ids later arrived, or flush)
 * go to the process's main thread (its id is the record's processId) under
 * a generic name.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_loom.h"

/* libstdc++'s demangler, found at the first kernel name: the plug-in does
 * not link libstdc++, whose loading (~1 ms) every process that loads the
 * plug-in would pay, loom record's own included.  libcupti, which decoding
 * needs, is C++ and brings it; else it is opened here.  NULL: names stay
 * mangled. */
typedef char *(*demangle_fn)(const char *mangled, char *out, size_t *len, int *status);
static demangle_fn demangler;
static pthread_once_t demangler_once = PTHREAD_ONCE_INIT;

static void find_demangler(void) {
  void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
  void *f = h ? dlsym(h, "__cxa_demangle") : NULL;
  memcpy(&demangler, &f, sizeof f); /* kept open: the names demangled later use it */
}

const loom_host *cupti_host;
loom_backend *cupti_self;
loom_clock cupti_clock;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* the tables below */

/* ---- small open-addressing maps keyed by a nonzero 64-bit id ------------- */
typedef struct map_entry { uint64_t key, a, b, c; } map_entry;
typedef struct map { map_entry *e; size_t cap, n; } map;

#define MAP_LIMIT (1u << 22) /* entries kept before a map starts over */
static size_t map_limit = MAP_LIMIT; /* LOOM_TEST_CUPTI_MAP_LIMIT (tests) */

static void map_clear(map *m) {
  free(m->e);
  memset(m, 0, sizeof *m);
}

static map_entry *map_slot(map *m, uint64_t key) {
  size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
  while (m->e[i].key && m->e[i].key != key) i = (i + 1) & (m->cap - 1);
  return &m->e[i];
}

static map_entry *map_find(map *m, uint64_t key) {
  if (!m->cap || !key) return NULL;
  map_entry *e = map_slot(m, key);
  return e->key ? e : NULL;
}

static int map_grow(map *m) {
  size_t nc = m->cap ? m->cap * 2 : 256;
  map_entry *old = m->e;
  size_t oc = m->cap;
  m->e = calloc(nc, sizeof *m->e);
  if (!m->e) {
    m->e = old;
    return -1;
  }
  m->cap = nc;
  for (size_t i = 0; i < oc; i++)
    if (old[i].key) *map_slot(m, old[i].key) = old[i];
  free(old);
  return 0;
}

/* The entry of key, created zeroed when absent (NULL when out of memory). */
static map_entry *map_put(map *m, uint64_t key) {
  if (!key) return NULL;
  if (m->n >= map_limit) map_clear(m);
  if ((m->n + 1) * 2 > m->cap && map_grow(m) != 0) return NULL;
  map_entry *e = map_slot(m, key);
  if (!e->key) {
    e->key = key;
    m->n++;
  }
  return e;
}

static map devices;  /* cupti device id + 1 -> a: loom device */
static map streams;  /* stream id + 1 -> a: loom device, b: resource */
static map contexts; /* context id + 1 -> a: cupti device id */
/* correlation id -> a: external id, b: host thread, c: the API call's name
 * (a loom_string_id; 0 before its record is decoded).  Two generations: a
 * full one becomes the old one (the one before is dropped), so that work
 * still in flight when the ids roll over keeps its external id and thread. */
static map corrs, corrs_old;

static map_entry *corr_find(uint64_t corr) {
  map_entry *e = map_find(&corrs, corr);
  return e ? e : map_find(&corrs_old, corr);
}

static map_entry *corr_put(uint64_t corr) {
  if (corrs.n >= map_limit) {
    map_clear(&corrs_old);
    corrs_old = corrs;
    memset(&corrs, 0, sizeof corrs);
  }
  size_t before = corrs.n;
  map_entry *e = map_put(&corrs, corr), *old;
  /* new in this generation but met in the last (just before the roll over) */
  if (e && corrs.n != before && corrs_old.n && (old = map_find(&corrs_old, corr)))
    e->a = old->a, e->b = old->b, e->c = old->c;
  return e;
}

/* Memory records waiting for their API call's record (mu held). */
typedef struct pending_mem {
  uint16_t flag;           /* LOOM_RECORD_F_ALLOC or _FREE */
  uint32_t corr, dev, pid; /* dev: loom device, LOOM_DEVICE_HOST for none */
  uint64_t ts, addr, bytes, reserved;
  const char *kind;        /* a static string */
} pending_mem;
#define PENDING_MAX 4096
static pending_mem *pending;
static size_t npending, cap_pending;

void cupti_decode_reset(void) {
  pthread_mutex_lock(&mu);
  free(pending);
  pending = NULL;
  npending = cap_pending = 0;
  const char *v = getenv("LOOM_TEST_CUPTI_MAP_LIMIT");
  map_limit = v && strtoull(v, NULL, 10) >= 4 ? (size_t)strtoull(v, NULL, 10) : MAP_LIMIT;
  map_clear(&devices);
  map_clear(&streams);
  map_clear(&contexts);
  map_clear(&corrs);
  map_clear(&corrs_old);
  pthread_mutex_unlock(&mu);
}

/* ---- devices and streams (mu held) -------------------------------------- */
static uint32_t add_device(uint32_t id, const char *name, const loom_arg *props, uint32_t n) {
  char generic[48];
  if (!name) {
    snprintf(generic, sizeof generic, "CUDA device %u", id);
    name = generic;
  }
  loom_device_info info = {.struct_size = sizeof info, .name = name, .vendor = "NVIDIA",
                           .type = "gpu", .props = props, .nprops = n};
  uint32_t dev = LOOM_DEVICE_HOST;
  if (cupti_host->device_add(cupti_self, &info, &dev) != LOOM_OK) return LOOM_DEVICE_HOST;
  map_entry *e = map_put(&devices, (uint64_t)id + 1);
  if (e) e->a = dev;
  return dev;
}

static uint32_t device_of(uint32_t id) {
  map_entry *e = map_find(&devices, (uint64_t)id + 1);
  return e ? (uint32_t)e->a : add_device(id, NULL, NULL, 0);
}

/* The resource of stream on CUPTI device id; fills *dev. */
static uint32_t stream_of(uint32_t id, uint32_t ctx, uint32_t stream, uint32_t *dev) {
  map_entry *e = map_find(&streams, (uint64_t)stream + 1);
  if (e) {
    *dev = (uint32_t)e->a;
    return (uint32_t)e->b;
  }
  map_entry *c = map_put(&contexts, (uint64_t)ctx + 1);
  if (c) c->a = id;
  *dev = device_of(id);
  char name[32];
  snprintf(name, sizeof name, "stream %u", stream);
  uint32_t res = 0;
  if (*dev == LOOM_DEVICE_HOST ||
      cupti_host->resource_add(cupti_self, *dev, name, stream, &res) != LOOM_OK)
    return 0;
  e = map_put(&streams, (uint64_t)stream + 1);
  if (e) {
    e->a = *dev;
    e->b = res;
  }
  return res;
}

static uint64_t external_of(uint32_t corr) {
  map_entry *e = corr_find(corr);
  return e ? e->a : 0;
}

/* ---- names -------------------------------------------------------------- */
static loom_string_id intern(const char *s) {
  return cupti_host->intern(cupti_self, s ? s : "", SIZE_MAX);
}

static loom_string_id kernel_name(const char *mangled) {
  if (!mangled) return intern("kernel");
  int status = -1, cxx = mangled[0] == '_' && mangled[1] == 'Z';
  if (cxx) pthread_once(&demangler_once, find_demangler);
  char *d = cxx && demangler ? demangler(mangled, NULL, NULL, &status) : NULL;
  loom_string_id id = intern(status == 0 && d ? d : mangled);
  free(d);
  return id;
}

typedef struct cbid_name { uint32_t cbid; const char *name; } cbid_name;

static const cbid_name runtime_names[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, "cudaFree"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, "cudaMallocHost"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, "cudaFreeHost"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, "cudaHostAlloc"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000, "cudaMallocManaged"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, "cudaMallocAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, "cudaFreeAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, "cudaMemset"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, "cudaEventRecord"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, "cudaEventSynchronize"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, "cudaStreamWaitEvent"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch"},
};

static const cbid_name driver_names[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuInit, "cuInit"},
    {CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize"},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, "cuMemcpyAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
};

static const char *table_name(const cbid_name *t, size_t n, uint32_t cbid) {
  for (size_t i = 0; i < n; i++)
    if (t[i].cbid == cbid) return t[i].name;
  return NULL;
}

/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (runtime names only: the
 * driver's _v2 suffixes are part of the real function names). */
static loom_string_id strip_version(const char *s) {
  const char *v = strstr(s, "_v");
  if (!v || !v[2] || strspn(v + 2, "0123456789") != strlen(v + 2) || strlen(v + 2) < 4)
    return intern(s);
  return cupti_host->intern(cupti_self, s, (size_t)(v - s));
}

/* What an API call enqueues, for loom report (LOOM_RECORD_F_*): kernel
 * and graph launches, and copies and fills. */
static uint16_t api_roles(const char *s) {
  static const char *const launch[] = {"cudaLaunch", "cuLaunch", "cudaGraphLaunch",
                                       "cuGraphLaunch"};
  static const char *const memory[] = {"cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset"};
  if (strstr(s, "LaunchHostFunc")) return 0; /* host work, not device compute */
  for (size_t i = 0; i < 4; i++) {
    if (!strncmp(s, launch[i], strlen(launch[i]))) return LOOM_RECORD_F_LAUNCH;
    if (!strncmp(s, memory[i], strlen(memory[i]))) return LOOM_RECORD_F_MEMORY;
  }
  return 0;
}

/* Communication kernels of NCCL: "ncclKernel_...", "ncclDevKernel_..."
 * (mangled: "_Z<length>nccl..."). */
static uint16_t kernel_roles(const char *mangled) {
  const char *s = mangled ? mangled : "";
  if (s[0] == '_' && s[1] == 'Z') s += 2 + strspn(s + 2, "0123456789");
  return !strncmp(s, "nccl", 4) ? LOOM_RECORD_F_COMM : 0;
}

static loom_string_id api_name(int runtime, uint32_t cbid, uint16_t *roles) {
  const char *s = NULL;
  CUpti_CallbackDomain dom = runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
  *roles = 0;
  if (atomic_load(&cupti_loaded) && cupti.GetCallbackName(dom, cbid, &s) == CUPTI_SUCCESS && s) {
    *roles = api_roles(s);
    return runtime ? strip_version(s) : intern(s);
  }
  s = runtime ? table_name(runtime_names, sizeof runtime_names / sizeof *runtime_names, cbid)
              : table_name(driver_names, sizeof driver_names / sizeof *driver_names, cbid);
  if (s) *roles = api_roles(s);
  if (s) return intern(s);
  char buf[48];
  snprintf(buf, sizeof buf, "%s#%u", runtime ? "cudaRuntimeApi" : "cudaDriverApi", cbid);
  return intern(buf);
}

static const char *copy_kind(unsigned k) {
  static const char *const n[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                  "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return k < sizeof n / sizeof *n ? n[k] : "Unknown";
}

static const char *memory_kind(unsigned k) {
  static const char *const n[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                  "Array",   "Managed",  "Device Static", "Managed Static"};
  return k < sizeof n / sizeof *n ? n[k] : "Unknown";
}

static const char *sync_name(unsigned type) {
  switch (type) {
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "Event Sync";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "Stream Wait Event";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "Stream Sync";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "Context Sync";
  default: return "Unknown Sync";
  }
}

static const char *overhead_name(unsigned kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "Driver Compiler";
  case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "Buffer Flush";
  case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "Instrumentation";
  case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "Resource";
  case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "Module Loading";
  case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "Lazy Function Loading";
  case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "Command Buffer Full";
  case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "Activity Buffer Request";
  case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "UVM Activity Init";
  default: return "Unknown Overhead";
  }
}

/* ---- one function per record kind (mu held) ----------------------------- */
/* roles: LOOM_RECORD_F_* (what the record is for, for loom report).  res is
 * the resource of a device record, the OS thread id of a host record. */
static void emit_as(uint16_t kind, uint16_t roles, uint32_t dev, uint32_t res, uint64_t start,
                    uint64_t end, loom_string_id name, uint32_t corr, const loom_arg *args,
                    uint32_t nargs) {
  loom_record r = {.struct_size = sizeof r, .kind = kind, .flags = roles, .clock = cupti_clock,
                   .device = dev, .start = start, .end = end < start ? start : end,
                   .name = name, .correlation = corr, .external_id = external_of(corr),
                   .nargs = nargs, .args = nargs ? args : NULL};
  if (dev == LOOM_DEVICE_HOST) r.tid = res;
  else r.resource = res;
  cupti_host->emit(cupti_self, &r);
}

static void emit(uint16_t kind, uint32_t dev, uint32_t res, uint64_t start, uint64_t end,
                 loom_string_id name, uint32_t corr, const loom_arg *args, uint32_t nargs) {
  emit_as(kind, 0, dev, res, start, end, name, corr, args, nargs);
}

#define ARG_U(k, x) ((loom_arg){.key = (k), .type = LOOM_ARG_UINT, .v.u = (x)})
#define ARG_S(k, x) ((loom_arg){.key = (k), .type = LOOM_ARG_STRING, .v.s = (x)})

static uint32_t graph_args(loom_arg *a, uint32_t n, uint32_t graph, uint64_t node) {
  if (graph) a[n++] = ARG_U("graph id", graph);
  if (node) a[n++] = ARG_U("graph node id", node);
  return n;
}

static void decode_kernel(const CUpti_ActivityKernel10 *k) {
  uint32_t dev, res = stream_of(k->deviceId, k->contextId, k->streamId, &dev);
  char grid[64], block[64];
  snprintf(grid, sizeof grid, "[%d, %d, %d]", k->gridX, k->gridY, k->gridZ);
  snprintf(block, sizeof block, "[%d, %d, %d]", k->blockX, k->blockY, k->blockZ);
  loom_arg a[8];
  uint32_t n = 0;
  a[n++] = ARG_S("grid", grid);
  a[n++] = ARG_S("block", block);
  a[n++] = ARG_U("registers per thread", k->registersPerThread);
  a[n++] = ARG_U("shared memory",
                 (uint64_t)(uint32_t)k->staticSharedMemory + (uint32_t)k->dynamicSharedMemory);
  a[n++] = ARG_U("context", k->contextId);
  n = graph_args(a, n, k->graphId, k->graphNodeId);
  emit_as(LOOM_KIND_KERNEL, kernel_roles(k->name), dev, res, k->start, k->end, kernel_name(k->name),
          k->correlationId, a, n);
}

static void decode_memcpy(const CUpti_ActivityMemcpy6 *m) {
  uint32_t dev, res = stream_of(m->deviceId, m->contextId, m->streamId, &dev);
  char name[96];
  snprintf(name, sizeof name, "Memcpy %s (%s -> %s)", copy_kind(m->copyKind),
           memory_kind(m->srcKind), memory_kind(m->dstKind));
  loom_arg a[6];
  uint32_t n = 0;
  a[n++] = ARG_U("bytes", m->bytes);
  if (m->copyKind && copy_kind(m->copyKind)[0] != 'U')
    a[n++] = ARG_S("direction", copy_kind(m->copyKind));
  a[n++] = ARG_U("context", m->contextId);
  n = graph_args(a, n, m->graphId, m->graphNodeId);
  emit(LOOM_KIND_MEMCPY, dev, res, m->start, m->end, intern(name), m->correlationId, a, n);
}

static void decode_memset(const CUpti_ActivityMemset4 *m) {
  uint32_t dev, res = stream_of(m->deviceId, m->contextId, m->streamId, &dev);
  char name[64];
  snprintf(name, sizeof name, "Memset (%s)", memory_kind(m->memoryKind));
  loom_arg a[5];
  uint32_t n = 0;
  a[n++] = ARG_U("bytes", m->bytes);
  a[n++] = ARG_U("value", m->value);
  a[n++] = ARG_U("context", m->contextId);
  n = graph_args(a, n, m->graphId, m->graphNodeId);
  emit(LOOM_KIND_MEMSET, dev, res, m->start, m->end, intern(name), m->correlationId, a, n);
}

/* ---- memory (mu held) ------------------------------------------------------ */
static void emit_memory(const pending_mem *m, uint32_t tid, loom_string_id name) {
  loom_arg a[5];
  uint32_t n = 0;
  a[n++] = ARG_U("addr", m->addr);
  a[n++] = ARG_U("bytes", m->bytes);
  a[n++] = ARG_S("memory_kind", m->kind);
  if (m->dev != LOOM_DEVICE_HOST) a[n++] = ARG_U("device", m->dev);
  if (m->reserved) a[n++] = ARG_U("reserved", m->reserved);
  emit_as(LOOM_KIND_MEMORY, m->flag, LOOM_DEVICE_HOST, tid, m->ts, m->ts, name, m->corr, a, n);
}

/* Without its call: the main thread, a generic name. */
static void emit_memory_alone(const pending_mem *m) {
  emit_memory(m, m->pid, intern(m->flag == LOOM_RECORD_F_ALLOC ? "CUDA memory allocation"
                                                               : "CUDA memory release"));
}

/* The memory records that waited for correlation corr's call; on the way,
 * those whose call is ORPHAN_AGE ids older than corr (ids grow: it is not
 * coming) go to the main thread, so few ever wait. */
#define ORPHAN_AGE 65536u
static void release_pending(uint32_t corr, uint32_t tid, loom_string_id name) {
  size_t kept = 0;
  for (size_t i = 0; i < npending; i++) {
    if (pending[i].corr == corr) emit_memory(&pending[i], tid, name);
    else if (corr > ORPHAN_AGE && pending[i].corr < corr - ORPHAN_AGE)
      emit_memory_alone(&pending[i]);
    else pending[kept++] = pending[i];
  }
  npending = kept;
}

static void wait_for_call(const pending_mem *m) {
  if (npending == cap_pending && npending < PENDING_MAX) {
    size_t nc = cap_pending ? cap_pending * 2 : 64;
    pending_mem *p = realloc(pending, nc * sizeof *p);
    if (p) pending = p, cap_pending = nc;
  }
  if (npending < cap_pending) pending[npending++] = *m;
  else emit_memory_alone(m);
}

/* loom's memory kind of CUPTI's; *on_device: the memory lives on the
 * record's device (not host memory). */
static const char *memory_kind_of(unsigned k, int *on_device) {
  *on_device = 1;
  switch (k) {
  case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: *on_device = 0; return "host";
  case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: *on_device = 0; return "host_pinned";
  case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
  case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "shared";
  default: return "device"; /* device, device static, array, unknown */
  }
}

/* A MEMORY2 record.  Only the fields every version of the struct shares
 * (up to memoryPoolConfig) are read.  Memory from a CUDA memory pool
 * (cudaMallocAsync: a local pool) is the kind "pool", with the pool's size
 * as its reserved bytes. */
static void decode_memory(const CUpti_ActivityMemory4 *r) {
  unsigned op = r->memoryOperationType;
  if (op != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
      op != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
    return;
  int on_device;
  pending_mem m = {.flag = op == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                               ? LOOM_RECORD_F_ALLOC : LOOM_RECORD_F_FREE,
                   .corr = r->correlationId, .pid = r->processId, .ts = r->timestamp,
                   .addr = r->address, .bytes = r->bytes,
                   .kind = memory_kind_of(r->memoryKind, &on_device)};
  m.dev = on_device ? device_of(r->deviceId) : LOOM_DEVICE_HOST;
  if (r->memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
    m.kind = "pool";
    m.reserved = r->memoryPoolConfig.pool.size;
  } else if (r->memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED) {
    m.kind = "pool";
  }
  map_entry *e = corr_find(r->correlationId);
  if (e && e->c) emit_memory(&m, (uint32_t)e->b, (loom_string_id)e->c);
  else wait_for_call(&m);
}

void cupti_decode_finish(void) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < npending; i++) emit_memory_alone(&pending[i]);
  npending = 0;
  pthread_mutex_unlock(&mu);
}

static void decode_api(const CUpti_ActivityAPI *api) {
  int runtime = api->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
  uint32_t tid = api->threadId;
  map_entry *e = corr_put(api->correlationId);
  if (e) e->b = tid;
  uint16_t roles;
  loom_string_id name = api_name(runtime, api->cbid, &roles);
  if (e && !e->c) e->c = name;
  emit_as(runtime ? LOOM_KIND_RUNTIME : LOOM_KIND_DRIVER, roles, LOOM_DEVICE_HOST, tid, api->start,
          api->end, name, api->correlationId, NULL, 0);
  if (npending) release_pending(api->correlationId, tid, e ? (loom_string_id)e->c : name);
}

static void decode_external(const CUpti_ActivityExternalCorrelation *x) {
  map_entry *e = corr_put(x->correlationId);
  if (e) e->a = x->externalId;
}

static void decode_sync(const CUpti_ActivitySynchronization2 *s) {
  loom_string_id name = intern(sync_name(s->type));
  map_entry *c = corr_find(s->correlationId);
  int on_stream = s->type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE &&
                  s->streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  if (!on_stream && c && c->b) {
    emit(LOOM_KIND_SYNC, LOOM_DEVICE_HOST, (uint32_t)c->b, s->start, s->end, name,
         s->correlationId, NULL, 0);
    return;
  }
  map_entry *ctx = map_find(&contexts, (uint64_t)s->contextId + 1);
  uint32_t id = ctx ? (uint32_t)ctx->a : 0, dev;
  uint32_t stream = on_stream ? s->streamId : 0;
  uint32_t res = stream_of(id, s->contextId, stream, &dev);
  loom_arg a[1] = {ARG_U("context", s->contextId)};
  emit(LOOM_KIND_SYNC, dev, res, s->start, s->end, name, s->correlationId, a, 1);
}

static void decode_overhead(const CUpti_ActivityOverhead3 *o) {
  loom_string_id name = intern(overhead_name(o->overheadKind));
  if (o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
      o->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
    emit(LOOM_KIND_OVERHEAD, LOOM_DEVICE_HOST, o->objectId.pt.threadId, o->start,
         o->end, name, 0, NULL, 0);
    return;
  }
  uint32_t dev = device_of(o->objectId.dcs.deviceId), res = 0;
  if (dev == LOOM_DEVICE_HOST ||
      cupti_host->resource_add(cupti_self, dev, "CUPTI overhead", 0, &res) != LOOM_OK)
    return;
  emit(LOOM_KIND_OVERHEAD, dev, res, o->start, o->end, name, 0, NULL, 0);
}

static void decode_device(const CUpti_ActivityDevice5 *d) {
  if (map_find(&devices, (uint64_t)d->id + 1)) return; /* already described */
  char cc[24];
  snprintf(cc, sizeof cc, "%u.%u", d->computeCapabilityMajor, d->computeCapabilityMinor);
  loom_arg p[] = {ARG_U("SM count", d->numMultiprocessors),
                  ARG_U("global memory bytes", d->globalMemorySize),
                  ARG_S("compute capability", cc),
                  ARG_U("max threads per block", d->maxThreadsPerBlock),
                  ARG_U("warp size", d->numThreadsPerWarp)};
  add_device(d->id, d->name, p, sizeof p / sizeof *p);
}

/* ---- dispatch and walkers ------------------------------------------------ */
size_t cupti_record_size(CUpti_ActivityKind kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
  case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
  case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
  case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
  case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
  case CUPTI_ACTIVITY_KIND_DEVICE: return sizeof(CUpti_ActivityDevice5);
  case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
  default: return 0;
  }
}

static int decode_locked(const CUpti_Activity *r) {
  switch (r->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: decode_kernel((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_MEMCPY: decode_memcpy((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_MEMSET: decode_memset((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER: decode_api((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: decode_external((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: decode_sync((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_OVERHEAD: decode_overhead((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_DEVICE: decode_device((const void *)r); break;
  case CUPTI_ACTIVITY_KIND_MEMORY2: decode_memory((const void *)r); break;
  default: return 0;
  }
  return 1;
}

int cupti_decode_record(const CUpti_Activity *r) {
  if (!cupti_host || !cupti_self) return 0;
  pthread_mutex_lock(&mu);
  int ok = decode_locked(r);
  pthread_mutex_unlock(&mu);
  return ok;
}

int cupti_walk_own(const uint8_t *buf, size_t valid) {
  int n = 0;
  size_t off = 0;
  while (off + sizeof(CUpti_Activity) <= valid) {
    CUpti_Activity head;
    memcpy(&head, buf + off, sizeof head);
    size_t sz = cupti_record_size(head.kind);
    if (!sz || off + sz > valid || ((uintptr_t)(buf + off) & (ACTIVITY_RECORD_ALIGNMENT - 1)))
      return -1;
    n += cupti_decode_record((const CUpti_Activity *)(const void *)(buf + off));
    off += sz;
  }
  return off == valid ? n : -1;
}

int cupti_walk_cupti(uint8_t *buf, size_t valid) {
  int n = 0;
  CUpti_Activity *r = NULL;
  while (cupti.ActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
    n += cupti_decode_record(r);
  return n;
}
