/*
 * loom_fakert.c - libloom-fakert.so, the loom backend of the fake runtime
 * (fakert.h), written the way a vendor writes one: against the installed
 * <loom/plugin.h> only, not linked with libloom nor with its runtime.
 *
 *  - enable: `loom record` records device type "fakert" by default where
 *    libfakert.so.1 is installed, and names this file in FRT_TOOLS; the
 *    runtime loads it at frt_init (so loom record does not load it itself);
 *  - the constructor attaches to the loom in the process, so the backend
 *    joins the session that is recording, even when the program loaded the
 *    runtime late; loaded through LOOM_PLUGINS it registers the usual way;
 *  - lazy: probe dlopen()s the runtime and finds its tracing interface;
 *  - the device clock ticks in us: declared with clock_set_rate(1000) and
 *    sync points against CLOCK_REALTIME that the core takes itself
 *    (clock_auto_sync), or taken here at start and stop with a core that
 *    lacks those slots; two or more points interpolate the 100 ppm drift;
 *  - runtime calls marked LOOM_RECORD_F_LAUNCH / _MEMORY, kernels and copies
 *    (with "bytes" and "direction") on one resource per queue, correlated by
 *    the runtime's call ids, and the runtime's "queue depth" counter.
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <loom/plugin.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "fakert.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXQ 8

static struct {
  const loom_host *host;
  loom_backend *b;
  atomic_int recording;
  int auto_sync;
  loom_clock host_clk, dev_clk;
  uint32_t device;
  _Atomic uint32_t res[MAXQ]; /* resource + 1 of each queue, added on first use */
  loom_string_id counter_name;
  uint64_t (*device_time)(void);
  void (*hooks_install)(const frt_hooks *);
} g;

/* The call open on this thread: api_enter -> api_exit (calls do not nest). */
static _Thread_local struct { uint64_t id, start; } call;

static void on_enter(void *u, const char *fn, uint64_t id) {
  (void)u, (void)fn;
  call.id = id;
  call.start = g.host->clock_now(LOOM_CLOCK_MONOTONIC);
}

static void on_exit_(void *u, const char *fn, uint64_t id) {
  (void)u;
  /* A call that began before the hooks were installed has no start. */
  if (!atomic_load(&g.recording) || call.id != id) return;
  uint16_t flags = !strcmp(fn, "frtEnqueueKernel") ? LOOM_RECORD_F_LAUNCH
                 : !strcmp(fn, "frtEnqueueCopy") ? LOOM_RECORD_F_MEMORY : 0;
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_RUNTIME, .flags = flags,
                   .clock = g.host_clk, .device = LOOM_DEVICE_HOST,
                   .start = call.start, .end = g.host->clock_now(LOOM_CLOCK_MONOTONIC),
                   .name = g.host->intern(g.b, fn, SIZE_MAX), .correlation = id};
  g.host->emit(g.b, &r);
}

/* The resource of a queue, added on first use: queues made before the
 * session, or before the backend joined, are known too.  Two threads adding
 * it at once add two resources with the same native id: one track still. */
static uint32_t resource(uint32_t q, const char *name) {
  if (q >= MAXQ) return UINT32_MAX;
  uint32_t r = atomic_load(&g.res[q]);
  if (!r && name && !g.host->resource_add(g.b, g.device, name, q + 1, &r))
    atomic_store(&g.res[q], ++r);
  return r ? r - 1 : UINT32_MAX;
}

static void on_work_end(void *u, const frt_work *w) {
  (void)u;
  if (!atomic_load(&g.recording)) return;
  static const char *dirs[] = {"?", "HtoD", "DtoH", "DtoD"};
  loom_arg args[2] = {{.key = "bytes", .type = LOOM_ARG_UINT, .v.u = w->bytes},
                      {.key = "direction", .type = LOOM_ARG_STRING,
                       .v.s = dirs[w->dir >= FRT_HTOD && w->dir <= FRT_DTOD ? w->dir : 0]}};
  loom_record r = {.struct_size = sizeof r,
                   .kind = w->is_copy ? LOOM_KIND_MEMCPY : LOOM_KIND_KERNEL,
                   .clock = g.dev_clk, .device = g.device,
                   .resource = resource(w->queue, w->queue_name),
                   .start = w->begin_us, .end = w->end_us,
                   .name = g.host->intern(g.b, w->name, SIZE_MAX), .correlation = w->id,
                   .nargs = w->is_copy ? 2 : 0, .args = w->is_copy ? args : NULL};
  g.host->emit(g.b, &r);
}

static void on_counter(void *u, const char *name, int64_t v, uint32_t q, const char *qname,
                       uint64_t us) {
  (void)u;
  if (!atomic_load(&g.recording)) return;
  /* One value, keyed by the counter's name, like loom_counter's. */
  loom_arg a = {.key = name, .type = LOOM_ARG_INT, .v.i = v};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_COUNTER, .clock = g.dev_clk,
                   .device = g.device, .resource = resource(q, qname), .start = us, .end = us,
                   .name = g.host->intern(g.b, name, SIZE_MAX), .nargs = 1, .args = &a};
  g.host->emit(g.b, &r);
}

