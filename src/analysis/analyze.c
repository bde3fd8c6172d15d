/*
 * analyze.c - the analysis pass behind `loom report`.
 *
 * Reading: the streaming readers hand every event to on_event(), which
 * counts it and keeps a 48-byte record of the complete events the report
 * uses.  Records go through the external sort (esort.c).  The pass then
 * walks them in time order, so every figure is computed with state that is
 * either per name, per device, per queue or per host thread (an op stack),
 * plus the launch calls whose device work has not started yet.
 *
 * Definitions (docs/report.md has them for users):
 *  - device work: kernels, copies, fills and collectives on a device track;
 *    busy = measure of the union of their intervals; window = first start to
 *    last end; idle = window - busy, split at each gap into "waiting for the
 *    host" (from the gap's start until the launch call of the work that
 *    ends the gap began) and "other";
 *  - launch latency: device start - start of the host call with the same
 *    correlation id;
 *  - overlap: measures of intersections of the unions per class, by
 *    inclusion-exclusion over the unions of every combination of classes;
 *  - self time of a host range: its duration minus its direct children's;
 *  - device time of a user range: the durations of device work whose launch
 *    call ran inside the range (each work item counted once per name).
 * The Holistic Trace Analysis figures use HTA's own rules, documented with
 * the code below that reproduces them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "cpu.h"
#include "core/core.h"
#include "ranks.h"

/* ---- what an event is for ------------------------------------------------
 * A trace written by loom carries the marks its backend gave each record
 * (LOOM_RECORD_F_*, "loom_role" in the files) and copies carry a
 * "direction": any runtime is understood without loom knowing its names.
 * Events without a mark (traces of other tools, Kineto's) are judged by
 * the names runtimes' backends list (backends/x/report-names.def). */
enum { N_LAUNCH, N_LAUNCH_MEMORY, N_COMM_PREFIX, N_COMM_SUBSTR };
static const struct { int kind; const char *s; } rule_names[] = {
#define LOOM_REPORT_NAME(k, str) {N_##k, str},
#define LOOM_REPORT_ROLES(str, marks) /* marks of older traces' calls: ranks.c */
#include "report_names.h"
#undef LOOM_REPORT_ROLES
#undef LOOM_REPORT_NAME
    {-1, NULL}};

static int is_comm_name(const char *n) {
  for (size_t i = 0; rule_names[i].s; i++) {
    if (rule_names[i].kind == N_COMM_PREFIX && !strncmp(n, rule_names[i].s, strlen(rule_names[i].s)))
      return 1;
    if (rule_names[i].kind == N_COMM_SUBSTR && strstr(n, rule_names[i].s)) return 1;
  }
  return 0;
}

static int is_step_name(const char *n) { return !strncmp(n, "ProfilerStep#", 13); }

#define ROLE_MASK (LOOM_RECORD_F_LAUNCH | LOOM_RECORD_F_MEMORY | LOOM_RECORD_F_COMM)
/* nf: the name's NF_* flags below. */
static int is_launch_call(const loom__arec *r, unsigned nf);
static int is_comm_work(const loom__arec *r, unsigned nf);

/* What a name is, worked out once per distinct name: NF_LAUNCH and the
 * HTA type are HTA's name lists (hta_names.c), NF_COMM the backends'. */
enum { NF_DONE = 1, NF_STEP = 2, NF_LAUNCH = 4, NF_COMM = 8, NF_HTA_SHIFT = 4 };
#define NF_HTA_TYPE(nf) (((nf) >> NF_HTA_SHIFT) & 3)
struct an;
static unsigned name_flags(struct an *a, const loom_trace *t, uint32_t name);

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
static int64_t ceil_us(int64_t ns) { return ns >= 0 ? (ns + 999) / 1000 * 1000 : -(-ns / 1000 * 1000); }

/* Adds [s, e).  Returns 1 when it starts a new merged interval after an
 * earlier one (*gap_from = where the gap began), else 0. */
