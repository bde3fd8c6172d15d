/* A plug-in whose ops table is too small for any ABI (struct_size of a
 * truncated table: 24 bytes, or TABLE_SIZE): loom must refuse it once,
 * saying what is wrong. */
#include <loom/plugin.h>

#ifndef TABLE_SIZE
#define TABLE_SIZE 24
#endif

static loom_status nop(loom_backend *b) { (void)b; return LOOM_OK; }

static const loom_backend_ops small_ops = {
    .struct_size = TABLE_SIZE, .abi_major = LOOM_ABI_MAJOR, .abi_minor = 0,
    .name = "small", .device_type = "small", .start = nop, .stop = nop};

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *host) {
  return host->backend_register(&small_ops, NULL);
}
