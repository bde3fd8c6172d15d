/*
 * backend.c - libloom-levelzero.so: the Level Zero backend (device type
 * "xpu").  Built against loom's public headers and the Level Zero headers
 * only; the loader (libze_loader.so.1) is opened with dlopen in probe.
 *
 * Host side: the loader's tracing layer (ZE_ENABLE_TRACING_LAYER=1, which
 * `loom record` sets) calls a prologue and an epilogue around each traced
 * API call on the calling thread; the epilogue emits a RUNTIME (or SYNC)
 * record with the thread's id.
 *
 * Device side: every kernel launch, copy, fill and barrier gets a signal
 * event: the application's own, or (when it passed none) one of the
 * backend's from its own timestamp event pool, swapped into the call's
 * parameters in the prologue (the application never sees it).  Event pools
 * the application creates get ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP added.  The
 * command is remembered on its immediate list, or on its regular list and,
 * at zeCommandQueueExecuteCommandLists, on the queue.  Completed commands
 * are read (zeEventQueryKernelTimestamp) at host synchronisation calls,
 * before the application resets or destroys events, lists or contexts, and
 * at flush.  Kernel timestamps have kernelTimestampValidBits bits: they are
 * extended to the full device counter next to the device time estimated
 * from the last sync point, then converted to ns with the timer frequency.
 * Each device gets a LOOM_CLOCK_DEVICE clock with sync points from
 * zeDeviceGetGlobalTimestamps at start and at stop (drift interpolated).
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <dlfcn.h>
#include <level_zero/layers/zel_tracing_api.h>
#include <level_zero/layers/zel_tracing_register_cb.h>
#include <level_zero/ze_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/plugin.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- the loader, opened at probe ----------------------------------------- */
#define ZE_FNS(X)                                                                     \
  X(zeInit) X(zeDriverGet) X(zeDeviceGet) X(zeDeviceGetProperties)                    \
  X(zeDeviceGetGlobalTimestamps) X(zeEventPoolCreate) X(zeEventPoolDestroy)           \
  X(zeEventCreate) X(zeEventDestroy) X(zeEventQueryStatus) X(zeEventHostReset)        \
  X(zeEventQueryKernelTimestamp) X(zeMemGetAllocProperties) X(zeKernelGetName)        \
  X(zelTracerCreate) X(zelTracerSetEnabled)

/* Traced calls: name, params struct, kind handler. */
#define ZE_TRACED(X)                                                                  \
  X(ContextCreate, context_create) X(ContextDestroy, context_destroy)                \
  X(CommandQueueCreate, command_queue_create) X(CommandQueueDestroy, command_queue_destroy) \
  X(CommandQueueExecuteCommandLists, command_queue_execute_command_lists)             \
  X(CommandQueueSynchronize, command_queue_synchronize)                               \
  X(CommandListCreate, command_list_create) X(CommandListCreateImmediate, command_list_create_immediate) \
  X(CommandListDestroy, command_list_destroy) X(CommandListClose, command_list_close) \
  X(CommandListReset, command_list_reset)                                             \
  X(CommandListAppendLaunchKernel, command_list_append_launch_kernel)                 \
  X(CommandListAppendMemoryCopy, command_list_append_memory_copy)                     \
  X(CommandListAppendMemoryFill, command_list_append_memory_fill)                     \
  X(CommandListAppendBarrier, command_list_append_barrier)                            \
  X(EventPoolCreate, event_pool_create) X(EventPoolDestroy, event_pool_destroy)       \
  X(EventCreate, event_create) X(EventDestroy, event_destroy)                         \
  X(EventHostSynchronize, event_host_synchronize) X(EventHostReset, event_host_reset) \
  X(ModuleCreate, module_create) X(ModuleDestroy, module_destroy)                     \
  X(KernelCreate, kernel_create) X(KernelDestroy, kernel_destroy)                     \
  X(KernelSetGroupSize, kernel_set_group_size) X(KernelSetArgumentValue, kernel_set_argument_value) \
  X(MemAllocDevice, mem_alloc_device) X(MemAllocHost, mem_alloc_host)                 \
  X(MemAllocShared, mem_alloc_shared) X(MemFree, mem_free)

static struct {
#define DECL(f) __typeof__(&f) f;
  ZE_FNS(DECL)
#undef DECL
#define DECLR(n, p) __typeof__(&zelTracer##n##RegisterCallback) reg_##n;
  ZE_TRACED(DECLR)
#undef DECLR
} ze;

static const loom_host *host;
static loom_backend *self;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int recording;
static atomic_uint gen;
static atomic_uint_fast64_t next_corr;
static loom_clock host_clk;
static zel_tracer_handle_t tracer;
static ze_result_t init_result = ZE_RESULT_ERROR_UNINITIALIZED;
static int loaded;
static __thread int busy; /* inside the backend's own Level Zero calls */

