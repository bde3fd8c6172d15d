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
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "analyze_int.h"
#include "cpu.h"
#include "critpath.h"
#include "base/base.h"
#include "export/export.h"
#include "ranks.h"

/* ---- what an event is for ------------------------------------------------
 * A trace written by loom carries the marks its backend gave each record
 * (LOOM_RECORD_F_*, "loom_role" in the files) and copies carry a
 * "direction": any runtime is understood without loom knowing its names.
 * Events without a mark (traces of other tools, Kineto's) are judged by
 * the names runtimes' backends list (backends/x/report-names.def). */
enum { N_LAUNCH, N_LAUNCH_MEMORY, N_COMM_PREFIX, N_COMM_SUBSTR, N_SYNC };
static const struct { int kind; const char *s; } rule_names[] = {
#define LOOM_REPORT_NAME(k, str) {N_##k, str},
#define LOOM_REPORT_ROLES(str, marks) /* marks of older traces' calls: ranks.c */
#include "report_names.h"
#include "util/util.h"
#undef LOOM_REPORT_ROLES
#undef LOOM_REPORT_NAME
    {-1, NULL}};

static int is_comm_name(const char *n) {
  for (size_t i = 0; rule_names[i].s; i++) {
    if (rule_names[i].kind == N_COMM_PREFIX &&
        !strncmp(n, rule_names[i].s, strlen(rule_names[i].s)))
      return 1;
    if (rule_names[i].kind == N_COMM_SUBSTR && strstr(n, rule_names[i].s)) return 1;
  }
  return 0;
}

int loom__sync_name(const char *n) {
  for (size_t i = 0; rule_names[i].s; i++)
    if (rule_names[i].kind == N_SYNC && !strcmp(n, rule_names[i].s)) return 1;
  return 0;
}

static int is_step_name(const char *n) { return !strncmp(n, "ProfilerStep#", 13); }

int loom__an_is_launch_call(const loom__arec *r, unsigned nf) {
  unsigned role = r->role & ROLE_MASK;
  return role ? (role & (LOOM_RECORD_F_LAUNCH | LOOM_RECORD_F_MEMORY)) != 0 : (nf & NF_LAUNCH) != 0;
}

