/*
 * memory.c - the OpenCL backend's memory records (LOOM_KIND_MEMORY): the
 * wrappers of the calls that create memory objects (buffers, images, pipes),
 * of SVM allocation and free, and of the calls that retain and release a
 * memory object, with the table of the objects made while a session records.
 *
 * Contract, as plugin.h's memory record asks:
 *  - an allocation record on the creating thread, named after the call, with
 *    "addr" (the cl_mem handle, or the SVM pointer), "bytes" (the size asked
 *    for a buffer or SVM, CL_MEM_SIZE for an image or pipe), "device" (the
 *    session's index of the context's device: the first of a context with
 *    several) and "memory_kind": "host" for CL_MEM_USE_HOST_PTR (the
 *    program's own memory), "host_pinned" for CL_MEM_ALLOC_HOST_PTR,
 *    "shared" for SVM, else "device";
 *  - a sub-buffer, or an image made over a buffer, is a view: no record, but
 *    it holds its buffer (as the runtime does: a buffer is not deleted
 *    before its sub-buffers), so the buffer's free comes with the last
 *    release of the buffer and its views;
 *  - the free record is stamped when the last release happens, on the thread
 *    that made it, and emitted before the runtime's release (so a handle the
 *    runtime gives again is freed in the trace before it is allocated again).
 *    The table counts the program's references (create 1, retain +1,
 *    release -1, each view +1): exact, where the runtime's
 *    CL_MEM_REFERENCE_COUNT also counts its own and is stale by its spec.
 * No cost when no session records: each wrapper tests one flag first.  The
 * table holds only objects made while recording (it is emptied when a
 * session starts); the last release of an older object is found by asking
 * the runtime (reference count 1, not a view), and emitted as a free of an
 * address the session never saw allocated, which the core counts as such.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "spin.h"

#define RECORDING() atomic_load_explicit(&ocl_recording, memory_order_relaxed)

enum { MK_DEVICE, MK_HOST, MK_PINNED, MK_SHARED };
static const char *const kind_name[] = {"device", "host", "host_pinned", "shared"};

/* One memory object or SVM allocation of this session. */
typedef struct ment {
  uintptr_t key;   /* cl_mem or SVM pointer; 0: empty slot */
  uintptr_t of;    /* a view: the buffer it holds; else 0 */
  uint64_t bytes;
  uint32_t refs;   /* the program's references, plus one per live view */
  uint32_t device; /* session device index; UINT32_MAX unknown */
  uint8_t kind;    /* MK_* */
} ment;

/* Open addressing, linear probing, deletion by backward shift: no tombstone
 * to slow a long-running program's lookups. */
/* everything below; a spin lock (spin.h): taken twice per allocation and free */
static loom_spin memmu = LOOM_SPIN_INIT;
static ment *tab;
static size_t cap_tab, ntab;

/* A context's first device and its session index (a handful of contexts). */
static struct ctxent { cl_context ctx; cl_device_id dev; unsigned gen; uint32_t device; } ctxs[16];
static size_t next_ctx;

static size_t slot_of(uintptr_t k) {
  uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 20) & (cap_tab - 1);
}

static ment *find(uintptr_t k) {
  if (!cap_tab) return NULL;
  for (size_t i = slot_of(k);; i = (i + 1) & (cap_tab - 1)) {
    if (tab[i].key == k) return &tab[i];
    if (!tab[i].key) return NULL;
  }
}

static int grow(void) {
  size_t nc = cap_tab ? cap_tab * 2 : 256;
  ment *old = tab, *nt = calloc(nc, sizeof *nt);
  if (!nt) return -1;
  size_t oc = cap_tab;
  tab = nt, cap_tab = nc;
  for (size_t i = 0; i < oc; i++)
    if (old[i].key) {
      size_t j = slot_of(old[i].key);
      while (tab[j].key) j = (j + 1) & (cap_tab - 1);
      tab[j] = old[i];
    }
  free(old);
  return 0;
}

/* Puts e (a handle the runtime gave again replaces what was there). */
static void put(const ment *e) {
  ment *m = find(e->key);
  if (m) {
    *m = *e;
    return;
  }
  if ((ntab + 1) * 2 > cap_tab && grow()) return; /* not followed: its free counts unknown */
  size_t i = slot_of(e->key);
  while (tab[i].key) i = (i + 1) & (cap_tab - 1);
  tab[i] = *e;
  ntab++;
}

