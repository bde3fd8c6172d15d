/*
 * layer.c - the OpenCL layer half of libloom-opencl.so.
 *
 * The ICD loader (ocl-icd 2.3 and later, OPENCL_LAYERS=/path/libloom-opencl.so)
 * calls clInitLayer with the next entry points; the layer returns its own
 * table: a copy with wrappers for the calls loom records.  Every wrapper
 * costs one flag check when no session records.  When one does:
 *  - enqueues are timed on the calling thread (a runtime record) and the
 *    command is followed to completion through an event (the application's,
 *    retained, or one the layer creates and releases);
 *  - queues are created with profiling enabled, and the application still
 *    sees the properties it asked for (clGetCommandQueueInfo is wrapped);
 *  - finish, flush, waits, program builds and kernel creation are timed;
 *  - memory objects and SVM allocations are followed (memory.c).
 * The application's own events and callbacks are untouched.
 */
#define _GNU_SOURCE
#include <string.h>

#include "ocl.h"

#define EXPORT __attribute__((visibility("default")))

cl_icd_dispatch ocl_next;
static cl_icd_dispatch layer_table;

/* ---- queues -------------------------------------------------------------- */
static cl_command_queue CL_API_CALL w_clCreateCommandQueue(cl_context ctx, cl_device_id dev,
                                                           cl_command_queue_properties props,
                                                           cl_int *err) {
  cl_command_queue q =
      ocl_next.clCreateCommandQueue(ctx, dev, props | CL_QUEUE_PROFILING_ENABLE, err);
  if (q)
    ocl_queue_created(q, dev, (props & CL_QUEUE_PROFILING_ENABLE) != 0,
                      !(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE));
  return q;
}

static cl_command_queue CL_API_CALL
w_clCreateCommandQueueWithProperties(cl_context ctx, cl_device_id dev,
                                     const cl_queue_properties *props, cl_int *err) {
  cl_queue_properties mine[130];
  size_t n = 0;
  int found = 0, wanted = 0, in_order = 1;
  for (; props && props[n] && n + 2 < 128; n += 2) {
    mine[n] = props[n];
    mine[n + 1] = props[n + 1];
    if (props[n] == CL_QUEUE_PROPERTIES) {
      found = 1;
      wanted = (props[n + 1] & CL_QUEUE_PROFILING_ENABLE) != 0;
      in_order = !(props[n + 1] & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
      mine[n + 1] |= CL_QUEUE_PROFILING_ENABLE;
    }
  }
  if (props && props[n]) /* more than 64 pairs: pass them through untouched */
    return ocl_next.clCreateCommandQueueWithProperties(ctx, dev, props, err);
  if (!found) {
    mine[n++] = CL_QUEUE_PROPERTIES;
    mine[n++] = CL_QUEUE_PROFILING_ENABLE;
  }
  mine[n] = 0;
  cl_command_queue q = ocl_next.clCreateCommandQueueWithProperties(ctx, dev, mine, err);
  if (q) ocl_queue_created(q, dev, wanted, in_order);
  return q;
}

static cl_int CL_API_CALL w_clGetCommandQueueInfo(cl_command_queue q, cl_command_queue_info what,
                                                  size_t size, void *value, size_t *size_ret) {
  cl_int rc = ocl_next.clGetCommandQueueInfo(q, what, size, value, size_ret);
  if (rc == CL_SUCCESS && value && what == CL_QUEUE_PROPERTIES &&
      size >= sizeof(cl_command_queue_properties) && ocl_queue_app_profiling(q) == 0)
    *(cl_command_queue_properties *)value &=
        ~(cl_command_queue_properties)CL_QUEUE_PROFILING_ENABLE;
  return rc;
}

static cl_int CL_API_CALL w_clReleaseCommandQueue(cl_command_queue q) {
  /* Asked before: after the last release the handle is gone. */
  cl_uint refs = 0;
  if (ocl_next.clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof refs, &refs, NULL) !=
      CL_SUCCESS)
    refs = 0;
  cl_int rc = ocl_next.clReleaseCommandQueue(q);
  if (rc == CL_SUCCESS && refs == 1) ocl_queue_released(q);
  return rc;
}

/* ---- enqueues -------------------------------------------------------------- */
#define BEGIN(q, ev)   \
  ocl_call c;          \
  ocl_call_begin(&c, q, ev)

