/*
 * analyze_walk.c - the analysis pass over records in time order: figures
 * per name, host threads' op stacks and ranges, device work with its
 * launch calls (analyze.c has the definitions).
 */
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"
#include "cpu.h"

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
  if (!(loom__an_name_flags(a, a->t, name) & NF_STEP)) return name;
  if (!a->step_all) a->step_all = loom__trace_str(a->t, "ProfilerStep#*");
  return a->step_all;
}

void loom__an_finalize(an *a, const frame *f) {
  int g = f->kind == LOOM_KIND_CPU_OP ? LOOM__G_OP
        : f->kind == LOOM_KIND_USER_RANGE ? LOOM__G_RANGE : LOOM__G_CALL;
  loom__rname *n = rname(a, g, g == LOOM__G_CALL ? f->name : tally_name(a, f->name));
  if (!n) return;
  int64_t dur = f->end - f->ts, self = dur - f->child > 0 ? dur - f->child : 0;
  add_dur(n, dur);
  n->self += self;
  if (a->o->on_item) a->o->on_item(a->o->item_ctx, a->rep, g, n->name, f->step, dur, self, f->kind);
}

/* Whether nm is already among names[0..n): a look along them while few,
 * a map of the names seen this time (by generation) past 64, so that a
 * stack thousands deep costs linear time. */
static int stk_has(an *a, const uint32_t *names, uint32_t n, uint32_t nm, int *mapped) {
  if (n < 64) {
    for (uint32_t k = 0; k < n; k++)
      if (names[k] == nm) return 1;
    return 0;
  }
  if (!*mapped) /* switching: the names so far into the map */
    for (uint32_t k = 0; k < n; k++)
      if (loom__map_put(&a->stk_seen, (uint64_t)names[k] + 1, a->stk_gen)) a->oom = 1;
  *mapped = 1;
  int added;
  uint64_t *g = loom__map_slot(&a->stk_seen, (uint64_t)nm + 1, &added);
  if (!g) {
    a->oom = 1;
    return 1;
  }
  if (!added && *g == a->stk_gen) return 1;
  *g = a->stk_gen;
  return 0;
}

/* Interns the distinct user range names on the stack (all of them, however
 * deep); returns its offset+1 in a->stk, 0 when there is none. */
static uint32_t stack_id(an *a, const hstate *h) {
  uint32_t n = 0;
  int mapped = 0;
  a->stk_gen++;
  for (size_t i = 0; i < h->n; i++) {
    if (h->st[i].kind != LOOM_KIND_USER_RANGE) continue;
    uint32_t nm = tally_name(a, h->st[i].name);
    if (stk_has(a, a->stk_names, n, nm, &mapped)) continue;
    if (n == a->cap_stk_names && loom__grow((void **)&a->stk_names, &a->cap_stk_names,
                                            (size_t)n + 1, sizeof *a->stk_names)) {
      a->oom = 1;
      return 0;
    }
    a->stk_names[n++] = nm;
  }
  const uint32_t *names = a->stk_names;
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
 * (its correlation was pruned, or came again later: a later entry stands).
 * Its slot tells, without a lookup: a slot forgotten or taken by another id
 * has another correlation, and a later call with the same id another time. */
static launch *lq_live(an *a, const struct lq *q) {
  launch *l = &a->ls[q->idx];
  return l->corr == q->corr && l->ts == q->ts ? l : NULL;
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
      launch *l = lq_live(a, q);
      if (!l) continue;
      if (q->ts >= now - horizon) break;
      l->corr = 0; /* forgotten: every entry of it is stale */
      loom__map_del(&a->inflight, q->corr);
      if (LOOM__PUSH(a->free_ls, a->nfree, a->cap_free, q->idx)) a->oom = 1;
    }
    horizon /= 2;
  }
}

/* A step range, and ranges and ops as slices of the CPU samples. */
static void host_slices(an *a, const loom__arec *r, unsigned nf) {
  loom__report *rep = a->rep;
  if (r->kind != LOOM_KIND_USER_RANGE && r->kind != LOOM_KIND_CPU_OP) return;
  if (nf & NF_STEP) {
    loom__rstep s = {r->name, r->ts, r->dur, 0, 0};
    if (LOOM__PUSH(rep->steps, rep->nsteps, a->cap_steps, s)) a->oom = 1;
    else if (loom__cpu_slice(rep->cpu, LOOM__CPU_STEP, (uint32_t)rep->nsteps - 1, r->track, r->ts,
                             r->dur))
      a->oom = 1;
  }
  uint32_t group = r->kind == LOOM_KIND_CPU_OP ? LOOM__G_OP : LOOM__G_RANGE;
  if (loom__cpu_slice(rep->cpu, group, tally_name(a, r->name), r->track, r->ts, r->dur)) a->oom = 1;
}