static void del(ment *m) {
  size_t i = (size_t)(m - tab);
  tab[i].key = 0;
  ntab--;
  for (size_t j = (i + 1) & (cap_tab - 1); tab[j].key; j = (j + 1) & (cap_tab - 1)) {
    size_t h = slot_of(tab[j].key);
    /* j's entry may fill the hole at i when its home is not in (i, j] */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      tab[i] = tab[j];
      tab[j].key = 0;
      i = j;
    }
  }
}

/* A session starts: what an earlier one followed may have been released
 * since, unseen. */
void ocl_memory_reset(void) {
  loom_spin_lock(&memmu);
  free(tab);
  tab = NULL;
  cap_tab = ntab = 0;
  loom_spin_unlock(&memmu);
}

/* ---- records ------------------------------------------------------------- */
static const uint16_t kind_loom[] = {LOOM_MEMORY_DEVICE, LOOM_MEMORY_HOST, LOOM_MEMORY_HOST_PINNED,
                                     LOOM_MEMORY_SHARED};

/* One memory record: through host->memory (ABI 1.6: a host record on this
 * thread, no lock) where the core has it, else through emit.  bytes
 * UINT64_MAX: not known; device UINT32_MAX (LOOM_DEVICE_HOST): none. */
static void emit_mem(uint32_t name, uint16_t role, uint64_t t, uintptr_t addr, uint64_t bytes,
                     uint32_t device, int kind) {
  if (LOOM_HOST_HAS(ocl_host, memory) && (bytes != UINT64_MAX || role == LOOM_RECORD_F_FREE)) {
    loom_memory_event m = {.struct_size = sizeof m, .flags = role, .kind = kind_loom[kind],
                           .clock = ocl_host_clk, .device = device, .name = name, .ts = t,
                           .addr = addr, .bytes = bytes == UINT64_MAX ? 0 : bytes};
    ocl_host->memory(ocl_self, &m);
    return;
  }
  loom_arg args[4];
  uint32_t n = 0;
  args[n++] = (loom_arg){.key = "addr", .type = LOOM_ARG_UINT, .v.u = addr};
  if (bytes != UINT64_MAX)
    args[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = bytes};
  if (device != UINT32_MAX)
    args[n++] = (loom_arg){.key = "device", .type = LOOM_ARG_UINT, .v.u = device};
  if (kind >= 0) args[n++] = (loom_arg){.key = "memory_kind", .type = LOOM_ARG_STRING,
                                        .v.s = kind_name[kind]};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY, .flags = role,
                   .clock = ocl_host_clk, .device = LOOM_DEVICE_HOST, .start = t, .end = t,
                   .name = name, .nargs = n, .args = args};
  ocl_host->emit(ocl_self, &r);
}

/* memmu held: ctx's entry, or NULL. */
static struct ctxent *ctx_find(cl_context ctx) {
  for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++)
    if (ctxs[i].ctx == ctx) return &ctxs[i];
  return NULL;
}

/* The session's index of ctx's (first) device; UINT32_MAX when unknown.
 * Takes memmu, and ocl_mu when the device is new to the session. */
static uint32_t ctx_device(cl_context ctx) {
  unsigned g = atomic_load_explicit(&ocl_gen, memory_order_relaxed);
  loom_spin_lock(&memmu);
  struct ctxent *c = ctx_find(ctx);
  uint32_t device = c && c->gen == g ? c->device : UINT32_MAX;
  cl_device_id dev = c ? c->dev : NULL;
  loom_spin_unlock(&memmu);
  if (device != UINT32_MAX) return device;
  if (!dev && ocl_next.clGetContextInfo(ctx, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL) !=
                  CL_SUCCESS && !dev)
    return UINT32_MAX;
  if (ocl_session_device(ctx, dev, g, &device)) return UINT32_MAX;
  loom_spin_lock(&memmu);
  c = ctx_find(ctx);
  if (!c) c = &ctxs[next_ctx++ % (sizeof ctxs / sizeof ctxs[0])];
  *c = (struct ctxent){ctx, dev, g, device};
  loom_spin_unlock(&memmu);
  return device;
}

/* Puts e, made in ctx, in the table with its device: one lock when ctx's
 * device is known to the session (the usual case). */
