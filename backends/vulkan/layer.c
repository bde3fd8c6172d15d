/*
 * layer.c - the Vulkan layer's side towards the loader: interface
 * negotiation, instances and devices (each with the next layer's entry
 * points), queues, command buffers, and GetProcAddr.
 *
 * Dispatchable handles (instance, physical device, device, queue, command
 * buffer) are found by their loader dispatch key, the pointer they start
 * with: a device, its queues and its command buffers share one.  Devices
 * and instances live in small append-only arrays that are read without a
 * lock; command buffers are in a hash table under one lock.
 *
 * At vkCreateDevice the layer enables what its timing needs when the
 * device offers it and the program did not ask: VK_EXT_calibrated_timestamps
 * (the clock's sync points) and hostQueryReset (its queries are reset from
 * the host, so no command is added to the program's command buffers except
 * timestamp writes).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXOBJ 64

static pthread_mutex_t objmu = PTHREAD_MUTEX_INITIALIZER;
static vk_map cbs;     /* VkCommandBuffer -> vk_cb* (objmu) */
static vk_map queues;  /* VkQueue -> vk_queue* (objmu) */

/* Instances and devices by dispatch key: MAXOBJ slots read without a lock
 * (every call looks its object up), a slot freed by a destroy taken again
 * by a later create; past MAXOBJ live at once, a map under objmu, so that
 * however many a program makes, each is found (a missing one would leave
 * the program without its functions). */
typedef struct objtab {
  struct { void *_Atomic key; void *obj; } slot[MAXOBJ];
  atomic_size_t n;     /* slots ever used */
  atomic_size_t nover; /* entries in over */
  vk_map over;         /* key -> obj (objmu) */
} objtab;
static objtab insts, devs;

static void *key_of(const void *h) { return h ? *(void *const *)h : NULL; }

static void *obj_of(objtab *t, const void *h) {
  void *k = key_of(h);
  size_t n = atomic_load_explicit(&t->n, memory_order_acquire);
  for (size_t i = 0; i < n; i++)
    if (atomic_load_explicit(&t->slot[i].key, memory_order_acquire) == k) return t->slot[i].obj;
  if (!k || !atomic_load_explicit(&t->nover, memory_order_acquire)) return NULL;
  pthread_mutex_lock(&objmu);
  void *o = vk_map_get(&t->over, VK_KEY(k));
  pthread_mutex_unlock(&objmu);
  return o;
}

/* objmu held.  The object is written before its key is published. */
static int obj_add(objtab *t, const void *h, void *obj) {
  void *k = key_of(h);
  size_t n = atomic_load(&t->n);
  for (size_t i = 0; i <= n && i < MAXOBJ; i++) {
    if (i < n && atomic_load(&t->slot[i].key)) continue;
    t->slot[i].obj = obj;
    atomic_store_explicit(&t->slot[i].key, k, memory_order_release);
    if (i == n) atomic_store_explicit(&t->n, n + 1, memory_order_release);
    return 0;
  }
  if (vk_map_put(&t->over, VK_KEY(k), obj)) return -1;
  atomic_fetch_add(&t->nover, 1);
  return 0;
}

/* objmu held. */
static void obj_del(objtab *t, void *obj) {
  for (size_t i = 0; i < atomic_load(&t->n); i++)
    if (t->slot[i].obj == obj && atomic_load(&t->slot[i].key))
      atomic_store_explicit(&t->slot[i].key, NULL, memory_order_release);
  for (size_t i = 0; i < t->over.cap; i++)
    if (t->over.keys[i] && t->over.vals[i] == obj) { /* once: a deletion moves the others */
      vk_map_del(&t->over, t->over.keys[i]);
      atomic_fetch_sub(&t->nover, 1);
      return;
    }
}

static vk_inst *inst_of(const void *h) { return obj_of(&insts, h); }

vk_dev *vk_dev_of(const void *h) { return obj_of(&devs, h); }

