/* A plug-in whose entry point fails: with nothing registered, or (with
 * REGISTER_FIRST) after registering a table.  loom must say which file
 * failed, the status its entry returned and what it had registered. */
#include <loom/plugin.h>

#ifdef REGISTER_FIRST
static loom_status nop(loom_backend *b) { (void)b; return LOOM_OK; }

static const loom_backend_ops ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "failafter", .device_type = "failafter",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL), .start = nop, .stop = nop};
#endif

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *host) {
#ifdef REGISTER_FIRST
  if (host->backend_register(&ops, NULL) != LOOM_OK) return LOOM_EINVAL;
#else
  (void)host;
#endif
  return LOOM_EBACKEND;
}