static int uset_add(uset *u, int64_t s, int64_t e, int64_t *gap_from) {
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

static int64_t uset_total(const uset *u) { return u->sum + (u->open ? u->ce - u->cs : 0); }

/* Widens a window [first, last) counted by n to hold [s, e). */
static void widen(int64_t *first, int64_t *last, uint64_t *n, int64_t s, int64_t e) {
  if (!*n || s < *first) *first = s;
  if (!*n || e > *last) *last = e;
  ++*n;
}

/* ---- state of the pass ---------------------------------------------------- */
typedef struct frame {
  int64_t ts, end, child;
  uint32_t name;
  uint8_t kind;
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
static void split_idle(const launch *l, int64_t gap, int64_t s, int64_t *host, int64_t *other) {
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
  struct lq { uint64_t corr; int64_t ts; } *lq; /* launches as they came (time order) */
  size_t lq_head, nlq, cap_lq;
  uint32_t *stk;          /* stack lists: [len, names...] */
  size_t nstk, cap_stk;
  loom__map stk_of;       /* hash -> offset + 1 */
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
  int oom;
} an;

static int is_launch_call(const loom__arec *r, unsigned nf) {
  unsigned role = r->role & ROLE_MASK;
  return role ? (role & (LOOM_RECORD_F_LAUNCH | LOOM_RECORD_F_MEMORY)) != 0 : (nf & NF_LAUNCH) != 0;
}

static int is_comm_work(const loom__arec *r, unsigned nf) {
  unsigned role = r->role & ROLE_MASK;
  return r->kind == LOOM_KIND_COLLECTIVE || (role ? (role & LOOM_RECORD_F_COMM) != 0 : (nf & NF_COMM) != 0);
}

/* The code of a copy's "direction" value (1 + its index in a->dirs), or 0
 * when there is none or more distinct values than the code holds. */
static unsigned direction_code(an *a, const loom__targ *args, uint16_t nargs) {
  for (uint16_t i = 0; a->dir_key && i < nargs; i++) {
    if (args[i].key != a->dir_key || args[i].type != LOOM_ARG_STRING) continue;
    for (unsigned k = 0; k < a->ndirs; k++)
      if (a->dirs[k] == args[i].v.s) return k + 1;
    if (a->ndirs == LOOM__AREC_NDIRS) return 0;
    a->dirs[a->ndirs++] = args[i].v.s;
    return a->ndirs;
  }
  return 0;
}

static unsigned name_flags(an *a, const loom_trace *t, uint32_t name) {
  if (name >= a->nnfl) {
    size_t n = a->nnfl ? a->nnfl : 1024;
    while (n <= name) n *= 2;
    uint8_t *p = realloc(a->nfl, n);
    if (!p) {
      a->oom = 1;
      return 0;
    }
    memset(p + a->nnfl, 0, n - a->nnfl);
    a->nfl = p;
    a->nnfl = n;
  }
  if (!a->nfl[name]) {
    const char *s = loom__strtab_get(&t->strs, name);
    a->nfl[name] = (uint8_t)(NF_DONE | (is_step_name(s) ? NF_STEP : 0) | (loom__hta_launch_name(s) ? NF_LAUNCH : 0) |
                             (is_comm_name(s) ? NF_COMM : 0) | loom__hta_kernel_type(s) << NF_HTA_SHIFT);
  }
  return a->nfl[name];
}

/* ---- reading -------------------------------------------------------------- */
static int count_unknown(an *a, uint32_t cat) {
  uint64_t *c = loom__map_get(&a->unknown, (uint64_t)cat + 1);
  if (c) (*c)++;
  else if (loom__map_put(&a->unknown, (uint64_t)cat + 1, 1)) return -1;
  return 0;
}

static uint64_t flow_key(uint32_t track, int64_t ts) {
  int64_t k[2] = {track, ts};
  return loom__hash_bytes(k, sizeof k) | 1;
}

/* Flow ends (Kineto's "ac2g" arrows from a runtime call to its device
 * work, loom's own): the slice starting where one ends is linked to a call
 * whose correlation id is the flow's id. */
static int on_flow(void *ctx, const loom_trace *t, uint64_t id, int64_t ts, uint32_t track, char ph,
                   int bind_enclosing, uint32_t name, uint32_t cat) {
  (void)bind_enclosing, (void)name;
  an *a = ctx;
  if (ts % 1000) a->fractional = 1; /* HTA's frame holds the flows' times too */
  if (!a->cat_ac2g) a->cat_ac2g = loom__strtab_find(&t->strs, "ac2g", 4);
  /* only call -> device work arrows ("ac2g", Kineto's and loom's name);
   * each is forgotten once the event it ends on is read */
  if (ph == 's' || !id || !cat || cat != a->cat_ac2g) return 0;
  return loom__map_put(&a->flow_end, flow_key(track, ts), id) ? -1 : 0;
}

/* An event of a category that names no kind (another runtime's own, such
 * as MTIA's "mtia_ccp_events") is device work by its structure: it lies on
 * a device process, or it has a stream, or a flow from a call ends on it.
 * A copy when it has a "direction", else a kernel.  One that only has a
 * correlation id stays a candidate (kind marker) until the pass sees
 * whether a runtime call with that id came before it (resolve()).
 * Returns -1 on error, 1 when the event is not understood (counted), else 0. */
static int by_structure(an *a, const loom_trace *t, const loom__ev *e, const loom__targ *args,
                        int has_stream, loom__arec *r) {
  int dev = t->tracks[e->track].device != LOOM_DEVICE_HOST || (has_stream && r->hta);
  uint64_t key = a->flow_end.n ? flow_key(e->track, e->ts) : 0;
  uint64_t *fid = key ? loom__map_get(&a->flow_end, key) : NULL;
  if (fid) {
    if (!r->corr) r->corr = *fid;
    loom__map_del(&a->flow_end, key);
    dev = 1;
  }
  if (!dev && !r->corr) return count_unknown(a, e->cat) ? -1 : 1;
  if (!dev) return 0;
  r->kind = LOOM_KIND_KERNEL;
  r->hta |= LOOM__AREC_HTA_STRUCT;
  for (uint16_t i = 0; a->dir_key && i < e->nargs; i++)
    if (args[i].key == a->dir_key) r->kind = LOOM_KIND_MEMCPY;
  return 0;
}

static int on_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  an *a = ctx;
  loom__report *rep = a->rep;
  if (!a->es && !(a->es = loom__esort_new(&t->strs, a->o->sort_budget))) return -1;
  if (t->strs.n != a->nstrs) { /* look for keys that were missing again */
    a->nstrs = t->strs.n;
    if (!a->bytes_key) a->bytes_key = loom__strtab_find(&t->strs, "bytes", 5);
    if (!a->stream_key) a->stream_key = loom__strtab_find(&t->strs, "stream", 6);
    if (!a->dir_key) a->dir_key = loom__strtab_find(&t->strs, "direction", 9);
    if (!a->cat_trace) a->cat_trace = loom__strtab_find(&t->strs, "Trace", 5);
    if (!a->cat_marker) a->cat_marker = loom__strtab_find(&t->strs, "marker", 6);
  }
  loom__ev ek;
  /* Older traces' calls of a runtime's own category (no marks in the file)
   * get them from its role description (ranks.c). */
  if (e->kind == LOOM_KIND_MARKER && rep->ranks) {
    ek = *e;
    ek.kind = (uint8_t)loom__kind_of_marks(LOOM_KIND_MARKER, loom__ranks_marks(rep->ranks, t, e),
                                           e->ph == LOOM__PH_INSTANT);
    e = &ek;
  }
  rep->nevents++;
  if (e->ts % 1000) a->fractional = 1;
  if (a->flow_end.n && e->kind != LOOM_KIND_MARKER && e->ph == LOOM__PH_COMPLETE &&
      e->track < t->ntracks && t->tracks[e->track].device != LOOM_DEVICE_HOST)
    loom__map_del(&a->flow_end, flow_key(e->track, e->ts)); /* known device work: not needed */
  if (e->kind < LOOM_KIND_COUNT_) rep->by_kind[e->kind]++;
  if (e->flags & LOOM__EV_UNCLOSED) rep->unclosed++;
  if (e->ts < rep->t0) rep->t0 = e->ts;
  if (e->ts + e->dur > rep->t1) rep->t1 = e->ts + e->dur;
  if (rep->ranks && loom__ranks_event(rep->ranks, t, e, args)) return -1; /* cross-rank state */
  if ((e->kind == LOOM_KIND_SAMPLE || e->kind == LOOM_KIND_COUNTER) && loom__cpu_event(rep->cpu, t, e, args))
    return -1;
  if (e->ph != LOOM__PH_COMPLETE) return 0;
  switch (e->kind) {
  case LOOM_KIND_MARKER:
    if (e->cat && (e->cat == a->cat_trace || e->cat == a->cat_marker)) return 0;
    break; /* device work by its structure? (by_structure) */
  case LOOM_KIND_INSTANT:
  case LOOM_KIND_COUNTER:
  case LOOM_KIND_OVERHEAD:
    return 0;
  default:
    break;
  }
  unsigned nf = name_flags(a, t, e->name);
  if ((e->kind == LOOM_KIND_USER_RANGE || e->kind == LOOM_KIND_CPU_OP) && (nf & NF_STEP)) {
    if (!loom__map_get(&a->step_names, e->name) && loom__map_put(&a->step_names, e->name, 1))
      return -1;
    if (e->ts > a->last_step_ts) a->last_step_ts = e->ts;
    if (e->ts + e->dur > a->last_step_end) {
      a->last_step_end = e->ts + e->dur;
      a->last_end_step[0] = e->ts;
      a->last_end_step[1] = e->dur;
    }
  }
  loom__arec r = {.ts = e->ts, .dur = e->dur < 0 ? 0 : e->dur, .corr = e->correlation,
                  .name = e->name, .track = e->track, .kind = e->kind,
                  .role = (uint8_t)(LOOM__EV_ROLE_OF(e) & ROLE_MASK)};
  /* HTA's GPU events: whatever has a "stream" other than -1; loom also
   * counts device work that has no stream argument at all, on its queue. */
  int has_stream = 0;
  for (uint16_t i = 0; a->stream_key && i < e->nargs; i++)
    if (args[i].key == a->stream_key && args[i].type != LOOM_ARG_STRING &&
        args[i].type != LOOM_ARG_DOUBLE) {
      has_stream = 1;
      r.stream = (uint32_t)args[i].v.i;
      r.hta = args[i].v.i != -1;
    }
  if (e->kind == LOOM_KIND_MARKER) {
    int st = by_structure(a, t, e, args, has_stream, &r);
    if (st) return st < 0 ? -1 : 0;
  }
  /* Device work of a known kind without a stream joins HTA on its queue;
   * device work by structure only with a stream, as in HTA. */
  if (!has_stream && loom__kind_on_device(e->kind)) {
    r.stream = (uint32_t)t->tracks[e->track].tid;
    r.hta = 1;
  }
  if (r.hta || r.kind == LOOM_KIND_MARKER) {
    uint64_t *ic = loom__map_get(&a->idle_cat, (uint64_t)e->cat + 1);
    if (!ic) {
      uint64_t v = 1 + (uint64_t)loom__hta_idle_category(e->cat ? loom__strtab_get(&t->strs, e->cat) : NULL);
      if (loom__map_put(&a->idle_cat, (uint64_t)e->cat + 1, v)) return -1;
      ic = loom__map_get(&a->idle_cat, (uint64_t)e->cat + 1);
    }
    if (*ic == 2) r.hta |= LOOM__AREC_HTA_IDLE;
  }
  if (r.kind == LOOM_KIND_MARKER) r.role |= (uint8_t)(direction_code(a, args, e->nargs) << LOOM__AREC_DIR_SHIFT);
  if (r.kind == LOOM_KIND_MEMCPY || r.kind == LOOM_KIND_MEMSET) {
    r.cls = LOOM__CLS_MEMORY;
    for (uint16_t i = 0; i < e->nargs; i++)
      if (args[i].key == a->bytes_key && a->bytes_key)
        r.bytes = args[i].type == LOOM_ARG_DOUBLE ? (uint64_t)args[i].v.d : args[i].v.u;
    r.role |= (uint8_t)(direction_code(a, args, e->nargs) << LOOM__AREC_DIR_SHIFT);
  } else if (r.kind == LOOM_KIND_COLLECTIVE || (r.kind == LOOM_KIND_KERNEL && is_comm_work(&r, nf))) {
    r.cls = LOOM__CLS_COMM;
  }
  rep->nkept++;
  return loom__esort_add(a->es, &r);
}

/* ---- per-name statistics -------------------------------------------------- */
static loom__rname *rname(an *a, int group, uint32_t name) {
  uint64_t key = (uint64_t)group << 32 | name;
  uint64_t *i = loom__map_get(&a->name_of, key);
  if (i) return &a->rep->names[*i - 1];
  loom__rname z;
  memset(&z, 0, sizeof z);
  z.name = name;
  z.group = (uint8_t)group;
  loom__report *rep = a->rep;
  if (LOOM__PUSH(rep->names, rep->nnames, a->cap_names, z) ||
      loom__map_put(&a->name_of, key, rep->nnames)) {
    a->oom = 1;
    return NULL;
  }
  return &rep->names[rep->nnames - 1];
}

static void add_dur(loom__rname *n, int64_t dur) {
  if (!n->count || dur < n->min) n->min = dur;
  if (!n->count || dur > n->max) n->max = dur;
  n->count++;
  n->total += dur;
}

/* A copy's direction: its "direction" argument, else from its name: "HtoD"
 * from "Memcpy HtoD (Pageable -> Device)", "CopyHostToDevice", ... */
static uint32_t direction(an *a, const loom__arec *r) {
  unsigned code = r->role >> LOOM__AREC_DIR_SHIFT;
  if (code) return a->dirs[code - 1];
  const char *name = loom__trace_cstr(a->t, r->name);
  static const char *longs[][2] = {{"HostToDevice", "HtoD"}, {"DeviceToHost", "DtoH"},
                                   {"DeviceToDevice", "DtoD"}, {"HostToHost", "HtoH"},
                                   {"PeerToPeer", "PtoP"}};
  for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++)
    if (strstr(name, longs[i][0])) return loom__trace_str(a->t, longs[i][1]);
  for (const char *p = name; p[0] && p[1] && p[2] && p[3]; p++)
    if (p[0] >= 'A' && p[0] <= 'Z' && p[1] == 't' && p[2] == 'o' && p[3] >= 'A' && p[3] <= 'Z' &&
        (p == name || p[-1] == ' ') && (!p[4] || p[4] == ' ')) {
      char d[5] = {p[0], 't', 'o', p[3], 0};
      return loom__trace_str(a->t, d);
    }
  return loom__trace_str(a->t, "other");
}

