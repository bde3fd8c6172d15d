/*
 * backend.c - the loom half of libloom-opencl.so: registration, devices and
 * queues, clock-domain detection and flush; commands.c has the runtime
 * records and the device records read from event profiling when commands
 * complete.
 *
 * Completion: each followed command holds one reference to its event (the
 * layer's own, or the application's, retained) in its queue's ring.  Rings
 * are harvested without blocking on the application's own OpenCL calls, and
 * the driver is asked as little as possible while the program enqueues (its
 * worker threads hold the locks a query takes):
 *  - clFinish harvests its queue: every command enqueued before it ended, so
 *    none is asked its status, only its times (once the device is idle);
 *  - once HARVEST_AT commands are in a ring, the ones that ended are found
 *    (on an in-order queue, where commands end in order, by a binary search
 *    over their statuses: log2(n) queries, not n) and read, emitted and
 *    released; the next look is HARVEST_STEP commands later.
 * No callback, so no wake-up of another thread per command.  At flush the
 * backend waits a bounded time for commands still in flight, then counts the
 * rest as lost.
 *
 * Clock domains are detected per device, not assumed: a profiled marker on a
 * private queue is bracketed by host clock reads, and the domain whose reads
 * bracket the device's timestamp wins (POCL: CLOCK_MONOTONIC_RAW).  A device
 * whose clock matches none becomes a device clock with sync points.
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

#define EXPORT __attribute__((visibility("default")))

atomic_int ocl_recording;

const loom_host *ocl_host;
loom_backend *ocl_self;
atomic_uint ocl_gen;          /* session generation */
loom_clock ocl_host_clk;


pthread_mutex_t ocl_mu = PTHREAD_MUTEX_INITIALIZER; /* everything below */

static dev_entry devs[64];
static size_t ndevs;
static queue_entry **queues;     /* entries never move; freed when retired and empty */
static size_t nqueues, cap_queues;
atomic_uint_fast64_t ocl_queue_serial;
atomic_uint ocl_queues_epoch;

/* ---- small helpers -------------------------------------------------------- */

/* Calls are timed on the clock of loom's own host records (host->recorder_now:
 * the CPU's time-stamp counter where it ticks at a constant rate, ~12 ns a
 * read here against ~37 ns for clock_gettime, twice per enqueue), so they
 * share the recorder's domain; the calls' clock (ocl_host_clk) is declared in
 * that domain.  A core without the service: CLOCK_MONOTONIC_RAW. */
static uint64_t (*recorder_now)(loom_clock_domain *domain);

uint64_t ocl_now(void) {
  return recorder_now ? recorder_now(NULL) : now_in(CLOCK_MONOTONIC_RAW);
}

uint32_t ocl_intern(const char *s) {
  return ocl_host ? ocl_host->intern(ocl_self, s, SIZE_MAX) : 0;
}

/* kernel handle -> name id */
static struct { cl_kernel k; uint32_t id; } kcache[256];
static pthread_mutex_t kmu = PTHREAD_MUTEX_INITIALIZER;

void ocl_kernel_forget(cl_kernel k) {
  pthread_mutex_lock(&kmu);
  for (size_t i = 0; i < 256; i++)
    if (kcache[i].k == k) kcache[i].k = NULL;
  pthread_mutex_unlock(&kmu);
}

uint32_t ocl_kernel_name(cl_kernel k) {
  size_t slot = ((uintptr_t)k >> 4) % 256;
  pthread_mutex_lock(&kmu);
  uint32_t id = kcache[slot].k == k ? kcache[slot].id : 0;
  pthread_mutex_unlock(&kmu);
  if (id) return id;
  /* the whole name: a longer one (C++ and SYCL kernels' often are) is
   * refused by the first query and read into a buffer of its size */
  char buf[256] = "", *name = buf, *big = NULL;
  size_t len = 0;
  if (ocl_next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof buf, buf, &len) != CL_SUCCESS) {
    len = 0;
    if (ocl_next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, 0, NULL, &len) == CL_SUCCESS &&
        len > sizeof buf && len < (1u << 20) && (big = malloc(len + 1)) &&
        ocl_next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, len, big, NULL) == CL_SUCCESS)
      big[len] = 0, name = big;
    else
      snprintf(buf, sizeof buf, "kernel");
  }
  buf[sizeof buf - 1] = 0;
  id = ocl_host->intern(ocl_self, name, SIZE_MAX);
  free(big);
  pthread_mutex_lock(&kmu);
  kcache[slot].k = k;
  kcache[slot].id = id;
  pthread_mutex_unlock(&kmu);
  return id;
}