vk_dev **vk_devices(size_t *count) {
  pthread_mutex_lock(&objmu);
  size_t n = atomic_load(&devs.n), k = 0;
  vk_dev **v = malloc((n + devs.over.n + 1) * sizeof *v);
  for (size_t i = 0; v && i < n; i++)
    if (atomic_load(&devs.slot[i].key)) v[k++] = devs.slot[i].obj;
  for (size_t i = 0; v && i < devs.over.cap; i++)
    if (devs.over.keys[i]) v[k++] = devs.over.vals[i];
  pthread_mutex_unlock(&objmu);
  *count = k;
  return v;
}

/* ---- command buffers and queues ------------------------------------------ */
vk_cb *vk_cb_of(VkCommandBuffer cb) {
  pthread_mutex_lock(&objmu);
  vk_cb *c = vk_map_get(&cbs, VK_KEY(cb));
  pthread_mutex_unlock(&objmu);
  return c;
}

int vk_cb_track(VkCommandBuffer cb, VkCommandPool pool, vk_dev *d, int secondary) {
  vk_cb *c = calloc(1, sizeof *c);
  if (!c) return -1;
  c->cb = cb, c->pool = pool, c->d = d, c->secondary = secondary;
  pthread_mutex_lock(&objmu);
  vk_cb *old = vk_map_get(&cbs, VK_KEY(cb));
  int rc = vk_map_put(&cbs, VK_KEY(cb), c);
  pthread_mutex_unlock(&objmu);
  if (old) { vk_cb_drop_recording(old); free(old); }
  if (rc) free(c);
  return rc;
}

void vk_cb_forget(VkCommandBuffer cb) {
  pthread_mutex_lock(&objmu);
  vk_cb *c = vk_map_del(&cbs, VK_KEY(cb));
  pthread_mutex_unlock(&objmu);
  if (!c) return;
  vk_cb_drop_recording(c);
  free(c);
}

/* The command buffers of pool (VK_NULL_HANDLE: all) of d; with take, they
 * leave the table.  *n of them, in a malloc'd array. */
static vk_cb **collect(vk_dev *d, VkCommandPool pool, int take, size_t *n) {
  pthread_mutex_lock(&objmu);
  vk_cb **v = malloc((cbs.n + 1) * sizeof *v);
  *n = 0;
  for (size_t i = 0; v && i < cbs.cap; i++) {
    vk_cb *c = cbs.vals[i];
    if (c && c->d == d && (pool == VK_NULL_HANDLE || c->pool == pool)) v[(*n)++] = c;
  }
  for (size_t i = 0; take && i < *n; i++) vk_map_del(&cbs, VK_KEY(v[i]->cb));
  pthread_mutex_unlock(&objmu);
  return v;
}

void vk_cb_each(vk_dev *d, VkCommandPool pool, void (*fn)(vk_cb *)) {
  size_t n;
  vk_cb **v = collect(d, pool, 0, &n);
  /* the program does not free these while it resets or destroys the pool */
  for (size_t i = 0; i < n; i++) fn(v[i]);
  free(v);
}

static void drop_pool_cbs(vk_dev *d, VkCommandPool pool) {
  size_t n;
  vk_cb **v = collect(d, pool, 1, &n);
  for (size_t i = 0; i < n; i++) {
    vk_cb_drop_recording(v[i]);
    free(v[i]);
  }
  free(v);
}

void vk_cmd_pool_gone(vk_dev *d, VkCommandPool pool) { drop_pool_cbs(d, pool); }

void vk_queue_track(vk_dev *d, VkQueue q, uint32_t family, uint32_t index) {
  pthread_mutex_lock(&objmu);
  if (!vk_map_get(&queues, VK_KEY(q)) && d->nqueues < sizeof d->queues / sizeof d->queues[0]) {
    vk_queue *e = calloc(1, sizeof *e);
    if (e) {
      e->q = q, e->d = d, e->family = family, e->index = index;
      e->native = (uint64_t)family * 256u + index + 1u;
      if (vk_map_put(&queues, VK_KEY(q), e) == 0) d->queues[d->nqueues++] = e;
      else free(e);
    }
  }
  pthread_mutex_unlock(&objmu);
}