/* ---- host threads ---------------------------------------------------------- */
/* The name a host range is tallied under: every step as one
 * "ProfilerStep#*" row (the steps section lists them one by one). */
static uint32_t tally_name(an *a, uint32_t name) {
  if (!(name_flags(a, a->t, name) & NF_STEP)) return name;
  if (!a->step_all) a->step_all = loom__trace_str(a->t, "ProfilerStep#*");
  return a->step_all;
}

static void finalize(an *a, const frame *f) {
  int g = f->kind == LOOM_KIND_CPU_OP ? LOOM__G_OP
        : f->kind == LOOM_KIND_USER_RANGE ? LOOM__G_RANGE : LOOM__G_CALL;
  loom__rname *n = rname(a, g, g == LOOM__G_CALL ? f->name : tally_name(a, f->name));
  if (!n) return;
  int64_t dur = f->end - f->ts;
  add_dur(n, dur);
  n->self += dur - f->child > 0 ? dur - f->child : 0;
}

/* Interns the distinct user range names on the stack; returns its offset+1
 * in a->stk, 0 when there is none. */
static uint32_t stack_id(an *a, const hstate *h) {
  uint32_t names[64];
  uint32_t n = 0;
  for (size_t i = 0; i < h->n && n < 64; i++) {
    if (h->st[i].kind != LOOM_KIND_USER_RANGE) continue;
    uint32_t k = 0, nm = tally_name(a, h->st[i].name);
    while (k < n && names[k] != nm) k++;
    if (k == n) names[n++] = nm;
  }
  if (!n) return 0;
  uint64_t hash = loom__hash_bytes(names, n * sizeof *names) | 1;
  for (;; hash++) { /* linear probing over hash values on collision */
    uint64_t *o = loom__map_get(&a->stk_of, hash);
    if (!o) break;
    const uint32_t *s = &a->stk[*o - 1];
    if (s[0] == n && !memcmp(s + 1, names, n * sizeof *names)) return (uint32_t)*o;
  }
  size_t off = a->nstk;
  if (loom__grow((void **)&a->stk, &a->cap_stk, a->nstk + n + 1, sizeof *a->stk)) {
    a->oom = 1;
    return 0;
  }
  a->stk[a->nstk++] = n;
  memcpy(&a->stk[a->nstk], names, n * sizeof *names);
  a->nstk += n;
  if (loom__map_put(&a->stk_of, hash, off + 1)) a->oom = 1;
  return (uint32_t)off + 1;
}

