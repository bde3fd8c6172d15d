/*
 * analysis.h - post-analysis of a trace (src/analysis, `loom report`).
 *
 * The analysis reads a trace file through the streaming readers, keeps one
 * compact record per event that matters (device work, host calls, ops,
 * ranges), orders them by time with an external sort (runs spill to a
 * temporary file past a memory budget) and computes everything in one pass
 * over that order.  Memory is the sort budget plus the size of the results
 * (names, per-name statistics, in-flight launches), never the trace's size.
 *
 * The report model below is what the text, JSON and HTML writers print; the
 * JSON schema ("loom-report/2") is documented in docs/report.md.
 */
#ifndef LOOM_ANALYSIS_H
#define LOOM_ANALYSIS_H

#include <stdint.h>
#include <stdio.h>

#include "trace/memory.h"
#include "trace/trace.h"
#include "util/util.h"

/* ---- external sort of compact records ----------------------------------- */
typedef struct loom__arec { /* 48 bytes */
  int64_t ts, dur;     /* ns; ts relative to the file's base */
  uint64_t corr;       /* runtime call <-> device work */
  uint64_t bytes;      /* copies and fills: bytes, when the trace says */
  uint32_t name;       /* string id in the trace */
  uint32_t track;      /* track index in the trace */
  uint32_t stream;     /* its "stream" argument (HTA groups by it) */
  uint8_t kind;        /* loom_kind */
  uint8_t cls;         /* LOOM__CLS_* */
  uint8_t hta;         /* LOOM__AREC_HTA_*: HTA's view of the event */
  /* Bits 0-2: the event's LOOM_RECORD_F_* marks (0: none, names decide);
   * bits 3-7: copies: 1 + index of its "direction" value (0: none). */
  uint8_t role;
} loom__arec;
#define LOOM__AREC_DIR_SHIFT 3
#define LOOM__AREC_HTA_GPU 1   /* a GPU event by HTA's rule (it has a stream) */
#define LOOM__AREC_HTA_IDLE 2  /* of a category HTA's idle-time breakdown uses */
#define LOOM__AREC_HTA_STRUCT 4 /* device work by structure (HTA: its name rules only) */
#define LOOM__AREC_LOOSE 8      /* only on a device track: work if the track is a queue */
#define LOOM__AREC_NDIRS 31

/* Device work classes (HTA's kernel types, generalised). */
enum { LOOM__CLS_COMPUTE = 0, LOOM__CLS_COMM = 1, LOOM__CLS_MEMORY = 2 };

typedef struct loom__esort loom__esort;
/* budget: bytes of records kept in memory before a run is spilled. */
loom__esort *loom__esort_new(const loom__strtab *strs, size_t budget);
int loom__esort_add(loom__esort *s, const loom__arec *r);
/* The names records are ordered by from now on: the same ids in another
 * table (a streaming read's mirror is gone after the read, export/pipe.h). */
void loom__esort_names(loom__esort *s, const loom__strtab *strs);
/* Ends input; then loom__esort_next yields records in time order. */
int loom__esort_finish(loom__esort *s);
const loom__arec *loom__esort_next(loom__esort *s);
const char *loom__esort_error(loom__esort *s);
void loom__esort_free(loom__esort *s);

/* ---- quantiles: exact up to a limit, then a log histogram ---------------- */
typedef struct loom__qs {
  uint64_t n;
  int64_t sum, min, max;
  double sumsq;
  int64_t *vals;      /* exact values while n <= LOOM__QS_EXACT */
  size_t nvals, cap;
  uint32_t **hist;    /* octave blocks of counters once past the limit */
} loom__qs;
#define LOOM__QS_EXACT 8192

int loom__qs_add(loom__qs *q, int64_t v);
/* p in [0, 1]: linear interpolation between closest ranks (numpy's
 * default) while exact; after, the same interpolation between the middles
 * of the buckets holding those ranks (relative error < 0.2%). */