vk_queue *vk_queue_of(VkQueue q) {
  pthread_mutex_lock(&objmu);
  vk_queue *e = vk_map_get(&queues, VK_KEY(q));
  pthread_mutex_unlock(&objmu);
  return e;
}

/* ---- instances ------------------------------------------------------------ */
static VkResult VKAPI_CALL L_CreateInstance(const VkInstanceCreateInfo *ci,
                                            const VkAllocationCallbacks *a, VkInstance *out) {
  VkLayerInstanceCreateInfo *li = (VkLayerInstanceCreateInfo *)ci->pNext;
  while (li && !(li->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                 li->function == VK_LAYER_LINK_INFO))
    li = (VkLayerInstanceCreateInfo *)li->pNext;
  if (!li) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetInstanceProcAddr gipa = li->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  li->u.pLayerInfo = li->u.pLayerInfo->pNext;
  PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
  if (!create) return VK_ERROR_INITIALIZATION_FAILED;
  VkResult rc = create(ci, a, out);
  if (rc != VK_SUCCESS) return rc;
  vk_inst *in = calloc(1, sizeof *in);
  if (!in) return rc; /* not traced; the program is unaffected */
  in->inst = *out;
  in->gipa = gipa;
  in->api_version = ci->pApplicationInfo ? ci->pApplicationInfo->apiVersion : VK_API_VERSION_1_0;
#define GET(n) in->n = (PFN_vk##n)gipa(*out, "vk" #n)
  GET(DestroyInstance);
  GET(EnumerateDeviceExtensionProperties);
  GET(GetPhysicalDeviceProperties);
  GET(GetPhysicalDeviceProperties2);
  GET(GetPhysicalDeviceQueueFamilyProperties);
  GET(GetPhysicalDeviceMemoryProperties);
  GET(GetPhysicalDeviceCalibrateableTimeDomainsEXT);
  GET(EnumeratePhysicalDevices);
#undef GET
  pthread_mutex_lock(&objmu);
  int lost = obj_add(&insts, *out, in);
  pthread_mutex_unlock(&objmu);
  if (lost) free(in); /* no memory: the instance's calls go past the layer */
  return rc;
}

static void VKAPI_CALL L_DestroyInstance(VkInstance inst, const VkAllocationCallbacks *a) {
  vk_inst *in = inst_of(inst);
  if (!in) return;
  PFN_vkDestroyInstance destroy = in->DestroyInstance;
  pthread_mutex_lock(&objmu);
  obj_del(&insts, in);
  pthread_mutex_unlock(&objmu);
  destroy(inst, a);
  free(in);
}

static VkResult VKAPI_CALL L_EnumeratePhysicalDevices(VkInstance inst, uint32_t *n,
                                                      VkPhysicalDevice *pd) {
  vk_inst *in = inst_of(inst);
  VkResult rc = in->EnumeratePhysicalDevices(inst, n, pd);
  if ((rc == VK_SUCCESS || rc == VK_INCOMPLETE) && !pd) vk_device_seen((int)*n);
  return rc;
}

static VkResult VKAPI_CALL L_EnumerateDeviceExtensionProperties(VkPhysicalDevice pd,
                                                                const char *layer, uint32_t *n,
                                                                VkExtensionProperties *p) {
  if (layer && !strcmp(layer, VK_LOOM_LAYER_NAME)) {
    *n = 0; /* the layer adds no extension */
    return VK_SUCCESS;
  }
  vk_inst *in = inst_of(pd);
  return in->EnumerateDeviceExtensionProperties(pd, layer, n, p);
}