/* The known launch of an entry of a->lq, or NULL when the entry is stale
 * (its correlation was pruned, or came again later: a later entry stands). */
static uint64_t *lq_live(an *a, const struct lq *q) {
  uint64_t *li = loom__map_get(&a->inflight, q->corr);
  return li && a->ls[*li - 1].ts == q->ts ? li : NULL;
}

/* Drops the entries before lq_head and the stale ones once they are most of
 * a->lq (each known launch has one live entry, its latest time): its length
 * stays within twice the known launches, plus 4096; amortised O(1). */
static void lq_compact(an *a) {
  int used_up = a->lq_head >= 4096 && a->lq_head >= a->nlq / 2;
  int stale = a->nlq - a->lq_head > 2 * a->inflight.n + 4096;
  if (!used_up && !stale) return;
  size_t k = 0;
  for (size_t i = a->lq_head; i < a->nlq; i++)
    if (lq_live(a, &a->lq[i])) a->lq[k++] = a->lq[i];
  a->nlq = k;
  a->lq_head = 0;
}

/* Forgets launches that began more than 10 s before now, then 5 s, ... until
 * half are left.  They came in time order, so each horizon's are the front
 * of a->lq: no scan of the map. */
static void prune_launches(an *a, int64_t now) {
  int64_t horizon = LAUNCH_HORIZON_NS;
  while (a->inflight.n > LAUNCH_PRUNE_AT / 2 && horizon > 1000) {
    for (; a->lq_head < a->nlq; a->lq_head++) {
      const struct lq *q = &a->lq[a->lq_head];
      uint64_t *li = lq_live(a, q);
      if (!li) continue;
      if (q->ts >= now - horizon) break;
      uint32_t idx = (uint32_t)(*li - 1);
      loom__map_del(&a->inflight, q->corr);
      if (LOOM__PUSH(a->free_ls, a->nfree, a->cap_free, idx)) a->oom = 1;
    }
    horizon /= 2;
  }
}

static void host_event(an *a, const loom__arec *r) {
  hstate *h = &a->hs[r->track];
  int64_t end = r->ts + r->dur;
  while (h->n && h->st[h->n - 1].end <= r->ts) finalize(a, &h->st[--h->n]);
  if (h->n && end <= h->st[h->n - 1].end) h->st[h->n - 1].child += r->dur;
  frame f = {r->ts, end, 0, r->name, r->kind};
  if (LOOM__PUSH(h->st, h->n, h->cap, f)) a->oom = 1;
  loom__report *rep = a->rep;
  unsigned nf = name_flags(a, a->t, r->name);
  if ((r->kind == LOOM_KIND_USER_RANGE || r->kind == LOOM_KIND_CPU_OP) && (nf & NF_STEP)) {
    loom__rstep s = {r->name, r->ts, r->dur, 0, 0};
    if (LOOM__PUSH(rep->steps, rep->nsteps, a->cap_steps, s)) a->oom = 1;
    else if (loom__cpu_slice(rep->cpu, LOOM__CPU_STEP, (uint32_t)rep->nsteps - 1, r->track, r->ts, r->dur))
      a->oom = 1;
  }
  if ((r->kind == LOOM_KIND_USER_RANGE || r->kind == LOOM_KIND_CPU_OP) &&
      loom__cpu_slice(rep->cpu, r->kind == LOOM_KIND_CPU_OP ? LOOM__G_OP : LOOM__G_RANGE, tally_name(a, r->name),
                      r->track, r->ts, r->dur))
    a->oom = 1;
  if (!r->corr || r->kind == LOOM_KIND_CPU_OP || r->kind == LOOM_KIND_USER_RANGE) return;
  /* A host call with a correlation id: device work may follow. */
  while (a->cur_step + 1 < (int32_t)rep->nsteps && rep->steps[a->cur_step + 1].ts <= r->ts)
    a->cur_step++;
  int32_t step = -1;
  if (a->cur_step >= 0) {
    const loom__rstep *s = &rep->steps[a->cur_step];
    if (r->ts >= s->ts && r->ts < s->ts + s->dur) step = a->cur_step;
  }
  launch l = {r->ts, r->dur, stack_id(a, h), step, (uint8_t)is_launch_call(r, nf),
              (uint8_t)(!(r->role & ROLE_MASK) || is_launch_call(r, nf)),
              (uint8_t)((r->role & LOOM_RECORD_F_MEMORY) != 0),
              (uint8_t)(r->kind == LOOM_KIND_RUNTIME || r->kind == LOOM_KIND_DRIVER)};
  uint64_t *old = loom__map_get(&a->inflight, r->corr);
  if (old) { /* the same id again: it stands for the later call */
    int moved = a->ls[*old - 1].ts != l.ts;
    a->ls[*old - 1] = l;
    if (moved && LOOM__PUSH(a->lq, a->nlq, a->cap_lq, ((struct lq){r->corr, r->ts}))) a->oom = 1;
    lq_compact(a);
    return;
  }
  if (LOOM__PUSH(a->lq, a->nlq, a->cap_lq, ((struct lq){r->corr, r->ts}))) {
    a->oom = 1;
    return;
  }
  uint32_t idx;
  if (a->nfree) idx = a->free_ls[--a->nfree];
  else if (LOOM__PUSH(a->ls, a->nls, a->cap_ls, l)) { a->oom = 1; return; }
  else idx = (uint32_t)a->nls - 1;
  a->ls[idx] = l;
  if (loom__map_put(&a->inflight, r->corr, idx + 1)) a->oom = 1;
  if (a->inflight.n > LAUNCH_PRUNE_AT) prune_launches(a, r->ts);
  lq_compact(a);
}