double loom__qs_quantile(loom__qs *q, double p);
double loom__qs_mean(const loom__qs *q);
double loom__qs_stddev(const loom__qs *q); /* population */
int loom__qs_exact(const loom__qs *q);
/* Calls fn with each distinct value in ascending order and how many times
 * it came (past the exact limit: each used bucket's middle and count). */
void loom__qs_each(loom__qs *q, void (*fn)(void *ctx, double v, uint64_t count), void *ctx);
void loom__qs_free(loom__qs *q);

/* ---- Holistic Trace Analysis's name lists (hta_names.c) ------------------- */
enum { LOOM__HTA_COMPUTE = 0, LOOM__HTA_COMM = 1, LOOM__HTA_MEMORY = 2, LOOM__HTA_OTHER = 3 };
int loom__hta_kernel_type(const char *name);   /* LOOM__HTA_*, by HTA's name patterns */
int loom__hta_launch_name(const char *name);   /* a launch call of HTA's launch statistics */
int loom__hta_idle_category(const char *cat);  /* a category HTA's idle-time breakdown uses */
/* A call that blocks until device work ends, by the backends' names
 * (report-names.def, SYNC) for traces that do not mark it (analyze.c). */
int loom__sync_name(const char *name);

/* ---- the report ------------------------------------------------------------ */
/* Measures of unions of device work by class: index = bit mask of classes
 * (1 compute, 2 communication, 4 memory); [7] is all work. */
typedef struct loom__umeas {
  int64_t u[8];
} loom__umeas;

typedef struct loom__rq { /* a device queue (stream) */
  int64_t pid, tid;
  uint32_t name;
  uint64_t nwork;
  int64_t first, last, busy, idle_host, idle_other;
} loom__rq;

/* Holistic Trace Analysis figures, by its rules (docs/report.md): one set
 * per trace (HTA's rank), its streams keyed by the events' "stream". */
typedef struct loom__hstream {
  int64_t stream;
  int64_t prev_end;
  int has_prev;
  int64_t idle[3];          /* host_wait, kernel_wait, other */
  uint64_t nidle[3];
  int seen[3];
} loom__hstream;

typedef struct loom__rhta {
  int last_step_dropped;
  uint64_t nevents;
  int64_t first, last;
  loom__umeas m;            /* unions of COMPUTATION, COMMUNICATION, MEMORY */
  int64_t all;              /* union of every GPU event (OTHER too) */
  int rounded;              /* fractional timestamps: events rounded to whole us */
  loom__qs delay;           /* launch_delay */
  uint64_t launches, long_runtime, long_delay, short_kernels;
  loom__hstream *streams;
  size_t nstreams;
} loom__rhta;

#define LOOM__NBUCKETS 120
typedef struct loom__rdev {
  int64_t pid;
  uint32_t name;
  uint64_t nwork, nkernels;
  int64_t first, last;
  int64_t idle_host, idle_other;
  loom__umeas m;            /* kernels, copies, fills, collectives */
  loom__qs launch;          /* device start - launch call start */
  int64_t bucket[LOOM__NBUCKETS];    /* busy ns per timeline bucket */
  int64_t bucket_c[LOOM__NBUCKETS];  /* compute busy ns per bucket */
  size_t q0, nq;            /* its queues: rep->queues[q0 .. q0+nq) */
} loom__rdev;

typedef struct loom__rname { /* per name statistics */
  uint32_t name;
  uint8_t group;            /* LOOM__G_* */
  uint8_t cls;
  uint64_t count;
  int64_t total, self, min, max;
  int64_t dev_time;         /* ranges: device work launched inside */
  uint64_t dev_count;
  uint64_t bytes;           /* transfers */
  loom__qs q;               /* kernels: durations */
} loom__rname;
enum { LOOM__G_KERNEL, LOOM__G_OP, LOOM__G_RANGE, LOOM__G_CALL, LOOM__G_COPY, LOOM__G_FILL,
       LOOM__G_COUNT_ };

typedef struct loom__rstep {
  uint32_t name;
  int64_t ts, dur;
  int64_t dev_time;
  uint64_t dev_count;
} loom__rstep;

