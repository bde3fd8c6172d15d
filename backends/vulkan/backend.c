/*
 * backend.c - the loom half of libloom-vulkan.so: registration, probe (is
 * the layer active, is there a Vulkan driver), devices and queues described
 * to the session, the device clock (VK_EXT_calibrated_timestamps pairs,
 * taken when a device joins the session, at stop and when the device is
 * destroyed, so drift is interpolated), host call records and losses.
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "vk.h"

#define EXPORT __attribute__((visibility("default")))

atomic_int vk_recording, vk_live;
atomic_uint vk_gen;
const loom_host *vk_host;
loom_backend *vk_self;
static atomic_uint_fast64_t corr_serial;
/* The clock of the host call and memory records: the host recorder's
 * (host->recorder_now, ABI 1.4; host->memory's fast way takes it), else
 * CLOCK_MONOTONIC_RAW ns. */
static loom_clock host_clk;
static uint64_t (*recorder_now)(loom_clock_domain *domain);

uint64_t vk_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t vk_stamp(void) { return recorder_now ? recorder_now(NULL) : vk_now(); }

uint32_t vk_intern(const char *s) { return vk_host ? vk_host->intern(vk_self, s, SIZE_MAX) : 0; }

uint64_t vk_next_corr(void) { return atomic_fetch_add(&corr_serial, 1) + 1; }

void vk_call_at(uint32_t name, uint64_t t0, uint64_t t1, uint16_t kind, uint64_t corr,
                uint16_t roles) {
  if (!atomic_load(&vk_live)) return;
  loom_record r = {.struct_size = sizeof r, .kind = kind, .flags = roles, .clock = host_clk,
                   .device = LOOM_DEVICE_HOST, .start = t0, .end = t1, .name = name,
                   .correlation = corr};
  /* host->call (ABI 1.7): one host record on this thread, no lock */
  if (LOOM_HOST_HAS(vk_host, call)) vk_host->call(vk_self, &r);
  else vk_host->emit(vk_self, &r);
}

void vk_call(uint32_t name, uint64_t t0, uint16_t kind, uint64_t corr, uint16_t roles) {
  vk_call_at(name, t0, vk_stamp(), kind, corr, roles);
}

void vk_memory_emit(loom_memory_event *m) {
  static const char *const kinds[] = {"host", "device", "host_pinned", "shared", "pool"};
  if (!atomic_load(&vk_live)) return;
  m->clock = host_clk;
  if (LOOM_HOST_HAS(vk_host, memory)) { /* ABI 1.6: a host record, no lock */
    vk_host->memory(vk_self, m);
    return;
  }
  loom_arg a[5];
  uint32_t n = 0;
  a[n++] = (loom_arg){.key = "addr", .type = LOOM_ARG_UINT, .v.u = m->addr};
  a[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = m->bytes};
  if (m->device != LOOM_DEVICE_HOST)
    a[n++] = (loom_arg){.key = "device", .type = LOOM_ARG_UINT, .v.u = m->device};
  a[n++] = (loom_arg){.key = "memory_kind", .type = LOOM_ARG_STRING, .v.s = kinds[m->kind % 5]};
  if (m->heap) a[n++] = (loom_arg){.key = "heap", .type = LOOM_ARG_UINT, .v.u = m->heap - 1};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY, .flags = m->flags,
                   .clock = host_clk, .device = LOOM_DEVICE_HOST, .start = m->ts, .end = m->ts,
                   .name = m->name, .nargs = n, .args = a};
  vk_host->emit(vk_self, &r);
}

void vk_lost(uint64_t n, const char *why) {
  if (n && atomic_load(&vk_live)) vk_host->count_lost(vk_self, n, why);
}

/* ---- devices, queues, clocks ------------------------------------------------ */
static const char *vendor_name(uint32_t id) {
  switch (id) {
  case 0x1002: return "AMD";
  case 0x10de: return "NVIDIA";
  case 0x8086: return "Intel";
  case 0x13b5: return "ARM";
  case 0x5143: return "Qualcomm";
  case 0x1010: return "Imagination";
  case 0x10005: return "Mesa";
  default: return "unknown";
  }
}

