/*
 * broken.c - one small plug-in built several times, each with one thing a
 * vendor could get wrong (BROKEN_*), for `loom check-backend`; and with
 * ENABLED / PRELOADED, plug-ins whose enable description `loom record` must
 * apply.  Device type "vendorx".
 */
#define _GNU_SOURCE
#include <loom/plugin.h>
#include <stdio.h>

static const loom_host *host;
static loom_clock clk;
static uint32_t dev;

static loom_status probe(loom_backend *b, char *why, size_t n) {
  (void)b;
#ifdef BROKEN_PROBE
  snprintf(why, n, "vendorx device driver not found");
  return LOOM_ENOTFOUND;
#else
  (void)why, (void)n;
  return LOOM_OK;
#endif
}

static loom_status configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  loom_device_info info = {.struct_size = sizeof info, .name = "VendorX 1", .vendor = "test",
                           .type = "accelerator"};
  if (host->clock_declare(b, LOOM_CLOCK_MONOTONIC, "vendorx", &clk) ||
      host->device_add(b, &info, &dev))
    return LOOM_EBACKEND;
  return LOOM_OK;
}

static loom_status nop(loom_backend *b) {
  (void)b;
  return LOOM_OK;
}

static loom_status flush(loom_backend *b) {
#ifdef BROKEN_DEVICE
  uint64_t now = host->clock_now(LOOM_CLOCK_MONOTONIC);
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_KERNEL, .clock = clk,
                   .device = dev + 7, .start = now, .end = now + 10,
                   .name = host->intern(b, "k", SIZE_MAX)};
  host->emit(b, &r);
#else
  (void)b;
#endif
  return LOOM_OK;
}

#if defined ENABLED || defined PRELOADED
static const loom_env_setting env[] = {
    {"VENDORX_TOOL", "$SELF", LOOM_ENV_SET_IF_UNSET},
    {"VENDORX_PATH", "$DIR", LOOM_ENV_PREPEND_PATH},
};
#ifdef NOT_HERE
static int not_here(void) { return 0; } /* its runtime is not installed */
#endif
static const loom_backend_enable enable = {
    .struct_size = sizeof(loom_backend_enable),
#ifdef NOT_HERE
    .default_check = not_here,
#endif
#ifdef ENABLED
    .flags = LOOM_ENABLE_F_DEFAULT,
#else
    .flags = LOOM_ENABLE_F_PRELOAD_SELF | LOOM_ENABLE_F_NO_PLUGIN_LOAD,
#endif
    .env = env,
    .nenv = 2,
};
#endif

static const loom_backend_ops ops = {
#ifdef BROKEN_SMALL
    .struct_size = 16,
#else
    .struct_size = sizeof(loom_backend_ops),
#endif
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "vendorx",
    .device_type = "vendorx",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL),
    .probe = probe,
    .configure = configure,
#ifndef BROKEN_START
    .start = nop,
#endif
    .stop = nop,
    .flush = flush,
#if defined ENABLED || defined PRELOADED
    .enable = &enable,
#endif
};

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *h) {
  host = h;
  return h->backend_register(&ops, NULL);
}
