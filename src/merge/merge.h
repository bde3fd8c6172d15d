/*
 * merge.h - pieces of loom_merge() shared between its files.
 */
#ifndef LOOM_MERGE_H
#define LOOM_MERGE_H

#include "trace/trace.h"

/* One input of a merge. */
typedef struct loom__minput {
  const char *path;
  loom_trace *t;
  long rank;          /* -1 when unknown */
  size_t order;       /* place in the output (by rank, then input order) */
  /* clock relation to the reference: offset(t) = off0 + slope * (t - t0) */
  int aligned;        /* 0: no relation found (merged unaligned) */
  int64_t t0, off0;
  double slope;
  int64_t err_ns;     /* rtt/2 of the worst point used */
  int npoints;
} loom__minput;

/* A pid as a map key (the maps reserve key 0; pids may be 0 or negative). */
#define LOOM__PID_KEY(pid) ((uint64_t)(pid) ^ (1ull << 63))

/* Metadata value of key in t, or NULL. */
const char *loom__meta_get(const loom_trace *t, const char *key);
/* Argument key of e in t (interned in t), or NULL. */
const loom__targ *loom__ev_arg(const loom_trace *t, const loom__ev *e, uint32_t key);

/* Finds the input's clock_sync points and sets its relation to the
 * reference; the reason for an unaligned input goes to out's warnings. */
int loom__merge_align(loom__minput *in, const loom__minput *ref, loom_trace *out);
static inline int64_t loom__merge_shift(const loom__minput *in, int64_t ts) {
  if (!in->aligned) return ts;
  return ts + in->off0 + (int64_t)(in->slope * (double)(ts - in->t0));
}

/* Matches point-to-point sends to receives of the merged, time-sorted trace
 * out (FIFO per source, destination, communicator and tag) and adds a flow
 * per match.  rank_of_pid maps an output pid to its world rank (-1 if
 * unknown).  *unmatched gets the ends left without partner. */
int loom__merge_messages(loom_trace *out, const loom__map *rank_of_pid, uint64_t first_flow_id,
                         uint64_t *matched, uint64_t *unmatched);

#endif