static void follow(ment *e, cl_context ctx) {
  unsigned g = atomic_load_explicit(&ocl_gen, memory_order_relaxed);
  loom_spin_lock(&memmu);
  struct ctxent *c = ctx_find(ctx);
  e->device = c && c->gen == g ? c->device : UINT32_MAX;
  if (e->device != UINT32_MAX) put(e);
  loom_spin_unlock(&memmu);
  if (e->device != UINT32_MAX) return;
  e->device = ctx_device(ctx);
  loom_spin_lock(&memmu);
  put(e);
  loom_spin_unlock(&memmu);
}

/* A new context: a handle the runtime gives again names another one. */
static void ctx_forget(cl_context ctx) {
  loom_spin_lock(&memmu);
  for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++)
    if (ctxs[i].ctx == ctx) ctxs[i].ctx = NULL;
  loom_spin_unlock(&memmu);
}

static int kind_of_flags(cl_mem_flags f) {
  return f & CL_MEM_USE_HOST_PTR ? MK_HOST : f & CL_MEM_ALLOC_HOST_PTR ? MK_PINNED : MK_DEVICE;
}

/* m was created by `name` (t: when it returned); bytes UINT64_MAX: ask. */
static void created(cl_mem m, cl_context ctx, uint32_t name, cl_mem_flags flags, uint64_t bytes,
                    uint64_t t) {
  if (!m) return;
  if (bytes == UINT64_MAX) {
    size_t sz = 0;
    bytes = ocl_next.clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof sz, &sz, NULL) == CL_SUCCESS
                ? sz : UINT64_MAX;
  }
  ment e = {.key = (uintptr_t)m, .bytes = bytes, .refs = 1,
            .kind = (uint8_t)kind_of_flags(flags)};
  follow(&e, ctx);
  emit_mem(name, LOOM_RECORD_F_ALLOC, t, e.key, bytes, e.device, e.kind);
}

/* v is a view of `of` (a sub-buffer, an image over a buffer): no record. */
static void viewed(cl_mem v, cl_mem of) {
  if (!v) return;
  ment e = {.key = (uintptr_t)v, .of = (uintptr_t)of, .refs = 1, .device = UINT32_MAX};
  loom_spin_lock(&memmu);
  ment *p = find((uintptr_t)of);
  if (p) p->refs++;
  put(&e); /* also when `of` is older than the session: its last release is asked for */
  loom_spin_unlock(&memmu);
}

/* The last release of m, older than the session (not in the table): asked
 * of the runtime. */
static void released_unknown(cl_mem m, uint64_t t) {
  cl_uint refs = 0;
  cl_mem of = NULL;
  if (ocl_next.clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL) ||
      refs != 1 ||
      ocl_next.clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof of, &of, NULL) || of)
    return;
  size_t sz = 0;
  cl_mem_flags fl = 0;
  cl_context ctx = NULL;
  uint64_t bytes = UINT64_MAX;
  if (!ocl_next.clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof sz, &sz, NULL)) bytes = sz;
  ocl_next.clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof fl, &fl, NULL);
  ocl_next.clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof ctx, &ctx, NULL);
  emit_mem(OCL_NAME("clReleaseMemObject"), LOOM_RECORD_F_FREE, t, (uintptr_t)m, bytes,
           ctx ? ctx_device(ctx) : UINT32_MAX, kind_of_flags(fl));
}

/* A release of m while recording, before the runtime's: the free records of
 * what it ends (m, and the buffer of a view whose last reference it was). */
static void released(cl_mem m) {
  uint64_t t = ocl_now();
  ment gone[4];
  size_t n = 0;
  loom_spin_lock(&memmu);
  ment *e = find((uintptr_t)m);
  int known = e != NULL;
  while (e && --e->refs == 0 && n < 4) {
    gone[n++] = *e;
    uintptr_t of = e->of;
    del(e);
    e = of ? find(of) : NULL;
  }
  loom_spin_unlock(&memmu);
  if (!known) released_unknown(m, t);
  for (size_t i = 0; i < n; i++)
    if (!gone[i].of)
      emit_mem(OCL_NAME("clReleaseMemObject"), LOOM_RECORD_F_FREE, t, gone[i].key, gone[i].bytes,
               gone[i].device, gone[i].kind);
}

static void svm_freed(uint32_t name, cl_context ctx, void *p, uint64_t t) {
  loom_spin_lock(&memmu);
  ment *e = find((uintptr_t)p), g = {.bytes = UINT64_MAX, .device = UINT32_MAX};
  if (e) g = *e, del(e);
  loom_spin_unlock(&memmu);
  if (!e && ctx) g.device = ctx_device(ctx);
  emit_mem(name, LOOM_RECORD_F_FREE, t, (uintptr_t)p, g.bytes, g.device, MK_SHARED);
}