/* ---- devices -------------------------------------------------------------- */
static int has_ext(vk_inst *in, VkPhysicalDevice pd, const char *name) {
  uint32_t n = 0;
  if (in->EnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || !n) return 0;
  VkExtensionProperties *p = malloc(n * sizeof *p);
  int found = 0;
  if (p && in->EnumerateDeviceExtensionProperties(pd, NULL, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(p[i].extensionName, name);
  free(p);
  return found;
}

/* The host clock the device's calibrated timestamps can pair with. */
static void pick_domain(vk_dev *d) {
  uint32_t n = 0;
  VkTimeDomainEXT doms[8];
  if (!d->in->GetPhysicalDeviceCalibrateableTimeDomainsEXT) return;
  n = 8;
  if (d->in->GetPhysicalDeviceCalibrateableTimeDomainsEXT(d->pd, &n, doms) < 0) return;
  int dev = 0, raw = 0, mono = 0;
  for (uint32_t i = 0; i < n; i++) {
    dev |= doms[i] == VK_TIME_DOMAIN_DEVICE_EXT;
    raw |= doms[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_RAW_EXT;
    mono |= doms[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
  }
  if (!dev || !(raw || mono)) return;
  d->calibrated = 1;
  d->host_domain =
      raw ? VK_TIME_DOMAIN_CLOCK_MONOTONIC_RAW_EXT : VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
}

static void describe(vk_dev *d) {
  vk_inst *in = d->in;
  in->GetPhysicalDeviceProperties(d->pd, &d->props);
  in->GetPhysicalDeviceMemoryProperties(d->pd, &d->mem);
  uint32_t nf = 16;
  VkQueueFamilyProperties fam[16];
  in->GetPhysicalDeviceQueueFamilyProperties(d->pd, &nf, fam);
  for (uint32_t i = 0; i < nf && i < 16; i++) d->valid_bits[i] = fam[i].timestampValidBits;
  if (in->GetPhysicalDeviceProperties2 && d->props.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceDriverProperties drv = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &drv};
    in->GetPhysicalDeviceProperties2(d->pd, &p2);
    snprintf(d->driver, sizeof d->driver, "%s %s", drv.driverName, drv.driverInfo);
  }
}

/* Finds the host-query-reset switch in the program's feature chain. */
static VkBool32 *find_reset_feature(const void *chain) {
  for (VkBaseOutStructure *s = (VkBaseOutStructure *)chain; s; s = s->pNext) {
    if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)
      return &((VkPhysicalDeviceVulkan12Features *)s)->hostQueryReset;
    if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES)
      return &((VkPhysicalDeviceHostQueryResetFeatures *)s)->hostQueryReset;
  }
  return NULL;
}

/* The next layer's device functions for d (d->dev created). */
static void device_funcs(vk_dev *d, int reset_ok) {
  PFN_vkGetDeviceProcAddr gdpa = d->gdpa;
  VkDevice dev = d->dev;
#define GETF(n) d->f.n = (PFN_vk##n)gdpa(dev, "vk" #n);
  VK_DEV_FUNCS(GETF)
#undef GETF
  if (!d->f.QueueSubmit2) d->f.QueueSubmit2 = (PFN_vkQueueSubmit2)gdpa(dev, "vkQueueSubmit2KHR");
  /* VK_KHR_copy_commands2 on a device older than 1.3 */
#define KHR(n) if (!d->f.n) d->f.n = (PFN_vk##n)gdpa(dev, "vk" #n "KHR");
  KHR(CmdCopyBuffer2) KHR(CmdCopyImage2) KHR(CmdCopyBufferToImage2)
  KHR(CmdCopyImageToBuffer2) KHR(CmdBlitImage2)
#undef KHR
  d->ResetQueryPool = reset_ok ? (PFN_vkResetQueryPool)gdpa(dev, "vkResetQueryPool") : NULL;
}

/* Makes d known (and part of a session that records); frees it when it
 * cannot be kept. */
static void device_keep(vk_dev *d) {
  pthread_mutex_init(&d->mu, NULL);
  pthread_mutex_lock(&objmu);
  int lost = obj_add(&devs, d->dev, d);
  pthread_mutex_unlock(&objmu);
  if (lost) {
    free(d);
    return;
  }
  if (atomic_load(&vk_recording)) {
    pthread_mutex_lock(&d->mu);
    vk_session_device(d);
    pthread_mutex_unlock(&d->mu);
  }
}

static VkResult VKAPI_CALL L_CreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                          const VkAllocationCallbacks *a, VkDevice *out) {
  VkLayerDeviceCreateInfo *link = NULL, *cb = NULL;
  for (VkLayerDeviceCreateInfo *l = (VkLayerDeviceCreateInfo *)ci->pNext; l;
       l = (VkLayerDeviceCreateInfo *)l->pNext) {
    if (l->sType != VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO) continue;
    if (l->function == VK_LAYER_LINK_INFO && !link) link = l;
    if (l->function == VK_LOADER_DATA_CALLBACK && !cb) cb = l;
  }
  vk_inst *in = inst_of(pd);
  if (!link || !in) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(in->inst, "vkCreateDevice");
  vk_dev *d = calloc(1, sizeof *d);
  if (!create || !d) {
    free(d);
    return create ? create(pd, ci, a, out) : VK_ERROR_INITIALIZATION_FAILED;
  }
  d->pd = pd, d->in = in, d->gdpa = gdpa;
  d->set_loader_data = cb ? cb->u.pfnSetDeviceLoaderData : NULL;
  describe(d);
  /* what the layer adds to the program's request */
  VkDeviceCreateInfo mine = *ci;
  const char **ext = malloc((ci->enabledExtensionCount + 1) * sizeof *ext);
  int want_cal = has_ext(in, pd, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME), have_cal = 0;
  for (uint32_t i = 0; ext && i < ci->enabledExtensionCount; i++) {
    ext[i] = ci->ppEnabledExtensionNames[i];
    have_cal |= !strcmp(ext[i], VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME);
  }
  if (ext && want_cal && !have_cal) {
    ext[mine.enabledExtensionCount++] = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;
    mine.ppEnabledExtensionNames = ext;
  }
  VkPhysicalDeviceHostQueryResetFeatures hqr = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES,
      .hostQueryReset = VK_TRUE};
  VkBool32 *sw = find_reset_feature(ci->pNext), saved = sw ? *sw : VK_FALSE;
  int reset_ok = d->props.apiVersion >= VK_API_VERSION_1_2;
  if (reset_ok && sw) *sw = VK_TRUE; /* restored below: the program's struct */
  else if (reset_ok) hqr.pNext = (void *)mine.pNext, mine.pNext = &hqr;
  VkResult rc = create(pd, &mine, a, out);
  if (sw) *sw = saved;
  free(ext);
  if (rc != VK_SUCCESS) { free(d); return rc; }
  d->dev = *out;
  device_funcs(d, reset_ok);
  if (want_cal && d->f.GetCalibratedTimestampsEXT) pick_domain(d);
  device_keep(d);
  return rc;
}