static uint64_t raw_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *result_name(ze_result_t r) {
  switch (r) {
#define R(x) case x: return #x;
    R(ZE_RESULT_SUCCESS) R(ZE_RESULT_NOT_READY) R(ZE_RESULT_ERROR_UNINITIALIZED)
    R(ZE_RESULT_ERROR_DEVICE_LOST) R(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    R(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) R(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    R(ZE_RESULT_ERROR_INVALID_ARGUMENT) R(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    R(ZE_RESULT_ERROR_INVALID_NULL_POINTER) R(ZE_RESULT_ERROR_UNKNOWN)
    R(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE) R(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)
    R(ZE_RESULT_ERROR_NOT_AVAILABLE) R(ZE_RESULT_ERROR_INVALID_ENUMERATION)
#undef R
  default: return "an unknown ze_result_t";
  }
}

/* ---- devices --------------------------------------------------------------- */
typedef struct xdev {
  ze_device_handle_t h;
  double ns_per_tick;
  uint64_t kmask;               /* kernel timestamp mask */
  uint64_t gmask;               /* global timestamp mask */
  uint64_t sync_ticks, sync_raw;/* last sync point */
  unsigned gen;
  uint32_t index;
  loom_clock clk;
  char name[ZE_MAX_DEVICE_NAME];
  ze_device_properties_t props;
} xdev;
static xdev devs[16];
static size_t ndevs;

/* ---- objects: queues, lists, kernels, own event pools --------------------- */
enum { OBJ_QUEUE = 1, OBJ_LIST, OBJ_IMM };
typedef struct cmd {
  uint16_t kind;
  int mine;                 /* the backend's event: reset and reused */
  uint32_t name;
  unsigned gen;
  uint64_t corr, bytes;
  const char *dir;
  uint32_t gc[3], gs[3];
  ze_event_handle_t ev;
  ze_context_handle_t ctx;
} cmd;
typedef struct obj {
  void *h;
  int type;
  ze_device_handle_t dev;
  ze_context_handle_t ctx;
  uint64_t native;
  unsigned gen;
  uint32_t res;
  cmd *c;                   /* regular list: template; queue/immediate: pending */
  size_t n, cap;
} obj;
static obj *objs;
static size_t nobjs, cap_objs;
static uint64_t serial;

typedef struct kinfo { ze_kernel_handle_t h; uint32_t name; uint32_t gs[3]; } kinfo;
static kinfo *kernels;
static size_t nkernels, cap_kernels;

enum { POOL_EVENTS = 1024 };
typedef struct mypool {
  ze_context_handle_t ctx;
  ze_event_pool_handle_t pool;
  ze_event_handle_t ev[POOL_EVENTS];
  uint8_t used[POOL_EVENTS];
} mypool;
static mypool *pools[16];
static size_t npools;

static obj *find_obj(void *h) {
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].h == h) return &objs[i];
  return NULL;
}
static obj *add_obj(void *h, int type, ze_device_handle_t d, ze_context_handle_t c) {
  obj *o = find_obj(h);
  if (!o) {
    if (nobjs == cap_objs) {
      size_t nc = cap_objs ? cap_objs * 2 : 32;
      obj *p = realloc(objs, nc * sizeof *p);
      if (!p) return NULL;
      objs = p, cap_objs = nc;
    }
    o = &objs[nobjs++];
  } else {
    free(o->c);
  }
  memset(o, 0, sizeof *o);
  o->h = h, o->type = type, o->dev = d, o->ctx = c, o->native = ++serial;
  return o;
}
static int push_cmd(obj *o, const cmd *c) {
  if (o->n == o->cap) {
    size_t nc = o->cap ? o->cap * 2 : 64;
    cmd *p = realloc(o->c, nc * sizeof *p);
    if (!p) return -1;
    o->c = p, o->cap = nc;
  }
  o->c[o->n++] = *c;
  return 0;
}
static kinfo *find_kernel(ze_kernel_handle_t k) {
  for (size_t i = 0; i < nkernels; i++)
    if (kernels[i].h == k) return &kernels[i];
  if (nkernels == cap_kernels) {
    size_t nc = cap_kernels ? cap_kernels * 2 : 32;
    kinfo *p = realloc(kernels, nc * sizeof *p);
    if (!p) return NULL;
    kernels = p, cap_kernels = nc;
  }
  kinfo *ki = &kernels[nkernels++];
  memset(ki, 0, sizeof *ki);
  ki->h = k;
  ki->gs[0] = ki->gs[1] = ki->gs[2] = 1;
  return ki;
}
static xdev *find_dev(ze_device_handle_t d) {
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].h == d) return &devs[i];
  return NULL;
}

/* An event of the backend's own timestamp pool for ctx (mu held). */
static ze_event_handle_t own_event(ze_context_handle_t ctx) {
  mypool *p = NULL;
  for (size_t i = 0; i < npools; i++)
    if (pools[i]->ctx == ctx) p = pools[i];
  if (!p) {
    if (npools == 16 || !(p = calloc(1, sizeof *p))) return NULL;
    ze_event_pool_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                               .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE | ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP,
                               .count = POOL_EVENTS};
    busy++;
    ze_result_t r = ze.zeEventPoolCreate(ctx, &pd, 0, NULL, &p->pool);
    busy--;
    if (r != ZE_RESULT_SUCCESS) {
      free(p);
      return NULL;
    }
    p->ctx = ctx;
    pools[npools++] = p;
  }
  for (uint32_t i = 0; i < POOL_EVENTS; i++) {
    if (p->used[i]) continue;
    if (!p->ev[i]) {
      ze_event_desc_t ed = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC, .index = i,
                            .signal = ZE_EVENT_SCOPE_FLAG_HOST, .wait = ZE_EVENT_SCOPE_FLAG_HOST};
      busy++;
      ze_result_t r = ze.zeEventCreate(p->pool, &ed, &p->ev[i]);
      busy--;
      if (r != ZE_RESULT_SUCCESS) return NULL;
    }
    p->used[i] = 1;
    return p->ev[i];
  }
  return NULL;
}
static void release_own(ze_event_handle_t e) {
  for (size_t i = 0; i < npools; i++)
    for (uint32_t k = 0; k < POOL_EVENTS; k++)
      if (pools[i]->ev[k] == e) {
        busy++;
        ze.zeEventHostReset(e);
        busy--;
        pools[i]->used[k] = 0;
        return;
      }
}