/* ---- queues and devices ------------------------------------------------- */
void ocl_queue_created(cl_command_queue q, cl_device_id dev, int app_wanted, int in_order) {
  queue_entry *e = calloc(1, sizeof *e);
  if (!e) return;
  e->q = q;
  e->dev = dev;
  e->app_profiling = app_wanted;
  e->in_order = in_order;
  e->look_at = HARVEST_AT;
  pthread_mutex_init(&e->lk, NULL);
  pthread_mutex_lock(&ocl_mu);
  e->native = atomic_fetch_add(&ocl_queue_serial, 1) + 1;
  if (nqueues == cap_queues) {
    size_t nc = cap_queues ? cap_queues * 2 : 16;
    queue_entry **p = realloc(queues, nc * sizeof *p);
    if (p) queues = p, cap_queues = nc;
  }
  if (nqueues < cap_queues) queues[nqueues++] = e;
  else free(e);
  atomic_fetch_add(&ocl_queues_epoch, 1);
  pthread_mutex_unlock(&ocl_mu);
}

/* ocl_mu held.  A retired entry keeps its handle only until its ring drains; a
 * new queue may get the same handle meanwhile. */
queue_entry *ocl_find_queue(cl_command_queue q) {
  for (size_t i = nqueues; i-- > 0;)
    if (queues[i]->q == q && !queues[i]->retired) return queues[i];
  return NULL;
}

int ocl_queue_app_profiling(cl_command_queue q) {
  pthread_mutex_lock(&ocl_mu);
  queue_entry *e = ocl_find_queue(q);
  int r = e ? e->app_profiling : -1;
  pthread_mutex_unlock(&ocl_mu);
  return r;
}

void ocl_queue_released(cl_command_queue q) {
  pthread_mutex_lock(&ocl_mu);
  queue_entry *e = ocl_find_queue(q);
  if (e) e->retired = 1; /* its commands still complete; flush frees it */
  atomic_fetch_add(&ocl_queues_epoch, 1);
  pthread_mutex_unlock(&ocl_mu);
}

/* Which host clock the device's profiling timestamps are in. */
static int detect_domain(cl_command_queue pq, uint64_t *dev_ts, uint64_t *raw_mid) {
  static const clockid_t ids[] = {CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC, CLOCK_REALTIME};
  static const int doms[] = {LOOM_CLOCK_MONOTONIC_RAW, LOOM_CLOCK_MONOTONIC, LOOM_CLOCK_REALTIME};
  uint64_t before[3], after[3];
  for (int i = 0; i < 3; i++) before[i] = now_in(ids[i]);
  cl_event e = NULL;
  if (ocl_next.clEnqueueMarkerWithWaitList(pq, 0, NULL, &e) != CL_SUCCESS) return -2;
  ocl_next.clFinish(pq);
  for (int i = 0; i < 3; i++) after[i] = now_in(ids[i]);
  cl_ulong t = 0;
  cl_int rc = ocl_next.clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL);
  ocl_next.clReleaseEvent(e);
  if (rc != CL_SUCCESS) return -2;
  *dev_ts = t;
  *raw_mid = before[0] + (after[0] - before[0]) / 2;
  for (int i = 0; i < 3; i++)
    if (t >= before[i] && t <= after[i]) return doms[i];
  return -1;
}

