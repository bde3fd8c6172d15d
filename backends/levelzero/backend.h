/*
 * backend.h - what the Level Zero backend's files share: backend.c (the
 * loader, the backend's entry points), objects.c (devices, queues, lists,
 * kernels, own event pools; device records read from completed commands),
 * calls.c (the tracing layer's callbacks) and memory.c (those of memory
 * allocations and frees).
 */
#ifndef LOOM_ZE_BACKEND_H
#define LOOM_ZE_BACKEND_H

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
  X(zeMemGetAddressRange)                                                             \
  X(zelTracerCreate) X(zelTracerSetEnabled)

/* Traced calls: name, params struct, kind handler. */
#define ZE_TRACED(X)                                                                        \
  X(ContextCreate, context_create) X(ContextDestroy, context_destroy)                       \
  X(CommandQueueCreate, command_queue_create) X(CommandQueueDestroy, command_queue_destroy) \
  X(CommandQueueExecuteCommandLists, command_queue_execute_command_lists)                   \
  X(CommandQueueSynchronize, command_queue_synchronize)                                     \
  X(CommandListCreate, command_list_create)                                                 \
  X(CommandListCreateImmediate, command_list_create_immediate)                              \
  X(CommandListDestroy, command_list_destroy) X(CommandListClose, command_list_close)       \
  X(CommandListReset, command_list_reset)                                                   \
  X(CommandListAppendLaunchKernel, command_list_append_launch_kernel)                       \
  X(CommandListAppendMemoryCopy, command_list_append_memory_copy)                           \
  X(CommandListAppendMemoryFill, command_list_append_memory_fill)                           \
  X(CommandListAppendBarrier, command_list_append_barrier)                                  \
  X(EventPoolCreate, event_pool_create) X(EventPoolDestroy, event_pool_destroy)             \
  X(EventCreate, event_create) X(EventDestroy, event_destroy)                               \
  X(EventHostSynchronize, event_host_synchronize) X(EventHostReset, event_host_reset)       \
  X(ModuleCreate, module_create) X(ModuleDestroy, module_destroy)                           \
  X(KernelCreate, kernel_create) X(KernelDestroy, kernel_destroy)                           \
  X(KernelSetGroupSize, kernel_set_group_size)                                              \
  X(KernelSetArgumentValue, kernel_set_argument_value) X(MemAllocDevice, mem_alloc_device)  \
  X(MemAllocHost, mem_alloc_host) X(MemAllocShared, mem_alloc_shared) X(MemFree, mem_free)

typedef struct ze_table {
#define DECL(f) __typeof__(&f) f;
  ZE_FNS(DECL)
#undef DECL
#define DECLR(n, p) __typeof__(&zelTracer##n##RegisterCallback) reg_##n;
  ZE_TRACED(DECLR)
#undef DECLR
} ze_table;

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
typedef struct kinfo { ze_kernel_handle_t h; uint32_t name; uint32_t gs[3]; } kinfo;
enum { POOL_EVENTS = 1024 };
typedef struct mypool {
  ze_context_handle_t ctx;
  ze_event_pool_handle_t pool;
  ze_event_handle_t ev[POOL_EVENTS];
  uint8_t used[POOL_EVENTS];
} mypool;

extern ze_table ze;
extern const loom_host *ze_host;
extern loom_backend *ze_self;
extern pthread_mutex_t mu;        /* guards the objects, kernels, pools and devices */
extern atomic_int recording;
extern atomic_uint gen;           /* session generation */
extern atomic_uint_fast64_t next_corr;
extern loom_clock host_clk;
/* The clock of host->recorder_now when memory records go through
 * host->memory (ABI 1.6), else 0. */
extern loom_clock mem_clk;
extern __thread int busy;         /* inside the backend's own Level Zero calls */
extern xdev devs[16];
extern size_t ndevs;
extern obj *objs;
extern size_t nobjs;
extern mypool *pools[16];
extern size_t npools;

static inline uint64_t raw_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

obj *find_obj(void *h);
obj *add_obj(void *h, int type, ze_device_handle_t d, ze_context_handle_t c);
int push_cmd(obj *o, const cmd *c);
kinfo *find_kernel(ze_kernel_handle_t k);
xdev *find_dev(ze_device_handle_t d);
ze_event_handle_t own_event(ze_context_handle_t ctx);
void release_own(ze_event_handle_t e);
void sync_point(xdev *d);
size_t harvest(obj *o, uint64_t wait_until);
void harvest_all(uint64_t wait_until);
const char *result_name(ze_result_t r);
/* The session's device index of h, or LOOM_DEVICE_HOST when h is not a
 * device described in the current session. */
uint32_t device_index(ze_device_handle_t h);

/* The tracing layer's callbacks (calls.c), registered in ze_probe. */
#define ZE_CB_DECL(n, p)                                                               \
  void ZE_APICALL pro_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu); \
  void ZE_APICALL epi_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu);
ZE_TRACED(ZE_CB_DECL)
#undef ZE_CB_DECL

#endif
