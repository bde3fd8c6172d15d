/* A plug-in whose backend name is already taken (test_plugins registers
 * "early" from a constructor): refused once, naming both origins, even
 * when the same file is reached twice. */
#include <loom/plugin.h>

static loom_status nop(loom_backend *b) { (void)b; return LOOM_OK; }

static const loom_backend_ops ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "early", .device_type = "early",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL), .start = nop, .stop = nop};

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *host) {
  return host->backend_register(&ops, NULL);
}
