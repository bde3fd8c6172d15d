/*
 * backend.c - libloom-levelzero.so: the Level Zero backend (device type
 * "xpu").  Built against loom's public headers and the Level Zero headers
 * only; the loader (libze_loader.so.1) is opened with dlopen in probe.
 *
 * Host side: the loader's tracing layer (ZE_ENABLE_TRACING_LAYER=1, which
 * `loom record` sets) calls a prologue and an epilogue around each traced
 * API call on the calling thread; the epilogue emits a RUNTIME (or SYNC)
 * record with the thread's id; allocations and frees also give memory
 * records (memory.c).
 *
 * Device side: every kernel launch, copy, fill and barrier gets a signal
 * event: the application's own, or (when it passed none) one of the
 * backend's from its own timestamp event pool, swapped into the call's
 * parameters in the prologue (the application never sees it).  Event pools
 * the application creates get ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP added.  The
 * command is remembered on its immediate list, or on its regular list and,
 * at zeCommandQueueExecuteCommandLists, on the queue.  Completed commands
 * are read (zeEventQueryKernelTimestamp) at host synchronisation calls,
 * before the application resets or destroys events, lists or contexts, and
 * at flush.  Kernel timestamps have kernelTimestampValidBits bits: they are
 * extended to the full device counter next to the device time estimated
 * from the last sync point, then converted to ns with the timer frequency.
 * Each device gets a LOOM_CLOCK_DEVICE clock with sync points from
 * zeDeviceGetGlobalTimestamps at start and at stop (drift interpolated).
 *
 * This file: the loader and the backend's entry points; objects.c keeps
 * devices, queues, lists and event pools and reads device records, calls.c
 * holds the tracing callbacks, memory.c those of allocations, backend.h
 * what they share.
 */
#include "backend.h"
#include "libfind.h"

ze_table ze;
const loom_host *ze_host;
loom_backend *ze_self;
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
atomic_int recording;
atomic_uint gen;
atomic_uint_fast64_t next_corr;
loom_clock host_clk, mem_clk;
static zel_tracer_handle_t tracer;
static ze_result_t init_result = ZE_RESULT_ERROR_UNINITIALIZED;
static int loaded;
__thread int busy; /* inside the backend's own Level Zero calls */