static const char *type_name(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated gpu";
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "gpu";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual gpu";
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
  default: return "other";
  }
}

void vk_sync_point(vk_dev *d) {
  if (!d->calibrated) return;
  VkCalibratedTimestampInfoEXT ti[2] = {
      {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
       .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
      {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = d->host_domain}};
  uint64_t ts[2], dev = 0;
  if (d->f.GetCalibratedTimestampsEXT(d->dev, 2, ti, ts, &dev) != VK_SUCCESS) return;
  vk_host->clock_sync(vk_self, d->clk, ts[0],
                      d->host_domain == VK_TIME_DOMAIN_CLOCK_MONOTONIC_RAW_EXT
                          ? LOOM_CLOCK_MONOTONIC_RAW
                          : LOOM_CLOCK_MONOTONIC,
                      ts[1]);
}

int vk_session_device(vk_dev *d) {
  unsigned g = atomic_load(&vk_gen);
  if (d->gen == g) return 0;
  if (!atomic_load(&vk_live)) return -1;
  const VkPhysicalDeviceProperties *p = &d->props;
  const VkPhysicalDeviceLimits *l = &p->limits;
  char api[32], groups[64], size[64];
  snprintf(api, sizeof api, "%u.%u.%u", VK_API_VERSION_MAJOR(p->apiVersion),
           VK_API_VERSION_MINOR(p->apiVersion), VK_API_VERSION_PATCH(p->apiVersion));
  snprintf(groups, sizeof groups, "[%u, %u, %u]", l->maxComputeWorkGroupCount[0],
           l->maxComputeWorkGroupCount[1], l->maxComputeWorkGroupCount[2]);
  snprintf(size, sizeof size, "[%u, %u, %u]", l->maxComputeWorkGroupSize[0],
           l->maxComputeWorkGroupSize[1], l->maxComputeWorkGroupSize[2]);
  uint64_t heap = 0;
  for (uint32_t i = 0; i < d->mem.memoryHeapCount; i++)
    if (d->mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      heap += d->mem.memoryHeaps[i].size;
  loom_arg props[] = {
      {.key = "vendor id", .type = LOOM_ARG_UINT, .v.u = p->vendorID},
      {.key = "device id", .type = LOOM_ARG_UINT, .v.u = p->deviceID},
      {.key = "Vulkan version", .type = LOOM_ARG_STRING, .v.s = api},
      {.key = "driver version", .type = LOOM_ARG_UINT, .v.u = p->driverVersion},
      {.key = "driver", .type = LOOM_ARG_STRING, .v.s = d->driver[0] ? d->driver : "unknown"},
      {.key = "timestamp period ns", .type = LOOM_ARG_DOUBLE, .v.d = p->limits.timestampPeriod},
      {.key = "max compute work group count", .type = LOOM_ARG_STRING, .v.s = groups},
      {.key = "max compute work group size", .type = LOOM_ARG_STRING, .v.s = size},
      {.key = "max compute work group invocations",
       .type = LOOM_ARG_UINT,
       .v.u = l->maxComputeWorkGroupInvocations},
      {.key = "max compute shared memory bytes",
       .type = LOOM_ARG_UINT,
       .v.u = l->maxComputeSharedMemorySize},
      {.key = "device-local memory bytes", .type = LOOM_ARG_UINT, .v.u = heap},
      {.key = "calibrated timestamps",
       .type = LOOM_ARG_STRING,
       .v.s = d->calibrated ? "yes" : "no"},
  };
  loom_device_info info = {.struct_size = sizeof info, .name = p->deviceName,
                           .vendor = vendor_name(p->vendorID), .type = type_name(p->deviceType),
                           .props = props, .nprops = sizeof props / sizeof props[0]};
  if (vk_host->device_add(vk_self, &info, &d->device) != LOOM_OK) return -1;
  if (vk_host->clock_declare(vk_self, LOOM_CLOCK_DEVICE, p->deviceName, &d->clk) != LOOM_OK)
    return -1;
  if (LOOM_HOST_HAS(vk_host, clock_set_rate) && p->limits.timestampPeriod > 0)
    vk_host->clock_set_rate(vk_self, d->clk, p->limits.timestampPeriod);
  if (!d->calibrated)
    vk_host->report(vk_self, LOOM_SEV_WARNING,
                    "device '%s' has no VK_EXT_calibrated_timestamps with a host "
                    "clock: its device times cannot be placed on the timeline",
                    p->deviceName);
  d->gen = g;
  atomic_store_explicit(&d->described, (uint64_t)g << 32 | d->device, memory_order_relaxed);
  vk_sync_point(d);
  return 0;
}

int vk_session_queue(vk_queue *q) {
  unsigned g = atomic_load(&vk_gen);
  if (q->gen == g) return 0;
  if (vk_session_device(q->d) != 0) return -1;
  char name[64];
  snprintf(name, sizeof name, "queue %u.%u", q->family, q->index);
  if (vk_host->resource_add(vk_self, q->d->device, name, q->native, &q->resource) != LOOM_OK)
    return -1;
  q->gen = g;
  return 0;
}

void vk_device_seen(int n) {
  if (n == 0 && atomic_load(&vk_live)) {
    const char *icd = getenv("VK_ICD_FILENAMES");
    vk_host->report(vk_self, LOOM_SEV_WARNING,
                    "vulkan: the program's Vulkan instance found no device "
                    "(no Vulkan driver%s%s%s); nothing to record on Vulkan",
                    icd ? ": VK_ICD_FILENAMES=" : "", icd ? icd : "", icd ? "" : " installed");
  }
}

/* ---- probe ----------------------------------------------------------------- */
static int manifest_in(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  if (S_ISREG(st.st_mode)) return 1;
  DIR *dir = S_ISDIR(st.st_mode) ? opendir(path) : NULL;
  int found = 0;
  for (struct dirent *e; dir && !found && (e = readdir(dir));) {
    size_t n = strlen(e->d_name);
    found = n > 5 && !strcmp(e->d_name + n - 5, ".json");
  }
  if (dir) closedir(dir);
  return found;
}

static int manifest_in_list(const char *list, const char *suffix) {
  char *copy = strdup(list), *save = NULL;
  int found = 0;
  for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p && !found;
       p = strtok_r(NULL, ":", &save)) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s", p, suffix);
    found = manifest_in(path);
  }
  free(copy);
  return found;
}