static void VKAPI_CALL L_DestroyDevice(VkDevice dev, const VkAllocationCallbacks *a) {
  vk_dev *d = vk_dev_of(dev);
  if (!d) return;
  /* All its work has completed (the program's duty): read what is left. */
  vk_harvest(d, 0);
  pthread_mutex_lock(&d->mu);
  if (atomic_load(&vk_recording) && d->gen == atomic_load(&vk_gen)) vk_sync_point(d);
  pthread_mutex_unlock(&d->mu);
  vk_pending_drop(d, "submissions whose times were not there when the device was destroyed");
  drop_pool_cbs(d, VK_NULL_HANDLE);
  pthread_mutex_lock(&objmu);
  obj_del(&devs, d);
  for (uint32_t i = 0; i < d->nqueues; i++) vk_map_del(&queues, VK_KEY(d->queues[i]->q));
  pthread_mutex_unlock(&objmu);
  for (uint32_t i = 0; i < d->nqueues; i++) vk_queue_free(d->queues[i]);
  for (uint32_t i = 0; i < d->npools; i++) d->f.DestroyQueryPool(dev, d->pools[i], NULL);
  PFN_vkDestroyDevice destroy = d->f.DestroyDevice;
  /* The record is kept (never freed): a late lookup through a stale
   * dispatch key finds nothing, and nothing points into freed memory. */
  free(d->pools), free(d->free_chunks);
  vk_map_free(&d->pipelines), vk_map_free(&d->modules);
  vk_memory_forget(d);
  vk_map_free(&d->buffers), vk_map_free(&d->memory), vk_map_free(&d->images);
  destroy(dev, a);
}

