/*
 * vk.h - shared state of the Vulkan backend (libloom-vulkan.so).
 *
 * The file is a Vulkan layer and a loom plug-in.  layer.c is the layer's
 * side towards the loader (instances, devices, dispatch, GetProcAddr);
 * cmd.c wraps command recording and puts the layer's own timestamp queries
 * around each dispatch, copy, fill, barrier and label; submit.c brackets
 * each submission, reads the timestamps back without waiting and turns them
 * into device records; calls.c wraps the host calls recorded as runtime
 * records; backend.c is the loom side (session, devices, clocks).
 */
#ifndef LOOM_VK_H
#define LOOM_VK_H

#include <loom/plugin.h>
#include "spin.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define VK_LOOM_LAYER_NAME "VK_LAYER_LOOM_trace"

/* Device-level entry points of the next layer (or driver) the layer uses. */
#define VK_DEV_FUNCS(X)                                                            \
  X(GetDeviceQueue) X(GetDeviceQueue2) X(DestroyDevice) X(QueueSubmit)            \
  X(QueueWaitIdle) X(DeviceWaitIdle) X(WaitForFences) X(CreateComputePipelines)    \
  X(DestroyPipeline) X(AllocateMemory) X(FreeMemory) X(MapMemory) X(CreateBuffer)  \
  X(DestroyBuffer) X(BindBufferMemory) X(BindBufferMemory2) X(CreateShaderModule)  \
  X(CreateQueryPool) X(DestroyQueryPool) X(GetQueryPoolResults) X(CreateCommandPool) \
  X(DestroyCommandPool) X(ResetCommandPool) X(AllocateCommandBuffers)              \
  X(FreeCommandBuffers) X(BeginCommandBuffer) X(EndCommandBuffer)                  \
  X(ResetCommandBuffer) X(CmdBindPipeline) X(CmdDispatch) X(CmdDispatchBase)       \
  X(CmdDispatchIndirect) X(CmdCopyBuffer) X(CmdFillBuffer) X(CmdUpdateBuffer)      \
  X(CmdPipelineBarrier) X(CmdExecuteCommands) X(CmdWriteTimestamp)                 \
  X(CmdResetQueryPool) X(GetCalibratedTimestampsEXT) X(CmdBeginDebugUtilsLabelEXT) \
  X(CmdEndDebugUtilsLabelEXT) X(SetDebugUtilsObjectNameEXT) X(QueueSubmit2)      \
  X(CreateImage) X(DestroyImage) X(BindImageMemory) X(CmdCopyImage)               \
  X(CmdCopyBufferToImage) X(CmdCopyImageToBuffer) X(CmdBlitImage)                 \
  X(CmdClearColorImage) X(CmdCopyBuffer2) X(CmdCopyImage2) X(CmdCopyBufferToImage2) \
  X(CmdCopyImageToBuffer2) X(CmdBlitImage2)

typedef struct vk_next {
#define VK_MEMBER(n) PFN_vk##n n;
  VK_DEV_FUNCS(VK_MEMBER)
#undef VK_MEMBER
} vk_next;

/* Integer-keyed open hash table (handles -> values). */
typedef struct vk_map {
  uint64_t *keys;
  void **vals;
  size_t cap, n;
} vk_map;
void *vk_map_get(const vk_map *m, uint64_t key);
int vk_map_put(vk_map *m, uint64_t key, void *val); /* replaces; 0 ok */
void *vk_map_del(vk_map *m, uint64_t key);          /* returns the old value */
void vk_map_free(vk_map *m);
#define VK_KEY(h) ((uint64_t)(uintptr_t)(h))

typedef struct vk_inst {
  VkInstance inst;
  PFN_vkGetInstanceProcAddr gipa;
  PFN_vkDestroyInstance DestroyInstance;
  PFN_vkEnumerateDeviceExtensionProperties EnumerateDeviceExtensionProperties;
  PFN_vkGetPhysicalDeviceProperties GetPhysicalDeviceProperties;
  PFN_vkGetPhysicalDeviceProperties2 GetPhysicalDeviceProperties2;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties GetPhysicalDeviceQueueFamilyProperties;
  PFN_vkGetPhysicalDeviceMemoryProperties GetPhysicalDeviceMemoryProperties;
  PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT GetPhysicalDeviceCalibrateableTimeDomainsEXT;
  PFN_vkEnumeratePhysicalDevices EnumeratePhysicalDevices;
  uint32_t api_version;
} vk_inst;