/* The step a call at ts falls in, -1 for none (steps come in time order). */
int32_t loom__an_step_at(an *a, int64_t ts) {
  const loom__report *rep = a->rep;
  while (a->cur_step + 1 < (int32_t)rep->nsteps && rep->steps[a->cur_step + 1].ts <= ts)
    a->cur_step++;
  if (a->cur_step < 0) return -1;
  const loom__rstep *s = &rep->steps[a->cur_step];
  return ts >= s->ts && ts < s->ts + s->dur ? a->cur_step : -1;
}

/* A host call with a correlation id: device work may follow, so it waits
 * in flight (the same id again stands for the later call). */
static void in_flight(an *a, const loom__arec *r, const launch *l) {
  int added;
  uint64_t *slot = loom__map_slot(&a->inflight, r->corr, &added);
  if (!slot) {
    a->oom = 1;
    return;
  }
  uint32_t idx = (uint32_t)(*slot - 1);
  if (!added) {
    int moved = a->ls[idx].ts != l->ts;
    a->ls[idx] = *l;
    if (moved && LOOM__PUSH(a->lq, a->nlq, a->cap_lq, ((struct lq){r->corr, r->ts, idx})))
      a->oom = 1;
    lq_compact(a);
    return;
  }
  if (a->nfree) idx = a->free_ls[--a->nfree];
  else if (LOOM__PUSH(a->ls, a->nls, a->cap_ls, *l)) {
    loom__map_del(&a->inflight, r->corr); /* no slot for it */
    a->oom = 1;
    return;
  } else idx = (uint32_t)a->nls - 1;
  a->ls[idx] = *l;
  *slot = idx + 1;
  if (LOOM__PUSH(a->lq, a->nlq, a->cap_lq, ((struct lq){r->corr, r->ts, idx}))) {
    a->oom = 1;
    return;
  }
  if (a->inflight.n > LAUNCH_PRUNE_AT) prune_launches(a, r->ts);
  lq_compact(a);
}

void loom__an_host_event(an *a, const loom__arec *r) {
  hstate *h = &a->hs[r->track];
  int64_t end = r->ts + r->dur;
  while (h->n && h->st[h->n - 1].end <= r->ts) loom__an_finalize(a, &h->st[--h->n]);
  if (h->n && end <= h->st[h->n - 1].end) h->st[h->n - 1].child += r->dur;
  frame f = {r->ts, end, 0, r->name, r->kind, -1};
  unsigned nf = loom__an_name_flags(a, a->t, r->name);
  host_slices(a, r, nf); /* a step is known before loom__an_step_at looks for it */
  int32_t step = loom__an_step_at(a, r->ts);
  f.step = step;
  if (LOOM__PUSH(h->st, h->n, h->cap, f)) a->oom = 1;
  if (!r->corr || r->kind == LOOM_KIND_CPU_OP || r->kind == LOOM_KIND_USER_RANGE) return;
  launch l = {r->corr, r->ts, r->dur, stack_id(a, h), step, (uint8_t)loom__an_is_launch_call(r, nf),
              (uint8_t)(!(r->role & ROLE_MASK) || loom__an_is_launch_call(r, nf)),
              (uint8_t)((r->role & LOOM_RECORD_F_MEMORY) != 0),
              (uint8_t)(r->kind == LOOM_KIND_RUNTIME || r->kind == LOOM_KIND_DRIVER)};
  in_flight(a, r, &l);
}

/* ---- devices ---------------------------------------------------------------- */
void loom__an_add_buckets(const loom__report *rep, int64_t *b, int64_t s, int64_t e) {
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
  return q->pid == k->pid && strlen(qn) == len && !memcmp(qn, name, len) ? (uint32_t)(*b - 1)
                                                                         : track;
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

void loom__an_device_event(an *a, const loom__arec *r) {
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
        loom__an_add_buckets(rep, m == 7 ? d->bucket : d->bucket_c, prev_s, prev_e);
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
      if (a->o->on_item)
        a->o->on_item(a->o->item_ctx, rep, n->group, n->name, l ? l->step : -1, r->dur, r->dur,
                      r->kind);
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
const loom__arec *loom__an_resolve(an *a, const loom__arec *r, loom__arec *out) {
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

