/*
 * memory.c - the Level Zero backend's memory records: zeMemAllocDevice,
 * zeMemAllocHost and zeMemAllocShared each give their runtime call's record
 * and an allocation (LOOM_KIND_MEMORY, LOOM_RECORD_F_ALLOC: "addr", "bytes",
 * "memory_kind" device / host_pinned / shared, "device" the session's index
 * of the call's device, none for host memory); zeMemFree gives its call and
 * a free of the address, with the size (zeMemGetAddressRange), kind and
 * device (zeMemGetAllocProperties) the driver still knows just before it,
 * so a free of memory allocated before the session still says how much.
 * Nothing is recorded for a failed call.
 */
#include "backend.h"

typedef struct memcall {
  uint64_t t0;
  uint64_t bytes;           /* zeMemFree: the size of what it frees, 0 unknown */
  const char *kind;         /* zeMemFree: its memory kind, NULL unknown */
  uint32_t dev;             /* zeMemFree: its device, LOOM_DEVICE_HOST none */
} memcall;
static __thread memcall mc;

static int memory_wanted(void) {
  return atomic_load(&recording) && !busy;
}

static void emit_runtime(const char *api) {
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_RUNTIME, .clock = host_clk,
                   .device = LOOM_DEVICE_HOST, .tid = ze_host->thread_id(), .start = mc.t0,
                   .end = raw_now(), .name = ze_host->intern(ze_self, api, SIZE_MAX)};
  ze_host->emit(ze_self, &r);
}

/* The memory record of api: flag LOOM_RECORD_F_ALLOC or _FREE; bytes 0 and
 * kind NULL when not known (a free's), dev LOOM_DEVICE_HOST for none. */
static void emit_memory(const char *api, uint16_t flag, const void *p, uint64_t bytes,
                        const char *kind, uint32_t dev) {
  if (mem_clk) { /* a host record on this thread, no lock */
    uint16_t k = !kind ? (dev != LOOM_DEVICE_HOST ? LOOM_MEMORY_DEVICE : LOOM_MEMORY_HOST)
                 : !strcmp(kind, "shared") ? LOOM_MEMORY_SHARED
                 : !strcmp(kind, "host_pinned") ? LOOM_MEMORY_HOST_PINNED
                 : !strcmp(kind, "host") ? LOOM_MEMORY_HOST : LOOM_MEMORY_DEVICE;
    loom_memory_event m = {.struct_size = sizeof m, .flags = flag, .kind = k, .clock = mem_clk,
                           .device = dev, .name = ze_host->intern(ze_self, api, SIZE_MAX),
                           .ts = ze_host->recorder_now(NULL), .addr = (uint64_t)(uintptr_t)p,
                           .bytes = bytes};
    ze_host->memory(ze_self, &m);
    return;
  }
  loom_arg a[4];
  uint32_t n = 0;
  a[n++] = (loom_arg){.key = "addr", .type = LOOM_ARG_UINT, .v.u = (uint64_t)(uintptr_t)p};
  if (bytes) a[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = bytes};
  if (kind) a[n++] = (loom_arg){.key = "memory_kind", .type = LOOM_ARG_STRING, .v.s = kind};
  if (dev != LOOM_DEVICE_HOST)
    a[n++] = (loom_arg){.key = "device", .type = LOOM_ARG_UINT, .v.u = dev};
  uint64_t t = raw_now();
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY, .flags = flag,
                   .clock = host_clk, .device = LOOM_DEVICE_HOST, .tid = ze_host->thread_id(),
                   .start = t, .end = t, .name = ze_host->intern(ze_self, api, SIZE_MAX),
                   .nargs = n, .args = a};
  ze_host->emit(ze_self, &r);
}

#define PRO(n, p) \
  void ZE_APICALL pro_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu)
#define EPI(n, p) \
  void ZE_APICALL epi_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu)
#define UNUSED (void)params, (void)r, (void)u, (void)iu

PRO(MemAllocDevice, mem_alloc_device) { UNUSED; mc.t0 = raw_now(); }
EPI(MemAllocDevice, mem_alloc_device) {
  UNUSED;
  if (!memory_wanted()) return;
  emit_runtime("zeMemAllocDevice");
  if (r == ZE_RESULT_SUCCESS && *params->ppptr)
    emit_memory("zeMemAllocDevice", LOOM_RECORD_F_ALLOC, **params->ppptr, *params->psize,
                "device", device_index(*params->phDevice));
}
PRO(MemAllocHost, mem_alloc_host) { UNUSED; mc.t0 = raw_now(); }
EPI(MemAllocHost, mem_alloc_host) {
  UNUSED;
  if (!memory_wanted()) return;
  emit_runtime("zeMemAllocHost");
  if (r == ZE_RESULT_SUCCESS && *params->ppptr)
    emit_memory("zeMemAllocHost", LOOM_RECORD_F_ALLOC, **params->ppptr, *params->psize,
                "host_pinned", LOOM_DEVICE_HOST);
}
/* Shared memory may name no device (it then migrates to any of the
 * context's): "device" only when it names one. */
PRO(MemAllocShared, mem_alloc_shared) { UNUSED; mc.t0 = raw_now(); }
EPI(MemAllocShared, mem_alloc_shared) {
  UNUSED;
  if (!memory_wanted()) return;
  emit_runtime("zeMemAllocShared");
  if (r == ZE_RESULT_SUCCESS && *params->ppptr)
    emit_memory("zeMemAllocShared", LOOM_RECORD_F_ALLOC, **params->ppptr, *params->psize,
                "shared", device_index(*params->phDevice));
}

/* What the driver knows of p before it is freed (mc.bytes, kind, dev). */
static void describe_freed(ze_context_handle_t ctx, const void *p) {
  mc.bytes = 0, mc.kind = NULL, mc.dev = LOOM_DEVICE_HOST;
  if (!p) return;
  void *base = NULL;
  size_t size = 0;
  ze_memory_allocation_properties_t pr = {.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES};
  ze_device_handle_t d = NULL;
  busy++;
  if (ze.zeMemGetAddressRange(ctx, p, &base, &size) == ZE_RESULT_SUCCESS && base == p)
    mc.bytes = size;
  ze_result_t st = ze.zeMemGetAllocProperties(ctx, p, &pr, &d);
  busy--;
  if (st != ZE_RESULT_SUCCESS) return;
  mc.kind = pr.type == ZE_MEMORY_TYPE_DEVICE   ? "device"
            : pr.type == ZE_MEMORY_TYPE_HOST   ? "host_pinned"
            : pr.type == ZE_MEMORY_TYPE_SHARED ? "shared"
                                               : NULL;
  if (mc.kind && pr.type != ZE_MEMORY_TYPE_HOST) mc.dev = device_index(d);
}
PRO(MemFree, mem_free) {
  UNUSED;
  if (!memory_wanted()) return;
  describe_freed(*params->phContext, *params->pptr);
  mc.t0 = raw_now();
}
EPI(MemFree, mem_free) {
  UNUSED;
  if (!memory_wanted()) return;
  emit_runtime("zeMemFree");
  if (r == ZE_RESULT_SUCCESS && *params->pptr)
    emit_memory("zeMemFree", LOOM_RECORD_F_FREE, *params->pptr, mc.bytes, mc.kind, mc.dev);
}
