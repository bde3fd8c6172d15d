/*
 * trigger.h - recording windows: the core's controller that turns recording
 * on and off within one session (steps, time, torch.profiler-style
 * schedules, requests from outside) and hands each finished window's trace
 * to a done function.  One controller per process (there is one session at
 * a time); every backend is started at a window's beginning and stopped and
 * flushed at its end, so a window's file holds its device work and nothing
 * from outside it.
 *
 * Applications route finished windows with loom_window_callback_set
 * (loom.h); loom-preload.so reaches loom__trigger_wanted through the tools
 * table (loom/tools.h); the control socket (src/ctl/ctl.c) is part of
 * libloom.
 */
#ifndef LOOM_TRIGGER_H
#define LOOM_TRIGGER_H

#include <stddef.h>
#include <stdint.h>

#include "loom/loom.h"

typedef struct loom__window_req {
  int64_t delay_ns;     /* wait this long first (0: now) */
  int64_t duration_ns;  /* >0: the window lasts this long */
  int64_t start_step;   /* >=0: begin at this step number; -1: at once */
  int64_t steps;        /* >0: the window lasts this many steps */
  const char *out;      /* file for this window; NULL: the session's output pattern */
  uint32_t kinds;       /* LOOM_KIND_BIT mask the window keeps (Kineto's
                           ACTIVITY_TYPES); 0: what the session records */
} loom__window_req;

/* From any thread: arm one window on the running process's session.  0;
 * LOOM_EBUSY (with a message naming the window in progress) when a window
 * is armed or recording. */
int loom__trigger_request(const loom__window_req *r);

/* From any thread, on a process recording in ring mode: dumps what its
 * rings hold now (last_ns > 0: only the records that began in the last
 * last_ns of it, device work with the call that launched it), keeping
 * r->kinds, written like a window (r->out, else the session's output
 * pattern).  A request for a window ahead (steps, start_step, delay) is
 * LOOM_EINVAL with a message; LOOM_ESTATE when nothing records in ring
 * mode. */
int loom__trigger_ring_dump(const loom__window_req *r, int64_t last_ns);

/* Keeps, of a finished trace, the events of the kinds in `kinds` (0: all;
 * markers always) that began at or after since_ns (INT64_MIN: all); device
 * work whose launching call is dropped by time goes with it; flows with a
 * dropped end are dropped.  *removed: how many events went.  0 or -1 (out
 * of memory, nothing changed).  keep.c. */
int loom__trace_keep(loom_trace *t, uint32_t kinds, int64_t since_ns, uint64_t *removed);
/* loom__trace_keep by kinds (0: nothing to do), saying so in the trace:
 * metadata loom_window_kinds and a warning counting what was left out. */
void loom__window_keep_kinds(loom_trace *t, uint32_t kinds, unsigned seq);

/* Called for every step (loom_step, PyTorch's ProfilerStep#N through the
 * adapter). */
void loom__trigger_step(uint64_t step);

/* Where a finished window goes is loom_window_callback_set's (loom.h,
 * defined in trigger.c): the preload's callback writes the file and tells a
 * waiting client; tests and Python set their own; none: written here. */

/* Hands a trace made outside a window (a ring dump) to the done function as
 * the session's next window: numbered, labelled with `label` (metadata
 * loom_window), named from out (NULL: the session's output pattern, with
 * -<seq> inserted when it has no {seq}).  Takes t.  From any thread. */
void loom__trigger_write(loom_trace *t, const char *out, const char *label);

/* The output name of window seq from pattern ({pid} {rank} {seq} {program};
 * multi: "-<seq>" before the extension when the pattern has no {seq}).
 * 0, or -1 when it does not fit in n bytes. */
int loom__window_path(char *buf, size_t n, const char *pattern, unsigned seq, int multi);

/* For `loom trigger` (src/ctl/ctl.c): the number of the next step to
 * begin (0 before the first), and the controller's state: 0 idle, 1 a
 * window armed, 2 one recording (or being written, or a session that is
 * not in window mode), with the window described in desc. */
int64_t loom__trigger_next_step(void);
int loom__trigger_state(char *desc, size_t n);

/* For the control socket: is a session recording in ring mode (a dump has
 * something to read)?  ring.c. */
int loom__ring_active(void);

/* For loom-preload: 1 when the session started in this process takes
 * requests from loom trigger (window mode, ring mode).  A session that
 * records everything has no use for them: no socket, no thread. */
int loom__trigger_wanted(void);

#endif
