/*
 * window.h - the window controller (trigger.c) and ring mode (ring.c) as
 * the session's life drives them: the calls src/session/entry.c wires into
 * the core's session hooks (core.h, loom__session_hooks), the fork child's,
 * and ring mode's dump.  What the preload, the control socket and tests
 * call is in trigger.h.
 */
#ifndef LOOM_WINDOW_H
#define LOOM_WINDOW_H

#include <stdint.h>

#include "core/core.h"
#include "window/trigger.h"

/* ---- windows (trigger.c drives them; session.c does the work) ----------- */
/* Reads the window options of s (start_step, steps, delay, duration, wait,
 * warmup, active, repeat, skip_first, output, windows); sets s->windows.
 * LOOM_EINVAL with a message naming the option. */
loom_status loom__trigger_configure(struct loom_session *s);
/* The session started (arms its first window) / stops (a window in progress
 * is ended and written; nothing is armed afterwards; -1 when a window's
 * beginning or end still ran after 10 s: the session's state is then that
 * thread's, and must not be freed) / is destroyed. */
void loom__trigger_session_start(struct loom_session *s);
int loom__trigger_session_stop(struct loom_session *s);
void loom__trigger_session_gone(struct loom_session *s);
/* In a forked child: the parent's controller is the parent's. */
void loom__trigger_forked(void);
/* on_demand=on: whether the session serves loom trigger from start (on) to
 * stop: 1 when the caller starts the control socket now, -1 when it stops
 * it, 0 when nothing changes. */
int loom__trigger_serve(struct loom_session *s, int on);
/* Who hears that a window the controller wrote itself (no done function)
 * or a ring dump was written, or could not be (the control socket, whose
 * waiting client is told): out the file, ok 0 with why when it failed. */
typedef void (*loom__window_written_fn)(const char *out, int ok, const char *why);
void loom__trigger_set_written(loom__window_written_fn fn);

/* ---- ring mode (ring.c) -------------------------------------------------- */
/* Reads mode, ring_size and the slow-step options into s (at create). */
loom_status loom__ring_configure(struct loom_session *s);
/* At start (before the host recorder starts) and at the beginning of stop:
 * a dump is possible between the two. */
void loom__ring_begin(struct loom_session *s);
void loom__ring_end(struct loom_session *s);
/* In the child of a fork: the parent's dump threads are not there. */
void loom__ring_forked(void);
/* Snapshot of the rings of the recording session as a trace (NULL: no
 * ring-mode session records, or out of memory; loom_last_error says which).
 * Recording goes on. */
loom_trace *loom__ring_dump(const char *reason);

#endif
