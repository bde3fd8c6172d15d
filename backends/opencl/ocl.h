/*
 * ocl.h - shared state of the OpenCL backend: the layer (layer.c) wraps the
 * application's OpenCL calls; the backend (backend.c) turns what they did
 * into loom records.
 */
#ifndef LOOM_OCL_H
#define LOOM_OCL_H

#include <CL/cl_icd.h>
#include <CL/cl_layer.h>
#include <loom/plugin.h>
#include <stdatomic.h>
#include <stdint.h>

/* The next layer's (or the driver's) entry points. */
extern cl_icd_dispatch ocl_next;

/* Recording state, read on every wrapped call. */
extern atomic_int ocl_recording;

/* One command whose device times are read when it completes. */
typedef struct ocl_cmd {
  uint64_t corr;
  uint16_t kind;        /* loom_kind */
  uint32_t name;        /* loom string id */
  uint32_t device, resource;
  uint64_t bytes;
  const char *direction;
  size_t gws[3], lws[3];
  cl_uint dims;
  cl_event event;       /* one reference held by the backend */
  uint64_t seq;         /* its place among its queue's commands */
  loom_clock clk;       /* its device's clock in that session */
  unsigned gen;         /* session generation it belongs to */
} ocl_cmd;

/* Called by the wrappers. */
typedef struct ocl_call {
  uint64_t t0;
  uint64_t corr;
  cl_event mine;
  cl_event *evp;        /* what to pass down as the event out-parameter */
  cl_command_queue q;
} ocl_call;

void ocl_call_begin(ocl_call *c, cl_command_queue q, cl_event *app_event);
/* Records the runtime call; when rc is CL_SUCCESS and kind != -1, follows
 * the command to completion.  Returns rc. */
cl_int ocl_call_end(ocl_call *c, uint32_t api, cl_int rc, int kind, uint32_t name,
                    uint64_t bytes, const char *direction, cl_uint dims, const size_t *gws,
                    const size_t *lws, cl_event *app_event);
/* A host-side call with no device work (finish, flush, wait, build). */
void ocl_host_call(uint32_t api, uint64_t t0, int kind);
/* A call's time, in the domain of the calls' clock (the host recorder's). */
uint64_t ocl_now(void);
/* Interns s (a loom string id). */
uint32_t ocl_intern(const char *s);
/* A literal's string id, interned once per call site. */
#define OCL_NAME(lit)                                                      \
  __extension__({                                                          \
    static _Atomic uint32_t id_;                                           \
    uint32_t v_ = atomic_load_explicit(&id_, memory_order_relaxed);        \
    if (!v_ && (lit)) atomic_store_explicit(&id_, v_ = ocl_intern(lit), memory_order_relaxed); \
    v_;                                                                    \
  })

/* Queue bookkeeping. */
void ocl_queue_created(cl_command_queue q, cl_device_id dev, int app_wanted_profiling,
                       int in_order);
int ocl_queue_app_profiling(cl_command_queue q); /* -1 unknown */
/* Taken before clFinish(q): the commands q held until then. */
uint64_t ocl_queue_fence(cl_command_queue q);
/* clFinish(q) returned (ok: CL_SUCCESS): the commands before fence ended;
 * emit what completed on q. */
void ocl_queue_finished(cl_command_queue q, uint64_t fence, int ok);
/* The queue's last reference was released: forget it. */
void ocl_queue_released(cl_command_queue q);
/* The kernel's function name (cached per handle), as a string id. */
uint32_t ocl_kernel_name(cl_kernel k);
void ocl_kernel_forget(cl_kernel k);

/* memory.c: puts the memory wrappers in the layer's table t; empties the
 * table of followed memory objects (a session starts). */
void ocl_memory_wrap(cl_icd_dispatch *t);
void ocl_memory_reset(void);

#endif