#define VK_CHUNK 64u   /* queries per chunk a recording takes */
#define VK_POOL 1024u  /* queries per layer-owned pool */
#define VK_SLOTS 64u   /* submission brackets in flight per queue */

typedef struct vk_dev vk_dev;

typedef struct vk_queue {
  VkQueue q;
  vk_dev *d;
  uint32_t family, index;
  uint64_t native;            /* track id: family * 256 + index + 1 */
  unsigned gen;               /* session it was described to */
  uint32_t resource;
  uint32_t name;              /* debug-utils name (string id), 0 none */
  VkCommandPool pool;         /* the layer's, for the brackets */
  VkQueryPool qpool;          /* 2 queries per slot */
  VkCommandBuffer head[VK_SLOTS], tail[VK_SLOTS];
  uint8_t busy[VK_SLOTS];
  uint32_t next_slot;
  int ready;                  /* brackets set up */
} vk_queue;

struct vk_dev {
  VkDevice dev;
  VkPhysicalDevice pd;
  vk_inst *in;
  vk_next f;
  PFN_vkGetDeviceProcAddr gdpa;
  PFN_vkSetDeviceLoaderData set_loader_data;
  PFN_vkResetQueryPool ResetQueryPool; /* host reset (Vulkan 1.2); NULL: no timing */
  pthread_mutex_t mu;         /* everything below */
  VkPhysicalDeviceProperties props;
  char driver[2 * VK_MAX_DRIVER_NAME_SIZE + 2];
  int calibrated;             /* VK_EXT_calibrated_timestamps enabled with a host domain */
  VkTimeDomainEXT host_domain;
  uint32_t valid_bits[16];    /* timestampValidBits per family */
  VkPhysicalDeviceMemoryProperties mem;
  vk_queue *queues[32];
  uint32_t nqueues;
  /* the layer's query pools, handed out in chunks */
  VkQueryPool *pools;
  uint32_t npools;
  uint32_t *free_chunks;      /* pool * (VK_POOL / VK_CHUNK) + chunk */
  uint32_t nfree, cap_free;
  struct vk_sub *pending, *pending_tail;
  vk_map pipelines;           /* VkPipeline -> (uintptr_t) name id */
  vk_map modules;             /* VkShaderModule -> name id (debug name) */
  vk_map buffers;             /* VkBuffer -> vk_buf* */
  vk_map memory;              /* VkDeviceMemory -> vk_mem*: under mem_lk, not mu */
  struct vk_mem *mem_spare;   /* freed vk_mem blocks, reused (memory.c): under mem_lk */
  vk_map images;              /* VkImage -> vk_img* */
  /* loom session */
  unsigned gen;
  uint32_t device;
  loom_clock clk;
  /* gen << 32 | device once d is described to session gen: read without
   * mu (the memory calls' check), both in one load */
  _Atomic uint64_t described;
  /* the memory table's lock (spin.h: taken twice per allocation and free;
   * never held while taking mu) */
  loom_spin mem_lk;
};

typedef struct vk_buf {
  uint64_t size;
  VkDeviceMemory mem;
} vk_buf;

typedef struct vk_img {
  VkFormat format;
  VkExtent3D extent;
  uint32_t levels, layers, samples;
  VkDeviceMemory mem;
} vk_img;

typedef struct vk_mem {
  VkMemoryPropertyFlags flags;
  int mapped;
  uint64_t bytes;             /* allocationSize */
  uint32_t heap;              /* its memory type's heap */
  struct vk_mem *next_spare;  /* in vk_dev.mem_spare */
} vk_mem;
/* d's followed allocations' blocks freed (at device destroy). */
void vk_memory_forget(vk_dev *d);

