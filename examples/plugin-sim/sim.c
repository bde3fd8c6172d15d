/*
 * sim.c - libloom-sim.so: a simulated device runtime and its loom backend.
 *
 * This is the template a vendor copies.  It uses only <loom/plugin.h> and
 * shows every part of the ABI:
 *  - an exported loom_plugin_entry that registers a const ops table, so
 *    LOOM_PLUGINS / LOOM_PLUGIN_PATH load it into unmodified programs;
 *  - a constructor that attaches to a loom already running in the process
 *    (loom_plugin_attach), for libraries dlopen()ed after loom started;
 *  - a device clock that runs at its own rate from its own origin, described
 *    to loom by sync points taken at start and stop;
 *  - runtime calls emitted at once from the calling thread, and device work
 *    buffered and emitted at flush (as CUPTI-like runtimes deliver it);
 *  - correlation ids linking each call to its device work;
 *  - options read through the host (sim.skew_ppm, sim.offset_ns, sim.fail,
 *    sim.max_pending), errors reported through the host, losses counted.
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <loom/plugin.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simrt.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct op {
  uint64_t start, end, corr;
  uint32_t name, kind, queue;
  uint64_t bytes;
  uint32_t grid, block, dir;
} op;

/* The runtime's state: one device, two in-order queues. */
static struct {
  pthread_mutex_t mu;
  const loom_host *host;
  loom_backend *b;          /* set while a session uses the backend */
  atomic_int recording;
  loom_clock host_clk, dev_clk;
  uint32_t device, res[SIMRT_QUEUES];
  uint64_t busy_until[SIMRT_QUEUES];
  op *pending;
  size_t npending, cap, max_pending;
  double skew;               /* device ns per host ns - 1 */
  int64_t offset;            /* device ts at host ts 0 */
  atomic_uint_fast64_t corr;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .skew = 200e-6, .offset = 18000000000000ll};

static uint64_t raw_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t dev_of(uint64_t raw) {
  return (uint64_t)(g.offset + (int64_t)((double)raw * (1.0 + g.skew)));
}

EXPORT uint64_t simrt_device_now(void) { return dev_of(raw_now()); }

/* ---- the runtime -------------------------------------------------------- */
/* roles tells loom report what the call enqueues (LOOM_RECORD_F_*): loom
 * knows no "sim" names, the marks travel with the trace instead. */
static void emit_call(const char *name, uint64_t t0, uint64_t t1, uint64_t corr,
                      int q, uint16_t roles) {
  loom_arg args[1] = {{.key = "queue", .type = LOOM_ARG_INT, .v.i = q}};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_RUNTIME, .flags = roles,
                   .clock = g.host_clk, .device = LOOM_DEVICE_HOST,
                   .start = t0, .end = t1,
                   .name = g.host->intern(g.b, name, SIZE_MAX),
                   .correlation = corr, .nargs = 1, .args = args};
  g.host->emit(g.b, &r);
}

/* Queues device work of dur_ns on q after what is already there. */
static uint64_t submit(int q, const char *call, op o, uint64_t dur_ns) {
  if (q < 0 || q >= SIMRT_QUEUES) return 0;
  uint64_t t0 = raw_now();
  uint64_t corr = atomic_fetch_add(&g.corr, 1) + 1;
  pthread_mutex_lock(&g.mu);
  uint64_t t1 = raw_now();
  uint64_t start = dev_of(t1);
  if (start < g.busy_until[q]) start = g.busy_until[q];
  g.busy_until[q] = start + dur_ns;
  if (atomic_load(&g.recording)) {
    o.start = start;
    o.end = start + dur_ns;
    o.corr = corr;
    o.queue = (uint32_t)q;
    if (g.npending >= g.max_pending) {
      g.host->count_lost(g.b, 1, "sim.max_pending reached");
    } else {
      if (g.npending == g.cap) {
        size_t nc = g.cap ? g.cap * 2 : 1024;
        op *p = realloc(g.pending, nc * sizeof *p);
        if (p) {
          g.pending = p;
          g.cap = nc;
        }
      }
      if (g.npending < g.cap) g.pending[g.npending++] = o;
      else g.host->count_lost(g.b, 1, "out of memory");
    }
  }
  pthread_mutex_unlock(&g.mu);
  if (atomic_load(&g.recording))
    emit_call(call, t0, raw_now(), corr, q,
              o.kind == LOOM_KIND_KERNEL ? LOOM_RECORD_F_LAUNCH : LOOM_RECORD_F_MEMORY);
  return corr;
}