static const frt_hooks hooks = {.api_enter = on_enter, .api_exit = on_exit_,
                                .work_end = on_work_end, .counter = on_counter};

/* ---- the backend -------------------------------------------------------- */
static loom_status fakert_probe(loom_backend *b, char *why, size_t n) {
  (void)b;
  void *rt = dlopen("libfakert.so.1", RTLD_NOW | RTLD_LOCAL);
  if (rt) {
    g.device_time = (uint64_t (*)(void))(uintptr_t)dlsym(rt, "frt_device_time");
    g.hooks_install = (void (*)(const frt_hooks *))(uintptr_t)dlsym(rt, "frt_hooks_install");
  }
  if (!rt || !g.device_time || !g.hooks_install) {
    snprintf(why, n, "libfakert.so.1 %s", rt ? "has no tracing interface" : "is not installed");
    return LOOM_ENOTFOUND;
  }
  return LOOM_OK;
}

/* The device clock at the start of a tick, so that the host time read next
 * to it is within ns of it (the clock counts whole us).  The core brackets
 * each call with host reads and keeps the narrowest of several, which is a
 * call that began just before an edge; our own sync points (an older core)
 * warm up first (lazy binding, caches) and spin to a second edge. */
static uint64_t tick_edge(loom_backend *b, void *ctx) {
  (void)b, (void)ctx;
  uint64_t t = g.device_time(), u;
  while ((u = g.device_time()) == t) {
  }
  return u;
}

static void sync_point(loom_backend *b) {
  g.host->clock_now(LOOM_CLOCK_REALTIME); /* warm */
  tick_edge(b, NULL);
  uint64_t dev = tick_edge(b, NULL);
  g.host->clock_sync(b, g.dev_clk, dev, LOOM_CLOCK_REALTIME,
                     g.host->clock_now(LOOM_CLOCK_REALTIME));
}

static loom_status fakert_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  const loom_host *h = g.host;
  loom_arg props[1] = {{.key = "clock", .type = LOOM_ARG_STRING, .v.s = "us, 100 ppm drift"}};
  loom_device_info dev = {.struct_size = sizeof dev, .name = "FakeRT Device",
                          .vendor = "loom examples", .type = "accelerator",
                          .props = props, .nprops = 1};
  if (h->clock_declare(b, LOOM_CLOCK_MONOTONIC, "host", &g.host_clk) ||
      h->clock_declare(b, LOOM_CLOCK_DEVICE, "fakert device", &g.dev_clk) ||
      h->device_add(b, &dev, &g.device))
    return LOOM_EBACKEND;
  for (int q = 0; q < MAXQ; q++) atomic_store(&g.res[q], 0);
  /* ABI 1.1: a rate of 1000 ns per tick, and sync points taken by the core
   * (at start, at stop, before flush and when joining a running session). */
  g.auto_sync = LOOM_HOST_HAS(h, clock_set_rate) && LOOM_HOST_HAS(h, clock_auto_sync) &&
                h->clock_set_rate(b, g.dev_clk, 1000.0) == LOOM_OK &&
                h->clock_auto_sync(b, g.dev_clk, tick_edge, NULL,
                                   LOOM_CLOCK_REALTIME) == LOOM_OK;
  return LOOM_OK;
}

static loom_status fakert_start(loom_backend *b) {
  g.b = b;
  if (!g.auto_sync) sync_point(b);
  atomic_store(&g.recording, 1);
  g.hooks_install(&hooks);
  return LOOM_OK;
}

static loom_status fakert_stop(loom_backend *b) {
  g.hooks_install(NULL);
  atomic_store(&g.recording, 0);
  if (!g.auto_sync) sync_point(b);
  return LOOM_OK;
}

/* Is the runtime installed here?  (Run by loom record, in its own process.) */
static int fakert_installed(void) {
  void *rt = dlopen("libfakert.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (rt) dlclose(rt);
  return rt != NULL;
}

static const loom_env_setting fakert_env[] = {
    {.name = "FRT_TOOLS", .value = "$SELF", .how = LOOM_ENV_PREPEND_PATH}};
static const loom_backend_enable fakert_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT | LOOM_ENABLE_F_NO_PLUGIN_LOAD,
    .env = fakert_env, .nenv = 1, .default_check = fakert_installed};

static const loom_backend_ops fakert_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "fakert",
    .device_type = "fakert",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_RUNTIME) | LOOM_KIND_BIT(LOOM_KIND_COUNTER),
    .flags = LOOM_BACKEND_F_LAZY,
    .probe = fakert_probe,
    .configure = fakert_configure,
    .start = fakert_start,
    .stop = fakert_stop,
    .enable = &fakert_enable,
};

static loom_status fakert_entry(const loom_host *host) {
  if (host->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  g.host = host;
  return host->backend_register(&fakert_ops, NULL);
}
EXPORT loom_status loom_plugin_entry(const loom_host *host) { return fakert_entry(host); }
__attribute__((constructor)) static void fakert_attach(void) { loom_plugin_attach(fakert_entry); }