int loom__an_is_comm_work(const loom__arec *r, unsigned nf) {
  unsigned role = r->role & ROLE_MASK;
  return r->kind == LOOM_KIND_COLLECTIVE ||
         (role ? (role & LOOM_RECORD_F_COMM) != 0 : (nf & NF_COMM) != 0);
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

unsigned loom__an_name_flags(an *a, const loom_trace *t, uint32_t name) {
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
    a->nfl[name] =
        (uint8_t)(NF_DONE | (is_step_name(s) ? NF_STEP : 0) |
                  (loom__hta_launch_name(s) ? NF_LAUNCH : 0) | (is_comm_name(s) ? NF_COMM : 0) |
                  loom__hta_kernel_type(s) << NF_HTA_SHIFT);
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
 * as MTIA's "mtia_ccp_events") is device work by its structure: it has a
 * stream (other than -1), or a flow from a call ends on it, or it lies on a
 * device process with a stream or a correlation id.  A copy when it has a
 * "direction", else a kernel.  One on a device process tied to nothing
 * else (a profiler's range with its counters in the arguments, a new kind
 * of work beside known work) is loose: device work only when its track is
 * a queue, one that holds device work (settle_loose(), in the pass); else
 * not understood.  One elsewhere that only has a correlation id stays a
 * candidate (kind marker) until the pass sees whether a runtime call with
 * that id came before it (loom__an_resolve()).
 * Returns -1 on error, 1 when the event is not understood (counted), else 0. */
static int by_structure(an *a, const loom_trace *t, const loom__ev *e, const loom__targ *args,
                        int has_stream, loom__arec *r) {
  int on_device = t->tracks[e->track].device != LOOM_DEVICE_HOST;
  int dev = on_device || (has_stream && r->hta);
  uint64_t key = a->flow_end.n ? flow_key(e->track, e->ts) : 0;
  uint64_t *fid = key ? loom__map_get(&a->flow_end, key) : NULL;
  if (fid) {
    if (!r->corr) r->corr = *fid;
    loom__map_del(&a->flow_end, key);
    dev = 1;
  }
  if (!dev && !r->corr) return count_unknown(a, e->cat) ? -1 : 1;
  if (!dev) return 0;
  if (on_device && !has_stream && !r->corr) {
    uint64_t lk = ((uint64_t)e->track << 32 | e->cat) + 1, *n = loom__map_get(&a->loose, lk);
    if (n) ++*n;
    else if (loom__map_put(&a->loose, lk, 1)) return -1;
    r->hta |= LOOM__AREC_LOOSE;
  }
  r->kind = LOOM_KIND_KERNEL;
  r->hta |= LOOM__AREC_HTA_STRUCT;
  for (uint16_t i = 0; a->dir_key && i < e->nargs; i++)
    if (args[i].key == a->dir_key) r->kind = LOOM_KIND_MEMCPY;
  return 0;
}

/* Device work that is not loose makes its track a queue. */
static int note_queue(an *a, const loom_trace *t, const loom__arec *r) {
  if (t->tracks[r->track].device == LOOM_DEVICE_HOST || (r->hta & LOOM__AREC_LOOSE)) return 0;
  if (!loom__kind_on_device(r->kind) && r->kind != LOOM_KIND_COLLECTIVE &&
      r->kind != LOOM_KIND_SYNC)
    return 0;
  return !loom__map_get(&a->queue, (uint64_t)r->track + 1) &&
                 loom__map_put(&a->queue, (uint64_t)r->track + 1, 1)
             ? -1
             : 0;
}

/* Once every event is read: loose ranges on a track that is no queue are
 * not device work; they are listed as not understood by their category
 * (the pass skips them). */
static int settle_loose(an *a) {
  for (size_t i = 0; i < a->loose.cap; i++) {
    uint64_t k = a->loose.keys[i];
    if (!k || loom__map_get(&a->queue, ((k - 1) >> 32) + 1)) continue;
    uint32_t cat = (uint32_t)(k - 1);
    uint64_t *c = loom__map_get(&a->unknown, (uint64_t)cat + 1);
    if (c) *c += a->loose.vals[i];
    else if (loom__map_put(&a->unknown, (uint64_t)cat + 1, a->loose.vals[i])) return -1;
    a->rep->nkept -= a->loose.vals[i];
  }
  return 0;
}

/* The ids of the keys and categories the pass looks for, looked up again
 * while missing whenever the reader has interned more strings. */
static void find_keys(an *a, const loom_trace *t) {
  if (t->strs.n == a->nstrs) return;
  a->nstrs = t->strs.n;
  if (!a->bytes_key) a->bytes_key = loom__strtab_find(&t->strs, "bytes", 5);
  if (!a->stream_key) a->stream_key = loom__strtab_find(&t->strs, "stream", 6);
  if (!a->dir_key) a->dir_key = loom__strtab_find(&t->strs, "direction", 9);
  if (!a->cat_trace) a->cat_trace = loom__strtab_find(&t->strs, "Trace", 5);
  if (!a->cat_marker) a->cat_marker = loom__strtab_find(&t->strs, "marker", 6);
  if (!a->wait_key) a->wait_key = loom__strtab_find(&t->strs, "wait_on_stream", 14);
}

/* A sync record's waited queue (its "wait_on_stream" argument: the thread id of a queue
 * of the same device) as r->bytes = tid + 1, which sync records have no other use for. */
static void waited_queue(const an *a, const loom__ev *e, const loom__targ *args, loom__arec *r) {
  for (uint16_t i = 0; a->wait_key && i < e->nargs; i++)
    if (args[i].key == a->wait_key && args[i].type != LOOM_ARG_STRING &&
        args[i].type != LOOM_ARG_DOUBLE && args[i].v.i >= 0)
      r->bytes = args[i].v.u + 1;
}

/* What every event read counts for: totals, kinds, the span. */
static void count_event(an *a, const loom_trace *t, const loom__ev *e) {
  loom__report *rep = a->rep;
  rep->nevents++;
  if (e->ts % 1000) a->fractional = 1;
  if (a->flow_end.n && e->kind != LOOM_KIND_MARKER && e->ph == LOOM__PH_COMPLETE &&
      e->track < t->ntracks && t->tracks[e->track].device != LOOM_DEVICE_HOST)
    loom__map_del(&a->flow_end, flow_key(e->track, e->ts)); /* known device work: not needed */
  if (e->kind < LOOM_KIND_COUNT_) rep->by_kind[e->kind]++;
  if (e->flags & LOOM__EV_UNCLOSED) rep->unclosed++;
  if (e->ts < rep->t0) rep->t0 = e->ts;
  if (e->ts + e->dur > rep->t1) rep->t1 = e->ts + e->dur;
}

/* 1 when the pass analyses e: complete, and not an instant, counter,
 * overhead or a trace's own marker (other markers may be device work by
 * their structure, by_structure). */
static int analysed(const an *a, const loom__ev *e) {
  if (e->ph != LOOM__PH_COMPLETE) return 0;
  switch (e->kind) {
  case LOOM_KIND_MARKER: return !(e->cat && (e->cat == a->cat_trace || e->cat == a->cat_marker));
  case LOOM_KIND_INSTANT:
  case LOOM_KIND_COUNTER:
  case LOOM_KIND_OVERHEAD: return 0;
  default: return 1;
  }
}

/* A step range: its name, and the last step's start and end. */
static int note_step(an *a, const loom__ev *e) {
  if (!loom__map_get(&a->step_names, e->name) && loom__map_put(&a->step_names, e->name, 1))
    return -1;
  if (e->ts > a->last_step_ts) a->last_step_ts = e->ts;
  if (e->ts + e->dur > a->last_step_end) {
    a->last_step_end = e->ts + e->dur;
    a->last_end_step[0] = e->ts;
    a->last_end_step[1] = e->dur;
  }
  return 0;
}

/* HTA's GPU events: whatever has a "stream" other than -1 (r->stream and
 * r->hta set; 1 returned); loom also counts device work that has no stream
 * argument at all, on its queue. */
static int stream_of(const an *a, const loom__ev *e, const loom__targ *args, loom__arec *r) {
  int has_stream = 0;
  for (uint16_t i = 0; a->stream_key && i < e->nargs; i++)
    if (args[i].key == a->stream_key && args[i].type != LOOM_ARG_STRING &&
        args[i].type != LOOM_ARG_DOUBLE) {
      has_stream = 1;
      r->stream = (uint32_t)args[i].v.i;
      r->hta = args[i].v.i != -1;
    }
  return has_stream;
}

/* HTA's idle-time category of the record's event (cached by category). */
static int idle_category(an *a, const loom_trace *t, const loom__ev *e, loom__arec *r) {
  uint64_t *ic = loom__map_get(&a->idle_cat, (uint64_t)e->cat + 1);
  if (!ic) {
    const char *cat = e->cat ? loom__strtab_get(&t->strs, e->cat) : NULL;
    uint64_t v = 1 + (uint64_t)loom__hta_idle_category(cat);
    if (loom__map_put(&a->idle_cat, (uint64_t)e->cat + 1, v)) return -1;
    ic = loom__map_get(&a->idle_cat, (uint64_t)e->cat + 1);
  }
  if (*ic == 2) r->hta |= LOOM__AREC_HTA_IDLE;
  return 0;
}

/* The record's class of device work, bytes and copy direction. */
static void work_class(an *a, const loom__ev *e, const loom__targ *args, unsigned nf,
                       loom__arec *r) {
  if (r->kind == LOOM_KIND_MARKER)
    r->role |= (uint8_t)(direction_code(a, args, e->nargs) << LOOM__AREC_DIR_SHIFT);
  if (r->kind == LOOM_KIND_MEMCPY || r->kind == LOOM_KIND_MEMSET) {
    r->cls = LOOM__CLS_MEMORY;
    for (uint16_t i = 0; i < e->nargs; i++)
      if (args[i].key == a->bytes_key && a->bytes_key)
        r->bytes = args[i].type == LOOM_ARG_DOUBLE ? (uint64_t)args[i].v.d : args[i].v.u;
    r->role |= (uint8_t)(direction_code(a, args, e->nargs) << LOOM__AREC_DIR_SHIFT);
  } else if (r->kind == LOOM_KIND_COLLECTIVE ||
             (r->kind == LOOM_KIND_KERNEL && loom__an_is_comm_work(r, nf))) {
    r->cls = LOOM__CLS_COMM;
  }
}

/* An analysed event becomes a record of the sort. */
static int keep_event(an *a, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  unsigned nf = loom__an_name_flags(a, t, e->name);
  if ((e->kind == LOOM_KIND_USER_RANGE || e->kind == LOOM_KIND_CPU_OP) && (nf & NF_STEP) &&
      note_step(a, e))
    return -1;
  loom__arec r = {.ts = e->ts, .dur = e->dur < 0 ? 0 : e->dur, .corr = e->correlation,
                  .name = e->name, .track = e->track, .kind = e->kind,
                  .role = (uint8_t)(LOOM__EV_ROLE_OF(e) & ROLE_MASK)};
  int has_stream = stream_of(a, e, args, &r);
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
  if ((r.hta || r.kind == LOOM_KIND_MARKER) && idle_category(a, t, e, &r)) return -1;
  work_class(a, e, args, nf, &r);
  if (r.kind == LOOM_KIND_SYNC) waited_queue(a, e, args, &r);
  if (note_queue(a, t, &r)) return -1;
  a->rep->nkept++;
  return loom__esort_add(a->es, &r);
}

static int on_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  an *a = ctx;
  loom__report *rep = a->rep;
  if (!a->es && !(a->es = loom__esort_new(&t->strs, a->o->sort_budget))) return -1;
  find_keys(a, t);
  loom__ev ek;
  /* Older traces' calls of a runtime's own category (no marks in the file)
   * get them from its role description (ranks.c). */
  if (e->kind == LOOM_KIND_MARKER && rep->ranks) {
    ek = *e;
    ek.kind = (uint8_t)loom__kind_of_marks(LOOM_KIND_MARKER, loom__ranks_marks(rep->ranks, t, e),
                                           e->ph == LOOM__PH_INSTANT);
    e = &ek;
  }
  count_event(a, t, e);
  if (e->kind == LOOM_KIND_MEMORY) return loom__an_keep_memory(a, t, e, args);
  if (rep->ranks && loom__ranks_event(rep->ranks, t, e, args)) return -1; /* cross-rank state */
  if ((e->kind == LOOM_KIND_SAMPLE || e->kind == LOOM_KIND_COUNTER) &&
      loom__cpu_event(rep->cpu, t, e, args))
    return -1;
  return analysed(a, e) ? keep_event(a, t, e, args) : 0;
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
    while (a->hs[i].n) loom__an_finalize(a, &a->hs[i].st[--a->hs[i].n]);
  for (size_t i = 0; i < rep->ndevs; i++) {
    loom__rdev *d = &rep->devs[i];
    dstate *ds = &a->ds[i];
    if (ds->u[7].open) loom__an_add_buckets(rep, d->bucket, ds->u[7].cs, ds->u[7].ce);
    if (ds->u[1].open) loom__an_add_buckets(rep, d->bucket_c, ds->u[1].cs, ds->u[1].ce);
    for (int m = 1; m < 8; m++) d->m.u[m] = uset_total(&ds->u[m]);
  }
  for (int m = 1; m < 8; m++) rep->hta.m.u[m] = uset_total(&a->hu[m]);
  if (loom__cpu_finish(rep->cpu)) a->oom = 1;
  if (rep->mem && loom__mem_finish(rep->mem)) a->oom = 1;
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
  loom__map_free(&a->queue);
  loom__map_free(&a->loose);
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
  free(a->stk_names);
  loom__map_free(&a->stk_seen);
  loom__map_free(&a->stk_of);
  loom__map_free(&a->hstream_of);
  loom__map_free(&a->idle_cat);
  loom__map_free(&a->flow_end);
  free(a->nfl);
  free(a->msp);
  loom__cp_free(a->cp);
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
  loom__mem_free(r->mem);
  free(r->cpu);
  if (r->cp) loom__cpres_free(r->cp);
  free(r->cp);
  free(r);
}

/* The cross-rank figures: this input's ranks, then the other inputs'. */
static loom_status ranks_pass(loom__report *rep, const loom__report_opts *o) {
  if (loom__ranks_end_input(rep->ranks, rep->meta))
    return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", rep->path);
  size_t nmine = rep->ranks->nranks;
  uint8_t *mine = calloc(nmine + 1, 1); /* this input's ranks */
  if (!mine) return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", rep->path);
  for (size_t i = 0; i < rep->ranks->nev; i++)
    if (rep->ranks->ev[i].rank >= 0) mine[rep->ranks->ev[i].rank] = 1;
  for (size_t i = 0; i < o->nmore; i++) {
    loom_status st = loom__ranks_read(rep->ranks, o->more[i]);
    if (st != LOOM_OK) {
      free(mine);
      return st;
    }
  }
  if (loom__ranks_finish(rep->ranks)) {
    free(mine);
    return loom__fail(LOOM_ENOMEM, "out of memory matching ranks");
  }
  if (rep->cp) loom__cp_ranks(rep->cp, rep->ranks, mine, nmine, rep->meta->base_ns);
  free(mine);
  return LOOM_OK;
}

/* An empty report of path, with its cross-rank and CPU parts; NULL when
 * out of memory. */
static loom__report *new_report(const char *path, const loom__report_opts *o) {
  loom__report *rep = calloc(1, sizeof *rep);
  if (!rep) return NULL;
  rep->path = path;
  if (!(rep->ranks = loom__ranks_new())) {
    free(rep);
    return NULL;
  }
  if (!(rep->cpu = malloc(sizeof *rep->cpu))) {
    loom__report_free(rep);
    return NULL;
  }
  loom__cpu_init(rep->cpu);
  if (o->wait_threshold_ns)
    rep->ranks->wait_threshold_ns = o->wait_threshold_ns < 0 ? 0 : o->wait_threshold_ns;
  rep->t0 = INT64_MAX;
  rep->t1 = INT64_MIN;
  return rep;
}

/* The sort's failure (a message) or memory: the status to return. */
static loom_status sort_failed(an *a, const char *path) {
  if (a->es && loom__esort_error(a->es)[0])
    return loom__fail(LOOM_EIO, "%s: %s", path, loom__esort_error(a->es));
  return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
}

/* Once the file is read: the state of the pass, and the sort finished. */
static loom_status before_pass(an *a, const char *path) {
  loom__report *rep = a->rep;
  a->t = rep->meta;
  if (!rep->nevents) rep->t0 = rep->t1 = 0;
  rep->hta.last_step_dropped = !a->o->hta_include_last_step && a->step_names.n >= 2;
  a->hta_filter = a->step_names.n < 2 ? 0 : rep->hta.last_step_dropped ? 1 : 2;
  size_t nt = a->t->ntracks ? a->t->ntracks : 1;
  a->hs = calloc(nt, sizeof *a->hs);
  a->qof = malloc(nt * sizeof *a->qof);
  if (!a->hs || !a->qof || settle_loose(a) != 0 || (a->es && loom__esort_finish(a->es) != 0))
    return sort_failed(a, path);
  for (size_t i = 0; i < nt; i++) a->qof[i] = -1;
  if (loom__cpu_sorted(rep->cpu)) a->oom = 1;
  /* a quarter of the sort budget for one step's graph (about 100 bytes an event), at least
   * 65536 events, so that a small budget changes no figure of a small trace; an eighth for
   * the stretches of communication calls cross-rank waits may lie on, when this input has
   * calls the ranks analysis matches */
  size_t spans = rep->ranks->nev ? a->o->sort_budget / 8 / sizeof(loom__cpspan) : 0;
  size_t cap = a->o->sort_budget / 4 / 104 > 65536 ? a->o->sort_budget / 4 / 104 : 65536;
  if (!a->o->no_critical_path &&
      !(a->cp = loom__cp_new(a->t, rep, cap, a->step_names.n > 0,
                             a->o->critical_path_trace != NULL, spans)))
    return sort_failed(a, path);
  return LOOM_OK;
}

/* The critical path's view of a record the pass analysed. */
static void cp_record(an *a, const loom__arec *r) {
  const loom__track *k = &a->t->tracks[r->track];
  unsigned nf = loom__an_name_flags(a, a->t, r->name);
  int work = r->kind == LOOM_KIND_KERNEL || r->kind == LOOM_KIND_MEMCPY ||
             r->kind == LOOM_KIND_MEMSET || r->kind == LOOM_KIND_COLLECTIVE;
  int32_t q = -1;
  if (k->device != LOOM_DEVICE_HOST || (work && r->kind != LOOM_KIND_COLLECTIVE)) {
    if (!(work || r->kind == LOOM_KIND_SYNC) || a->qof[r->track] < 0) return;
    q = a->qof[r->track];
  }
  int step = (r->kind == LOOM_KIND_USER_RANGE || r->kind == LOOM_KIND_CPU_OP) && (nf & NF_STEP);
  loom__cp_record(a->cp, r, q, step, loom__an_is_launch_call(r, nf),
                  loom__an_is_comm_work(r, nf));
}

/* One record of the pass, in time order, to what it is. */
static void pass_record(an *a, const loom__arec *r) {
  loom__arec rs;
  if (r->track >= a->t->ntracks) return;
  if (r->kind == LOOM_KIND_MEMORY) {
    loom__an_memory(a, r);
    return;
  }
  if ((r->hta & LOOM__AREC_LOOSE) && !loom__map_get(&a->queue, (uint64_t)r->track + 1)) return;
  if (r->kind == LOOM_KIND_MARKER) { /* device work if a runtime call has its id */
    if (!(r = loom__an_resolve(a, r, &rs))) return;
  }
  if (r->hta & LOOM__AREC_HTA_GPU) loom__an_hta_event(a, r);
  const loom__track *k = &a->t->tracks[r->track];
  if (k->device != LOOM_DEVICE_HOST) {
    if (r->kind == LOOM_KIND_KERNEL || r->kind == LOOM_KIND_MEMCPY || r->kind == LOOM_KIND_MEMSET ||
        r->kind == LOOM_KIND_COLLECTIVE || r->kind == LOOM_KIND_SYNC)
      loom__an_device_event(a, r);
    /* user ranges on devices are projections: loom computes its own */
  } else if (r->kind == LOOM_KIND_KERNEL || r->kind == LOOM_KIND_MEMCPY ||
             r->kind == LOOM_KIND_MEMSET) {
    loom__an_device_event(a, r); /* device work on a track nobody marked a device */
  } else {
    loom__an_host_event(a, r);
  }
  if (a->cp) cp_record(a, r);
}

/* Reads path into the sort, then one pass over the records in time order. */
static loom_status read_and_pass(an *a, const char *path) {
  loom__report *rep = a->rep;
  loom__sink sink = {.event = on_event,
                     .ctx = a,
                     .threaded = 1}; /* keeps ids, not pointers: may run on a thread */
  loom__flow_sink flows = {on_flow, a};
  loom_status st = loom__trace_stream_flows(path, &sink, &flows, &rep->meta);
  if (st == LOOM_OK && a->es) loom__esort_names(a->es, &rep->meta->strs);
  if (st != LOOM_OK) {
    const char *why = a->es && loom__esort_error(a->es)[0] ? loom__esort_error(a->es) : NULL;
    return why ? loom__fail(LOOM_EIO, "%s: %s", path, why) : st;
  }
  if ((st = before_pass(a, path)) != LOOM_OK) return st;
  for (const loom__arec *r; a->es && !a->oom && (r = loom__esort_next(a->es));) pass_record(a, r);
  if (a->es && loom__esort_error(a->es)[0])
    return loom__fail(LOOM_EIO, "%s: %s", path, loom__esort_error(a->es));
  if (a->cp && (!(rep->cp = calloc(1, sizeof *rep->cp)) || loom__cp_finish(a->cp, rep->cp)))
    a->oom = 1; /* before finish(): the paths use the queues' order of the pass */
  finish(a);
  if (a->oom) return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
  return ranks_pass(rep, a->o);
}

loom_status loom__analyze(const char *path, const loom__report_opts *opts, loom__report **out) {
  *out = NULL;
  loom__report_opts o = {0};
  if (opts) o = *opts;
  if (!o.sort_budget) o.sort_budget = (size_t)256 << 20;
  loom__report *rep = new_report(path, &o);
  if (!rep) return loom__fail(LOOM_ENOMEM, "out of memory analysing %s", path);
  an a;
  memset(&a, 0, sizeof a);
  a.inflight.runs = 1; /* correlation ids mostly count up */
  a.rep = rep;
  a.o = &o;
  a.cur_step = -1;
  a.last_step_ts = a.last_step_end = INT64_MIN;
  loom_status st = read_and_pass(&a, path);
  an_free(&a);
  if (st == LOOM_OK && o.critical_path_trace && rep->cp)
    st = loom__cp_write_trace(rep->cp, path, o.critical_path_trace);
  if (st != LOOM_OK) {
    loom__report_free(rep);
    return st;
  }
  *out = rep;
  return LOOM_OK;
}