/* ---- devices ---------------------------------------------------------------- */
static void add_buckets(const loom__report *rep, int64_t *b, int64_t s, int64_t e) {
  int64_t span = rep->t1 - rep->t0;
  if (span <= 0 || e <= s) return;
  for (int64_t x = s; x < e;) {
    int64_t i = (int64_t)((__int128)(x - rep->t0) * LOOM__NBUCKETS / span);
    if (i >= LOOM__NBUCKETS) i = LOOM__NBUCKETS - 1;
    int64_t be = rep->t0 + (int64_t)((__int128)(i + 1) * span / LOOM__NBUCKETS);
    if (i == LOOM__NBUCKETS - 1 || be > e) be = e;
    if (be <= x) be = x + 1 > e ? e : x + 1;
    b[i] += be - x;
    x = be;
  }
}

static loom__rdev *device(an *a, int64_t pid, dstate **ds) {
  loom__report *rep = a->rep;
  uint64_t *i = loom__map_get(&a->dev_of, (uint64_t)pid + 1);
  if (!i) {
    loom__rdev d;
    memset(&d, 0, sizeof d);
    d.pid = pid;
    loom__proc *p = loom__trace_proc(a->t, pid);
    d.name = p ? p->name : 0;
    dstate z;
    memset(&z, 0, sizeof z);
    if (LOOM__PUSH(rep->devs, rep->ndevs, a->cap_devs, d) ||
        LOOM__PUSH(a->ds, a->nds, a->cap_ds, z) ||
        loom__map_put(&a->dev_of, (uint64_t)pid + 1, rep->ndevs)) {
      a->oom = 1;
      return NULL;
    }
    i = loom__map_get(&a->dev_of, (uint64_t)pid + 1);
  }
  *ds = &a->ds[*i - 1];
  return &rep->devs[*i - 1];
}

static uint64_t track_key(int64_t pid, const char *name, size_t len) {
  return loom__hash_u64(loom__hash_bytes(name, len) ^ (uint64_t)pid);
}

/* The queue a track belongs to: a track named "<queue> lane <k>" on the
 * process of a track named "<queue>" is another lane of that queue (a
 * backend puts commands of one queue that run at once on lanes, since
 * overlapping slices on one track are dropped by trace viewers:
 * docs/writing-a-backend.md), and its work counts with the queue's.  Else
 * the track itself. */
static uint32_t lane_base(an *a, uint32_t track) {
  const loom__track *k = &a->t->tracks[track];
  const char *name = loom__trace_cstr(a->t, k->name), *lane = NULL;
  for (const char *p = strstr(name, " lane "); p; p = strstr(p + 1, " lane ")) lane = p;
  if (!lane || !lane[6]) return track;
  for (const char *d = lane + 6; *d; d++)
    if (*d < '0' || *d > '9') return track;
  if (!a->tracks_mapped) { /* once: every track by (pid, name) */
    a->tracks_mapped = 1;
    for (size_t i = 0; i < a->t->ntracks; i++) {
      const char *n = loom__trace_cstr(a->t, a->t->tracks[i].name);
      uint64_t key = track_key(a->t->tracks[i].pid, n, strlen(n));
      if (!loom__map_get(&a->track_of, key) && loom__map_put(&a->track_of, key, i + 1)) a->oom = 1;
    }
  }
  size_t len = (size_t)(lane - name);
  uint64_t *b = loom__map_get(&a->track_of, track_key(k->pid, name, len));
  if (!b) return track;
  const loom__track *q = &a->t->tracks[*b - 1];
  const char *qn = loom__trace_cstr(a->t, q->name);
  return q->pid == k->pid && strlen(qn) == len && !memcmp(qn, name, len) ? (uint32_t)(*b - 1) : track;
}

static loom__rq *queue(an *a, uint32_t track, qstate **qs) {
  loom__report *rep = a->rep;
  if (a->qof[track] < 0) {
    uint32_t base = lane_base(a, track);
    if (base != track && lane_base(a, base) == base) { /* a lane of a lane stays apart */
      if (!queue(a, base, qs)) return NULL;
      a->qof[track] = a->qof[base];
      return &rep->queues[a->qof[track]];
    }
    const loom__track *k = &a->t->tracks[track];
    loom__rq q;
    memset(&q, 0, sizeof q);
    q.pid = k->pid;
    q.tid = k->tid;
    q.name = k->name;
    qstate z;
    memset(&z, 0, sizeof z);
    if (LOOM__PUSH(rep->queues, rep->nqueues, a->cap_queues, q) ||
        LOOM__PUSH(a->qs, a->nqs, a->cap_qs, z)) {
      a->oom = 1;
      return NULL;
    }
    a->qof[track] = (int32_t)rep->nqueues - 1;
  }
  *qs = &a->qs[a->qof[track]];
  return &rep->queues[a->qof[track]];
}