/* ---- device records ------------------------------------------------------- */
static void sync_point(xdev *d) {
  uint64_t hts = 0, dts = 0;
  busy++;
  ze_result_t r = ze.zeDeviceGetGlobalTimestamps(d->h, &hts, &dts);
  busy--;
  if (r != ZE_RESULT_SUCCESS) {
    host->report(self, LOOM_SEV_WARNING, "zeDeviceGetGlobalTimestamps failed: %s", result_name(r));
    return;
  }
  dts &= d->gmask;
  d->sync_ticks = dts, d->sync_raw = hts;
  /* The host side of the pair is CLOCK_MONOTONIC_RAW ns (as the driver reads it). */
  host->clock_sync(self, d->clk, (uint64_t)((double)dts * d->ns_per_tick), LOOM_CLOCK_MONOTONIC_RAW, hts);
}

/* A kernel timestamp (kernelTimestampValidBits) as full device ticks: the
 * value with those low bits nearest the device time estimated now. */
static uint64_t extend(const xdev *d, uint64_t k) {
  uint64_t est = d->sync_ticks + (uint64_t)((double)(raw_now() - d->sync_raw) / d->ns_per_tick);
  uint64_t m = d->kmask, half = (m >> 1) + 1;
  uint64_t full = (est & ~m) | (k & m);
  if (m == UINT64_MAX) return k;
  if (full > est + half) full -= m + 1;
  else if (full + half < est) full += m + 1;
  return full;
}

static uint32_t session_resource(obj *o, unsigned g, xdev *d) {
  if (o->gen != g) {
    char name[64];
    snprintf(name, sizeof name, "%s %llu", o->type == OBJ_IMM ? "immediate list" : "command queue",
             (unsigned long long)o->native);
    if (host->resource_add(self, d->index, name, o->native, &o->res) != LOOM_OK) return UINT32_MAX;
    o->gen = g;
  }
  return o->res;
}

static void emit_cmd(obj *o, const cmd *c, const ze_kernel_timestamp_result_t *ts) {
  unsigned g = atomic_load(&gen);
  xdev *d = find_dev(o->dev);
  if (!d || d->gen != g) {
    host->count_lost(self, 1, "a command on a device the backend does not know");
    return;
  }
  uint32_t res = session_resource(o, g, d);
  uint64_t s = extend(d, ts->global.kernelStart);
  uint64_t e = s + ((ts->global.kernelEnd - ts->global.kernelStart) & d->kmask);
  uint64_t sn = (uint64_t)((double)s * d->ns_per_tick), en = (uint64_t)((double)e * d->ns_per_tick);
  loom_arg args[4];
  uint32_t n = 0;
  char gc[64], gs[64];
  if (c->kind == LOOM_KIND_KERNEL) {
    snprintf(gc, sizeof gc, "[%u, %u, %u]", c->gc[0], c->gc[1], c->gc[2]);
    snprintf(gs, sizeof gs, "[%u, %u, %u]", c->gs[0], c->gs[1], c->gs[2]);
    args[n++] = (loom_arg){.key = "group count", .type = LOOM_ARG_STRING, .v.s = gc};
    args[n++] = (loom_arg){.key = "group size", .type = LOOM_ARG_STRING, .v.s = gs};
  } else if (c->kind != LOOM_KIND_SYNC) {
    args[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = c->bytes};
    if (c->dir) args[n++] = (loom_arg){.key = "direction", .type = LOOM_ARG_STRING, .v.s = c->dir};
  }
  loom_record r = {.struct_size = sizeof r, .kind = c->kind, .clock = d->clk, .device = d->index,
                   .resource = res, .start = sn, .end = en, .name = c->name,
                   .correlation = c->corr, .nargs = n, .args = n ? args : NULL};
  host->emit(self, &r);
}

/* Reads, emits and drops completed pending commands of o (mu held).  With
 * wait_until (MONOTONIC_RAW ns) it waits for incomplete ones until then;
 * returns how many are left. */
static size_t harvest(obj *o, uint64_t wait_until) {
  size_t i = 0;
  unsigned g = atomic_load(&gen);
  while (i < o->n) {
    cmd *c = &o->c[i];
    busy++;
    ze_result_t st = ze.zeEventQueryStatus(c->ev);
    busy--;
    if (st == ZE_RESULT_NOT_READY) {
      if (wait_until && raw_now() < wait_until) {
        struct timespec ms = {0, 100000};
        nanosleep(&ms, NULL);
        continue;
      }
      i++;
      continue;
    }
    if (c->gen == g) {
      ze_kernel_timestamp_result_t ts;
      busy++;
      ze_result_t r = st == ZE_RESULT_SUCCESS ? ze.zeEventQueryKernelTimestamp(c->ev, &ts) : st;
      busy--;
      if (r == ZE_RESULT_SUCCESS) emit_cmd(o, c, &ts);
      else host->count_lost(self, 1, "the driver gave no kernel timestamps for a command "
                            "(an event pool created before tracing, without timestamps?)");
    }
    if (c->mine && o->type == OBJ_IMM) release_own(c->ev);
    else if (c->mine) {
      busy++;
      ze.zeEventHostReset(c->ev); /* its list may run again */
      busy--;
    }
    o->c[i] = o->c[--o->n];
  }
  return o->n;
}
static void harvest_all(uint64_t wait_until) {
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].type != OBJ_LIST) harvest(&objs[i], wait_until);
}

