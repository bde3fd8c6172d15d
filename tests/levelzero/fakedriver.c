/*
 * fakedriver.c - a fake Level Zero driver for the tests, loaded by the REAL
 * loader (libze_loader) through ZE_ENABLE_ALT_DRIVERS, behind its tracing
 * layer.  One driver, one GPU device "Loom Fake XPU".  Commands run on the
 * host: immediate command lists at append time, regular ones when a queue
 * executes them.  Device timestamps are deterministic functions of the host
 * clock with an offset and a drift:
 *   ticks = (CLOCK_MONOTONIC_RAW ns * 1.0005 + 7e12) / TIMER_RES_NS
 * Kernel timestamps keep only KERNEL_TS_BITS bits (they wrap), global
 * timestamps TS_BITS bits.  A kernel runs for about 20 us, a copy or fill
 * for about 5 us plus its memcpy/memset.
 */
#define _GNU_SOURCE
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define TIMER_RES_NS 2
#define KERNEL_TS_BITS 32
#define TS_BITS 56

static uint64_t raw_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t ticks_of(uint64_t raw) {
  return (uint64_t)(((double)raw * 1.0005 + 7e12) / TIMER_RES_NS) & ((1ull << TS_BITS) - 1);
}
static void spin(uint64_t ns) {
  uint64_t end = raw_ns() + ns;
  while (raw_ns() < end) {
  }
}

typedef struct fevent { int signaled; uint64_t start, end; int ts; } fevent;
typedef struct fpool { fevent *ev; uint32_t n; int ts; } fpool;
typedef struct fkernel { char name[128]; uint32_t gs[3]; } fkernel;
enum { C_KERNEL, C_COPY, C_FILL, C_BARRIER };
typedef struct fcmd {
  int type;
  void *dst;
  const void *src;
  size_t size, psize;
  fevent *ev;
  uint64_t dur;
} fcmd;
typedef struct flist { int immediate, closed; fcmd *c; size_t n, cap; } flist;
typedef struct falloc { void *p; size_t size; int type; ze_device_handle_t dev; } falloc;

static int drv, dev, ctxobj, modobj;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static falloc allocs[1024];
static size_t nallocs;

static void run_cmd(const fcmd *c) {
  uint64_t t0 = raw_ns();
  if (c->type == C_COPY) memcpy(c->dst, c->src, c->size);
  if (c->type == C_FILL)
    for (size_t i = 0; i + c->psize <= c->size; i += c->psize) memcpy((char *)c->dst + i, c->src, c->psize);
  spin(c->dur);
  uint64_t t1 = raw_ns();
  if (c->ev) {
    c->ev->start = ticks_of(t0) & ((1ull << KERNEL_TS_BITS) - 1);
    c->ev->end = ticks_of(t1) & ((1ull << KERNEL_TS_BITS) - 1);
    c->ev->signaled = 1;
  }
}