/* One recorded command timed by two of the recording's queries. */
enum { VK_CMD_WORK = 0, VK_CMD_LABEL = 1, VK_CMD_EXEC = 2 };
typedef struct vk_cmd {
  uint8_t what;               /* VK_CMD_* */
  uint16_t kind;              /* loom_kind */
  uint32_t name;              /* string id */
  uint32_t q0, q1;            /* query numbers in the recording; UINT32_MAX none */
  uint32_t g[3];              /* group counts */
  uint64_t bytes;             /* VK_BYTES_UNKNOWN: an image format the layer cannot size */
  uint64_t texels;            /* image transfers: texels (every sample), else 0 */
  const char *dir;
  int indirect;
  struct vk_rec *sec;         /* VK_CMD_EXEC: the secondary's recording */
} vk_cmd;

/* What one recording of a command buffer holds; shared by the submissions
 * that ran it (refs), so its queries live until every one was read. */
typedef struct vk_rec {
  atomic_int refs;
  vk_dev *d;
  vk_cmd *cmds;
  size_t n, cap;
  uint32_t *chunks;           /* chunk numbers (see vk_dev.free_chunks) */
  uint32_t nchunks, cap_chunks;
  uint32_t used;              /* queries used */
  uint32_t open[16];          /* open labels (command indices) */
  uint32_t nopen;
  int broken;                 /* out of memory or queries while recording */
  atomic_int unread;          /* submissions not yet read back */
  uint16_t roles;             /* LOOM_RECORD_F_* of what it enqueues */
  uint32_t epoch;             /* submissions so far (d->mu) */
} vk_rec;

typedef struct vk_cb {
  VkCommandBuffer cb;
  VkCommandPool pool;
  vk_dev *d;
  vk_rec *rec;                /* the current recording, NULL when none */
  uint32_t pipe_name;         /* bound compute pipeline's name id */
  int secondary;
} vk_cb;

/* One VkSubmitInfo in flight. */
typedef struct vk_sub {
  struct vk_sub *next;
  vk_queue *q;
  int slot;                   /* bracket slot, -1 none */
  uint64_t corr;
  unsigned gen;
  vk_rec **recs;
  uint32_t *epochs;           /* each recording's epoch at this submission */
  uint32_t nrecs, ncbs;
  size_t nlost;
} vk_sub;

/* ---- layer.c ---- */
vk_dev *vk_dev_of(const void *dispatchable);
vk_cb *vk_cb_of(VkCommandBuffer cb);
void vk_cb_forget(VkCommandBuffer cb);
int vk_cb_track(VkCommandBuffer cb, VkCommandPool pool, vk_dev *d, int secondary);
/* Every command buffer of pool (NULL: of d) gets fn. */
void vk_cb_each(vk_dev *d, VkCommandPool pool, void (*fn)(vk_cb *));
void vk_queue_track(vk_dev *d, VkQueue q, uint32_t family, uint32_t index);
vk_queue *vk_queue_of(VkQueue q);
vk_dev **vk_devices(size_t *n); /* snapshot (malloc'd) */
void vk_cmd_pool_gone(vk_dev *d, VkCommandPool pool); /* its command buffers are gone */
int vk_layer_seen(void);

/* ---- calls.c ---- */
/* A table of d (its buffers, memory, images, pipelines) under d->mu. */
int vk_dev_put(vk_dev *d, vk_map *m, uint64_t key, void *v); /* 0 ok */
void *vk_dev_del(vk_dev *d, vk_map *m, uint64_t key);         /* the old value */