/* ---- wrappers ----------------------------------------------------------- */
static cl_context CL_API_CALL w_clCreateContext(const cl_context_properties *props, cl_uint n,
                                                const cl_device_id *devs,
                                                void(CL_CALLBACK *cb)(const char *, const void *,
                                                                      size_t, void *),
                                                void *u, cl_int *err) {
  cl_context c = ocl_next.clCreateContext(props, n, devs, cb, u, err);
  if (c) ctx_forget(c);
  return c;
}

static cl_context CL_API_CALL
w_clCreateContextFromType(const cl_context_properties *props, cl_device_type type,
                          void(CL_CALLBACK *cb)(const char *, const void *, size_t, void *),
                          void *u, cl_int *err) {
  cl_context c = ocl_next.clCreateContextFromType(props, type, cb, u, err);
  if (c) ctx_forget(c);
  return c;
}

static cl_mem CL_API_CALL w_clCreateBuffer(cl_context ctx, cl_mem_flags f, size_t size, void *host,
                                           cl_int *err) {
  if (!RECORDING()) return ocl_next.clCreateBuffer(ctx, f, size, host, err);
  cl_mem m = ocl_next.clCreateBuffer(ctx, f, size, host, err);
  created(m, ctx, OCL_NAME("clCreateBuffer"), f, size, ocl_now());
  return m;
}

static cl_mem CL_API_CALL w_clCreateBufferWithProperties(cl_context ctx,
                                                         const cl_mem_properties *props,
                                                         cl_mem_flags f, size_t size, void *host,
                                                         cl_int *err) {
  if (!RECORDING()) return ocl_next.clCreateBufferWithProperties(ctx, props, f, size, host, err);
  cl_mem m = ocl_next.clCreateBufferWithProperties(ctx, props, f, size, host, err);
  created(m, ctx, OCL_NAME("clCreateBufferWithProperties"), f, size, ocl_now());
  return m;
}

static cl_mem CL_API_CALL w_clCreateSubBuffer(cl_mem buf, cl_mem_flags f,
                                              cl_buffer_create_type type, const void *info,
                                              cl_int *err) {
  cl_mem m = ocl_next.clCreateSubBuffer(buf, f, type, info, err);
  if (RECORDING()) viewed(m, buf);
  return m;
}

/* An image over a buffer (desc->buffer) is a view of it. */
static void image_made(cl_mem m, cl_context ctx, uint32_t name, cl_mem_flags f,
                       const cl_image_desc *desc) {
  if (desc && desc->buffer) viewed(m, desc->buffer);
  else created(m, ctx, name, f, UINT64_MAX, ocl_now());
}

static cl_mem CL_API_CALL w_clCreateImage(cl_context ctx, cl_mem_flags f,
                                          const cl_image_format *fmt, const cl_image_desc *desc,
                                          void *host, cl_int *err) {
  if (!RECORDING()) return ocl_next.clCreateImage(ctx, f, fmt, desc, host, err);
  cl_mem m = ocl_next.clCreateImage(ctx, f, fmt, desc, host, err);
  image_made(m, ctx, OCL_NAME("clCreateImage"), f, desc);
  return m;
}

static cl_mem CL_API_CALL w_clCreateImageWithProperties(cl_context ctx,
                                                        const cl_mem_properties *props,
                                                        cl_mem_flags f, const cl_image_format *fmt,
                                                        const cl_image_desc *desc, void *host,
                                                        cl_int *err) {
  if (!RECORDING())
    return ocl_next.clCreateImageWithProperties(ctx, props, f, fmt, desc, host, err);
  cl_mem m = ocl_next.clCreateImageWithProperties(ctx, props, f, fmt, desc, host, err);
  image_made(m, ctx, OCL_NAME("clCreateImageWithProperties"), f, desc);
  return m;
}

static cl_mem CL_API_CALL w_clCreateImage2D(cl_context ctx, cl_mem_flags f,
                                            const cl_image_format *fmt, size_t w, size_t h,
                                            size_t rp, void *host, cl_int *err) {
  cl_mem m = ocl_next.clCreateImage2D(ctx, f, fmt, w, h, rp, host, err);
  if (RECORDING()) created(m, ctx, OCL_NAME("clCreateImage2D"), f, UINT64_MAX, ocl_now());
  return m;
}

