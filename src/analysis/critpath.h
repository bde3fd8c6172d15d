/*
 * critpath.h - the critical path of every step of `loom report` (docs/report.md, "Critical
 * path"), and the bound named from it.
 *
 * The analysis pass hands each record, in time order, to loom__cp_record(): it builds one
 * step's graph (host nesting and thread order, launch call -> device work by correlation,
 * queue order, sync -> the device work it waited for, cross-queue waits) while the step
 * lasts; when the step ends the graph is walked back from its last node along the
 * dependency that was satisfied last, and only the figures stay: the path's length and
 * share by class, its contributors per name, the slack of work off it, the bound.  A
 * trace without steps is cut into windows of at most `cap` events, so memory is bounded
 * by the sort budget, never by the trace.  Cross-rank waits are laid on the paths once
 * the ranks are matched (loom__cp_ranks).
 */
#ifndef LOOM_CRITPATH_H
#define LOOM_CRITPATH_H

#include <stdint.h>

#include "analysis.h"
#include "util/util.h"

/* Classes of the time on a path. */
enum { LOOM__CPC_HOST, LOOM__CPC_LAUNCH, LOOM__CPC_COMPUTE, LOOM__CPC_COPY, LOOM__CPC_SYNC,
       LOOM__CPC_COMM, LOOM__CPC_WAIT, LOOM__CPC_COUNT_ };
extern const char *const loom__cpc_name[LOOM__CPC_COUNT_];

/* Bounds (docs/report.md, "Bound"). */
enum { LOOM__BOUND_NONE, LOOM__BOUND_LAUNCH, LOOM__BOUND_HOST, LOOM__BOUND_SYNC,
       LOOM__BOUND_TRANSFER, LOOM__BOUND_COMM, LOOM__BOUND_LATE_RANK, LOOM__BOUND_COMPUTE,
       LOOM__BOUND_COUNT_ };
extern const char *const loom__bound_name[LOOM__BOUND_COUNT_];

#define LOOM__CP_NEVID 3
typedef struct loom__cpevid { /* a contributor of the bound's class */
  uint32_t name;
  uint8_t kind;
  uint64_t count;
  int64_t ns;
} loom__cpevid;

typedef struct loom__cpstep { /* one step's (or window's) path */
  int32_t step;               /* index in rep->steps; -1: a window of a trace without steps */
  int64_t pid;                /* the step's process (its host track's), -1: a window */
  int64_t t0, t1;             /* relative ns: its start, the end of its last node */
  int64_t cls_ns[LOOM__CPC_COUNT_];
  uint64_t nevents, npath;    /* events in its graph, on the path */
  int64_t device_busy;        /* sum of device work durations in it (any queue) */
  uint64_t kernels;           /* device compute work in it, and its time */
  int64_t kernel_ns;
  uint8_t bound;
  int32_t late_rank;          /* world rank waited for most on the path, -1 */
  loom__cpevid ev[LOOM__CPC_COUNT_][LOOM__CP_NEVID]; /* top contributors per class */
  uint8_t cut;                /* the step held more than the cap: its first events only */
} loom__cpstep;

typedef struct loom__cpspan { /* a stretch of a path in a communication call */
  int64_t t0, t1;
  uint32_t step;              /* index in steps */
  uint32_t name;
  uint8_t cls, kind;
} loom__cpspan;

typedef struct loom__cpname { /* a name's events on and off the paths */
  uint32_t name;
  uint8_t kind, cls;
  uint64_t on, off;           /* events on a path, off every path */
  int64_t ns;                 /* time of the paths it holds */
  int64_t slack_min, slack_sum; /* of its events off the paths */
} loom__cpname;

typedef struct loom__cp loom__cp;

typedef struct loom__cpres {  /* what the report keeps */
  loom__cpstep *steps;
  size_t nsteps, cap_steps;
  loom__cpname *names;
  size_t nnames, cap_names;
  int64_t cls_ns[LOOM__CPC_COUNT_]; /* over every path */
  size_t cap;                 /* events per graph at most (windows are cut there) */
  uint64_t cut;               /* steps cut short at the cap */
  uint64_t sync_edges, xqueue_edges;
  uint64_t block_edges;        /* calls whose end waited for the work they launched */
  loom__cpspan *spans;        /* where cross-rank waits may lie: kept only when the input
                               * has communication calls the ranks analysis matches, at
                               * most max_spans (from the sort budget) */
  size_t nspans, cap_spans, max_spans;
  uint64_t spans_left;        /* stretches past max_spans: no cross-rank waiting laid on */
  /* with keep_path: each path event's key (critpath_trace.c) -> 1, and the path's
   * dependency edges between events (not nesting) for the marked trace's flows */
  loom__map on_path;
  struct loom__cpedge *edges;
  size_t nedges, cap_edges;
} loom__cpres;

/* Edges of a path drawn as flows: thread order (one event's end to the next one's start on
 * a thread), launch, queue order, cross-queue wait, sync. */
enum { LOOM__CPE_THREAD, LOOM__CPE_LAUNCH, LOOM__CPE_QUEUE, LOOM__CPE_XQUEUE, LOOM__CPE_SYNC,
       LOOM__CPE_COUNT_ };
extern const char *const loom__cpe_name[LOOM__CPE_COUNT_];
typedef struct loom__cpedge {
  uint64_t from, to;          /* event keys */
  int64_t from_t, to_t;       /* epoch ns of the two nodes */
  uint8_t type;               /* LOOM__CPE_* */
} loom__cpedge;

/* The key of an event in both reads of a trace: its pid, tid, epoch start, duration and
 * name's text. */
uint64_t loom__cp_key(int64_t pid, int64_t tid, int64_t ts, int64_t dur, const char *name);

/* An empty state for the pass over t; stepped: the trace has steps (records outside them
 * are left out), else windows; cap: events per graph (from the sort budget); keep_path:
 * remember the path's events for loom__cp_write_trace; max_spans: stretches of
 * communication calls kept for cross-rank waits (0: none).  NULL when out of memory. */
loom__cp *loom__cp_new(loom_trace *t, loom__report *rep, size_t cap, int stepped,
                       int keep_path, size_t max_spans);
/* One record of the pass (time order).  queue: its queue index (device work and sync
 * records on a device), else -1; step: it is a step range (NF_STEP); launch: a launch or
 * copy call by its marks or name; comm: communication work or call. */
void loom__cp_record(loom__cp *c, const loom__arec *r, int32_t queue, int step, int launch,
                     int comm);
/* The end of the pass: the last graph walked; the results move to *out. 0, -1 on OOM. */
int loom__cp_finish(loom__cp *c, loom__cpres *out);
/* Cross-rank waits (ranks.h) of this input's ranks laid on the paths: waiting time moves
 * to class "waiting" with the rank waited for.  mine[rank index < nmine]: 1 for this
 * input's ranks.  base_ns: the input's time base. */
void loom__cp_ranks(loom__cpres *res, const struct loom__ranks *k, const uint8_t *mine,
                    size_t nmine, int64_t base_ns);
/* Writes the trace at in to out with the paths marked ("critical": 1 on each event on
 * them, a flow between consecutive ones).  Needs keep_path. */
loom_status loom__cp_write_trace(const loom__cpres *r, const char *in, const char *out);
void loom__cp_free(loom__cp *c);
void loom__cpres_free(loom__cpres *r);

#endif