/* ---- tracing callbacks ------------------------------------------------------ */
typedef struct call {
  uint64_t t0, corr;
  ze_event_handle_t mine;
} call;
static __thread call cur;

static uint32_t api_name(const char *s) {
  return host->intern(self, s, SIZE_MAX);
}

/* roles: LOOM_RECORD_F_* (what the call enqueues, for loom report). */
static void emit_call_as(const char *api, int kind, uint64_t corr, uint16_t roles) {
  if (!atomic_load(&recording)) return;
  loom_record r = {.struct_size = sizeof r, .kind = (uint16_t)kind, .flags = roles, .clock = host_clk,
                   .device = LOOM_DEVICE_HOST, .resource = host->thread_id(), .start = cur.t0,
                   .end = raw_now(), .name = api_name(api), .correlation = corr};
  host->emit(self, &r);
}

static void emit_call(const char *api, int kind, uint64_t corr) { emit_call_as(api, kind, corr, 0); }

static const char *mem_kind(ze_context_handle_t ctx, const void *p) {
  ze_memory_allocation_properties_t pr = {.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES};
  ze_device_handle_t d = NULL;
  busy++;
  ze_result_t r = ze.zeMemGetAllocProperties(ctx, p, &pr, &d);
  busy--;
  if (r != ZE_RESULT_SUCCESS) return "H";
  return pr.type == ZE_MEMORY_TYPE_DEVICE ? "D" : pr.type == ZE_MEMORY_TYPE_SHARED ? "S" : "H";
}

/* Prologue of a command append: a correlation, and an event when none. */
static void cmd_prologue(ze_command_list_handle_t l, ze_event_handle_t *sig) {
  cur.t0 = raw_now();
  cur.corr = 0;
  cur.mine = NULL;
  if (!atomic_load(&recording)) return;
  cur.corr = atomic_fetch_add(&next_corr, 1) + 1;
  if (!*sig) {
    pthread_mutex_lock(&mu);
    obj *o = find_obj(l);
    ze_event_handle_t e = o ? own_event(o->ctx) : NULL;
    pthread_mutex_unlock(&mu);
    if (e) *sig = cur.mine = e;
  }
}

/* Epilogue: the call's record, and the command remembered. */
static void cmd_epilogue(const char *api, ze_result_t res, ze_command_list_handle_t l, cmd *c,
                         ze_event_handle_t ev) {
  if (!cur.corr) return;
  uint16_t roles = c->kind == LOOM_KIND_KERNEL ? LOOM_RECORD_F_LAUNCH
                 : c->kind == LOOM_KIND_MEMCPY || c->kind == LOOM_KIND_MEMSET ? LOOM_RECORD_F_MEMORY : 0;
  emit_call_as(api, LOOM_KIND_RUNTIME, res == ZE_RESULT_SUCCESS ? cur.corr : 0, roles);
  pthread_mutex_lock(&mu);
  obj *o = find_obj(l);
  if (res != ZE_RESULT_SUCCESS || !o || !ev) {
    if (cur.mine) release_own(cur.mine);
    if (res == ZE_RESULT_SUCCESS) host->count_lost(self, 1, "a command on a list created before loom traced");
    pthread_mutex_unlock(&mu);
    return;
  }
  c->corr = cur.corr;
  c->ev = ev;
  c->mine = cur.mine != NULL;
  c->gen = atomic_load(&gen);
  c->ctx = o->ctx;
  if (o->type == OBJ_IMM && o->n >= 64) harvest(o, 0);
  if (push_cmd(o, c) != 0) host->count_lost(self, 1, "out of memory");
  pthread_mutex_unlock(&mu);
}

#define PRO(n, p) static void ZE_APICALL pro_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu)
#define EPI(n, p) static void ZE_APICALL epi_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu)
#define UNUSED (void)params, (void)r, (void)u, (void)iu