static cl_int CL_API_CALL w_clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims,
                                                   const size_t *off, const size_t *gws,
                                                   const size_t *lws, cl_uint nw,
                                                   const cl_event *wl, cl_event *ev) {
  if (!atomic_load_explicit(&ocl_recording, memory_order_relaxed))
    return ocl_next.clEnqueueNDRangeKernel(q, k, dims, off, gws, lws, nw, wl, ev);
  BEGIN(q, ev);
  cl_int rc = ocl_next.clEnqueueNDRangeKernel(q, k, dims, off, gws, lws, nw, wl, c.evp);
  return ocl_call_end(&c, OCL_NAME("clEnqueueNDRangeKernel"), rc, LOOM_KIND_KERNEL,
                      ocl_kernel_name(k), 0, NULL, dims, gws, lws, ev);
}

static cl_int CL_API_CALL w_clEnqueueTask(cl_command_queue q, cl_kernel k, cl_uint nw,
                                          const cl_event *wl, cl_event *ev) {
  if (!atomic_load_explicit(&ocl_recording, memory_order_relaxed))
    return ocl_next.clEnqueueTask(q, k, nw, wl, ev);
  BEGIN(q, ev);
  cl_int rc = ocl_next.clEnqueueTask(q, k, nw, wl, c.evp);
  size_t one = 1;
  return ocl_call_end(&c, OCL_NAME("clEnqueueTask"), rc, LOOM_KIND_KERNEL, ocl_kernel_name(k), 0,
                      NULL, 1, &one, &one, ev);
}

#define BUFFER_OP(fn, kind, label, dir, bytes, PARAMS, ARGS)                                       \
  static cl_int CL_API_CALL w_##fn PARAMS {                                                        \
    if (!atomic_load_explicit(&ocl_recording, memory_order_relaxed)) return ocl_next.fn ARGS;      \
    cl_event *ev_app = ev;                                                                         \
    BEGIN(q, ev_app);                                                                              \
    ev = c.evp;                                                                                    \
    cl_int rc = ocl_next.fn ARGS;                                                                  \
    return ocl_call_end(&c, OCL_NAME(#fn), rc, kind, OCL_NAME(label), bytes, dir, 0, NULL, NULL,   \
                        ev_app);                                                                   \
  }

static uint64_t region_size(const size_t *r) { return r ? (uint64_t)r[0] * r[1] * r[2] : 0; }

BUFFER_OP(clEnqueueReadBuffer, LOOM_KIND_MEMCPY, "Memcpy DtoH (buffer)", "DtoH", size,
          (cl_command_queue q, cl_mem m, cl_bool blk, size_t off, size_t size, void *p,
           cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, blk, off, size, p, nw, wl, ev))
BUFFER_OP(clEnqueueWriteBuffer, LOOM_KIND_MEMCPY, "Memcpy HtoD (buffer)", "HtoD", size,
          (cl_command_queue q, cl_mem m, cl_bool blk, size_t off, size_t size, const void *p,
           cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, blk, off, size, p, nw, wl, ev))
BUFFER_OP(clEnqueueCopyBuffer, LOOM_KIND_MEMCPY, "Memcpy DtoD (buffer)", "DtoD", size,
          (cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dof, size_t size,
           cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, s, d, so, dof, size, nw, wl, ev))
BUFFER_OP(clEnqueueFillBuffer, LOOM_KIND_MEMSET, "Memset (buffer)", NULL, size,
          (cl_command_queue q, cl_mem m, const void *pat, size_t psize, size_t off, size_t size,
           cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, pat, psize, off, size, nw, wl, ev))
BUFFER_OP(clEnqueueReadBufferRect, LOOM_KIND_MEMCPY, "Memcpy DtoH (buffer rect)", "DtoH",
          region_size(reg),
          (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *bo, const size_t *ho,
           const size_t *reg, size_t brp, size_t bsp, size_t hrp, size_t hsp, void *p,
           cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, blk, bo, ho, reg, brp, bsp, hrp, hsp, p, nw, wl, ev))
BUFFER_OP(clEnqueueWriteBufferRect, LOOM_KIND_MEMCPY, "Memcpy HtoD (buffer rect)", "HtoD",
          region_size(reg),
          (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *bo, const size_t *ho,
           const size_t *reg, size_t brp, size_t bsp, size_t hrp, size_t hsp, const void *p,
           cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, blk, bo, ho, reg, brp, bsp, hrp, hsp, p, nw, wl, ev))
