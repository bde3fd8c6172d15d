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

/* ---- the external sort (sorter.c) ----------------------------------------
 * A record: an event, or a flow end (e.ph 's', 't' or 'f'; e.correlation
 * the flow id, e.kind 1 when it binds to the enclosing slice), its
 * arguments following it.  Times are the file's (base added, not shifted),
 * strings the output's, tracks the input's. */
typedef struct loom__mrec {
  uint64_t seq;   /* reading order, over all inputs */
  uint32_t input; /* command-line place */
  loom__ev e;
} loom__mrec;

typedef struct loom__mrun {
  uint32_t input;
  int memory;               /* the buffer still in memory */
  uint64_t off, len, n;     /* in the file: bytes; records */
  uint64_t at, read;        /* records handed out; bytes read */
  unsigned char *blk;
  size_t bat, blen, bcap, cur_size;
} loom__mrun;

typedef struct loom__sorter {
  uint64_t budget;
  unsigned char *arena;
  size_t len, cap;
  void *keys;
  size_t nkeys, cap_keys;
  uint32_t cur_input;
  int fd;                   /* the spill file, -1 until needed */
  uint64_t file_len;
  loom__mrun *runs;
  size_t nruns, cap_runs;
  uint64_t spilled;         /* runs written to the file */
  loom_status status;       /* of the first failure */
} loom__sorter;

/* Each returns LOOM_OK or the failure's status (also in status), with
 * loom_last_error set. */
int loom__sorter_init(loom__sorter *s, uint64_t budget);
int loom__sorter_add(loom__sorter *s, uint32_t input, uint64_t seq, const loom__ev *e, const loom__targ *args);
/* At the end of an input: its records become a run (last: kept in memory). */
int loom__sorter_end_input(loom__sorter *s, int last);
int loom__sorter_finish(loom__sorter *s);
/* The run's next record in order (valid until the next call), NULL at its
 * end or on a read error (loom_last_error says which). */
const loom__mrec *loom__sorter_run_next(loom__sorter *s, loom__mrun *r);
void loom__sorter_free(loom__sorter *s);

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

#endif