/* Plain calls: just their records. */
#define PLAIN(n, p)                                                           \
  PRO(n, p) { UNUSED; if (!busy) cur.t0 = raw_now(); }                       \
  EPI(n, p) { UNUSED; if (!busy) emit_call("ze" #n, LOOM_KIND_RUNTIME, 0); }
PLAIN(ModuleCreate, module_create)
PLAIN(ModuleDestroy, module_destroy)
PLAIN(KernelSetArgumentValue, kernel_set_argument_value)
PLAIN(MemAllocDevice, mem_alloc_device)
PLAIN(MemAllocHost, mem_alloc_host)
PLAIN(MemAllocShared, mem_alloc_shared)
PLAIN(MemFree, mem_free)
PLAIN(CommandListClose, command_list_close)
PLAIN(EventCreate, event_create)
PLAIN(ContextCreate, context_create)
PLAIN(KernelDestroy, kernel_destroy)

/* Calls before which completed commands must be read (they reset or free
 * what the timestamps live in). */
#define HARVEST_FIRST(n, p)                                                    \
  PRO(n, p) {                                                                  \
    UNUSED;                                                                    \
    if (busy) return;                                                          \
    cur.t0 = raw_now();                                                        \
    pthread_mutex_lock(&mu);                                                   \
    harvest_all(0);                                                            \
    pthread_mutex_unlock(&mu);                                                 \
    cur.t0 = raw_now();                                                        \
  }                                                                            \
  EPI(n, p) { UNUSED; if (!busy) emit_call("ze" #n, LOOM_KIND_RUNTIME, 0); }
HARVEST_FIRST(EventDestroy, event_destroy)
HARVEST_FIRST(EventHostReset, event_host_reset)
HARVEST_FIRST(EventPoolDestroy, event_pool_destroy)
PRO(CommandQueueDestroy, command_queue_destroy) {
  UNUSED;
  if (busy) return;
  pthread_mutex_lock(&mu);
  harvest_all(0);
  pthread_mutex_unlock(&mu);
  cur.t0 = raw_now();
}
EPI(CommandQueueDestroy, command_queue_destroy) {
  UNUSED;
  if (busy) return;
  emit_call("zeCommandQueueDestroy", LOOM_KIND_RUNTIME, 0);
  if (r != ZE_RESULT_SUCCESS) return;
  pthread_mutex_lock(&mu);
  obj *o = find_obj(*params->phCommandQueue);
  if (o) { /* commands it still held never complete now */
    free(o->c);
    *o = objs[--nobjs];
  }
  pthread_mutex_unlock(&mu);
}

/* Host synchronisation: a SYNC record, then completed commands are read. */
#define SYNC(n, p)                                                             \
  PRO(n, p) { UNUSED; if (!busy) cur.t0 = raw_now(); }                        \
  EPI(n, p) {                                                                  \
    UNUSED;                                                                    \
    if (busy) return;                                                          \
    emit_call("ze" #n, LOOM_KIND_SYNC, 0);                                     \
    pthread_mutex_lock(&mu);                                                   \
    harvest_all(0);                                                            \
    pthread_mutex_unlock(&mu);                                                 \
  }
SYNC(CommandQueueSynchronize, command_queue_synchronize)
SYNC(EventHostSynchronize, event_host_synchronize)

PRO(ContextDestroy, context_destroy) {
  UNUSED;
  if (busy) return;
  pthread_mutex_lock(&mu);
  harvest_all(0);
  for (size_t i = 0; i < npools;) {
    if (pools[i]->ctx == *params->phContext) {
      busy++;
      for (uint32_t k = 0; k < POOL_EVENTS; k++)
        if (pools[i]->ev[k]) ze.zeEventDestroy(pools[i]->ev[k]);
      ze.zeEventPoolDestroy(pools[i]->pool);
      busy--;
      free(pools[i]);
      pools[i] = pools[--npools];
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&mu);
  cur.t0 = raw_now();
}
EPI(ContextDestroy, context_destroy) { UNUSED; if (!busy) emit_call("zeContextDestroy", LOOM_KIND_RUNTIME, 0); }

PRO(CommandQueueCreate, command_queue_create) { UNUSED; if (!busy) cur.t0 = raw_now(); }
EPI(CommandQueueCreate, command_queue_create) {
  UNUSED;
  if (busy) return;
  if (r == ZE_RESULT_SUCCESS) {
    pthread_mutex_lock(&mu);
    add_obj(**params->pphCommandQueue, OBJ_QUEUE, *params->phDevice, *params->phContext);
    pthread_mutex_unlock(&mu);
  }
  emit_call("zeCommandQueueCreate", LOOM_KIND_RUNTIME, 0);
}
PRO(CommandListCreate, command_list_create) { UNUSED; if (!busy) cur.t0 = raw_now(); }
EPI(CommandListCreate, command_list_create) {
  UNUSED;
  if (busy) return;
  if (r == ZE_RESULT_SUCCESS) {
    pthread_mutex_lock(&mu);
    add_obj(**params->pphCommandList, OBJ_LIST, *params->phDevice, *params->phContext);
    pthread_mutex_unlock(&mu);
  }
  emit_call("zeCommandListCreate", LOOM_KIND_RUNTIME, 0);
}
PRO(CommandListCreateImmediate, command_list_create_immediate) { UNUSED; if (!busy) cur.t0 = raw_now(); }
EPI(CommandListCreateImmediate, command_list_create_immediate) {
  UNUSED;
  if (busy) return;
  if (r == ZE_RESULT_SUCCESS) {
    pthread_mutex_lock(&mu);
    add_obj(**params->pphCommandList, OBJ_IMM, *params->phDevice, *params->phContext);
    pthread_mutex_unlock(&mu);
  }
  emit_call("zeCommandListCreateImmediate", LOOM_KIND_RUNTIME, 0);
}

/* Reset / destroy of a list: read what completed, give back its events. */
static void list_forget(ze_command_list_handle_t l, int destroy) {
  pthread_mutex_lock(&mu);
  harvest_all(0);
  obj *o = find_obj(l);
  if (o) {
    if (o->type == OBJ_LIST) {
      /* pending copies of its commands on queues go too */
      for (size_t i = 0; i < nobjs; i++) {
        obj *q = &objs[i];
        if (q->type != OBJ_QUEUE) continue;
        for (size_t k = 0; k < q->n;) {
          int ours = 0;
          for (size_t j = 0; j < o->n; j++) ours |= q->c[k].ev == o->c[j].ev && o->c[j].mine;
          if (ours) q->c[k] = q->c[--q->n];
          else k++;
        }
      }
    }
    for (size_t j = 0; j < o->n; j++)
      if (o->c[j].mine) release_own(o->c[j].ev);
    o->n = 0;
    if (destroy) {
      free(o->c);
      *o = objs[--nobjs];
    }
  }
  pthread_mutex_unlock(&mu);
}
PRO(CommandListReset, command_list_reset) {
  UNUSED;
  if (busy) return;
  list_forget(*params->phCommandList, 0);
  cur.t0 = raw_now();
}
EPI(CommandListReset, command_list_reset) { UNUSED; if (!busy) emit_call("zeCommandListReset", LOOM_KIND_RUNTIME, 0); }
PRO(CommandListDestroy, command_list_destroy) {
  UNUSED;
  if (busy) return;
  list_forget(*params->phCommandList, 1);
  cur.t0 = raw_now();
}
EPI(CommandListDestroy, command_list_destroy) { UNUSED; if (!busy) emit_call("zeCommandListDestroy", LOOM_KIND_RUNTIME, 0); }

PRO(CommandQueueExecuteCommandLists, command_queue_execute_command_lists) {
  UNUSED;
  if (busy) return;
  cur.t0 = raw_now();
  pthread_mutex_lock(&mu);
  harvest_all(0); /* a list that runs again re-signals its events */
  pthread_mutex_unlock(&mu);
}
EPI(CommandQueueExecuteCommandLists, command_queue_execute_command_lists) {
  UNUSED;
  if (busy) return;
  emit_call("zeCommandQueueExecuteCommandLists", LOOM_KIND_RUNTIME, 0);
  if (r != ZE_RESULT_SUCCESS) return;
  pthread_mutex_lock(&mu);
  obj *q = find_obj(*params->phCommandQueue);
  size_t lost = 0;
  for (uint32_t i = 0; i < *params->pnumCommandLists; i++) {
    obj *l = find_obj((*params->pphCommandLists)[i]);
    if (!l || !q) continue;
    for (size_t k = 0; k < l->n; k++)
      if (push_cmd(q, &l->c[k]) != 0) lost++;
    q = find_obj(*params->phCommandQueue); /* objs may not move here, but be safe */
  }
  pthread_mutex_unlock(&mu);
  if (lost) host->count_lost(self, lost, "out of memory");
}

PRO(EventPoolCreate, event_pool_create) {
  UNUSED;
  if (busy) return;
  cur.t0 = raw_now();
  /* Timestamps on every pool, so commands signalling the program's own
   * events can be timed.  The program's descriptor is not written to. */
  static __thread ze_event_pool_desc_t copy;
  const ze_event_pool_desc_t *d = *params->pdesc;
  if (d && !(d->flags & ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP)) {
    copy = *d;
    copy.flags |= ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP;
    *params->pdesc = &copy;
  }
}
EPI(EventPoolCreate, event_pool_create) { UNUSED; if (!busy) emit_call("zeEventPoolCreate", LOOM_KIND_RUNTIME, 0); }

PRO(KernelCreate, kernel_create) { UNUSED; if (!busy) cur.t0 = raw_now(); }
EPI(KernelCreate, kernel_create) {
  UNUSED;
  if (busy) return;
  if (r == ZE_RESULT_SUCCESS && *params->pdesc && (*params->pdesc)->pKernelName) {
    pthread_mutex_lock(&mu);
    kinfo *k = find_kernel(**params->pphKernel);
    if (k) {
      k->name = api_name((*params->pdesc)->pKernelName);
      k->gs[0] = k->gs[1] = k->gs[2] = 1;
    }
    pthread_mutex_unlock(&mu);
  }
  emit_call("zeKernelCreate", LOOM_KIND_RUNTIME, 0);
}
PRO(KernelSetGroupSize, kernel_set_group_size) { UNUSED; if (!busy) cur.t0 = raw_now(); }
EPI(KernelSetGroupSize, kernel_set_group_size) {
  UNUSED;
  if (busy) return;
  if (r == ZE_RESULT_SUCCESS) {
    pthread_mutex_lock(&mu);
    kinfo *k = find_kernel(*params->phKernel);
    if (k) k->gs[0] = *params->pgroupSizeX, k->gs[1] = *params->pgroupSizeY, k->gs[2] = *params->pgroupSizeZ;
    pthread_mutex_unlock(&mu);
  }
  emit_call("zeKernelSetGroupSize", LOOM_KIND_RUNTIME, 0);
}

PRO(CommandListAppendLaunchKernel, command_list_append_launch_kernel) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendLaunchKernel, command_list_append_launch_kernel) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_KERNEL};
  pthread_mutex_lock(&mu);
  kinfo *k = find_kernel(*params->phKernel);
  if (k && !k->name) {
    char nm[256] = "";
    size_t len = sizeof nm;
    busy++;
    if (ze.zeKernelGetName(*params->phKernel, &len, nm) != ZE_RESULT_SUCCESS || !nm[0])
      snprintf(nm, sizeof nm, "kernel");
    busy--;
    k->name = api_name(nm);
  }
  c.name = k ? k->name : api_name("kernel");
  if (k) memcpy(c.gs, k->gs, sizeof c.gs);
  pthread_mutex_unlock(&mu);
  const ze_group_count_t *g = *params->ppLaunchFuncArgs;
  if (g) c.gc[0] = g->groupCountX, c.gc[1] = g->groupCountY, c.gc[2] = g->groupCountZ;
  cmd_epilogue("zeCommandListAppendLaunchKernel", r, *params->phCommandList, &c, *params->phSignalEvent);
}
PRO(CommandListAppendMemoryCopy, command_list_append_memory_copy) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendMemoryCopy, command_list_append_memory_copy) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_MEMCPY, .bytes = *params->psize};
  pthread_mutex_lock(&mu);
  obj *o = find_obj(*params->phCommandList);
  ze_context_handle_t ctx = o ? o->ctx : NULL;
  pthread_mutex_unlock(&mu);
  static const char *dirs[3][3] = {{"HtoH", "HtoD", "HtoS"}, {"DtoH", "DtoD", "DtoS"}, {"StoH", "StoD", "StoS"}};
  const char *s = mem_kind(ctx, *params->psrcptr), *d = mem_kind(ctx, *params->pdstptr);
  int si = *s == 'H' ? 0 : *s == 'D' ? 1 : 2, di = *d == 'H' ? 0 : *d == 'D' ? 1 : 2;
  c.dir = dirs[si][di];
  char nm[32];
  snprintf(nm, sizeof nm, "Memcpy %s", c.dir);
  c.name = api_name(nm);
  cmd_epilogue("zeCommandListAppendMemoryCopy", r, *params->phCommandList, &c, *params->phSignalEvent);
}
PRO(CommandListAppendMemoryFill, command_list_append_memory_fill) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendMemoryFill, command_list_append_memory_fill) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_MEMSET, .bytes = *params->psize, .name = api_name("Memset")};
  cmd_epilogue("zeCommandListAppendMemoryFill", r, *params->phCommandList, &c, *params->phSignalEvent);
}
PRO(CommandListAppendBarrier, command_list_append_barrier) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendBarrier, command_list_append_barrier) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_SYNC, .name = api_name("Barrier")};
  cmd_epilogue("zeCommandListAppendBarrier", r, *params->phCommandList, &c, *params->phSignalEvent);
}

