/* A plug-in built against the frozen ABI 1.0 header: its ops table ends at
 * pop_external and it knows the 1.0 loom_host only.  A loom of ABI 1.1 must
 * load it, probe it and record what it emits (and never read slots past its
 * table).  abi10_run(n) emits n kernels, each launched by a runtime call. */
#include "abi10/loom_plugin_1_0.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

_Static_assert(LOOM_ABI_MINOR == 0, "abi10.c must build against the 1.0 header");

static const loom_host *host;
static loom_backend *bk;
static loom_clock host_clk, dev_clk;
static uint32_t dev, queue;
static int probed, recording;

static uint64_t raw_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The device counts ns from its own origin. */
static uint64_t dev_now(void) { return raw_now() + 777000000000ull; }

static void sync_point(loom_backend *b) {
  uint64_t r = raw_now();
  host->clock_sync(b, dev_clk, r + 777000000000ull, LOOM_CLOCK_MONOTONIC_RAW, r);
}

static loom_status a_probe(loom_backend *b, char *why, size_t n) {
  (void)b, (void)why, (void)n;
  probed++;
  return LOOM_OK;
}

static loom_status a_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  bk = b;
  loom_device_info d = {.struct_size = sizeof d, .name = "ABI 1.0 device",
                        .vendor = "tests", .type = "accelerator"};
  if (host->clock_declare(b, LOOM_CLOCK_MONOTONIC_RAW, "host", &host_clk) ||
      host->clock_declare(b, LOOM_CLOCK_DEVICE, "dev", &dev_clk) ||
      host->device_add(b, &d, &dev) || host->resource_add(b, dev, "queue 0", 1, &queue))
    return LOOM_EBACKEND;
  return LOOM_OK;
}

static loom_status a_start(loom_backend *b) {
  sync_point(b);
  recording = 1;
  return LOOM_OK;
}

static loom_status a_stop(loom_backend *b) {
  recording = 0;
  sync_point(b);
  return LOOM_OK;
}

EXPORT int abi10_probed(void) { return probed; }

EXPORT void abi10_run(int n) {
  for (int i = 0; i < n && recording; i++) {
    uint64_t t0 = raw_now(), d0 = dev_now();
    loom_record call = {.struct_size = sizeof call, .kind = LOOM_KIND_RUNTIME,
                        .clock = host_clk, .device = LOOM_DEVICE_HOST, .start = t0,
                        .end = raw_now(), .name = host->intern(bk, "abi10Launch", SIZE_MAX),
                        .correlation = (uint64_t)i + 1};
    host->emit(bk, &call);
    loom_record k = {.struct_size = sizeof k, .kind = LOOM_KIND_KERNEL, .clock = dev_clk,
                     .device = dev, .resource = queue, .start = d0 + 1000, .end = d0 + 3000,
                     .name = host->intern(bk, "abi10_kernel", SIZE_MAX),
                     .correlation = (uint64_t)i + 1};
    host->emit(bk, &k);
  }
}

static const loom_backend_ops ops = {
    .struct_size = sizeof(loom_backend_ops), /* the 1.0 size */
    .abi_major = LOOM_ABI_MAJOR, .abi_minor = LOOM_ABI_MINOR,
    .name = "abi10", .device_type = "abi10",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME),
    .probe = a_probe, .configure = a_configure, .start = a_start, .stop = a_stop};

EXPORT loom_status loom_plugin_entry(const loom_host *h) {
  /* A 1.0 plug-in reads only what its loom_host has. */
  if (h->abi_major != LOOM_ABI_MAJOR || h->struct_size < sizeof(loom_host)) return LOOM_EABI;
  host = h;
  return h->backend_register(&ops, NULL);
}