const char *result_name(ze_result_t r) {
  switch (r) {
#define R(x) case x: return #x;
    R(ZE_RESULT_SUCCESS) R(ZE_RESULT_NOT_READY) R(ZE_RESULT_ERROR_UNINITIALIZED)
    R(ZE_RESULT_ERROR_DEVICE_LOST) R(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    R(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) R(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    R(ZE_RESULT_ERROR_INVALID_ARGUMENT) R(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    R(ZE_RESULT_ERROR_INVALID_NULL_POINTER) R(ZE_RESULT_ERROR_UNKNOWN)
    R(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE) R(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)
    R(ZE_RESULT_ERROR_NOT_AVAILABLE) R(ZE_RESULT_ERROR_INVALID_ENUMERATION)
#undef R
  default: return "an unknown ze_result_t";
  }
}

/* ---- the backend ---------------------------------------------------------- */
static loom_status load_loader(char *why, size_t n) {
  if (loaded) return LOOM_OK;
  void *h = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    snprintf(why, n, "the Level Zero loader (libze_loader.so.1) is not installed: %s", dlerror());
    return LOOM_ENOTFOUND;
  }
#define LOAD(f)                                                                    \
  if (!(*(void **)&ze.f = dlsym(h, #f))) {                                         \
    snprintf(why, n, "libze_loader.so.1 lacks %s (too old a loader)", #f);         \
    return LOOM_ENOTFOUND;                                                         \
  }
  ZE_FNS(LOAD)
#undef LOAD
#define LOADR(nm, p)                                                                  \
  if (!(*(void **)&ze.reg_##nm = dlsym(h, "zelTracer" #nm "RegisterCallback"))) {     \
    snprintf(why, n, "libze_loader.so.1 lacks zelTracer%sRegisterCallback", #nm);     \
    return LOOM_ENOTFOUND;                                                            \
  }
  ZE_TRACED(LOADR)
#undef LOADR
  loaded = 1;
  return LOOM_OK;
}

static loom_status ze_probe(loom_backend *b, char *why, size_t n) {
  ze_self = b;
  loom_status st = load_loader(why, n);
  if (st != LOOM_OK) return st;
  busy++;
  init_result = ze.zeInit(0);
  busy--;
  if (init_result != ZE_RESULT_SUCCESS) {
    snprintf(why, n, "zeInit failed: %s (no Level Zero driver)", result_name(init_result));
    return LOOM_ENOTFOUND;
  }
  uint32_t nd = 0;
  busy++;
  ze_result_t r = ze.zeDriverGet(&nd, NULL);
  busy--;
  if (r != ZE_RESULT_SUCCESS || !nd) {
    snprintf(why, n, "no Level Zero driver (zeDriverGet: %s)", result_name(r));
    return LOOM_ENOTFOUND;
  }
  if (!tracer) {
    zel_tracer_desc_t d = {.stype = ZEL_STRUCTURE_TYPE_TRACER_DESC, .pUserData = NULL};
    busy++;
    r = ze.zelTracerCreate(&d, &tracer);
    busy--;
    if (r != ZE_RESULT_SUCCESS) {
      tracer = NULL;
      snprintf(why, n, "the Level Zero tracing layer is off (zelTracerCreate: %s): set "
               "ZE_ENABLE_TRACING_LAYER=1 before the program starts ('loom record' does)",
               result_name(r));
      return LOOM_ENOTFOUND;
    }
#define REG(nm, p)                                                                 \
    ze.reg_##nm(tracer, ZEL_REGISTER_PROLOGUE, pro_##nm);                          \
    ze.reg_##nm(tracer, ZEL_REGISTER_EPILOGUE, epi_##nm);
    ZE_TRACED(REG)
#undef REG
    /* Enabled for the rest of the process (objects made between sessions
     * stay known); callbacks record only while a session records. */
    ze.zelTracerSetEnabled(tracer, 1);
  }
  return LOOM_OK;
}

/* The entry of device h, created with its properties the first time it is
 * seen; NULL when the table is full (mu held). */
static xdev *dev_of(ze_device_handle_t h) {
  xdev *d = find_dev(h);
  if (d) return d;
  if (ndevs == 16) return NULL;
  d = &devs[ndevs++];
  memset(d, 0, sizeof *d);
  d->h = h;
  d->props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  ze.zeDeviceGetProperties(h, &d->props);
  ze_device_properties_t p12 = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2};
  /* API 1.2+: timerResolution in cycles/s (exact); else ns per tick */
  if (ze.zeDeviceGetProperties(h, &p12) == ZE_RESULT_SUCCESS && p12.timerResolution > 1000)
    d->ns_per_tick = 1e9 / (double)p12.timerResolution;
  else
    d->ns_per_tick = d->props.timerResolution ? (double)d->props.timerResolution : 1.0;
  unsigned kb = d->props.kernelTimestampValidBits, gb = d->props.timestampValidBits;
  d->kmask = kb && kb < 64 ? (1ull << kb) - 1 : UINT64_MAX;
  d->gmask = gb && gb < 64 ? (1ull << gb) - 1 : UINT64_MAX;
  memcpy(d->name, d->props.name, sizeof d->name);
  d->name[sizeof d->name - 1] = 0;
  return d;
}

/* Adds d to the session (device and clock) for generation g (mu held). */
static void describe_dev(loom_backend *b, xdev *d, unsigned g) {
  const ze_device_properties_t *p = &d->props;
  char vendor[32];
  if (p->vendorId == 0x8086) snprintf(vendor, sizeof vendor, "Intel");
  else snprintf(vendor, sizeof vendor, "vendor 0x%04x", p->vendorId);
  loom_arg props[] = {
      {.key = "vendor id", .type = LOOM_ARG_UINT, .v.u = p->vendorId},
      {.key = "device id", .type = LOOM_ARG_UINT, .v.u = p->deviceId},
      {.key = "core clock MHz", .type = LOOM_ARG_UINT, .v.u = p->coreClockRate},
      {.key = "execution units", .type = LOOM_ARG_UINT,
       .v.u = (uint64_t)p->numEUsPerSubslice * p->numSubslicesPerSlice * p->numSlices},
      {.key = "max alloc bytes", .type = LOOM_ARG_UINT, .v.u = p->maxMemAllocSize},
      {.key = "timer ns per tick", .type = LOOM_ARG_DOUBLE, .v.d = d->ns_per_tick},
      {.key = "timestamp valid bits", .type = LOOM_ARG_UINT, .v.u = p->timestampValidBits},
      {.key = "kernel timestamp valid bits", .type = LOOM_ARG_UINT,
       .v.u = p->kernelTimestampValidBits},
  };
  loom_device_info info = {.struct_size = sizeof info, .name = d->name, .vendor = vendor,
                           .type = p->type == ZE_DEVICE_TYPE_GPU ? "gpu"
                                   : p->type == ZE_DEVICE_TYPE_CPU ? "cpu" : "accelerator",
                           .props = props, .nprops = sizeof props / sizeof props[0]};
  if (ze_host->device_add(b, &info, &d->index) != LOOM_OK) return;
  char cn[300];
  snprintf(cn, sizeof cn, "%s", d->name);
  if (ze_host->clock_declare(b, LOOM_CLOCK_DEVICE, cn, &d->clk) != LOOM_OK) return;
  d->gen = g;
}

static loom_status ze_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  ze_self = b;
  loom_status st = ze_host->clock_declare(b, LOOM_CLOCK_MONOTONIC_RAW, "host", &host_clk);
  if (st != LOOM_OK) return st;
  mem_clk = 0; /* memory records through host->memory (ABI 1.6) take the recorder's clock */
  loom_clock_domain md;
  if (LOOM_HOST_HAS(ze_host, memory) && LOOM_HOST_HAS(ze_host, recorder_now) &&
      (ze_host->recorder_now(&md), ze_host->clock_declare(b, md, "host recorder", &mem_clk)))
    mem_clk = 0;
  unsigned g = atomic_load(&gen) + 1; /* the generation start will begin */
  ze_driver_handle_t drivers[8];
  uint32_t nd = 8;
  busy++;
  ze.zeDriverGet(&nd, drivers);
  pthread_mutex_lock(&mu);
  for (uint32_t i = 0; i < nd && i < 8; i++) {
    ze_device_handle_t dv[16];
    uint32_t n = 16;
    if (ze.zeDeviceGet(drivers[i], &n, dv) != ZE_RESULT_SUCCESS) continue;
    for (uint32_t k = 0; k < n && k < 16; k++) {
      xdev *d = dev_of(dv[k]);
      if (!d) break;
      describe_dev(b, d, g);
    }
  }
  pthread_mutex_unlock(&mu);
  busy--;
  return LOOM_OK;
}

static loom_status ze_start(loom_backend *b) {
  ze_self = b;
  pthread_mutex_lock(&mu);
  unsigned g = atomic_fetch_add(&gen, 1) + 1;
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].gen == g) sync_point(&devs[i]);
  pthread_mutex_unlock(&mu);
  atomic_store(&recording, 1);
  return LOOM_OK;
}

static loom_status ze_stop(loom_backend *b) {
  (void)b;
  atomic_store(&recording, 0);
  return LOOM_OK;
}

static loom_status ze_flush(loom_backend *b) {
  const char *v = ze_host->config_get(b, "levelzero.flush_timeout_ms");
  uint64_t deadline = raw_now() + (uint64_t)(v ? atol(v) : 2000) * 1000000ull;
  unsigned g = atomic_load(&gen);
  pthread_mutex_lock(&mu);
  harvest_all(deadline);
  size_t lost = 0;
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].type != OBJ_LIST)
      for (size_t k = 0; k < objs[i].n; k++) lost += objs[i].c[k].gen == g, objs[i].c[k].gen = 0;
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].gen == g) sync_point(&devs[i]);
  pthread_mutex_unlock(&mu);
  if (lost)
    ze_host->count_lost(b, lost, "commands still executing at stop (levelzero.flush_timeout_ms)");
  return LOOM_OK;
}