static void add_device_props(cl_device_id d, loom_device_info *info, loom_arg *props, uint32_t *n,
                             char *name, char *vendor, char *version, char *driver) {
  cl_uint cu = 0, mhz = 0;
  cl_ulong mem = 0, local = 0;
  cl_device_type type = 0;
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_NAME, 256, name, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_VENDOR, 256, vendor, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_VERSION, 256, version, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DRIVER_VERSION, 256, driver, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof mhz, &mhz, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  info->name = name;
  info->vendor = vendor;
  info->type = type & CL_DEVICE_TYPE_GPU ? "gpu" : type & CL_DEVICE_TYPE_CPU ? "cpu"
             : type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator" : "other";
  props[(*n)++] = (loom_arg){.key = "compute units", .type = LOOM_ARG_UINT, .v.u = cu};
  props[(*n)++] = (loom_arg){.key = "max clock MHz", .type = LOOM_ARG_UINT, .v.u = mhz};
  props[(*n)++] = (loom_arg){.key = "global memory bytes", .type = LOOM_ARG_UINT, .v.u = mem};
  props[(*n)++] = (loom_arg){.key = "local memory bytes", .type = LOOM_ARG_UINT, .v.u = local};
  props[(*n)++] = (loom_arg){.key = "OpenCL version", .type = LOOM_ARG_STRING, .v.s = version};
  props[(*n)++] = (loom_arg){.key = "driver version", .type = LOOM_ARG_STRING, .v.s = driver};
}

/* The device entry of d for this session, described to loom on first use.
 * Called with ocl_mu held. */
static dev_entry *session_device(cl_context ctx, cl_device_id d, unsigned g) {
  dev_entry *e = NULL;
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].id == d) e = &devs[i];
  if (!e) {
    if (ndevs == sizeof devs / sizeof devs[0]) return NULL;
    e = &devs[ndevs++];
    memset(e, 0, sizeof *e);
    e->id = d;
    e->domain = -3; /* not detected yet */
  }
  if (e->gen == g) return e;
  char name[256] = "", vendor[256] = "", version[256] = "", driver[256] = "";
  loom_arg props[8];
  uint32_t n = 0;
  loom_device_info info = {.struct_size = sizeof info};
  add_device_props(d, &info, props, &n, name, vendor, version, driver);
  info.props = props;
  info.nprops = n;
  if (ocl_host->device_add(ocl_self, &info, &e->device) != LOOM_OK) return NULL;
  if (!e->probe_q)
    e->probe_q = ocl_next.clCreateCommandQueue(ctx, d, CL_QUEUE_PROFILING_ENABLE, NULL);
  uint64_t dts = 0, raw = 0;
  if (e->domain == -3 && e->probe_q) e->domain = detect_domain(e->probe_q, &dts, &raw);
  if (e->domain >= 0) {
    ocl_host->clock_declare(ocl_self, (loom_clock_domain)e->domain, name, &e->clk);
  } else {
    ocl_host->clock_declare(ocl_self, LOOM_CLOCK_DEVICE, name, &e->clk);
    if (e->probe_q && detect_domain(e->probe_q, &dts, &raw) != -2)
      ocl_host->clock_sync(ocl_self, e->clk, dts, LOOM_CLOCK_MONOTONIC_RAW, raw);
    ocl_host->report(ocl_self, LOOM_SEV_INFO, "device '%s': profiling clock matches no host clock; "
                 "using sync points", name);
  }
  e->gen = g;
  return e;
}

/* Fills the session ids of q (device, resource); 0 on success.  ocl_mu held. */
int ocl_session_queue(cl_command_queue q, unsigned g, uint32_t *device, uint32_t *resource) {
  queue_entry *qe = ocl_find_queue(q);
  if (!qe) return -1;
  if (qe->gen != g) {
    cl_context ctx = NULL;
    ocl_next.clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL);
    dev_entry *de = session_device(ctx, qe->dev, g);
    if (!de) return -1;
    char name[32];
    snprintf(name, sizeof name, "queue %llu", (unsigned long long)qe->native);
    if (ocl_host->resource_add(ocl_self, de->device, name, qe->native, &qe->resource) != LOOM_OK)
      return -1;
    qe->device = de->device;
    qe->gen = g;
  }
  *device = qe->device;
  *resource = qe->resource;
  return 0;
}

int ocl_session_device(cl_context ctx, cl_device_id d, unsigned g, uint32_t *device) {
  pthread_mutex_lock(&ocl_mu);
  dev_entry *e = session_device(ctx, d, g);
  if (e) *device = e->device;
  pthread_mutex_unlock(&ocl_mu);
  return e ? 0 : -1;
}

