/*
 * unusedbk.c - libloom-unused.so, a plug-in that loom record enables by
 * default (device type "unused") and that declares a clock at configure, as
 * OpenCL, Vulkan and MPI do, but is never used by the program: no record,
 * no device.  A killed process's summary and rebuilt trace must not name it
 * (tests/save/leave.sh), unless --devices asks for it.
 */
#include <loom/plugin.h>

static const loom_host *host;
static loom_clock clk;

static loom_status configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  return host->clock_declare(b, LOOM_CLOCK_MONOTONIC, "unused runtime", &clk);
}
static loom_status nop(loom_backend *b) { (void)b; return LOOM_OK; }

static const loom_backend_enable enable = {.struct_size = sizeof enable,
                                           .flags = LOOM_ENABLE_F_DEFAULT};
static const loom_backend_ops ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "unused", .device_type = "unused",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL), .configure = configure, .start = nop,
    .stop = nop, .enable = &enable};

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *h) {
  host = h;
  return host->backend_register(&ops, NULL);
}