static void device_event(an *a, const loom__arec *r) {
  loom__report *rep = a->rep;
  const loom__track *k = &a->t->tracks[r->track];
  dstate *ds;
  qstate *qs;
  loom__rdev *d = device(a, k->pid, &ds);
  if (!d) return;
  loom__rq *q = queue(a, r->track, &qs);
  if (!q) return;
  uint64_t *li = r->corr ? loom__map_get(&a->inflight, r->corr) : NULL;
  const launch *l = li ? &a->ls[*li - 1] : NULL;
  int64_t s = r->ts, e = r->ts + r->dur, gap = 0;
  int work = r->kind != LOOM_KIND_SYNC;
  if (work) {
    unsigned bit = 1u << r->cls;
    for (unsigned m = 1; m < 8; m++) {
      if (!(m & bit)) continue;
      int64_t prev_s = ds->u[m].cs, prev_e = ds->u[m].ce;
      int was_open = ds->u[m].open;
      int reopened = uset_add(&ds->u[m], s, e, &gap);
      if (m == 7 && reopened) split_idle(l, gap, s, &d->idle_host, &d->idle_other);
      if ((m == 7 || m == 1) && was_open && reopened)
        add_buckets(rep, m == 7 ? d->bucket : d->bucket_c, prev_s, prev_e);
    }
    widen(&d->first, &d->last, &d->nwork, s, e);
    if (uset_add(&qs->u, s, e, &gap)) split_idle(l, gap, s, &q->idle_host, &q->idle_other);
    widen(&q->first, &q->last, &q->nwork, s, e);
    loom__rname *n = NULL;
    if (r->kind == LOOM_KIND_MEMCPY) {
      n = rname(a, LOOM__G_COPY, direction(a, r));
    } else if (r->kind == LOOM_KIND_MEMSET) {
      n = rname(a, LOOM__G_FILL, r->name);
    } else {
      d->nkernels += r->kind == LOOM_KIND_KERNEL;
      n = rname(a, LOOM__G_KERNEL, r->name);
      if (n && loom__qs_add(&n->q, r->dur)) a->oom = 1;
    }
    if (n) {
      add_dur(n, r->dur);
      n->cls = r->cls;
      n->bytes += r->bytes;
    }
    if (l) {
      if (l->timed && loom__qs_add(&d->launch, s - l->ts)) a->oom = 1;
      for (uint32_t i = 0; l->stack && i < a->stk[l->stack - 1]; i++) {
        loom__rname *rn = rname(a, LOOM__G_RANGE, a->stk[l->stack + i]);
        if (rn) rn->dev_time += r->dur, rn->dev_count++;
      }
      if (l->step >= 0) rep->steps[l->step].dev_time += r->dur, rep->steps[l->step].dev_count++;
    } else {
      rep->orphan_work++;
    }
  }
}

/* A candidate of by_structure() (time order: a call comes before its
 * work): device work (a kernel, or a copy when it has a direction: its code
 * is kept) when a runtime or driver call has its correlation id, else
 * itself a runtime call, whose device work may follow. */
static const loom__arec *resolve(an *a, const loom__arec *r, loom__arec *out) {
  uint64_t *li = loom__map_get(&a->inflight, r->corr);
  *out = *r;
  if (!li || !a->ls[*li - 1].call) {
    out->kind = LOOM_KIND_RUNTIME;
    out->stream = 0;
    out->role &= ROLE_MASK;
    return out;
  }
  out->kind = (r->role >> LOOM__AREC_DIR_SHIFT) ? LOOM_KIND_MEMCPY : LOOM_KIND_KERNEL;
  out->cls = out->kind == LOOM_KIND_MEMCPY ? LOOM__CLS_MEMORY : LOOM__CLS_COMPUTE;
  out->hta |= LOOM__AREC_HTA_STRUCT;
  return out; /* no stream: not one of HTA's GPU events */
}

/* Holistic Trace Analysis 0.6.1: every event with a stream (syncs too, even
 * host events that carry one), in its scope (without the last profiler step
 * unless asked), for the whole trace like HTA's rank.  When any timestamp
 * of the trace is fractional, every event is first rounded to whole
 * microseconds, start up and end down (HTA's round_down_time_stamps). */
static void hta_span(const an *a, int64_t ts, int64_t dur, int64_t *s, int64_t *e) {
  if (!a->fractional) {
    *s = ts;
    *e = ts + dur;
    return;
  }
  /* HTA's times are doubles of microseconds: at 16 digits their step is
   * 0.25 us, and ts + dur is rounded to it before the floor. */
  int64_t w = ts >= 0 ? ts / 1000 : -((-ts + 999) / 1000);
  double t = (double)w + (double)(ts - w * 1000) / 1000.0, end = t + (double)dur / 1000.0;
  *s = (int64_t)ceil(t) * 1000;
  *e = (int64_t)floor(end) * 1000;
}

/* HTA's kernel type, by its name lists; loom's own traces add their marks
 * (communication) and copies and fills of a known category that carry a
 * "direction" or were launched by a call marked memory. */
static unsigned hta_type(an *a, const loom__arec *r, const launch *l) {
  unsigned nf = name_flags(a, a->t, r->name);
  if (r->kind == LOOM_KIND_COLLECTIVE || (r->role & LOOM_RECORD_F_COMM)) return LOOM__HTA_COMM;
  if ((r->kind == LOOM_KIND_MEMCPY || r->kind == LOOM_KIND_MEMSET) && !(r->hta & LOOM__AREC_HTA_STRUCT) &&
      ((r->role >> LOOM__AREC_DIR_SHIFT) || (l && l->memory)))
    return LOOM__HTA_MEMORY;
  return NF_HTA_TYPE(nf);
}

static int64_t ceil_us_if(const an *a, int64_t ns) { return a->fractional ? ceil_us(ns) : ns; }

/* The end of the step that ends last, as HTA sees it. */
static int64_t hta_last_end(const an *a) {
  int64_t s, e;
  hta_span(a, a->last_end_step[0], a->last_end_step[1], &s, &e);
  return e;
}

static loom__hstream *hta_stream(an *a, int64_t stream) {
  loom__rhta *h = &a->rep->hta;
  uint64_t key = (uint64_t)stream + 2;
  uint64_t *si = loom__map_get(&a->hstream_of, key);
  if (!si) {
    loom__hstream z;
    memset(&z, 0, sizeof z);
    z.stream = stream;
    if (LOOM__PUSH(h->streams, h->nstreams, a->cap_hstreams, z) ||
        loom__map_put(&a->hstream_of, key, h->nstreams)) {
      a->oom = 1;
      return NULL;
    }
    si = loom__map_get(&a->hstream_of, key);
  }
  return &h->streams[*si - 1];
}

/* The idle-time breakdown: kernels, copies and fills (HTA's categories)
 * in time order per stream; the gap since the previous row's end (not a
 * running maximum) is host_wait when the launch call began after that end,
 * kernel_wait when under 30 us, else other; the first row is "other". */