loom_clock ocl_device_clock(uint32_t device) {
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].gen == atomic_load(&ocl_gen) && devs[i].device == device) return devs[i].clk;
  return 0;
}

/* ---- the backend ---------------------------------------------------------- */
static int layer_path_active(void) {
  if (ocl_next.clGetPlatformIDs) return 1; /* clInitLayer already ran */
  Dl_info me;
  const char *layers = getenv("OPENCL_LAYERS");
  if (!layers || !dladdr((void *)layer_path_active, &me) || !me.dli_fname) return 0;
  const char *base = strrchr(me.dli_fname, '/');
  base = base ? base + 1 : me.dli_fname;
  return strstr(layers, base) != NULL;
}

/* Was OPENCL_LAYERS naming the layer in the environment the program started
 * with (loom record's case)? */
static int layer_in_initial_env(const char *base) {
  FILE *f = fopen("/proc/self/environ", "re");
  if (!f) return 1; /* cannot tell: assumed, nothing forced below */
  char *buf = NULL;
  size_t cap = 0;
  int found = 0;
  while (!found && getdelim(&buf, &cap, 0, f) > 0)
    found = !strncmp(buf, "OPENCL_LAYERS=", 14) && strstr(buf + 14, base);
  free(buf);
  fclose(f);
  return found;
}

/* The layer is named in OPENCL_LAYERS but the loader has not initialised it:
 * either the program made no OpenCL call yet, or the loader initialised
 * before the variable was set (a Python program that used OpenCL before
 * `import loom`) and never calls the layer.  Told apart, only when the
 * variable was set after the program started and the loader is loaded, by
 * making it initialise now (one clGetPlatformIDs; the program's own first
 * call would have).  1: the layer was missed. */
static int layer_missed(void) {
  Dl_info me;
  if (!dladdr((void *)layer_missed, &me) || !me.dli_fname) return 0;
  const char *base = strrchr(me.dli_fname, '/');
  if (layer_in_initial_env(base ? base + 1 : me.dli_fname)) return 0;
  void *h = dlopen("libOpenCL.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0; /* not loaded: it reads the variable when it is */
  cl_int(CL_API_CALL * platforms)(cl_uint, cl_platform_id *, cl_uint *) =
      (cl_int(CL_API_CALL *)(cl_uint, cl_platform_id *, cl_uint *))dlsym(h, "clGetPlatformIDs");
  cl_uint np = 0;
  if (platforms) platforms(0, NULL, &np);
  dlclose(h);
  return !ocl_next.clGetPlatformIDs;
}

static loom_status ocl_probe(loom_backend *b, char *why, size_t n) {
  ocl_self = b;
  if (layer_path_active() && !ocl_next.clGetPlatformIDs && layer_missed()) {
    snprintf(why, n, "OpenCL was initialised in this process before loom's layer was set "
             "(OPENCL_LAYERS): its OpenCL calls and device work are not seen; import loom "
             "before the program's first OpenCL call, or run it under 'loom record'");
    return LOOM_ENOTFOUND;
  }
  if (!layer_path_active()) {
    Dl_info me;
    dladdr((void *)ocl_probe, &me);
    snprintf(why, n, "the OpenCL layer is not active in this process: start the program "
             "with 'loom record', or set OPENCL_LAYERS=%s before it starts",
             me.dli_fname ? me.dli_fname : "libloom-opencl.so");
    return LOOM_ENOTFOUND;
  }
  return LOOM_OK;
}

static loom_status ocl_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  ocl_self = b;
  loom_clock_domain calls = LOOM_CLOCK_MONOTONIC_RAW;
  if (recorder_now) recorder_now(&calls);
  return ocl_host->clock_declare(b, calls, "host", &ocl_host_clk);
}

static loom_status ocl_start(loom_backend *b) {
  ocl_self = b;
  atomic_fetch_add(&ocl_gen, 1);
  ocl_memory_reset();
  atomic_store(&ocl_recording, 1);
  return LOOM_OK;
}