BUFFER_OP(clEnqueueCopyBufferRect, LOOM_KIND_MEMCPY, "Memcpy DtoD (buffer rect)", "DtoD",
          region_size(reg),
          (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *dof,
           const size_t *reg, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint nw,
           const cl_event *wl, cl_event *ev),
          (q, s, d, so, dof, reg, srp, ssp, drp, dsp, nw, wl, ev))
BUFFER_OP(clEnqueueReadImage, LOOM_KIND_MEMCPY, "Memcpy DtoH (image)", "DtoH", region_size(reg),
          (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *org, const size_t *reg,
           size_t rp, size_t sp, void *p, cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, blk, org, reg, rp, sp, p, nw, wl, ev))
BUFFER_OP(clEnqueueWriteImage, LOOM_KIND_MEMCPY, "Memcpy HtoD (image)", "HtoD", region_size(reg),
          (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *org, const size_t *reg,
           size_t rp, size_t sp, const void *p, cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, blk, org, reg, rp, sp, p, nw, wl, ev))
BUFFER_OP(clEnqueueCopyImage, LOOM_KIND_MEMCPY, "Memcpy DtoD (image)", "DtoD", region_size(reg),
          (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *dof,
           const size_t *reg, cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, s, d, so, dof, reg, nw, wl, ev))
BUFFER_OP(clEnqueueFillImage, LOOM_KIND_MEMSET, "Memset (image)", NULL, region_size(reg),
          (cl_command_queue q, cl_mem m, const void *color, const size_t *org, const size_t *reg,
           cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, color, org, reg, nw, wl, ev))
BUFFER_OP(clEnqueueCopyImageToBuffer, LOOM_KIND_MEMCPY, "Memcpy DtoD (image to buffer)", "DtoD",
          region_size(reg),
          (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *reg,
           size_t dof, cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, s, d, so, reg, dof, nw, wl, ev))
BUFFER_OP(clEnqueueCopyBufferToImage, LOOM_KIND_MEMCPY, "Memcpy DtoD (buffer to image)", "DtoD",
          region_size(reg),
          (cl_command_queue q, cl_mem s, cl_mem d, size_t so, const size_t *dof,
           const size_t *reg, cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, s, d, so, dof, reg, nw, wl, ev))
BUFFER_OP(clEnqueueUnmapMemObject, LOOM_KIND_MEMCPY, "Unmap", "unmap", 0,
          (cl_command_queue q, cl_mem m, void *p, cl_uint nw, const cl_event *wl, cl_event *ev),
          (q, m, p, nw, wl, ev))
BUFFER_OP(clEnqueueMigrateMemObjects, LOOM_KIND_MEMCPY, "Migrate", "migrate", 0,
          (cl_command_queue q, cl_uint n, const cl_mem *ms, cl_mem_migration_flags f, cl_uint nw,
           const cl_event *wl, cl_event *ev),
          (q, n, ms, f, nw, wl, ev))
BUFFER_OP(clEnqueueSVMMemcpy, LOOM_KIND_MEMCPY, "Memcpy (SVM)", "SVM", size,
          (cl_command_queue q, cl_bool blk, void *d, const void *s, size_t size, cl_uint nw,
           const cl_event *wl, cl_event *ev),
          (q, blk, d, s, size, nw, wl, ev))
BUFFER_OP(clEnqueueSVMMemFill, LOOM_KIND_MEMSET, "Memset (SVM)", NULL, size,
          (cl_command_queue q, void *p, const void *pat, size_t ps, size_t size, cl_uint nw,
           const cl_event *wl, cl_event *ev),
          (q, p, pat, ps, size, nw, wl, ev))
BUFFER_OP(clEnqueueMarkerWithWaitList, -1, NULL, NULL, 0,
          (cl_command_queue q, cl_uint nw, const cl_event *wl, cl_event *ev), (q, nw, wl, ev))
BUFFER_OP(clEnqueueBarrierWithWaitList, -1, NULL, NULL, 0,
          (cl_command_queue q, cl_uint nw, const cl_event *wl, cl_event *ev), (q, nw, wl, ev))

/* Maps return a pointer, not a status. */
static void *CL_API_CALL w_clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blk,
                                              cl_map_flags f, size_t off, size_t size,
                                              cl_uint nw, const cl_event *wl, cl_event *ev,
                                              cl_int *err) {
  if (!atomic_load_explicit(&ocl_recording, memory_order_relaxed))
    return ocl_next.clEnqueueMapBuffer(q, m, blk, f, off, size, nw, wl, ev, err);
  BEGIN(q, ev);
  cl_int rc = CL_SUCCESS;
  void *p = ocl_next.clEnqueueMapBuffer(q, m, blk, f, off, size, nw, wl, c.evp, &rc);
  if (err) *err = rc;
  ocl_call_end(&c, OCL_NAME("clEnqueueMapBuffer"), rc, LOOM_KIND_MEMCPY, OCL_NAME("Map (buffer)"),
               size, "map", 0, NULL, NULL, ev);
  return p;
}