/* ---- cmd.c ---- */
PFN_vkVoidFunction vk_cmd_proc(const char *name);
void vk_rec_release(vk_rec *r);
void vk_cb_drop_recording(vk_cb *c);
/* Query chunk allocation (d->mu held). */
int vk_chunk_get(vk_dev *d, uint32_t *out);
void vk_chunk_put(vk_dev *d, uint32_t chunk);
#define VK_CHUNK_POOL(d, c) ((d)->pools[(c) / (VK_POOL / VK_CHUNK)])
#define VK_CHUNK_FIRST(c) (((c) % (VK_POOL / VK_CHUNK)) * VK_CHUNK)
/* The recording of cb when the session records it, else NULL. */
vk_cb *vk_cb_recording(VkCommandBuffer cb);
/* Appends a transfer timed from now (its index, or SIZE_MAX), and its end. */
size_t vk_mem_begin(vk_cb *c, uint16_t kind, uint32_t name, uint64_t bytes, const char *dir);
void vk_cmd_end(vk_cb *c, size_t i);
/* Whether memory is the host's: mapped by the program, or host-visible and
 * not device-local (takes d->mu). */
int vk_mem_on_host(vk_dev *d, VkDeviceMemory mem);
int vk_buf_on_host(vk_dev *d, VkBuffer b);
/* "DtoD", "DtoH", "HtoD" or "HtoH" from whether each side is the host's. */
const char *vk_direction(int src_host, int dst_host);

/* ---- xfer.c: images and their transfers ---- */
#define VK_BYTES_UNKNOWN UINT64_MAX
PFN_vkVoidFunction vk_xfer_proc(const char *name);

/* ---- submit.c ---- */
VkResult VKAPI_CALL vk_QueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *s, VkFence f);
VkResult VKAPI_CALL vk_QueueSubmit2(VkQueue q, uint32_t n, const VkSubmitInfo2 *s, VkFence f);
/* Emits every submission of d whose times are there, without waiting;
 * with wait_ns, waits up to that long for the rest (flush). */
void vk_harvest(vk_dev *d, uint64_t wait_ns);
/* Everything pending on d is dropped (counted lost) and released. */
void vk_pending_drop(vk_dev *d, const char *why);
void vk_queue_free(vk_queue *q);

/* ---- calls.c ---- */
PFN_vkVoidFunction vk_call_proc(const char *name);

/* ---- memory.c: vkAllocateMemory, vkFreeMemory, vkMapMemory ---- */
PFN_vkVoidFunction vk_memory_proc(const char *name);

/* ---- backend.c ---- */
extern atomic_int vk_recording;
extern atomic_int vk_live; /* a session holds the backend (configure to flush) */
extern const loom_host *vk_host;
extern loom_backend *vk_self;
extern atomic_uint vk_gen;
uint64_t vk_now(void);           /* CLOCK_MONOTONIC_RAW ns (deadlines) */
/* A record's time on the host calls' clock (the host recorder's when the
 * core offers it: one rdtsc, not a clock_gettime). */
uint64_t vk_stamp(void);
uint32_t vk_intern(const char *s);
uint64_t vk_next_corr(void);
/* A host call [t0, now) as a runtime (or sync) record. */
void vk_call(uint32_t name, uint64_t t0, uint16_t kind, uint64_t corr, uint16_t roles);
/* The same, ended at t1 (a time the caller already took). */
void vk_call_at(uint32_t name, uint64_t t0, uint64_t t1, uint16_t kind, uint64_t corr,
                uint16_t roles);
/* The memory record *m (its ts from vk_stamp; the clock is filled in) on the
 * calling thread: host->memory where the core has it (ABI 1.6), else emit. */
void vk_memory_emit(loom_memory_event *m);
/* Describes d (and its clock) to the current session if not yet; 0 ok.
 * d->mu held. */
int vk_session_device(vk_dev *d);
int vk_session_queue(vk_queue *q);
/* A sync point of d's clock (calibrated timestamps). */
void vk_sync_point(vk_dev *d);
void vk_lost(uint64_t n, const char *why);
void vk_device_seen(int ndevices); /* the program enumerated devices */

#define VK_NAME(lit)                                                        \
  __extension__({                                                          \
    static _Atomic uint32_t id_;                                           \
    uint32_t v_ = atomic_load_explicit(&id_, memory_order_relaxed);        \
    if (!v_ && vk_host) atomic_store_explicit(&id_, v_ = vk_intern(lit), memory_order_relaxed); \
    v_;                                                                    \
  })

#endif