EXPORT uint64_t simrt_launch(int q, const char *kernel, uint64_t dur_ns,
                             uint32_t grid, uint32_t block) {
  op o = {.kind = LOOM_KIND_KERNEL, .grid = grid, .block = block};
  if (atomic_load(&g.recording)) o.name = g.host->intern(g.b, kernel, SIZE_MAX);
  return submit(q, "simLaunchKernel", o, dur_ns);
}

EXPORT uint64_t simrt_memcpy(int q, enum simrt_copy dir, size_t bytes) {
  static const char *names[] = {"?", "Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD"};
  op o = {.kind = LOOM_KIND_MEMCPY, .bytes = bytes, .dir = (uint32_t)dir};
  if (atomic_load(&g.recording))
    o.name = g.host->intern(g.b, names[dir <= 3 ? dir : 0], SIZE_MAX);
  /* 10 GB/s plus 2 us of latency. */
  return submit(q, "simMemcpyAsync", o, 2000 + bytes / 10);
}

EXPORT uint64_t simrt_memset(int q, size_t bytes) {
  op o = {.kind = LOOM_KIND_MEMSET, .bytes = bytes};
  if (atomic_load(&g.recording)) o.name = g.host->intern(g.b, "Memset", SIZE_MAX);
  return submit(q, "simMemsetAsync", o, 1000 + bytes / 20);
}

EXPORT uint64_t simrt_synchronize(int q) {
  if (q < 0 || q >= SIMRT_QUEUES) return 0;
  uint64_t t0 = raw_now();
  pthread_mutex_lock(&g.mu);
  uint64_t until = g.busy_until[q];
  pthread_mutex_unlock(&g.mu);
  while (dev_of(raw_now()) < until) {
    struct timespec nap = {0, 20000};
    nanosleep(&nap, NULL);
  }
  uint64_t corr = atomic_fetch_add(&g.corr, 1) + 1;
  if (atomic_load(&g.recording)) {
    loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_SYNC,
                     .clock = g.host_clk, .device = LOOM_DEVICE_HOST,
                     .start = t0, .end = raw_now(),
                     .name = g.host->intern(g.b, "simQueueSynchronize", SIZE_MAX),
                     .correlation = corr};
    g.host->emit(g.b, &r);
  }
  return corr;
}

/* ---- the backend -------------------------------------------------------- */
static int fail_at(loom_backend *b, const char *step) {
  const char *f = g.host->config_get(b, "sim.fail");
  return f && !strcmp(f, step);
}

static loom_status sim_probe(loom_backend *b, char *why, size_t n) {
  if (fail_at(b, "probe")) {
    snprintf(why, n, "simulated device not found (sim.fail=probe)");
    return LOOM_ENOTFOUND;
  }
  return LOOM_OK;
}

static loom_status sim_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  if (fail_at(b, "configure")) {
    g.host->report(b, LOOM_SEV_ERROR, "configuration refused (sim.fail=configure)");
    return LOOM_EBACKEND;
  }
  const char *v;
  if ((v = g.host->config_get(b, "sim.skew_ppm"))) g.skew = atof(v) * 1e-6;
  if ((v = g.host->config_get(b, "sim.offset_ns"))) g.offset = atoll(v);
  g.max_pending = 1u << 22;
  if ((v = g.host->config_get(b, "sim.max_pending"))) g.max_pending = strtoull(v, NULL, 10);
  loom_arg props[3] = {
      {.key = "compute units", .type = LOOM_ARG_INT, .v.i = 8},
      {.key = "memory bytes", .type = LOOM_ARG_UINT, .v.u = 16ull << 30},
      {.key = "clock skew ppm", .type = LOOM_ARG_DOUBLE, .v.d = g.skew * 1e6}};
  loom_device_info dev = {.struct_size = sizeof dev, .name = "LoomSim Accelerator",
                          .vendor = "loom examples", .type = "accelerator",
                          .props = props, .nprops = 3};
  if (g.host->clock_declare(b, LOOM_CLOCK_MONOTONIC_RAW, "host", &g.host_clk) ||
      g.host->clock_declare(b, LOOM_CLOCK_DEVICE, "sim device", &g.dev_clk) ||
      g.host->device_add(b, &dev, &g.device))
    return LOOM_EBACKEND;
  for (int q = 0; q < SIMRT_QUEUES; q++) {
    char name[32];
    snprintf(name, sizeof name, "queue %d", q);
    if (g.host->resource_add(b, g.device, name, (uint64_t)q + 1, &g.res[q]))
      return LOOM_EBACKEND;
  }
  return LOOM_OK;
}

