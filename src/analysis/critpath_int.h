/*
 * critpath_int.h - what the files of the critical path share (critpath.c: the graph;
 * critpath_path.c: the walk, slack and bound; critpath_trace.c: the marked trace).
 */
#ifndef LOOM_CRITPATH_INT_H
#define LOOM_CRITPATH_INT_H

#include <stdint.h>

#include "critpath.h"

/* Edge types, by priority when two sources are satisfied at the same time (the higher
 * wins: a wait on a device explains a node better than the thread's own order). */
enum { ET_SELF, ET_SEQ, ET_LAUNCH, ET_QUEUE, ET_XQUEUE, ET_SYNC };

#define CP_NPRED 3  /* incoming edges kept per node */
#define CP_QRING 64 /* recent work per queue that a sync may have waited for */

/* Event flags. */
enum { CPF_STEP = 1, CPF_WAITS = 2, CPF_WAITDEV = 4, CPF_WAITANY = 8, CPF_ON = 16 };

typedef struct cpe { /* an event of the graph */
  int64_t ts, end;
  uint64_t corr;
  uint32_t name, track;
  uint32_t pred[2][CP_NPRED]; /* per node (start, end): source node + 1, 0: none */
  uint8_t et[2][CP_NPRED];
  uint8_t kind, cls, flags;
  int32_t parent;             /* enclosing host event, -1 */
  int32_t owner;              /* the step (index in roots) it belongs to, -1: none known */
  uint32_t walk;              /* the last walk that found it on its path */
  int32_t waitq;              /* device work: its queue; a waiting call: the queue, -1 */
  uint32_t wtrack;            /* CPF_WAITDEV: the sync record's track (its device) */
} cpe;

typedef struct cpthr {
  int32_t *st;                /* open host events */
  size_t n, cap;
  uint32_t last;              /* the thread's last node + 1 */
  uint32_t gen;
} cpthr;

typedef struct cpq {
  int32_t ring[CP_QRING];     /* its last work, oldest overwritten */
  unsigned n;
  int32_t xsrc;               /* work the next work waits for (cross-queue), -1 */
  uint32_t gen;
} cpq;

typedef struct cpseg { /* a name's share of one path, per class */
  uint32_t name;
  uint8_t kind, cls;
  uint8_t ecls;               /* the events' own class (cls is the time's) */
  uint64_t count;
  int64_t ns;
  int32_t last;               /* the last event counted */
} cpseg;

struct loom__cp {
  loom_trace *t;
  loom__report *rep;
  loom__cpres res;
  size_t cap;
  int stepped, keep, oom;
  /* the open graph */
  int open, cut;
  int64_t t0, tend, busy, kernel_ns;
  uint64_t kernels;
  uint32_t gen, walkgen;
  struct cproot { int32_t ev, step; } *roots; /* the graph's steps: overlapping steps (of
                                                 several processes) share one graph */
  size_t nroots, cap_roots;
  cpe *ev;
  size_t nev, cap_ev;
  uint32_t *order;            /* nodes in the order they were resolved */
  size_t nord, cap_ord;
  cpthr *th;                  /* per track */
  uint32_t *touched;          /* tracks with state in this graph */
  size_t ntouched, cap_touched;
  cpq *q;                     /* per queue index */
  size_t nq;
  loom__map corr;             /* correlation id -> host event + 1 */
  /* the walk's scratch */
  int64_t *slack;
  size_t cap_slack;
  int32_t *back;              /* the path's events, last first */
  size_t nback, cap_back;
  cpseg *seg;
  size_t nseg, cap_seg;
  loom__map segmap;           /* (class, kind, name) -> seg index + 1 */
  loom__map name_of;          /* (kind, name) -> res.names index + 1 */
  uint32_t step_all;          /* "ProfilerStep#*" */
};

#define CP_REF(i, k) ((uint32_t)(i) << 1 | (uint32_t)(k))
static inline int64_t cp_time(const loom__cp *c, uint32_t node) {
  const cpe *e = &c->ev[node >> 1];
  return node & 1 ? e->end : e->ts;
}

void loom__cp_order(loom__cp *c, uint32_t node);
void loom__cp_pred(loom__cp *c, int32_t i, int k, uint32_t src, uint8_t et);
int32_t loom__cp_last_before(loom__cp *c, int32_t qi, int64_t t);
void loom__cp_pop_all(loom__cp *c);
/* critpath_path.c: the open graph walked, its figures kept, the graph emptied. */
void loom__cp_close(loom__cp *c);
/* The bound of a step from its shares. */
uint8_t loom__cp_bound(const loom__cpstep *s);

#endif