static loom_status ocl_stop(loom_backend *b) {
  (void)b;
  atomic_store(&ocl_recording, 0);
  return LOOM_OK;
}

static loom_status ocl_flush(loom_backend *b) {
  const char *v = ocl_host->config_get(b, "opencl.flush_timeout_ms");
  uint64_t deadline = now_in(CLOCK_MONOTONIC_RAW) + (uint64_t)(v ? atol(v) : 2000) * 1000000ull;
  pthread_mutex_lock(&ocl_mu);
  size_t n = nqueues;
  queue_entry **snap = malloc((n + 1) * sizeof *snap);
  if (snap && n) memcpy(snap, queues, n * sizeof *snap);
  pthread_mutex_unlock(&ocl_mu);
  size_t lost = 0;
  unsigned g = atomic_load(&ocl_gen);
  for (size_t i = 0; snap && i < n; i++) {
    queue_entry *qe = snap[i];
    pthread_mutex_lock(&qe->lk);
    ocl_harvest(qe, 0, deadline);
    for (size_t k = 0; k < qe->count; k++) { /* still executing: counted, dropped */
      ocl_cmd *c = &qe->ring[(qe->head + k) % qe->cap];
      if (c->gen == g) lost++;
      c->gen = 0; /* belongs to no session any more */
    }
    pthread_mutex_unlock(&qe->lk);
  }
  free(snap);
  /* Sync points at stop, for device clocks; then retire drained queues. */
  pthread_mutex_lock(&ocl_mu);
  for (size_t i = 0; i < ndevs; i++) {
    uint64_t dts, raw;
    if (devs[i].domain < 0 && devs[i].probe_q && devs[i].gen == g &&
        detect_domain(devs[i].probe_q, &dts, &raw) != -2)
      ocl_host->clock_sync(b, devs[i].clk, dts, LOOM_CLOCK_MONOTONIC_RAW, raw);
  }
  for (size_t i = 0; i < nqueues;) {
    queue_entry *qe = queues[i];
    if (qe->retired && !qe->count) {
      atomic_fetch_add(&ocl_queues_epoch, 1);
      free(qe->ring);
      pthread_mutex_destroy(&qe->lk);
      free(qe);
      queues[i] = queues[--nqueues];
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&ocl_mu);
  if (lost)
    ocl_host->count_lost(b, lost, "commands still executing at stop (opencl.flush_timeout_ms)");
  return LOOM_OK;
}

/* loom record: the ICD loader loads this file as a layer (OPENCL_LAYERS, read
 * once at the program's first OpenCL call); it is also a plug-in, so the
 * backend is registered before the session starts.  Recorded by default: the
 * layer costs nothing in a program that never calls OpenCL. */
static const loom_env_setting ocl_env[] = {
    {"OPENCL_LAYERS", "$SELF", LOOM_ENV_PREPEND_PATH},
};
static const loom_backend_enable ocl_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT,
    .env = ocl_env,
    .nenv = sizeof ocl_env / sizeof ocl_env[0],
};

static const loom_option_desc opencl_options[] = {
    {"opencl.flush_timeout_ms", "ms to wait at stop for commands still running (default 2000)"},
    {NULL, NULL}};
static const loom_backend_ops ocl_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = opencl_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "opencl",
    .device_type = "opencl",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_MEMSET) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
             LOOM_KIND_BIT(LOOM_KIND_SYNC) | LOOM_KIND_BIT(LOOM_KIND_MEMORY),
    .runtime_category = "opencl_runtime",
    .probe = ocl_probe,
    .configure = ocl_configure,
    .start = ocl_start,
    .stop = ocl_stop,
    .flush = ocl_flush,
    .enable = &ocl_enable,
};

static loom_status ocl_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  ocl_host = h;
  if (LOOM_HOST_HAS(h, recorder_now)) recorder_now = h->recorder_now;
  return h->backend_register(&ocl_ops, NULL);
}

EXPORT loom_status loom_plugin_entry(const loom_host *h) { return ocl_entry(h); }

/* Loaded by the ICD loader as a layer into a process that already runs loom
 * (a framework that linked it): register there too. */
__attribute__((constructor)) static void ocl_attach(void) { loom_plugin_attach(ocl_entry); }
