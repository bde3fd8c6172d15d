/*
 * memory.c - the Vulkan layer's device memory: vkAllocateMemory and
 * vkFreeMemory as memory records (LOOM_KIND_MEMORY), and vkMapMemory (a
 * mapped allocation is the host's, for copy directions).
 *
 * Every allocation is followed in its device's table (d->memory), recording
 * or not, as the layer already did for copy directions: so a free while
 * recording knows the bytes, heap and kind of memory allocated before.
 * Records, on the calling thread, named after the call:
 *  - vkAllocateMemory: "addr" (the VkDeviceMemory handle), "bytes"
 *    (allocationSize), "device" (the session's index of the VkDevice),
 *    "memory_kind" from its memory type's property flags (device-local and
 *    host-visible: "shared"; host-visible only: "host_pinned"; else
 *    "device") and "heap" (the type's heap index);
 *  - vkFreeMemory: the same, stamped and emitted before the driver's free,
 *    so that a handle the driver gives again is freed in the trace first.
 * When no session records, each call costs what it did before: one flag
 * check besides the table.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "vk.h"

#define RECORDING() atomic_load_explicit(&vk_recording, memory_order_relaxed)

static uint16_t kind_of(VkMemoryPropertyFlags f) {
  int local = (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0;
  int visible = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0;
  return local && visible ? LOOM_MEMORY_SHARED : visible ? LOOM_MEMORY_HOST_PINNED
                                                         : LOOM_MEMORY_DEVICE;
}

/* The memory record of allocation or free h (t: when) on the calling
 * thread; known: d is described to the session (then its index `device`). */
static void record(uint32_t name, uint16_t role, uint64_t t, VkDeviceMemory h, const vk_mem *m,
                   int known, uint32_t device) {
  loom_memory_event e = {.struct_size = sizeof e, .flags = role, .kind = kind_of(m->flags),
                         .device = known ? device : LOOM_DEVICE_HOST, .name = name,
                         .heap = m->heap + 1, .ts = t, .addr = VK_KEY(h), .bytes = m->bytes};
  vk_memory_emit(&e);
}

/* A block for a new allocation's entry (d->mem_lk held): a spare one, else a
 * new one.  Reused, never freed while the device lives: a malloc and a free
 * per allocation would leave small free chunks that make glibc consolidate
 * at the driver's next large allocation. */
static vk_mem *mem_take(vk_dev *d) {
  vk_mem *m = d->mem_spare;
  if (m) d->mem_spare = m->next_spare;
  else m = malloc(sizeof *m);
  return m;
}

static void mem_give(vk_dev *d, vk_mem *m) {
  m->next_spare = d->mem_spare;
  d->mem_spare = m;
}

void vk_memory_forget(vk_dev *d) {
  for (size_t i = 0; i < d->memory.cap; i++)
    if (d->memory.keys[i]) free(d->memory.vals[i]);
  for (vk_mem *m = d->mem_spare, *nx; m; m = nx) nx = m->next_spare, free(m);
  d->mem_spare = NULL;
}

/* Whether d is described to the session (then its index in *device):
 * without a lock once it is; the first time, under d->mu. */
static int described(vk_dev *d, uint32_t *device) {
  uint64_t v = atomic_load_explicit(&d->described, memory_order_relaxed);
  if ((unsigned)(v >> 32) == atomic_load(&vk_gen)) {
    *device = (uint32_t)v;
    return 1;
  }
  pthread_mutex_lock(&d->mu);
  int known = vk_session_device(d) == 0;
  *device = d->device;
  pthread_mutex_unlock(&d->mu);
  return known;
}

/* Follows the allocation h of d (its entry: *tmp). */
static void follow(vk_dev *d, VkDeviceMemory h, const vk_mem *tmp) {
  loom_spin_lock(&d->mem_lk);
  vk_mem *m = mem_take(d);
  if (m) {
    *m = *tmp;
    if (vk_map_put(&d->memory, VK_KEY(h), m)) mem_give(d, m);
  }
  loom_spin_unlock(&d->mem_lk);
}

static VkResult VKAPI_CALL L_AllocateMemory(VkDevice dev, const VkMemoryAllocateInfo *ai,
                                            const VkAllocationCallbacks *a, VkDeviceMemory *out) {
  vk_dev *d = vk_dev_of(dev);
  int rec = RECORDING();
  uint64_t t0 = rec ? vk_stamp() : 0;
  VkResult rc = d->f.AllocateMemory(dev, ai, a, out);
  if (rc != VK_SUCCESS) return rc;
  uint64_t t1 = rec ? vk_stamp() : 0;
  vk_mem tmp = {0};
  uint32_t type = ai->memoryTypeIndex, device;
  if (type < d->mem.memoryTypeCount) {
    tmp.flags = d->mem.memoryTypes[type].propertyFlags;
    tmp.heap = d->mem.memoryTypes[type].heapIndex;
  }
  tmp.bytes = ai->allocationSize;
  follow(d, *out, &tmp);
  if (rec) {
    int known = described(d, &device);
    vk_call_at(VK_NAME("vkAllocateMemory"), t0, t1, LOOM_KIND_RUNTIME, 0, 0);
    record(VK_NAME("vkAllocateMemory"), LOOM_RECORD_F_ALLOC, t1, *out, &tmp, known, device);
  }
  return rc;
}

static void VKAPI_CALL L_FreeMemory(VkDevice dev, VkDeviceMemory mem,
                                    const VkAllocationCallbacks *a) {
  vk_dev *d = vk_dev_of(dev);
  int rec = RECORDING();
  uint64_t t = rec ? vk_stamp() : 0;
  loom_spin_lock(&d->mem_lk);
  vk_mem *m = mem ? vk_map_del(&d->memory, VK_KEY(mem)) : NULL, was = {0};
  if (m) {
    was = *m;
    mem_give(d, m);
  }
  loom_spin_unlock(&d->mem_lk);
  uint32_t device = 0;
  if (m && rec) {
    int known = described(d, &device);
    record(VK_NAME("vkFreeMemory"), LOOM_RECORD_F_FREE, t, mem, &was, known, device);
  }
  d->f.FreeMemory(dev, mem, a);
}

static VkResult VKAPI_CALL L_MapMemory(VkDevice dev, VkDeviceMemory mem, VkDeviceSize off,
                                       VkDeviceSize size, VkMemoryMapFlags fl, void **p) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.MapMemory(dev, mem, off, size, fl, p);
  loom_spin_lock(&d->mem_lk);
  vk_mem *m = rc == VK_SUCCESS ? vk_map_get(&d->memory, VK_KEY(mem)) : NULL;
  if (m) m->mapped = 1;
  loom_spin_unlock(&d->mem_lk);
  return rc;
}

PFN_vkVoidFunction vk_memory_proc(const char *name) {
  if (!strcmp(name, "vkAllocateMemory")) return (PFN_vkVoidFunction)L_AllocateMemory;
  if (!strcmp(name, "vkFreeMemory")) return (PFN_vkVoidFunction)L_FreeMemory;
  if (!strcmp(name, "vkMapMemory")) return (PFN_vkVoidFunction)L_MapMemory;
  return NULL;
}
