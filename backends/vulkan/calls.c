/*
 * calls.c - host calls recorded as runtime records (waits as sync records),
 * and the objects the layer follows to name and describe device work:
 * pipelines (entry point or debug-utils name), shader modules, buffers and
 * the memory bound to them (for copy directions), queue names; memory.c has
 * the device memory itself.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "vk.h"

#define RECORDING() atomic_load_explicit(&vk_recording, memory_order_relaxed)

int vk_dev_put(vk_dev *d, vk_map *m, uint64_t key, void *v) {
  pthread_mutex_lock(&d->mu);
  int rc = vk_map_put(m, key, v);
  pthread_mutex_unlock(&d->mu);
  return rc;
}

void *vk_dev_del(vk_dev *d, vk_map *m, uint64_t key) {
  pthread_mutex_lock(&d->mu);
  void *v = vk_map_del(m, key);
  pthread_mutex_unlock(&d->mu);
  return v;
}

/* A wait: a sync record, then what it let complete is read. */
#define WAIT(fn, handle, PARAMS, ARGS)                                   \
  static VkResult VKAPI_CALL L_##fn PARAMS {                             \
    vk_dev *d = vk_dev_of(handle);                                       \
    if (!RECORDING()) return d->f.fn ARGS;                               \
    uint64_t t0 = vk_stamp();                                              \
    VkResult rc = d->f.fn ARGS;                                          \
    vk_call(VK_NAME("vk" #fn), t0, LOOM_KIND_SYNC, 0, 0);                \
    vk_harvest(d, 0);                                                    \
    return rc;                                                           \
  }
WAIT(QueueWaitIdle, q, (VkQueue q), (q))
WAIT(DeviceWaitIdle, dev, (VkDevice dev), (dev))
WAIT(WaitForFences, dev,
     (VkDevice dev, uint32_t n, const VkFence *f, VkBool32 all, uint64_t timeout),
     (dev, n, f, all, timeout))

static VkResult VKAPI_CALL L_CreateComputePipelines(VkDevice dev, VkPipelineCache cache, uint32_t n,
                                                    const VkComputePipelineCreateInfo *ci,
                                                    const VkAllocationCallbacks *a,
                                                    VkPipeline *out) {
  vk_dev *d = vk_dev_of(dev);
  uint64_t t0 = vk_stamp();
  VkResult rc = d->f.CreateComputePipelines(dev, cache, n, ci, a, out);
  if (rc < 0 && rc != VK_PIPELINE_COMPILE_REQUIRED) return rc;
  for (uint32_t i = 0; i < n; i++) {
    if (!out[i]) continue;
    const char *entry = ci[i].stage.pName ? ci[i].stage.pName : "main";
    pthread_mutex_lock(&d->mu);
    uint32_t mod = (uint32_t)(uintptr_t)vk_map_get(&d->modules, VK_KEY(ci[i].stage.module));
    pthread_mutex_unlock(&d->mu);
    /* "main" says nothing: a module's debug name says more */
    uint32_t name = mod && !strcmp(entry, "main") ? mod : vk_intern(entry);
    vk_dev_put(d, &d->pipelines, VK_KEY(out[i]), (void *)(uintptr_t)name);
  }
  if (RECORDING()) vk_call(VK_NAME("vkCreateComputePipelines"), t0, LOOM_KIND_RUNTIME, 0, 0);
  return rc;
}

static void VKAPI_CALL L_DestroyPipeline(VkDevice dev, VkPipeline p,
                                         const VkAllocationCallbacks *a) {
  vk_dev *d = vk_dev_of(dev);
  vk_dev_del(d, &d->pipelines, VK_KEY(p));
  d->f.DestroyPipeline(dev, p, a);
}

static VkResult VKAPI_CALL L_CreateShaderModule(VkDevice dev, const VkShaderModuleCreateInfo *ci,
                                                const VkAllocationCallbacks *a,
                                                VkShaderModule *out) {
  vk_dev *d = vk_dev_of(dev);
  if (!RECORDING()) return d->f.CreateShaderModule(dev, ci, a, out);
  uint64_t t0 = vk_stamp();
  VkResult rc = d->f.CreateShaderModule(dev, ci, a, out);
  vk_call(VK_NAME("vkCreateShaderModule"), t0, LOOM_KIND_RUNTIME, 0, 0);
  return rc;
}

static VkResult VKAPI_CALL L_CreateBuffer(VkDevice dev, const VkBufferCreateInfo *ci,
                                          const VkAllocationCallbacks *a, VkBuffer *out) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.CreateBuffer(dev, ci, a, out);
  vk_buf *b = rc == VK_SUCCESS ? calloc(1, sizeof *b) : NULL;
  if (!b) return rc;
  b->size = ci->size;
  if (vk_dev_put(d, &d->buffers, VK_KEY(*out), b)) free(b);
  return rc;
}

