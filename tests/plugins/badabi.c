/* A plug-in built for another major version of the backend ABI: loom must
 * refuse it with a message and go on. */
#include <loom/plugin.h>

static loom_status nop(loom_backend *b) { (void)b; return LOOM_OK; }

static const loom_backend_ops future_ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR + 98,
    .abi_minor = 0, .name = "future", .device_type = "future",
    .start = nop, .stop = nop};

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *host) {
  return host->backend_register(&future_ops, NULL);
}