static void hta_idle(an *a, const loom__arec *r, const launch *l, int64_t s, int64_t e) {
  loom__hstream *st = hta_stream(a, r->stream);
  if (!st) return;
  if (st->has_prev) {
    int64_t idle = s - st->prev_end, ls = 0, le;
    if (l) hta_span(a, l->ts, l->dur, &ls, &le);
    int c = l && ls > st->prev_end ? 0 : idle < HTA_CONSECUTIVE_NS ? 1 : 2;
    st->idle[c] += idle;
    st->nidle[c]++;
    st->seen[c] = 1;
  } else {
    st->seen[2] = 1;
  }
  st->prev_end = e;
  st->has_prev = 1;
}

/* Launch statistics: delay = max(0, device start - call end) (HTA PR #214). */
static void hta_launch(an *a, const launch *l, int64_t s, int64_t e) {
  loom__rhta *h = &a->rep->hta;
  int64_t ls, le;
  hta_span(a, l->ts, l->dur, &ls, &le);
  int64_t delay = s - le, cdur = le - ls;
  if (delay < 0) delay = 0;
  h->launches++;
  if (loom__qs_add(&h->delay, delay)) a->oom = 1;
  if (cdur > HTA_RUNTIME_CUTOFF_NS) h->long_runtime++;
  if (delay > HTA_DELAY_CUTOFF_NS) h->long_delay++;
  if (cdur <= HTA_RUNTIME_CUTOFF_NS && e - s < cdur) h->short_kernels++;
}

static void hta_event(an *a, const loom__arec *r) {
  loom__rhta *h = &a->rep->hta;
  uint64_t *li = r->corr ? loom__map_get(&a->inflight, r->corr) : NULL;
  const launch *l = li ? &a->ls[*li - 1] : NULL;
  /* With two or more steps HTA keeps the device events whose correlation
   * id one of its kept host events has: those that began before the last
   * step (after its end with the last step in).  Events without an id
   * match the host events without one (HTA duplicates them once per such
   * event; loom counts them once). */
  if (a->hta_filter && r->corr) {
    int64_t ls, le, lim = a->hta_filter == 1 ? ceil_us_if(a, a->last_step_ts) : hta_last_end(a);
    if (!l) return;
    hta_span(a, l->ts, l->dur, &ls, &le);
    if (a->hta_filter == 1 ? ls >= lim : ls > lim) return;
  }
  int64_t s, e, gap;
  hta_span(a, r->ts, r->dur, &s, &e);
  unsigned type = hta_type(a, r, l);
  if (type != LOOM__HTA_OTHER)
    for (unsigned m = 1; m < 8; m++)
      if (m & (1u << (type == LOOM__HTA_COMPUTE ? 0 : type == LOOM__HTA_COMM ? 1 : 2)))
        uset_add(&a->hu[m], s, e, &gap);
  uset_add(&a->hall, s, e, &gap);
  widen(&h->first, &h->last, &h->nevents, s, e);
  if (r->hta & LOOM__AREC_HTA_IDLE) hta_idle(a, r, l, s, e);
  if (l && l->is_launch) hta_launch(a, l, s, e);
}

/* ---- finishing ---------------------------------------------------------------- */
int64_t loom__umeas_exact(const loom__umeas *m, unsigned mask) {
  /* intersections from unions, then exclusive pieces from intersections */
  int64_t inter[8] = {0};
  for (unsigned s = 1; s < 8; s++)
    for (unsigned r = s;; r = (r - 1) & s) {
      if (r) inter[s] += (__builtin_popcount(r) & 1 ? 1 : -1) * m->u[r];
      if (!r) break;
    }
  int64_t x = 0;
  for (unsigned s = 1; s < 8; s++)
    if ((s & mask) == mask) x += (__builtin_popcount(s ^ mask) & 1 ? -1 : 1) * inter[s];
  return x;
}

static int cmp_queue(const void *pa, const void *pb) {
  const loom__rq *a = pa, *b = pb;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  return a->tid < b->tid ? -1 : a->tid > b->tid;
}

static int cmp_dev(const void *pa, const void *pb) {
  const loom__rdev *a = pa, *b = pb;
  return a->pid < b->pid ? -1 : a->pid > b->pid;
}

static _Thread_local const loom_trace *cat_trace;
static int cmp_cat(const void *pa, const void *pb) {
  return strcmp(loom__trace_cstr(cat_trace, ((const loom__rcat *)pa)->cat),
                loom__trace_cstr(cat_trace, ((const loom__rcat *)pb)->cat));
}

static void finish(an *a) {
  loom__report *rep = a->rep;
  for (size_t i = 0; i < a->t->ntracks; i++)
    while (a->hs[i].n) finalize(a, &a->hs[i].st[--a->hs[i].n]);
  for (size_t i = 0; i < rep->ndevs; i++) {
    loom__rdev *d = &rep->devs[i];
    dstate *ds = &a->ds[i];
    if (ds->u[7].open) add_buckets(rep, d->bucket, ds->u[7].cs, ds->u[7].ce);
    if (ds->u[1].open) add_buckets(rep, d->bucket_c, ds->u[1].cs, ds->u[1].ce);
    for (int m = 1; m < 8; m++) d->m.u[m] = uset_total(&ds->u[m]);
  }
  for (int m = 1; m < 8; m++) rep->hta.m.u[m] = uset_total(&a->hu[m]);
  if (loom__cpu_finish(rep->cpu)) a->oom = 1;
  rep->hta.all = uset_total(&a->hall);
  rep->hta.rounded = a->fractional;
  for (size_t i = 0; i < rep->nqueues; i++) rep->queues[i].busy = uset_total(&a->qs[i].u);
  if (rep->nqueues > 1) qsort(rep->queues, rep->nqueues, sizeof *rep->queues, cmp_queue);
  if (rep->ndevs > 1) qsort(rep->devs, rep->ndevs, sizeof *rep->devs, cmp_dev);
  for (size_t i = 0, q = 0; i < rep->ndevs; i++) {
    while (q < rep->nqueues && rep->queues[q].pid < rep->devs[i].pid) q++;
    rep->devs[i].q0 = q;
    while (q < rep->nqueues && rep->queues[q].pid == rep->devs[i].pid) q++, rep->devs[i].nq++;
  }
  for (size_t i = 0; i < a->unknown.cap; i++) {
    if (!a->unknown.keys[i]) continue;
    loom__rcat c = {(uint32_t)(a->unknown.keys[i] - 1), a->unknown.vals[i]};
    size_t cap = rep->nunknown;
    if (LOOM__PUSH(rep->unknown, rep->nunknown, cap, c)) a->oom = 1;
  }
  cat_trace = a->t;
  if (rep->nunknown > 1) qsort(rep->unknown, rep->nunknown, sizeof *rep->unknown, cmp_cat);
}