static void VKAPI_CALL L_DestroyBuffer(VkDevice dev, VkBuffer buf, const VkAllocationCallbacks *a) {
  vk_dev *d = vk_dev_of(dev);
  free(vk_dev_del(d, &d->buffers, VK_KEY(buf)));
  d->f.DestroyBuffer(dev, buf, a);
}

static void bound(vk_dev *d, VkBuffer buf, VkDeviceMemory mem) {
  pthread_mutex_lock(&d->mu);
  vk_buf *b = vk_map_get(&d->buffers, VK_KEY(buf));
  if (b) b->mem = mem;
  pthread_mutex_unlock(&d->mu);
}

static VkResult VKAPI_CALL L_BindBufferMemory(VkDevice dev, VkBuffer buf, VkDeviceMemory mem,
                                              VkDeviceSize off) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.BindBufferMemory(dev, buf, mem, off);
  if (rc == VK_SUCCESS) bound(d, buf, mem);
  return rc;
}

static VkResult VKAPI_CALL L_BindBufferMemory2(VkDevice dev, uint32_t n,
                                               const VkBindBufferMemoryInfo *bi) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.BindBufferMemory2(dev, n, bi);
  for (uint32_t i = 0; rc == VK_SUCCESS && i < n; i++) bound(d, bi[i].buffer, bi[i].memory);
  return rc;
}

static VkResult VKAPI_CALL L_SetDebugUtilsObjectNameEXT(VkDevice dev,
                                                        const VkDebugUtilsObjectNameInfoEXT *ni) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.SetDebugUtilsObjectNameEXT(dev, ni);
  if (!ni->pObjectName || !*ni->pObjectName) return rc;
  vk_map *m = ni->objectType == VK_OBJECT_TYPE_PIPELINE ? &d->pipelines
            : ni->objectType == VK_OBJECT_TYPE_SHADER_MODULE ? &d->modules : NULL;
  uint32_t name = vk_intern(ni->pObjectName);
  if (ni->objectType == VK_OBJECT_TYPE_QUEUE) {
    vk_queue *q = vk_queue_of((VkQueue)(uintptr_t)ni->objectHandle);
    if (q) q->name = name;
  }
  if (m && name) vk_dev_put(d, m, ni->objectHandle, (void *)(uintptr_t)name);
  return rc;
}

PFN_vkVoidFunction vk_call_proc(const char *name) {
#define P(n) if (!strcmp(name, "vk" #n)) return (PFN_vkVoidFunction)L_##n;
  P(QueueWaitIdle)
  P(DeviceWaitIdle) P(WaitForFences) P(CreateComputePipelines) P(DestroyPipeline)
      P(CreateShaderModule) P(CreateBuffer)
          P(DestroyBuffer) P(BindBufferMemory) P(BindBufferMemory2) P(SetDebugUtilsObjectNameEXT)
#undef P
              if (!strcmp(name, "vkQueueSubmit")) return (PFN_vkVoidFunction)vk_QueueSubmit;
  if (!strcmp(name, "vkQueueSubmit2") || !strcmp(name, "vkQueueSubmit2KHR"))
    return (PFN_vkVoidFunction)vk_QueueSubmit2;
  if (!strcmp(name, "vkBindBufferMemory2KHR")) return (PFN_vkVoidFunction)L_BindBufferMemory2;
  return vk_memory_proc(name);
}