static void VKAPI_CALL L_GetDeviceQueue(VkDevice dev, uint32_t family, uint32_t index, VkQueue *q) {
  vk_dev *d = vk_dev_of(dev);
  d->f.GetDeviceQueue(dev, family, index, q);
  if (*q) vk_queue_track(d, *q, family, index);
}

static void VKAPI_CALL L_GetDeviceQueue2(VkDevice dev, const VkDeviceQueueInfo2 *info, VkQueue *q) {
  vk_dev *d = vk_dev_of(dev);
  d->f.GetDeviceQueue2(dev, info, q);
  if (*q) vk_queue_track(d, *q, info->queueFamilyIndex, info->queueIndex);
}

/* ---- GetProcAddr ---------------------------------------------------------- */
static PFN_vkVoidFunction device_proc(const char *name) {
#define P(n) if (!strcmp(name, "vk" #n)) return (PFN_vkVoidFunction)L_##n;
  P(DestroyDevice) P(GetDeviceQueue) P(GetDeviceQueue2)
#undef P
  PFN_vkVoidFunction f = vk_cmd_proc(name);
  if (!f) f = vk_xfer_proc(name);
  return f ? f : vk_call_proc(name);
}

static PFN_vkVoidFunction VKAPI_CALL L_GetDeviceProcAddr(VkDevice dev, const char *name) {
  if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)L_GetDeviceProcAddr;
  vk_dev *d = vk_dev_of(dev);
  if (!d) return NULL;
  PFN_vkVoidFunction next = d->gdpa(dev, name);
  PFN_vkVoidFunction mine = next ? device_proc(name) : NULL;
  return mine ? mine : next;
}

static PFN_vkVoidFunction VKAPI_CALL L_GetInstanceProcAddr(VkInstance inst, const char *name) {
#define P(n) if (!strcmp(name, "vk" #n)) return (PFN_vkVoidFunction)L_##n;
  P(GetInstanceProcAddr) P(CreateInstance) P(DestroyInstance) P(CreateDevice)
  P(EnumeratePhysicalDevices) P(EnumerateDeviceExtensionProperties) P(GetDeviceProcAddr)
#undef P
  vk_inst *in = inst_of(inst);
  if (!in) return NULL;
  PFN_vkVoidFunction next = in->gipa(inst, name);
  PFN_vkVoidFunction mine = next ? device_proc(name) : NULL;
  return mine ? mine : next;
}

EXPORT VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
  if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT) return VK_ERROR_INITIALIZATION_FAILED;
  if (v->loaderLayerInterfaceVersion < 2) return VK_ERROR_INITIALIZATION_FAILED;
  v->loaderLayerInterfaceVersion = 2;
  v->pfnGetInstanceProcAddr = L_GetInstanceProcAddr;
  v->pfnGetDeviceProcAddr = L_GetDeviceProcAddr;
  v->pfnGetPhysicalDeviceProcAddr = NULL;
  return VK_SUCCESS;
}

/* For the probe: has the loader run this layer in this process? */
int vk_layer_seen(void) { return atomic_load(&insts.n) > 0 || atomic_load(&insts.nover) > 0; }