static void an_free(an *a) {
  loom__esort_free(a->es);
  loom__map_free(&a->unknown);
  loom__map_free(&a->step_names);
  if (a->hs && a->t)
    for (size_t i = 0; i < a->t->ntracks; i++) free(a->hs[i].st);
  free(a->hs);
  free(a->qof);
  loom__map_free(&a->track_of);
  loom__map_free(&a->dev_of);
  free(a->ds);
  free(a->qs);
  loom__map_free(&a->name_of);
  free(a->ls);
  free(a->free_ls);
  free(a->lq);
  loom__map_free(&a->inflight);
  free(a->stk);
  loom__map_free(&a->stk_of);
  loom__map_free(&a->hstream_of);
  loom__map_free(&a->idle_cat);
  loom__map_free(&a->flow_end);
  free(a->nfl);
}

void loom__report_free(loom__report *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nnames; i++) loom__qs_free(&r->names[i].q);
  for (size_t i = 0; i < r->ndevs; i++) {
    loom__qs_free(&r->devs[i].launch);
  }
  loom__qs_free(&r->hta.delay);
  free(r->hta.streams);
  free(r->names);
  free(r->devs);
  free(r->queues);
  free(r->steps);
  free(r->unknown);
  loom_trace_free(r->meta);
  loom__ranks_free(r->ranks);
  if (r->cpu) loom__cpu_free(r->cpu);
  free(r->cpu);
  free(r);
}

/* The cross-rank figures: this input's ranks, then the other inputs'. */
static loom_status ranks_pass(loom__report *rep, const loom__report_opts *o) {
  if (loom__ranks_end_input(rep->ranks, rep->meta))
    return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", rep->path);
  for (size_t i = 0; i < o->nmore; i++) {
    loom_status st = loom__ranks_read(rep->ranks, o->more[i]);
    if (st != LOOM_OK) return st;
  }
  if (loom__ranks_finish(rep->ranks)) return loom__fail(LOOM_ENOMEM, "out of memory matching ranks");
  return LOOM_OK;
}

loom_status loom__analyze(const char *path, const loom__report_opts *opts, loom__report **out) {
  *out = NULL;
  loom__report_opts o = {0};
  if (opts) o = *opts;
  if (!o.sort_budget) o.sort_budget = (size_t)256 << 20;
  loom__report *rep = calloc(1, sizeof *rep);
  if (!rep) return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
  rep->path = path;
  if (!(rep->ranks = loom__ranks_new())) {
    free(rep);
    return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
  }
  if (!(rep->cpu = malloc(sizeof *rep->cpu))) {
    loom__report_free(rep);
    return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
  }
  loom__cpu_init(rep->cpu);
  if (o.wait_threshold_ns) rep->ranks->wait_threshold_ns = o.wait_threshold_ns < 0 ? 0 : o.wait_threshold_ns;
  rep->t0 = INT64_MAX;
  rep->t1 = INT64_MIN;
  an a;
  memset(&a, 0, sizeof a);
  a.rep = rep;
  a.o = &o;
  a.cur_step = -1;
  a.last_step_ts = a.last_step_end = INT64_MIN;
  loom__sink sink = {on_event, &a};
  loom__flow_sink flows = {on_flow, &a};
  loom_status st = loom__trace_stream_flows(path, &sink, &flows, &rep->meta);
  if (st != LOOM_OK) {
    const char *why = a.es && loom__esort_error(a.es)[0] ? loom__esort_error(a.es) : NULL;
    if (why) st = loom__fail(LOOM_EIO, "%s: %s", path, why);
    an_free(&a);
    loom__report_free(rep);
    return st;
  }
  a.t = rep->meta;
  if (!rep->nevents) rep->t0 = rep->t1 = 0;
  rep->hta.last_step_dropped = !o.hta_include_last_step && a.step_names.n >= 2;
  a.hta_filter = a.step_names.n < 2 ? 0 : rep->hta.last_step_dropped ? 1 : 2;
  size_t nt = a.t->ntracks ? a.t->ntracks : 1;
  a.hs = calloc(nt, sizeof *a.hs);
  a.qof = malloc(nt * sizeof *a.qof);
  if (!a.hs || !a.qof || (a.es && loom__esort_finish(a.es) != 0)) {
    st = a.es && loom__esort_error(a.es)[0] ? loom__fail(LOOM_EIO, "%s: %s", path, loom__esort_error(a.es))
                                            : loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
    an_free(&a);
    loom__report_free(rep);
    return st;
  }
  for (size_t i = 0; i < nt; i++) a.qof[i] = -1;
  if (loom__cpu_sorted(rep->cpu)) a.oom = 1;
  const loom__arec *r;
  loom__arec rs;
  while (a.es && !a.oom && (r = loom__esort_next(a.es))) {
    if (r->track >= a.t->ntracks) continue;
    if (r->kind == LOOM_KIND_MARKER) { /* device work if a runtime call has its id */
      if (!(r = resolve(&a, r, &rs))) continue;
    }
    if (r->hta & LOOM__AREC_HTA_GPU) hta_event(&a, r);
    const loom__track *k = &a.t->tracks[r->track];
    if (k->device != LOOM_DEVICE_HOST) {
      if (r->kind == LOOM_KIND_KERNEL || r->kind == LOOM_KIND_MEMCPY || r->kind == LOOM_KIND_MEMSET ||
          r->kind == LOOM_KIND_COLLECTIVE || r->kind == LOOM_KIND_SYNC)
        device_event(&a, r);
      /* user ranges on devices are projections: loom computes its own */
    } else if (r->kind == LOOM_KIND_KERNEL || r->kind == LOOM_KIND_MEMCPY ||
               r->kind == LOOM_KIND_MEMSET) {
      device_event(&a, r); /* device work on a track nobody marked a device */
    } else {
      host_event(&a, r);
    }
  }
  if (a.es && loom__esort_error(a.es)[0]) {
    st = loom__fail(LOOM_EIO, "%s: %s", path, loom__esort_error(a.es));
  } else {
    finish(&a);
    if (a.oom) st = loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
    else st = ranks_pass(rep, &o);
  }
  an_free(&a);
  if (st != LOOM_OK) {
    loom__report_free(rep);
    return st;
  }
  *out = rep;
  return LOOM_OK;
}