/* ---- the backend ---------------------------------------------------------- */
static loom_status load_loader(char *why, size_t n) {
  if (loaded) return LOOM_OK;
  void *h = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    snprintf(why, n, "the Level Zero loader (libze_loader.so.1) is not installed: %s", dlerror());
    return LOOM_ENOTFOUND;
  }
#define LOAD(f)                                                                    \
  if (!(*(void **)&ze.f = dlsym(h, #f))) {                                         \
    snprintf(why, n, "libze_loader.so.1 lacks %s (too old a loader)", #f);         \
    return LOOM_ENOTFOUND;                                                         \
  }
  ZE_FNS(LOAD)
#undef LOAD
#define LOADR(nm, p)                                                                  \
  if (!(*(void **)&ze.reg_##nm = dlsym(h, "zelTracer" #nm "RegisterCallback"))) {     \
    snprintf(why, n, "libze_loader.so.1 lacks zelTracer%sRegisterCallback", #nm);     \
    return LOOM_ENOTFOUND;                                                            \
  }
  ZE_TRACED(LOADR)
#undef LOADR
  loaded = 1;
  return LOOM_OK;
}

static loom_status ze_probe(loom_backend *b, char *why, size_t n) {
  self = b;
  loom_status st = load_loader(why, n);
  if (st != LOOM_OK) return st;
  busy++;
  init_result = ze.zeInit(0);
  busy--;
  if (init_result != ZE_RESULT_SUCCESS) {
    snprintf(why, n, "zeInit failed: %s (no Level Zero driver)", result_name(init_result));
    return LOOM_ENOTFOUND;
  }
  uint32_t nd = 0;
  busy++;
  ze_result_t r = ze.zeDriverGet(&nd, NULL);
  busy--;
  if (r != ZE_RESULT_SUCCESS || !nd) {
    snprintf(why, n, "no Level Zero driver (zeDriverGet: %s)", result_name(r));
    return LOOM_ENOTFOUND;
  }
  if (!tracer) {
    zel_tracer_desc_t d = {.stype = ZEL_STRUCTURE_TYPE_TRACER_DESC, .pUserData = NULL};
    busy++;
    r = ze.zelTracerCreate(&d, &tracer);
    busy--;
    if (r != ZE_RESULT_SUCCESS) {
      tracer = NULL;
      snprintf(why, n, "the Level Zero tracing layer is off (zelTracerCreate: %s): set "
               "ZE_ENABLE_TRACING_LAYER=1 before the program starts ('loom record' does)",
               result_name(r));
      return LOOM_ENOTFOUND;
    }
#define REG(nm, p)                                                                 \
    ze.reg_##nm(tracer, ZEL_REGISTER_PROLOGUE, pro_##nm);                          \
    ze.reg_##nm(tracer, ZEL_REGISTER_EPILOGUE, epi_##nm);
    ZE_TRACED(REG)
#undef REG
    /* Enabled for the rest of the process (objects made between sessions
     * stay known); callbacks record only while a session records. */
    ze.zelTracerSetEnabled(tracer, 1);
  }
  return LOOM_OK;
}

static loom_status ze_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  self = b;
  loom_status st = host->clock_declare(b, LOOM_CLOCK_MONOTONIC_RAW, "host", &host_clk);
  if (st != LOOM_OK) return st;
  unsigned g = atomic_load(&gen) + 1; /* the generation start will begin */
  ze_driver_handle_t drivers[8];
  uint32_t nd = 8;
  busy++;
  ze.zeDriverGet(&nd, drivers);
  pthread_mutex_lock(&mu);
  for (uint32_t i = 0; i < nd && i < 8; i++) {
    ze_device_handle_t dv[16];
    uint32_t n = 16;
    if (ze.zeDeviceGet(drivers[i], &n, dv) != ZE_RESULT_SUCCESS) continue;
    for (uint32_t k = 0; k < n && k < 16; k++) {
      xdev *d = find_dev(dv[k]);
      if (!d) {
        if (ndevs == 16) break;
        d = &devs[ndevs++];
        memset(d, 0, sizeof *d);
        d->h = dv[k];
        d->props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        ze.zeDeviceGetProperties(dv[k], &d->props);
        ze_device_properties_t p12 = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2};
        /* API 1.2+: timerResolution in cycles/s (exact); else ns per tick */
        if (ze.zeDeviceGetProperties(dv[k], &p12) == ZE_RESULT_SUCCESS && p12.timerResolution > 1000)
          d->ns_per_tick = 1e9 / (double)p12.timerResolution;
        else
          d->ns_per_tick = d->props.timerResolution ? (double)d->props.timerResolution : 1.0;
        unsigned kb = d->props.kernelTimestampValidBits, gb = d->props.timestampValidBits;
        d->kmask = kb && kb < 64 ? (1ull << kb) - 1 : UINT64_MAX;
        d->gmask = gb && gb < 64 ? (1ull << gb) - 1 : UINT64_MAX;
        memcpy(d->name, d->props.name, sizeof d->name);
        d->name[sizeof d->name - 1] = 0;
      }
      const ze_device_properties_t *p = &d->props;
      char vendor[32];
      if (p->vendorId == 0x8086) snprintf(vendor, sizeof vendor, "Intel");
      else snprintf(vendor, sizeof vendor, "vendor 0x%04x", p->vendorId);
      loom_arg props[] = {
          {.key = "vendor id", .type = LOOM_ARG_UINT, .v.u = p->vendorId},
          {.key = "device id", .type = LOOM_ARG_UINT, .v.u = p->deviceId},
          {.key = "core clock MHz", .type = LOOM_ARG_UINT, .v.u = p->coreClockRate},
          {.key = "execution units", .type = LOOM_ARG_UINT,
           .v.u = (uint64_t)p->numEUsPerSubslice * p->numSubslicesPerSlice * p->numSlices},
          {.key = "max alloc bytes", .type = LOOM_ARG_UINT, .v.u = p->maxMemAllocSize},
          {.key = "timer ns per tick", .type = LOOM_ARG_DOUBLE, .v.d = d->ns_per_tick},
          {.key = "timestamp valid bits", .type = LOOM_ARG_UINT, .v.u = p->timestampValidBits},
          {.key = "kernel timestamp valid bits", .type = LOOM_ARG_UINT, .v.u = p->kernelTimestampValidBits},
      };
      loom_device_info info = {.struct_size = sizeof info, .name = d->name, .vendor = vendor,
                               .type = p->type == ZE_DEVICE_TYPE_GPU ? "gpu"
                                       : p->type == ZE_DEVICE_TYPE_CPU ? "cpu" : "accelerator",
                               .props = props, .nprops = sizeof props / sizeof props[0]};
      if (host->device_add(b, &info, &d->index) != LOOM_OK) continue;
      char cn[300];
      snprintf(cn, sizeof cn, "%s", d->name);
      if (host->clock_declare(b, LOOM_CLOCK_DEVICE, cn, &d->clk) != LOOM_OK) continue;
      d->gen = g;
    }
  }
  pthread_mutex_unlock(&mu);
  busy--;
  return LOOM_OK;
}

static loom_status ze_start(loom_backend *b) {
  self = b;
  pthread_mutex_lock(&mu);
  unsigned g = atomic_fetch_add(&gen, 1) + 1;
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].gen == g) sync_point(&devs[i]);
  pthread_mutex_unlock(&mu);
  atomic_store(&recording, 1);
  return LOOM_OK;
}

