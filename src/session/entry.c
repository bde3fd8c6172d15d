/*
 * entry.c - the public session call that needs every layer: a session is
 * created by the core (src/core/session.c) with the hooks through which it
 * tells the layers above about its life: ring mode and the window
 * controller (src/window), and on_demand=on's control socket (src/ctl).
 * The core never calls them by name, so its arrows point down only.
 */
#include "core/core.h"
#include "ctl/ctl.h"
#include "window/window.h"

static loom_status configure(loom_session *s) {
  loom_status st = loom__ring_configure(s);
  return st == LOOM_OK ? loom__trigger_configure(s) : st;
}

static void recording(loom_session *s, int on) {
  if (on) loom__ring_begin(s);
  else loom__ring_end(s);
}

static void serve(loom_session *s, int on) {
  int change = loom__trigger_serve(s, on);
  if (change > 0) loom__ctl_start();
  if (change < 0) loom__ctl_stop("the session stopped before the window ended");
}

static const loom__session_hooks hooks = {
    .configure = configure,
    .recording = recording,
    .windows_start = loom__trigger_session_start,
    .windows_stop = loom__trigger_session_stop,
    .windows_gone = loom__trigger_session_gone,
    .serve = serve,
};

loom_status loom_session_create(const loom_session_config *cfg, loom_session **out) {
  /* a window the controller writes itself tells a client of the socket */
  loom__trigger_set_written(loom__ctl_window_done);
  return loom__session_create(cfg, &hooks, out);
}