/* Where the Vulkan loader looks for drivers; 1 when one is there. */
static int driver_present(char *why, size_t n) {
  const char *vars[] = {"VK_DRIVER_FILES", "VK_ICD_FILENAMES"};
  for (int i = 0; i < 2; i++) {
    const char *v = getenv(vars[i]);
    if (!v || !*v) continue;
    if (manifest_in_list(v, "")) return 1;
    snprintf(why, n, "no Vulkan driver: %s=%s names no driver manifest that exists", vars[i], v);
    return 0;
  }
  const char *xdg_conf = getenv("XDG_CONFIG_DIRS"), *xdg_data = getenv("XDG_DATA_DIRS");
  if (manifest_in_list(xdg_conf && *xdg_conf ? xdg_conf : "/etc/xdg", "/vulkan/icd.d") ||
      manifest_in_list("/etc", "/vulkan/icd.d") ||
      manifest_in_list(xdg_data && *xdg_data ? xdg_data : "/usr/local/share:/usr/share",
                       "/vulkan/icd.d"))
    return 1;
  snprintf(why, n,
           "no Vulkan driver: no driver manifest in the loader's folders (/etc/vulkan/icd.d, "
           "/usr/share/vulkan/icd.d, ...); install one (Debian: mesa-vulkan-drivers)");
  return 0;
}

static int layer_requested(void) {
  const char *v = getenv("VK_INSTANCE_LAYERS");
  return vk_layer_seen() || (v && strstr(v, VK_LOOM_LAYER_NAME));
}

static loom_status vk_probe(loom_backend *b, char *why, size_t n) {
  vk_self = b;
  if (!driver_present(why, n)) return LOOM_ENOTFOUND;
  if (!layer_requested()) {
    Dl_info me;
    dladdr((void *)vk_probe, &me);
    snprintf(
        why, n,
        "the Vulkan layer is not active in this process: start the program with 'loom "
        "record', or set VK_ADD_LAYER_PATH to the folder of its manifest (vulkan/ next to %s) and "
        "VK_INSTANCE_LAYERS=" VK_LOOM_LAYER_NAME " before it starts",
        me.dli_fname ? me.dli_fname : "libloom-vulkan.so");
    return LOOM_ENOTFOUND;
  }
  return LOOM_OK;
}