static loom_status ze_stop(loom_backend *b) {
  (void)b;
  atomic_store(&recording, 0);
  return LOOM_OK;
}

static loom_status ze_flush(loom_backend *b) {
  const char *v = host->config_get(b, "levelzero.flush_timeout_ms");
  uint64_t deadline = raw_now() + (uint64_t)(v ? atol(v) : 2000) * 1000000ull;
  unsigned g = atomic_load(&gen);
  pthread_mutex_lock(&mu);
  harvest_all(deadline);
  size_t lost = 0;
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].type != OBJ_LIST)
      for (size_t k = 0; k < objs[i].n; k++) lost += objs[i].c[k].gen == g, objs[i].c[k].gen = 0;
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].gen == g) sync_point(&devs[i]);
  pthread_mutex_unlock(&mu);
  if (lost) host->count_lost(b, lost, "commands still executing at stop (levelzero.flush_timeout_ms)");
  return LOOM_OK;
}

/* loom record: the loader enables its tracing layer only when
 * ZE_ENABLE_TRACING_LAYER is set before the program starts (unless the user
 * chose otherwise).  Recorded by default where a driver is installed or
 * named (an alternate driver through ZE_ENABLE_ALT_DRIVERS): asking for xpu
 * elsewhere would only warn that there is none. */
