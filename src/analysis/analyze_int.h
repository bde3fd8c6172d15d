/*
 * analyze_int.h - what the files of the analysis pass share (analyze.c:
 * reading and finishing; analyze_walk.c: names, host threads, devices;
 * analyze_hta.c: Holistic Trace Analysis's figures): the pass's state and
 * the union of intervals it measures with.
 */
#ifndef LOOM_ANALYZE_INT_H
#define LOOM_ANALYZE_INT_H

#include <stdint.h>

#include "analysis.h"
#include "base/base.h"
#include "trace/memory.h"
#include "util/util.h"

/* The marks that say what a runtime call is for. */
#define ROLE_MASK (LOOM_RECORD_F_LAUNCH | LOOM_RECORD_F_MEMORY | LOOM_RECORD_F_COMM)

/* What a name is, worked out once per distinct name: NF_LAUNCH and the
 * HTA type are HTA's name lists (hta_names.c), NF_COMM the backends'. */
enum { NF_DONE = 1, NF_STEP = 2, NF_LAUNCH = 4, NF_COMM = 8, NF_HTA_SHIFT = 4 };
#define NF_HTA_TYPE(nf) (((nf) >> NF_HTA_SHIFT) & 3)

/* HTA: an idle gap shorter than this (30 us) between consecutive work on a
 * stream is "kernel_wait"; runtime calls above 50 us and launch delays above
 * 100 us are outliers. */
#define HTA_CONSECUTIVE_NS 30000
#define HTA_RUNTIME_CUTOFF_NS 50000
#define HTA_DELAY_CUTOFF_NS 100000

/* Launch calls stay known after their device work started (a graph launch
 * runs many kernels), and calls like syncs never see any.  Once more than
 * LAUNCH_PRUNE_AT are known, the oldest go: those that began more than 10 s
 * before, then 5 s, ... until half are left.  Device work thus finds its
 * call when fewer than 32768 launches were made after it (a device's
 * queues hold far fewer pending launches). */
#define LAUNCH_HORIZON_NS 10000000000LL
#define LAUNCH_PRUNE_AT (1u << 16)

/* ---- union of intervals arriving in start order -------------------------- */
typedef struct uset {
  int64_t cs, ce, sum;
  int open;
} uset;

/* HTA on a trace with fractional timestamps: each event's start rounded up
 * and its end down to a whole microsecond (of the file's time). */
static inline int64_t ceil_us(int64_t ns) {
  return ns >= 0 ? (ns + 999) / 1000 * 1000 : -(-ns / 1000 * 1000);
}

/* Adds [s, e).  Returns 1 when it starts a new merged interval after an
 * earlier one (*gap_from = where the gap began), else 0. */
static inline int uset_add(uset *u, int64_t s, int64_t e, int64_t *gap_from) {
  if (u->open && s <= u->ce) {
    if (e > u->ce) u->ce = e;
    return 0;
  }
  int had = u->open;
  if (had) {
    u->sum += u->ce - u->cs;
    *gap_from = u->ce;
  }
  u->cs = s;
  u->ce = e;
  u->open = 1;
  return had;
}

static inline int64_t uset_total(const uset *u) { return u->sum + (u->open ? u->ce - u->cs : 0); }

/* Widens a window [first, last) counted by n to hold [s, e). */
static inline void widen(int64_t *first, int64_t *last, uint64_t *n, int64_t s, int64_t e) {
  if (!*n || s < *first) *first = s;
  if (!*n || e > *last) *last = e;
  ++*n;
}

/* ---- state of the pass ---------------------------------------------------- */
typedef struct frame {
  int64_t ts, end, child;
  uint32_t name;
  uint8_t kind;
  int32_t step;     /* the step it began in (index in rep->steps) or -1 */
} frame;

typedef struct hstate { /* a host thread */
  frame *st;
  size_t n, cap;
} hstate;

typedef struct dstate { /* a device */
  uset u[8];
} dstate;

typedef struct qstate { /* a device queue */
  uset u;
} qstate;

typedef struct launch {
  uint64_t corr;    /* its correlation id; 0 once forgotten (a free slot) */
  int64_t ts, dur;
  uint32_t stack;   /* enclosing user range names (stacks[]) */
  int32_t step;     /* index in rep->steps or -1 */
  uint8_t is_launch; /* marked launch or memory call, or by its name */
  uint8_t timed;     /* counts in loom's launch latency: a launch, or unmarked */
  uint8_t memory;    /* marked memory call: what it launched is a copy or fill */
  uint8_t call;      /* a runtime or driver call (device work by structure follows it) */
} launch;

/* An idle gap [gap, s) ended by work whose launch call is l: the part
 * before the call began was waiting for the host. */
static inline void split_idle(const launch *l, int64_t gap, int64_t s, int64_t *host,
                              int64_t *other) {
  int64_t h = l ? l->ts - gap : 0;
  h = h < 0 ? 0 : h > s - gap ? s - gap : h;
  *host += h;
  *other += s - gap - h;
}