static void *CL_API_CALL w_clEnqueueMapImage(cl_command_queue q, cl_mem m, cl_bool blk,
                                             cl_map_flags f, const size_t *org, const size_t *reg,
                                             size_t *rp, size_t *sp, cl_uint nw,
                                             const cl_event *wl, cl_event *ev, cl_int *err) {
  if (!atomic_load_explicit(&ocl_recording, memory_order_relaxed))
    return ocl_next.clEnqueueMapImage(q, m, blk, f, org, reg, rp, sp, nw, wl, ev, err);
  BEGIN(q, ev);
  cl_int rc = CL_SUCCESS;
  void *p = ocl_next.clEnqueueMapImage(q, m, blk, f, org, reg, rp, sp, nw, wl, c.evp, &rc);
  if (err) *err = rc;
  ocl_call_end(&c, OCL_NAME("clEnqueueMapImage"), rc, LOOM_KIND_MEMCPY, OCL_NAME("Map (image)"),
               region_size(reg), "map", 0, NULL, NULL, ev);
  return p;
}

/* ---- host calls ------------------------------------------------------------ */
#define HOST_CALL(fn, kind, PARAMS, ARGS)                                \
  static cl_int CL_API_CALL w_##fn PARAMS {                              \
    if (!atomic_load_explicit(&ocl_recording, memory_order_relaxed))     \
      return ocl_next.fn ARGS;                                           \
    uint64_t t0 = ocl_now();                                             \
    cl_int rc = ocl_next.fn ARGS;                                        \
    ocl_host_call(OCL_NAME(#fn), t0, kind);                                        \
    return rc;                                                           \
  }

static cl_int CL_API_CALL w_clFinish(cl_command_queue q) {
  if (!atomic_load_explicit(&ocl_recording, memory_order_relaxed)) return ocl_next.clFinish(q);
  uint64_t fence = ocl_queue_fence(q), t0 = ocl_now();
  cl_int rc = ocl_next.clFinish(q);
  ocl_host_call(OCL_NAME("clFinish"), t0, LOOM_KIND_SYNC);
  ocl_queue_finished(q, fence, rc == CL_SUCCESS);
  return rc;
}
HOST_CALL(clFlush, LOOM_KIND_RUNTIME, (cl_command_queue q), (q))
HOST_CALL(clWaitForEvents, LOOM_KIND_SYNC, (cl_uint n, const cl_event *l), (n, l))
HOST_CALL(clBuildProgram, LOOM_KIND_RUNTIME,
          (cl_program p, cl_uint nd, const cl_device_id *d, const char *o,
           void(CL_CALLBACK *cb)(cl_program, void *), void *u),
          (p, nd, d, o, cb, u))
HOST_CALL(clCompileProgram, LOOM_KIND_RUNTIME,
          (cl_program p, cl_uint nd, const cl_device_id *d, const char *o, cl_uint nh,
           const cl_program *h, const char **hn, void(CL_CALLBACK *cb)(cl_program, void *),
           void *u),
          (p, nd, d, o, nh, h, hn, cb, u))

static cl_program CL_API_CALL w_clLinkProgram(cl_context ctx, cl_uint nd, const cl_device_id *d,
                                              const char *o, cl_uint np, const cl_program *ps,
                                              void(CL_CALLBACK *cb)(cl_program, void *),
                                              void *u, cl_int *err) {
  uint64_t t0 = ocl_now();
  cl_program p = ocl_next.clLinkProgram(ctx, nd, d, o, np, ps, cb, u, err);
  if (atomic_load_explicit(&ocl_recording, memory_order_relaxed))
    ocl_host_call(OCL_NAME("clLinkProgram"), t0, LOOM_KIND_RUNTIME);
  return p;
}

static cl_program CL_API_CALL w_clCreateProgramWithSource(cl_context ctx, cl_uint n,
                                                          const char **s, const size_t *l,
                                                          cl_int *err) {
  uint64_t t0 = ocl_now();
  cl_program p = ocl_next.clCreateProgramWithSource(ctx, n, s, l, err);
  if (atomic_load_explicit(&ocl_recording, memory_order_relaxed))
    ocl_host_call(OCL_NAME("clCreateProgramWithSource"), t0, LOOM_KIND_RUNTIME);
  return p;
}

static cl_kernel CL_API_CALL w_clCreateKernel(cl_program p, const char *name, cl_int *err) {
  uint64_t t0 = ocl_now();
  cl_kernel k = ocl_next.clCreateKernel(p, name, err);
  if (k) ocl_kernel_forget(k); /* a reused handle must not keep an old name */
  if (atomic_load_explicit(&ocl_recording, memory_order_relaxed))
    ocl_host_call(OCL_NAME("clCreateKernel"), t0, LOOM_KIND_RUNTIME);
  return k;
}

static cl_int CL_API_CALL w_clReleaseKernel(cl_kernel k) {
  ocl_kernel_forget(k);
  return ocl_next.clReleaseKernel(k);
}

/* ---- the layer entry points ---------------------------------------------- */
EXPORT cl_int CL_API_CALL clGetLayerInfo(cl_layer_info what, size_t size, void *value,
                                        size_t *size_ret) {
  switch (what) {
  case CL_LAYER_API_VERSION: {
    cl_layer_api_version v = CL_LAYER_API_VERSION_100;
    if (size_ret) *size_ret = sizeof v;
    if (value) {
      if (size < sizeof v) return CL_INVALID_VALUE;
      memcpy(value, &v, sizeof v);
    }
    return CL_SUCCESS;
  }
  case CL_LAYER_NAME: {
    static const char name[] = "loom";
    if (size_ret) *size_ret = sizeof name;
    if (value) {
      if (size < sizeof name) return CL_INVALID_VALUE;
      memcpy(value, name, sizeof name);
    }
    return CL_SUCCESS;
  }
  default:
    return CL_INVALID_VALUE;
  }
}

EXPORT cl_int CL_API_CALL clInitLayer(cl_uint num_entries, const cl_icd_dispatch *target,
                                     cl_uint *num_entries_ret,
                                     const cl_icd_dispatch **layer_dispatch_ret) {
  size_t n = num_entries * sizeof(void *);
  if (!target || !num_entries_ret || !layer_dispatch_ret) return CL_INVALID_VALUE;
  memset(&ocl_next, 0, sizeof ocl_next);
  memcpy(&ocl_next, target, n < sizeof ocl_next ? n : sizeof ocl_next);
  layer_table = ocl_next;
#define WRAP(fn) \
  if (layer_table.fn) layer_table.fn = w_##fn
  WRAP(clCreateCommandQueue);
  WRAP(clCreateCommandQueueWithProperties);
  WRAP(clGetCommandQueueInfo);
  WRAP(clReleaseCommandQueue);
  WRAP(clEnqueueNDRangeKernel);
  WRAP(clEnqueueTask);
  WRAP(clEnqueueReadBuffer);
  WRAP(clEnqueueWriteBuffer);
  WRAP(clEnqueueCopyBuffer);
  WRAP(clEnqueueFillBuffer);
  WRAP(clEnqueueReadBufferRect);
  WRAP(clEnqueueWriteBufferRect);
  WRAP(clEnqueueCopyBufferRect);
  WRAP(clEnqueueReadImage);
  WRAP(clEnqueueWriteImage);
  WRAP(clEnqueueCopyImage);
  WRAP(clEnqueueFillImage);
  WRAP(clEnqueueCopyImageToBuffer);
  WRAP(clEnqueueCopyBufferToImage);
  WRAP(clEnqueueMapBuffer);
  WRAP(clEnqueueMapImage);
  WRAP(clEnqueueUnmapMemObject);
  WRAP(clEnqueueMigrateMemObjects);
  WRAP(clEnqueueSVMMemcpy);
  WRAP(clEnqueueSVMMemFill);
  WRAP(clEnqueueMarkerWithWaitList);
  WRAP(clEnqueueBarrierWithWaitList);
  WRAP(clFinish);
  WRAP(clFlush);
  WRAP(clWaitForEvents);
  WRAP(clBuildProgram);
  WRAP(clCompileProgram);
  WRAP(clLinkProgram);
  WRAP(clCreateProgramWithSource);
  WRAP(clCreateKernel);
  WRAP(clReleaseKernel);
#undef WRAP
  ocl_memory_wrap(&layer_table);
  *layer_dispatch_ret = &layer_table;
  *num_entries_ret = (cl_uint)(sizeof layer_table / sizeof(void *));
  return CL_SUCCESS;
}