/* loom record: the loader enables its tracing layer only when
 * ZE_ENABLE_TRACING_LAYER is set before the program starts (unless the user
 * chose otherwise).  Recorded by default where a driver is installed or
 * named (an alternate driver through ZE_ENABLE_ALT_DRIVERS): asking for xpu
 * elsewhere would only warn that there is none. */
static int ze_default_check(void) {
  const char *alt = getenv("ZE_ENABLE_ALT_DRIVERS");
  if (alt && *alt) return 1;
  return loom_lib_installed("libze_intel_gpu.so.1");
}
static const loom_env_setting ze_env[] = {
    {"ZE_ENABLE_TRACING_LAYER", "1", LOOM_ENV_SET_IF_UNSET},
};
static const loom_backend_enable ze_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT,
    .env = ze_env,
    .nenv = sizeof ze_env / sizeof ze_env[0],
    .default_check = ze_default_check,
};

static const loom_option_desc levelzero_options[] = {
    {"levelzero.flush_timeout_ms", "ms to wait at stop for commands still running (default 2000)"},
    {NULL, NULL}};
static const loom_backend_ops ze_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = levelzero_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "levelzero",
    .device_type = "xpu",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_MEMSET) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
             LOOM_KIND_BIT(LOOM_KIND_SYNC) | LOOM_KIND_BIT(LOOM_KIND_MEMORY),
    .flags = LOOM_BACKEND_F_LAZY,
    .runtime_category = "xpu_runtime",
    .probe = ze_probe,
    .configure = ze_configure,
    .start = ze_start,
    .stop = ze_stop,
    .flush = ze_flush,
    .enable = &ze_enable,
};

static loom_status ze_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  ze_host = h;
  return h->backend_register(&ze_ops, NULL);
}

EXPORT loom_status loom_plugin_entry(const loom_host *h) { return ze_entry(h); }

/* dlopen()ed by a program that already runs loom: join its next session. */
__attribute__((constructor)) static void ze_attach(void) { loom_plugin_attach(ze_entry); }