typedef struct an {
  loom__report *rep;
  loom__esort *es;
  const loom__report_opts *o;
  uint8_t *nfl;           /* per name id: NF_* (names are classified once) */
  uint32_t step_all;      /* "ProfilerStep#*" */
  size_t nnfl;
  loom__map unknown;      /* category id -> count */
  loom__map queue;        /* device track + 1 -> 1: it holds device work (a queue) */
  loom__map loose;        /* (device track << 32 | category id) + 1 -> count of its loose ranges */
  loom__map step_names;   /* distinct step names (HTA's rule) */
  int64_t last_step_ts, last_step_end;
  int64_t last_end_step[2]; /* ts and dur of the step that ends last */
  int fractional;         /* a timestamp is not a whole us (HTA rounds every event) */
  loom__map idle_cat;     /* category id + 1 -> 1 + (HTA's idle-time breakdown uses it) */
  loom__map flow_end;     /* hash of (track, ts) of a call -> work flow's end -> its id */
  uint32_t cat_ac2g;
  uint32_t bytes_key, cat_trace, cat_marker;
  size_t nstrs;           /* strings in the trace when keys were looked up */
  /* pass */
  loom_trace *t;
  hstate *hs;             /* per track */
  int32_t *qof;           /* per track: queue index or -1 */
  loom__map track_of;     /* hash of (pid, track name) -> track + 1, made at the first lane */
  int tracks_mapped;
  loom__map dev_of;       /* pid + 1 -> device index + 1 */
  dstate *ds;
  size_t nds, cap_ds;
  qstate *qs;
  size_t nqs, cap_qs, cap_devs, cap_queues, cap_names, cap_steps;
  loom__map name_of;      /* group << 32 | name -> index + 1 */
  launch *ls;
  size_t nls, cap_ls;
  uint32_t *free_ls;
  size_t nfree, cap_free;
  loom__map inflight;     /* correlation -> launch index + 1 */
  struct lq { uint64_t corr; int64_t ts; uint32_t idx; } *lq; /* launches as they came
                                                                 (time order), their slots in ls */
  size_t lq_head, nlq, cap_lq;
  uint32_t *stk;          /* stack lists: [len, names...] */
  size_t nstk, cap_stk;
  loom__map stk_of;       /* hash -> offset + 1 */
  uint32_t *stk_names;    /* scratch: the distinct names on one stack */
  size_t cap_stk_names;
  loom__map stk_seen;     /* scratch for deep stacks: name + 1 -> stk_gen */
  uint64_t stk_gen;
  int32_t cur_step;
  int hta_filter;
  uset hu[8];             /* HTA's unions per class combination */
  uset hall;              /* HTA: union of every GPU event */
  loom__map hstream_of;   /* stream + 2 -> index + 1 */
  size_t cap_hstreams;
  uint32_t stream_key;
  uint32_t dir_key;       /* "direction" */
  uint32_t dirs[LOOM__AREC_NDIRS]; /* distinct direction values (string ids) */
  unsigned ndirs;
  loom__mem_keys mkeys;    /* memory events' argument keys */
  struct mspace { int64_t device; uint32_t kind, call; uint16_t src; } *msp; /* memory
                             records' (device, kind, producer, call) */
  size_t nmsp, cap_msp, last_msp;
  uint64_t mseq;          /* memory records made: their order in the file */
  uint32_t wait_key;      /* "wait_on_stream": a sync record's waited queue */
  struct loom__cp *cp;    /* the critical path (critpath.h), NULL when not asked */
  int oom;
} an;


/* analyze.c: what a record is, by its marks or its name's flags (NF_*). */
int loom__an_is_launch_call(const loom__arec *r, unsigned nf);
int loom__an_is_comm_work(const loom__arec *r, unsigned nf);
unsigned loom__an_name_flags(an *a, const loom_trace *t, uint32_t name);

/* analyze_walk.c: the pass over records in time order. */
void loom__an_host_event(an *a, const loom__arec *r);
void loom__an_device_event(an *a, const loom__arec *r);
/* A marker record by structure: device work when a call has its
 * correlation id (written to *out), else a runtime call. */
const loom__arec *loom__an_resolve(an *a, const loom__arec *r, loom__arec *out);
/* Closes a host range left open at the end of the trace. */
void loom__an_finalize(an *a, const frame *f);
/* Adds [s, e) to a device's utilisation buckets over the report's span. */
void loom__an_add_buckets(const loom__report *rep, int64_t *b, int64_t s, int64_t e);

/* The step a host event at ts falls in (index in rep->steps), -1 for none;
 * calls come in time order. */
int32_t loom__an_step_at(an *a, int64_t ts);

/* analyze_mem.c: memory events.  A memory event becomes one record: ts;
 * dur -(1 + its order in the file), so that it sorts after every range
 * beginning at its time and memory records keep the file's order among
 * themselves; corr its address; bytes; name and stream the low and high
 * halves of a pool's reserved bytes (names of memory records are never
 * compared: their dur differs); cls and hta the low and high bytes of its
 * (device, kind, producer, call) in a->msp; role its LOOM__MEM_* flags. */
int loom__an_keep_memory(an *a, const loom_trace *t, const loom__ev *e, const loom__targ *args);
/* One memory record of the pass: the op, range and step around it. */
void loom__an_memory(an *a, const loom__arec *r);

/* analyze_hta.c: one of HTA's GPU events (it has a stream). */
void loom__an_hta_event(an *a, const loom__arec *r);

#endif
