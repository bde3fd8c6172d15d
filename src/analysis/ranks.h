/*
 * ranks.h - cross-rank analysis of `loom report` (docs/report.md, "Ranks").
 *
 * Every input (one merged trace, or one trace per rank) streams its events
 * through loom__ranks_event(); only what the cross-rank figures need is
 * kept: steps (ProfilerStep#N), communication calls (kind collective, or
 * marked comm, send, recv, post, wait or a collective pattern) with their
 * matching arguments (comm, seq, root, src, dst,
 * tag, request, wait_start_ns; docs of the contract in schema.md).  Ranks
 * come from a process name "rank R: ...", else the trace's "rank" metadata
 * (Kineto's distributedInfo), else one rank per process in input order.
 * loom__ranks_finish() matches collectives by (comm, seq) and messages FIFO
 * per (src, dst, comm, tag) and computes Scalasca's wait states.
 */
#ifndef LOOM_RANKS_H
#define LOOM_RANKS_H

#include <stdint.h>

#include "trace/trace.h"
#include "util/util.h"

enum { /* wait states (Scalasca's names) */
  LOOM__W_LATE_SENDER,
  LOOM__W_LATE_RECEIVER,
  LOOM__W_NXN,
  LOOM__W_BARRIER,
  LOOM__W_LATE_BCAST,
  LOOM__W_EARLY_REDUCE,
  LOOM__W_COUNT_
};
extern const char *const loom__wait_name[LOOM__W_COUNT_];

enum { /* what a kept event is */
  LOOM__RK_STEP, LOOM__RK_COLL, LOOM__RK_SEND, LOOM__RK_RECV, LOOM__RK_IRECV, LOOM__RK_DONE,
  LOOM__RK_OTHER
};

#define LOOM__RK_NONE INT64_MIN
typedef struct loom__rkev {
  int64_t ts, end;        /* epoch ns once the input is read */
  int64_t pid;            /* until the input's ranks are known */
  int64_t a_comm, a_seq, a_root, a_peer, a_tag, a_req, a_wait; /* LOOM__RK_NONE when absent */
  uint32_t name;          /* in loom__ranks.strs */
  int32_t rank;           /* index into ranks[] */
  int32_t step;           /* LOOM__RK_STEP: its number; else index in steps[] or -1 */
  uint8_t type;
  uint8_t blocking;       /* marked "wait": a send that waits for its receive, a
                           * call that waits for requests (not a test) */
  uint8_t pattern;        /* LOOM__RK_COLL: its wait state (LOOM__W_*) */
} loom__rkev;

typedef struct loom__rwait { /* one wait, as waits.c found it */
  int64_t t0, t1;         /* the waiting call's enter, + the waiting time */
  int32_t rank, by;       /* who waited, the rank that was late (-1: unknown) */
  int32_t step;           /* the step holding t0, -1 */
  uint32_t name;          /* the waiting call */
  uint8_t state;
} loom__rwait;

/* Waits shorter than this are noise by default: ranks never enter a call
 * at the same instant, and a rank that the scheduler set aside for a
 * moment delays the others that much (docs/report.md, "Ranks"). */
#define LOOM__WAIT_THRESHOLD_NS 1000000

typedef struct loom__rsite { /* waiting per (state, call name) */
  uint8_t state;
  uint32_t name;
  int64_t total;
  uint64_t calls;         /* calls that waited */
} loom__rsite;

typedef struct loom__ranks {
  loom__strtab strs;
  loom__rkev *ev;
  size_t nev, cap_ev, file0;  /* file0: first event of the input being read */
  int input;                  /* inputs read so far */
  uint32_t k[16];             /* key ids in the current input's strings (ranks.c) */
  size_t kstrs;
  loom__map name_marks;       /* name id + 1 -> listed marks + 1 (current input) */
  uint64_t last_name;         /* name id + 1 of the last lookup, 0: none */
  unsigned last_marks;
  /* results (loom__ranks_finish) */
  int64_t *rank_id;           /* world rank of each rank index */
  size_t nranks;
  int64_t *step_no;           /* distinct step numbers, ascending */
  size_t nsteps;
  int64_t *step_ns, *wait_ns; /* [rank * nsteps + step]; step_ns -1 when absent */
  int64_t *state_ns;          /* [rank * LOOM__W_COUNT_ + state] */
  int64_t *step_state_ns;     /* [step * LOOM__W_COUNT_ + state] */
  int64_t *comm_ns;           /* per rank: time in communication calls in its steps */
  int64_t *caused_ns;         /* [rank * nsteps + step]: waiting this rank caused */
  int64_t *root_ns;           /* [rank * nsteps + step]: waiting whose chain ends here */
  loom__map waits_for;        /* (step * nranks + waiter) * nranks + root + 1 -> ns */
  int64_t *noise_ns;          /* per rank: waits below the threshold, summed */
  uint64_t noise_waits;
  int64_t wait_threshold_ns;  /* waits shorter than this are noise (0: none) */
  loom__rwait *waits;
  size_t nwaits, cap_waits;
  loom__rsite *sites;
  size_t nsites, cap_sites;
  uint64_t coll_instances, coll_incomplete, messages, unmatched_sends, unmatched_recvs;
  int64_t pace_step;          /* index of the slowest step (max over ranks), -1 */
  int32_t pace_rank;          /* rank index at the root of the most waiting, -1 */
  int oom;
} loom__ranks;

loom__ranks *loom__ranks_new(void);
/* The marks of e (LOOM_RECORD_F_*): its own, or for a trace written before
 * the marks, those the backends' role descriptions list for its name. */
unsigned loom__ranks_marks(loom__ranks *k, const loom_trace *t, const loom__ev *e);
/* The streaming sink's work for one event of the input being read. */
int loom__ranks_event(loom__ranks *k, const loom_trace *t, const loom__ev *e,
                      const loom__targ *args);
/* After an input is read: times to epoch ns, pids to ranks. */
int loom__ranks_end_input(loom__ranks *k, const loom_trace *meta);
/* The rank a trace's metadata names ("rank": a number), else -1. */
int64_t loom__ranks_meta_rank(const loom_trace *t);
/* Reads another input (one rank's trace) with the streaming readers. */
loom_status loom__ranks_read(loom__ranks *k, const char *path);
/* Matching and wait states; 0 or -1 (out of memory). */
int loom__ranks_finish(loom__ranks *k);
void loom__ranks_free(loom__ranks *k);
/* The straggler of step index s: the rank index at the root of the most
 * waiting in it (waits.c, "root cause"), or -1 when nobody waited in it. */
int32_t loom__ranks_straggler(const loom__ranks *k, size_t s);

/* waits.c */
int loom__ranks_waits(loom__ranks *k);

#endif
