/*
 * trigger.c - the window controller (see trigger.h).  Stub: windows are not
 * implemented yet.
 */
#include "core.h"
#include "trigger.h"

static loom__window_done_fn done_fn;
static void *done_ud;

int loom__trigger_request(const loom__window_req *r) {
  (void)r;
  return loom__fail(LOOM_EUNSUPPORTED, "recording windows are not implemented yet");
}

void loom__trigger_step(uint64_t step) { (void)step; }

void loom__trigger_set_done(loom__window_done_fn fn, void *ud) {
  done_fn = fn;
  done_ud = ud;
}