static cl_mem CL_API_CALL w_clCreateImage3D(cl_context ctx, cl_mem_flags f,
                                            const cl_image_format *fmt, size_t w, size_t h,
                                            size_t d, size_t rp, size_t sp, void *host,
                                            cl_int *err) {
  cl_mem m = ocl_next.clCreateImage3D(ctx, f, fmt, w, h, d, rp, sp, host, err);
  if (RECORDING()) created(m, ctx, OCL_NAME("clCreateImage3D"), f, UINT64_MAX, ocl_now());
  return m;
}

static cl_mem CL_API_CALL w_clCreatePipe(cl_context ctx, cl_mem_flags f, cl_uint psize,
                                         cl_uint maxp, const cl_pipe_properties *props,
                                         cl_int *err) {
  cl_mem m = ocl_next.clCreatePipe(ctx, f, psize, maxp, props, err);
  if (RECORDING()) created(m, ctx, OCL_NAME("clCreatePipe"), f, UINT64_MAX, ocl_now());
  return m;
}

static cl_int CL_API_CALL w_clRetainMemObject(cl_mem m) {
  cl_int rc = ocl_next.clRetainMemObject(m);
  if (rc == CL_SUCCESS && RECORDING()) {
    loom_spin_lock(&memmu);
    ment *e = find((uintptr_t)m);
    if (e) e->refs++;
    loom_spin_unlock(&memmu);
  }
  return rc;
}

static cl_int CL_API_CALL w_clReleaseMemObject(cl_mem m) {
  if (RECORDING() && m) released(m);
  return ocl_next.clReleaseMemObject(m);
}

static void *CL_API_CALL w_clSVMAlloc(cl_context ctx, cl_svm_mem_flags f, size_t size,
                                      cl_uint align) {
  void *p = ocl_next.clSVMAlloc(ctx, f, size, align);
  if (!p || !RECORDING()) return p;
  uint64_t t = ocl_now();
  ment e = {.key = (uintptr_t)p, .bytes = size, .refs = 1, .kind = MK_SHARED};
  follow(&e, ctx);
  emit_mem(OCL_NAME("clSVMAlloc"), LOOM_RECORD_F_ALLOC, t, e.key, size, e.device, MK_SHARED);
  return p;
}

static void CL_API_CALL w_clSVMFree(cl_context ctx, void *p) {
  if (p && RECORDING()) svm_freed(OCL_NAME("clSVMFree"), ctx, p, ocl_now());
  ocl_next.clSVMFree(ctx, p);
}

/* Without a callback the runtime frees the pointers (when the command runs:
 * stamped at the enqueue); with one, the program frees them in it. */
static cl_int CL_API_CALL w_clEnqueueSVMFree(cl_command_queue q, cl_uint n, void *ptrs[],
                                             void(CL_CALLBACK *cb)(cl_command_queue, cl_uint,
                                                                   void *[], void *),
                                             void *u, cl_uint nw, const cl_event *wl,
                                             cl_event *ev) {
  if (RECORDING() && !cb && ptrs) {
    uint64_t t = ocl_now();
    cl_context ctx = NULL;
    ocl_next.clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL);
    for (cl_uint i = 0; i < n; i++)
      if (ptrs[i]) svm_freed(OCL_NAME("clEnqueueSVMFree"), ctx, ptrs[i], t);
  }
  return ocl_next.clEnqueueSVMFree(q, n, ptrs, cb, u, nw, wl, ev);
}

void ocl_memory_wrap(cl_icd_dispatch *t) {
#define WRAP(fn) \
  if (t->fn) t->fn = w_##fn
  WRAP(clCreateContext);
  WRAP(clCreateContextFromType);
  WRAP(clCreateBuffer);
  WRAP(clCreateBufferWithProperties);
  WRAP(clCreateSubBuffer);
  WRAP(clCreateImage);
  WRAP(clCreateImageWithProperties);
  WRAP(clCreateImage2D);
  WRAP(clCreateImage3D);
  WRAP(clCreatePipe);
  WRAP(clRetainMemObject);
  WRAP(clReleaseMemObject);
  WRAP(clSVMAlloc);
  WRAP(clSVMFree);
  WRAP(clEnqueueSVMFree);
#undef WRAP
}
