/*
 * fork.c - a child forked without exec (loom-preload's pthread_atfork
 * handler): every layer forgets what belongs to the parent, from the top
 * (the control socket, the window controller, ring mode) down to the
 * recorder and the arena, so that the child may record a session of its own.
 */
#include "core/core.h"
#include "ctl/ctl.h"
#include "record/arena.h"
#include "record/record.h"
#include "window/window.h"

/* loom-preload's, through the tools table (loom/tools.h): called in the
 * child of a fork that did not exec.  The parent's session and records are
 * the parent's; the child drops them (not freed: other threads of the parent
 * may have held their locks at the fork) and may then create a session of
 * its own. */
void loom__fork_child(void) {
  loom__arena_forked();
  loom__hostrec_forked();
  loom__session_forked();
  loom__ctl_forked(); /* the parent's socket is not the child's */
  loom__trigger_forked();
  loom__ring_forked();
}