static void sync_point(loom_backend *b) {
  uint64_t raw = raw_now();
  g.host->clock_sync(b, g.dev_clk, dev_of(raw), LOOM_CLOCK_MONOTONIC_RAW, raw);
}

static loom_status sim_start(loom_backend *b) {
  if (fail_at(b, "start")) {
    g.host->report(b, LOOM_SEV_ERROR, "device busy (sim.fail=start)");
    return LOOM_EBACKEND;
  }
  pthread_mutex_lock(&g.mu);
  g.b = b;
  g.npending = 0;
  pthread_mutex_unlock(&g.mu);
  sync_point(b);
  atomic_store(&g.recording, 1);
  return LOOM_OK;
}

static loom_status sim_stop(loom_backend *b) {
  atomic_store(&g.recording, 0);
  sync_point(b);
  return LOOM_OK;
}

static loom_status sim_flush(loom_backend *b) {
  pthread_mutex_lock(&g.mu);
  for (size_t i = 0; i < g.npending; i++) {
    const op *o = &g.pending[i];
    loom_arg args[4];
    uint32_t n = 0;
    if (o->kind == LOOM_KIND_KERNEL) {
      args[n++] = (loom_arg){.key = "grid", .type = LOOM_ARG_UINT, .v.u = o->grid};
      args[n++] = (loom_arg){.key = "block", .type = LOOM_ARG_UINT, .v.u = o->block};
    } else {
      args[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = o->bytes};
      if (o->kind == LOOM_KIND_MEMCPY)
        args[n++] = (loom_arg){.key = "direction", .type = LOOM_ARG_STRING,
                               .v.s = o->dir == SIMRT_H2D ? "HtoD" : o->dir == SIMRT_D2H ? "DtoH" : "DtoD"};
    }
    loom_record r = {.struct_size = sizeof r, .kind = (uint16_t)o->kind,
                     .clock = g.dev_clk, .device = g.device,
                     .resource = g.res[o->queue], .start = o->start, .end = o->end,
                     .name = o->name, .correlation = o->corr, .nargs = n, .args = args};
    g.host->emit(b, &r);
  }
  g.npending = 0;
  pthread_mutex_unlock(&g.mu);
  return LOOM_OK;
}

static void sim_destroy(loom_backend *b) {
  (void)b;
  pthread_mutex_lock(&g.mu);
  g.b = NULL;
  free(g.pending);
  g.pending = NULL;
  g.npending = g.cap = 0;
  pthread_mutex_unlock(&g.mu);
}

/* What configure and probe read: declared, so a mistyped key is refused
 * before anything runs and `loom backends` lists them (ABI 1.3). */
static const loom_option_desc sim_options[] = {
    {"sim.skew_ppm", "the device clock's drift against the host's, in ppm (default 0)"},
    {"sim.offset_ns", "the device clock's offset from the host's, in ns (default 0)"},
    {"sim.max_pending", "launches held until the stop before more are counted lost (default 4194304)"},
    {"sim.fail", "probe or configure: fail that step, to test loom's handling (default none)"},
    {NULL, NULL}};

static const loom_backend_ops sim_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = sim_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "sim",
    .device_type = "sim",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_MEMSET) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
             LOOM_KIND_BIT(LOOM_KIND_SYNC),
    .runtime_category = "sim_runtime",
    .probe = sim_probe,
    .configure = sim_configure,
    .start = sim_start,
    .stop = sim_stop,
    .flush = sim_flush,
    .destroy = sim_destroy,
};

/* Static, so that the constructor below calls this library's entry even
 * when another plug-in's loom_plugin_entry is visible first in the process. */
static loom_status sim_entry(const loom_host *host) {
  if (host->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  g.host = host;
  return host->backend_register(&sim_ops, NULL);
}

/* What LOOM_PLUGINS / LOOM_PLUGIN_PATH look up with dlsym. */
EXPORT loom_status loom_plugin_entry(const loom_host *host) { return sim_entry(host); }

/* Loaded by other means (the program dlopen()ed us after loom started):
 * attach to the loom in the process, if there is one. */
__attribute__((constructor)) static void sim_attach(void) {
  loom_plugin_attach(sim_entry);
}
