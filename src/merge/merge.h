/*
 * merge.h - pieces of loom_merge() shared between its files.
 */
#ifndef LOOM_MERGE_H
#define LOOM_MERGE_H

#include "export/export.h"
#include "trace/trace.h"

/* A clock_sync point of an input: at local time ts add off (rtt: the
 * exchange's round trip). */
typedef struct loom__cpoint {
  int64_t ts, off, rtt;
} loom__cpoint;

/* One input of a merge. */
typedef struct loom__minput {
  const char *path;
  loom_trace *t;      /* what the streaming read keeps: no events */
  long rank;          /* -1 when unknown */
  size_t order;       /* place on the command line */
  size_t k;           /* place in the output (by rank, then order) */
  loom__cpoint *pts;  /* clock_sync points (times with the file's base) */
  size_t npts, cap_pts;
  int64_t min_ts, max_end; /* of its events, file times */
  uint64_t nev;
  loom__map pmap;     /* input pid key -> output pid */
  uint32_t *tmap;     /* input track -> output track */
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
/* Argument key of e among args, or NULL. */
const loom__targ *loom__arg_of(const loom__ev *e, const loom__targ *args, uint32_t key);

/* Sets the input's clock relation to the reference from its points; the
 * reason for an unaligned input goes to out's warnings. */
int loom__merge_align(loom__minput *in, const loom__minput *ref, loom_trace *out);
static inline int64_t loom__merge_shift(const loom__minput *in, int64_t ts) {
  if (!in->aligned) return ts;
  return ts + in->off0 + (int64_t)(in->slope * (double)(ts - in->t0));
}

/* A record of the merge's external sort (util/xsort.h): an event, or a
 * flow end (e.ph 's', 't' or 'f'; e.correlation the flow id, e.kind 1 when
 * it binds to the enclosing slice), its arguments following it.  Times are
 * the file's (base added, not shifted), strings the output's, tracks the
 * input's. */
typedef struct loom__mrec {
  uint64_t seq;   /* reading order, over all inputs */
  uint32_t input; /* command-line place */
  loom__ev e;
} loom__mrec;

/* ---- messages (messages.c) -----------------------------------------------
 * Matches point-to-point sends to receives as the merged events stream by
 * in time order, keeping only the ends not yet matched (FIFO per source,
 * destination, communicator and tag), and writes each match as a flow. */
typedef struct loom__match loom__match;
/* NULL when out has no message arguments (nothing to match); *err set on
 * out of memory.  rank_of_track: world rank per output track, -1 unknown. */
loom__match *loom__match_new(const loom_trace *out, const int64_t *rank_of_track, uint64_t first_id,
                           int *err);
int loom__match_event(loom__match *m, const loom__ev *e, const loom__targ *args, loom__jstream *w);
void loom__match_free(loom__match *m, uint64_t *matched, uint64_t *unmatched);
/* How many matched messages ended their receive before their send began
 * (the ranks' clocks disagree by at least worst ns there). */
void loom__match_backwards(const loom__match *m, uint64_t *n, int64_t *worst);

#endif