static loom_status vk_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  vk_self = b;
  atomic_store(&vk_live, 1);
  loom_clock_domain calls = LOOM_CLOCK_MONOTONIC_RAW;
  recorder_now = LOOM_HOST_HAS(vk_host, recorder_now) ? vk_host->recorder_now : NULL;
  if (recorder_now) recorder_now(&calls);
  return vk_host->clock_declare(b, calls, "host", &host_clk);
}

static loom_status vk_start(loom_backend *b) {
  vk_self = b;
  atomic_fetch_add(&vk_gen, 1);
  size_t n = 0;
  vk_dev **v = vk_devices(&n);
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&v[i]->mu);
    vk_session_device(v[i]);
    pthread_mutex_unlock(&v[i]->mu);
  }
  free(v);
  atomic_store(&vk_recording, 1);
  return LOOM_OK;
}

static loom_status vk_stop(loom_backend *b) {
  (void)b;
  atomic_store(&vk_recording, 0);
  size_t n = 0;
  vk_dev **v = vk_devices(&n);
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&v[i]->mu);
    if (v[i]->gen == atomic_load(&vk_gen)) vk_sync_point(v[i]);
    pthread_mutex_unlock(&v[i]->mu);
  }
  free(v);
  return LOOM_OK;
}

static loom_status vk_flush(loom_backend *b) {
  const char *t = vk_host->config_get(b, "vulkan.flush_timeout_ms");
  uint64_t wait = (uint64_t)(t ? strtoul(t, NULL, 10) : 2000) * 1000000ull;
  size_t n = 0;
  vk_dev **v = vk_devices(&n);
  for (size_t i = 0; i < n; i++) {
    vk_harvest(v[i], wait);
    vk_pending_drop(v[i], "submissions still executing at stop (vulkan.flush_timeout_ms)");
  }
  free(v);
  atomic_store(&vk_live, 0);
  return LOOM_OK;
}

/* loom record: the loader finds the layer's manifest (vulkan/ next to this
 * file) and runs it in every instance; it is also a plug-in, so the backend
 * registers before the session starts.  Recorded by default where a Vulkan
 * driver is installed; a program that never calls Vulkan never loads it as
 * a layer. */
static int vk_default_check(void) {
  char why[256];
  return driver_present(why, sizeof why);
}

static const loom_env_setting vk_env[] = {
    {"VK_ADD_LAYER_PATH", "$DIR/vulkan", LOOM_ENV_PREPEND_PATH},
    {"VK_INSTANCE_LAYERS", VK_LOOM_LAYER_NAME, LOOM_ENV_PREPEND_PATH},
};
static const loom_backend_enable vk_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT,
    .env = vk_env,
    .nenv = sizeof vk_env / sizeof vk_env[0],
    .default_check = vk_default_check,
};

static const loom_option_desc vulkan_options[] = {
    {"vulkan.flush_timeout_ms", "ms to wait at stop for submissions still running (default 2000)"},
    {NULL, NULL}};
static const loom_backend_ops vk_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = vulkan_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "vulkan",
    .device_type = "vulkan",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_MEMSET) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
             LOOM_KIND_BIT(LOOM_KIND_SYNC) | LOOM_KIND_BIT(LOOM_KIND_USER_RANGE) |
             LOOM_KIND_BIT(LOOM_KIND_MEMORY),
    .runtime_category = "vulkan_runtime",
    .probe = vk_probe,
    .configure = vk_configure,
    .start = vk_start,
    .stop = vk_stop,
    .flush = vk_flush,
    .enable = &vk_enable,
};

static loom_status vk_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  vk_host = h;
  return h->backend_register(&vk_ops, NULL);
}

EXPORT loom_status loom_plugin_entry(const loom_host *h) { return vk_entry(h); }

/* Loaded by the Vulkan loader into a process that already runs loom: register there. */
__attribute__((constructor)) static void vk_attach(void) { loom_plugin_attach(vk_entry); }