static ze_result_t add_cmd(ze_command_list_handle_t h, fcmd c) {
  flist *l = (flist *)h;
  if (!l) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (l->immediate) {
    run_cmd(&c);
    return ZE_RESULT_SUCCESS;
  }
  if (l->closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 16;
    l->c = realloc(l->c, l->cap * sizeof *l->c);
  }
  l->c[l->n++] = c;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_init(ze_init_flags_t f) { (void)f; return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_driverGet(uint32_t *n, ze_driver_handle_t *d) {
  if (d && *n) d[0] = (ze_driver_handle_t)&drv;
  *n = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_apiVersion(ze_driver_handle_t d, ze_api_version_t *v) {
  (void)d;
  *v = ZE_API_VERSION_1_4;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_driverProps(ze_driver_handle_t d, ze_driver_properties_t *p) {
  (void)d;
  memset(p->uuid.id, 7, sizeof p->uuid.id);
  p->driverVersion = 42;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_deviceGet(ze_driver_handle_t d, uint32_t *n, ze_device_handle_t *out) {
  (void)d;
  if (out && *n) out[0] = (ze_device_handle_t)&dev;
  *n = 1;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_deviceProps(ze_device_handle_t d, ze_device_properties_t *p) {
  (void)d;
  p->type = ZE_DEVICE_TYPE_GPU;
  p->vendorId = 0x8086;
  p->deviceId = 0xfa4e;
  p->coreClockRate = 1600;
  p->maxMemAllocSize = 1ull << 32;
  p->numThreadsPerEU = 8;
  p->numEUsPerSubslice = 16;
  p->numSubslicesPerSlice = 4;
  p->numSlices = 2;
  p->timerResolution = p->stype == ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 ? 1000000000ull / TIMER_RES_NS
                                                                           : TIMER_RES_NS;
  p->timestampValidBits = TS_BITS;
  p->kernelTimestampValidBits = KERNEL_TS_BITS;
  snprintf(p->name, sizeof p->name, "Loom Fake XPU");
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_globalTs(ze_device_handle_t d, uint64_t *host, uint64_t *devts) {
  (void)d;
  uint64_t r = raw_ns();
  *host = r;
  *devts = ticks_of(r);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_ctxCreate(ze_driver_handle_t d, const ze_context_desc_t *desc,
                                          ze_context_handle_t *c) {
  (void)d, (void)desc;
  *c = (ze_context_handle_t)&ctxobj;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_ctxDestroy(ze_context_handle_t c) { (void)c; return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_qCreate(ze_context_handle_t c, ze_device_handle_t d,
                                        const ze_command_queue_desc_t *desc, ze_command_queue_handle_t *q) {
  (void)c, (void)d, (void)desc;
  *q = (ze_command_queue_handle_t)calloc(1, sizeof(int));
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_qDestroy(ze_command_queue_handle_t q) { free(q); return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_qExecute(ze_command_queue_handle_t q, uint32_t n, ze_command_list_handle_t *ls,
                                         ze_fence_handle_t f) {
  (void)q, (void)f;
  for (uint32_t i = 0; i < n; i++) {
    flist *l = (flist *)ls[i];
    if (!l->closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (size_t k = 0; k < l->n; k++) run_cmd(&l->c[k]);
  }
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_qSync(ze_command_queue_handle_t q, uint64_t t) { (void)q, (void)t; return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_clCreate(ze_context_handle_t c, ze_device_handle_t d,
                                         const ze_command_list_desc_t *desc, ze_command_list_handle_t *l) {
  (void)c, (void)d, (void)desc;
  *l = (ze_command_list_handle_t)calloc(1, sizeof(flist));
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_clCreateImm(ze_context_handle_t c, ze_device_handle_t d,
                                            const ze_command_queue_desc_t *desc, ze_command_list_handle_t *l) {
  (void)c, (void)d, (void)desc;
  flist *fl = calloc(1, sizeof(flist));
  fl->immediate = 1;
  *l = (ze_command_list_handle_t)fl;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_clDestroy(ze_command_list_handle_t h) {
  flist *l = (flist *)h;
  free(l->c);
  free(l);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_clClose(ze_command_list_handle_t h) { ((flist *)h)->closed = 1; return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_clReset(ze_command_list_handle_t h) {
  flist *l = (flist *)h;
  l->n = 0;
  l->closed = 0;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_barrier(ze_command_list_handle_t h, ze_event_handle_t e, uint32_t n,
                                        ze_event_handle_t *w) {
  (void)n, (void)w;
  return add_cmd(h, (fcmd){.type = C_BARRIER, .ev = (fevent *)e, .dur = 1000});
}
static ze_result_t ZE_APICALL f_copy(ze_command_list_handle_t h, void *dst, const void *src, size_t size,
                                     ze_event_handle_t e, uint32_t n, ze_event_handle_t *w) {
  (void)n, (void)w;
  return add_cmd(h, (fcmd){.type = C_COPY, .dst = dst, .src = src, .size = size, .ev = (fevent *)e, .dur = 5000});
}
static ze_result_t ZE_APICALL f_fill(ze_command_list_handle_t h, void *ptr, const void *pattern, size_t psize,
                                     size_t size, ze_event_handle_t e, uint32_t n, ze_event_handle_t *w) {
  (void)n, (void)w;
  if (!psize) return ZE_RESULT_ERROR_INVALID_SIZE;
  return add_cmd(h, (fcmd){.type = C_FILL, .dst = ptr, .src = pattern, .size = size, .psize = psize,
                           .ev = (fevent *)e, .dur = 5000});
}
static ze_result_t ZE_APICALL f_launch(ze_command_list_handle_t h, ze_kernel_handle_t k,
                                       const ze_group_count_t *g, ze_event_handle_t e, uint32_t n,
                                       ze_event_handle_t *w) {
  (void)n, (void)w;
  if (!k || !g) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return add_cmd(h, (fcmd){.type = C_KERNEL, .ev = (fevent *)e, .dur = 20000});
}
static ze_result_t ZE_APICALL f_poolCreate(ze_context_handle_t c, const ze_event_pool_desc_t *desc, uint32_t nd,
                                           ze_device_handle_t *ds, ze_event_pool_handle_t *p) {
  (void)c, (void)nd, (void)ds;
  fpool *fp = calloc(1, sizeof *fp);
  fp->n = desc->count;
  fp->ev = calloc(desc->count, sizeof(fevent));
  fp->ts = (desc->flags & ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP) != 0;
  *p = (ze_event_pool_handle_t)fp;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_poolDestroy(ze_event_pool_handle_t p) {
  fpool *fp = (fpool *)p;
  free(fp->ev);
  free(fp);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_evCreate(ze_event_pool_handle_t p, const ze_event_desc_t *desc, ze_event_handle_t *e) {
  fpool *fp = (fpool *)p;
  if (desc->index >= fp->n) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  fevent *ev = &fp->ev[desc->index];
  memset(ev, 0, sizeof *ev);
  ev->ts = fp->ts;
  *e = (ze_event_handle_t)ev;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_evDestroy(ze_event_handle_t e) { (void)e; return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_evSync(ze_event_handle_t e, uint64_t t) {
  (void)t;
  return ((fevent *)e)->signaled ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}
static ze_result_t ZE_APICALL f_evQuery(ze_event_handle_t e) {
  return ((fevent *)e)->signaled ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}
static ze_result_t ZE_APICALL f_evReset(ze_event_handle_t e) { ((fevent *)e)->signaled = 0; return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_evTs(ze_event_handle_t e, ze_kernel_timestamp_result_t *r) {
  fevent *ev = (fevent *)e;
  if (!ev->ts) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (!ev->signaled) return ZE_RESULT_NOT_READY;
  r->global.kernelStart = r->context.kernelStart = ev->start;
  r->global.kernelEnd = r->context.kernelEnd = ev->end;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_modCreate(ze_context_handle_t c, ze_device_handle_t d, const ze_module_desc_t *desc,
                                          ze_module_handle_t *m, ze_module_build_log_handle_t *log) {
  (void)c, (void)d, (void)desc;
  *m = (ze_module_handle_t)&modobj;
  if (log) *log = NULL;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_modDestroy(ze_module_handle_t m) { (void)m; return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_kCreate(ze_module_handle_t m, const ze_kernel_desc_t *desc, ze_kernel_handle_t *k) {
  (void)m;
  fkernel *fk = calloc(1, sizeof *fk);
  snprintf(fk->name, sizeof fk->name, "%s", desc->pKernelName);
  fk->gs[0] = fk->gs[1] = fk->gs[2] = 1;
  *k = (ze_kernel_handle_t)fk;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_kDestroy(ze_kernel_handle_t k) { free(k); return ZE_RESULT_SUCCESS; }
static ze_result_t ZE_APICALL f_kGroupSize(ze_kernel_handle_t k, uint32_t x, uint32_t y, uint32_t z) {
  fkernel *fk = (fkernel *)k;
  fk->gs[0] = x, fk->gs[1] = y, fk->gs[2] = z;
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_kArg(ze_kernel_handle_t k, uint32_t i, size_t s, const void *v) {
  (void)k, (void)i, (void)s, (void)v;
  return ZE_RESULT_SUCCESS;
}
/* NULL past the device's maxMemAllocSize (the call then fails). */
static void *track(size_t size, size_t align, int type, ze_device_handle_t dv) {
  void *p = NULL;
  if (size > (1ull << 32)) return NULL;
  if (posix_memalign(&p, align < 64 ? 64 : align, size ? size : 1)) return NULL;
  pthread_mutex_lock(&mu);
  if (nallocs < 1024) allocs[nallocs++] = (falloc){p, size, type, dv};
  pthread_mutex_unlock(&mu);
  return p;
}
static ze_result_t ZE_APICALL f_allocDevice(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *d, size_t size,
                                            size_t align, ze_device_handle_t dv, void **p) {
  (void)c, (void)d;
  *p = track(size, align, ZE_MEMORY_TYPE_DEVICE, dv);
  return *p ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
static ze_result_t ZE_APICALL f_allocHost(ze_context_handle_t c, const ze_host_mem_alloc_desc_t *d, size_t size,
                                          size_t align, void **p) {
  (void)c, (void)d;
  *p = track(size, align, ZE_MEMORY_TYPE_HOST, NULL);
  return *p ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
/* Shared memory with no device is allowed (it may migrate to any). */
static ze_result_t ZE_APICALL f_allocShared(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *dd,
                                            const ze_host_mem_alloc_desc_t *hd, size_t size, size_t align,
                                            ze_device_handle_t dv, void **p) {
  (void)c, (void)dd, (void)hd;
  *p = track(size, align, ZE_MEMORY_TYPE_SHARED, dv);
  return *p ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
static ze_result_t ZE_APICALL f_free(ze_context_handle_t c, void *p) {
  (void)c;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nallocs; i++)
    if (allocs[i].p == p) allocs[i] = allocs[--nallocs];
  pthread_mutex_unlock(&mu);
  free(p);
  return ZE_RESULT_SUCCESS;
}
static ze_result_t ZE_APICALL f_allocProps(ze_context_handle_t c, const void *p, ze_memory_allocation_properties_t *pr,
                                           ze_device_handle_t *d) {
  (void)c;
  pr->type = ZE_MEMORY_TYPE_UNKNOWN;
  if (d) *d = NULL;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nallocs; i++)
    if ((const char *)p >= (char *)allocs[i].p && (const char *)p < (char *)allocs[i].p + allocs[i].size) {
      pr->type = (ze_memory_type_t)allocs[i].type;
      if (d) *d = allocs[i].dev; /* the device it was made for, NULL for none */
    }
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

/* The allocation that holds p: its base and size. */
static ze_result_t ZE_APICALL f_addressRange(ze_context_handle_t c, const void *p, void **base, size_t *size) {
  (void)c;
  ze_result_t r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nallocs; i++)
    if ((const char *)p >= (char *)allocs[i].p && (const char *)p < (char *)allocs[i].p + allocs[i].size) {
      if (base) *base = allocs[i].p;
      if (size) *size = allocs[i].size;
      r = ZE_RESULT_SUCCESS;
    }
  pthread_mutex_unlock(&mu);
  return r;
}

#include "tables.inc"