typedef struct loom__rcat { uint32_t cat; uint64_t count; } loom__rcat;

typedef struct loom__report {
  loom_trace *meta;         /* strings, tracks, processes, devices */
  const char *path;
  uint64_t nevents, nkept, by_kind[LOOM_KIND_COUNT_];
  int64_t t0, t1;           /* span of every event (relative ns) */
  uint64_t orphan_work;     /* device work with no launch call found */
  uint64_t unclosed;
  loom__rcat *unknown;      /* categories not understood */
  size_t nunknown;
  loom__rdev *devs;
  size_t ndevs;
  loom__rq *queues;
  size_t nqueues;
  loom__rname *names;
  size_t nnames;
  loom__rstep *steps;
  size_t nsteps;
  loom__rhta hta;
  struct loom__ranks *ranks; /* cross-rank figures (ranks.h) */
  struct loom__rcpu *cpu;    /* CPU samples and OS counters (cpu.h) */
  loom__mem *mem;           /* memory events' accounting (trace/memory.h); NULL: none */
  struct loom__cpres *cp;    /* critical paths (critpath.h); NULL when left out */
} loom__report;

/* The text of a string id of the report (its trace's strings). */
static inline const char *loom__report_str(const loom__report *r, uint32_t id) {
  return loom__trace_cstr(r->meta, id);
}

/* One figure of the pass for a caller that wants them one by one (loom
 * diff, diff.c): a host frame as it closes, or device work.  group:
 * LOOM__G_*; name: the trace's string id, tallied as the report tallies
 * it (every step "ProfilerStep#*", copies by direction); step: index in
 * rep->steps of the step it belongs to, -1 for none (HTA's rule: host work
 * by its start, device work by its launch call's); self: host frames' time
 * minus their direct children's, else dur; kind: its loom_kind. */
struct loom__report;
typedef void (*loom__item_fn)(void *ctx, const struct loom__report *rep, int group, uint32_t name,
                              int32_t step, int64_t dur, int64_t self, int kind);

typedef struct loom__report_opts {
  size_t sort_budget;       /* bytes; 0 = default (256 MiB) */
  loom__item_fn on_item;    /* NULL: none */
  void *item_ctx;
  int hta_include_last_step;
  const char *const *more;  /* further inputs, one rank each (cross-rank figures) */
  size_t nmore;
  int64_t wait_threshold_ns; /* 0: LOOM__WAIT_THRESHOLD_NS; < 0: none */
  int no_critical_path;      /* leave the critical path out */
  const char *critical_path_trace; /* write the trace with the paths marked there */
} loom__report_opts;

loom_status loom__analyze(const char *path, const loom__report_opts *o, loom__report **out);
void loom__report_free(loom__report *r);

/* Writers (report.c: the report model of report_model.h, rendered) append
 * to o (a file or memory buffer); top = rows per table, 0 = all. */
struct loom__out;
void loom__report_text(const loom__report *r, struct loom__out *o, size_t top);
void loom__report_json(const loom__report *r, struct loom__out *o, size_t top);
void loom__report_html(const loom__report *r, struct loom__out *o, size_t top);

/* printf onto o, any length. */
void loom__outf(struct loom__out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Shared by the writers: rows of one group sorted by total time (then
 * name); the caller frees.  *n gets the count. */
size_t *loom__report_rows(const loom__report *r, int group, size_t *n, int by_self);
/* HTA's temporal breakdown from its union measures. */
typedef struct loom__hta_temporal {
  int64_t kernel_time, idle, compute, non_compute;
  double idle_pct, compute_pct, non_compute_pct;
  double comm_comp_overlap_pct; /* < 0 when there is no communication */
} loom__hta_temporal;
void loom__hta_temporal_of(const loom__rhta *h, loom__hta_temporal *out);

/* HTA's exclusive kernel-type pieces: measure of the time where exactly the
 * classes in mask (1..7) run, from the union measures. */
int64_t loom__umeas_exact(const loom__umeas *m, unsigned mask);

#endif
