/*
 * tools.c - the one table through which loom's own command and
 * loom-preload.so reach libloom's insides (loom/tools.h), and its version
 * check.  Every slot points at the function the library uses itself, so the
 * tools and the library never hold two copies of the arena, the control
 * socket's folder rules or the Kineto configuration reader.  Only
 * loom_tools_get is exported; the functions behind the slots stay hidden.
 */
#include <stddef.h>

#include "loom/tools.h"

#include "core/core.h"
#include "core/ops_min.h"
#include "ctl/ctl.h"
#include "ctl/kineto_cfg.h"
#include "record/arena.h"
#include "record/record.h"
#include "salvage/salvage.h"
#include "trace/memory.h"
#include "window/trigger.h"
#include "window/window.h"

/* In a child forked without exec (loom-preload's pthread_atfork handler)
 * every layer forgets what belongs to the parent: its session and records
 * are the parent's, dropped, not freed (other threads of the parent may
 * have held their locks at the fork); the child may then create a session
 * of its own. */
static void fork_child(void) {
  loom__arena_forked();
  loom__hostrec_forked();
  loom__session_forked();
  loom__ctl_forked(); /* the parent's socket is not the child's */
  loom__trigger_forked();
  loom__ring_forked();
}

static const loom_tools tools_table = {
    .struct_size = sizeof(loom_tools),
    .abi_major = LOOM_TOOLS_ABI_MAJOR,
    .abi_minor = LOOM_TOOLS_ABI_MINOR,
    .backend_ops_min_size = LOOM__OPS_MIN_SIZE,
    .arena_begin = loom__arena_begin,
    .arena_maps = loom__arena_maps,
    .arena_off = loom__arena_off,
    .arena_end = loom__arena_end,
    .device_hook_set = loom__bkarena_set_device_hook,
    .fork_child = fork_child,
    .trigger_wanted = loom__trigger_wanted,
    .ctl_start = loom__ctl_start,
    .ctl_stop = loom__ctl_stop,
    .ctl_forked = loom__ctl_forked,
    .ctl_window_done = loom__ctl_window_done,
    .salvage_to = loom__salvage_to,
    .salvage_peek = loom__salvage_peek,
    .ctl_dir_name = loom__ctl_dir_name,
    .ctl_dir_check = loom__ctl_dir_check,
    .ctl_sock_path = loom__ctl_sock_path,
    .ondemand_init = loom__ondemand_init,
    .kineto_load = loom__kineto_load,
    .memory_lines = loom__mem_lines,
};

LOOM_EXTERN const loom_tools *loom_tools_get(uint16_t abi_major, uint16_t abi_minor,
                                             size_t size) {
  if (abi_major == LOOM_TOOLS_ABI_MAJOR && size <= sizeof tools_table) return &tools_table;
  loom__fail(LOOM_EABI,
             "this libloom (loom %s, tools table %d.%d, %zu bytes) cannot serve a loom "
             "command or loom-preload.so built for tools table %u.%u (%zu bytes): they come "
             "from different builds; install loom's command, loom-preload.so and libloom "
             "from the same build",
             loom_version_string(), LOOM_TOOLS_ABI_MAJOR, LOOM_TOOLS_ABI_MINOR,
             sizeof tools_table, (unsigned)abi_major, (unsigned)abi_minor, size);
  return NULL;
}