static int ze_default_check(void) {
  const char *alt = getenv("ZE_ENABLE_ALT_DRIVERS");
  if (alt && *alt) return 1;
  void *d = dlopen("libze_intel_gpu.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (d) dlclose(d);
  return d != NULL;
}
static const loom_env_setting ze_env[] = {
    {"ZE_ENABLE_TRACING_LAYER", "1", LOOM_ENV_SET_IF_UNSET},
};
static const loom_backend_enable ze_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT,
    .env = ze_env,
    .nenv = sizeof ze_env / sizeof ze_env[0],
    .default_check = ze_default_check,
};

static const loom_backend_ops ze_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "levelzero",
    .device_type = "xpu",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_MEMSET) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
             LOOM_KIND_BIT(LOOM_KIND_SYNC),
    .flags = LOOM_BACKEND_F_LAZY,
    .runtime_category = "xpu_runtime",
    .probe = ze_probe,
    .configure = ze_configure,
    .start = ze_start,
    .stop = ze_stop,
    .flush = ze_flush,
    .enable = &ze_enable,
};

static loom_status ze_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  host = h;
  return h->backend_register(&ze_ops, NULL);
}

EXPORT loom_status loom_plugin_entry(const loom_host *h) { return ze_entry(h); }

/* dlopen()ed by a program that already runs loom: join its next session. */
__attribute__((constructor)) static void ze_attach(void) { loom_plugin_attach(ze_entry); }
