/*
 * memory_walk.c - memory events of a trace read into the accounting of
 * memory.c: their arguments (the reserved names of plugin.h), the names
 * people read for a device and a kind, and the walk over a trace in memory
 * that finds each event's op, range and step and feeds them in time order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/memory.h"

int loom__mem_is_step(const char *name) { return !strncmp(name, "ProfilerStep#", 13); }

const char *loom__mem_kind_name(const loom_trace *t, int64_t device, uint32_t kind) {
  if (kind) return loom__trace_cstr(t, kind);
  return device == LOOM__MEM_HOST ? "host" : "device";
}

/* Whether m has host memory of a process other than pid's. */
static int other_host(const loom__mem *m, int64_t pid) {
  for (size_t i = 0; i < loom__mem_count(m); i++) {
    const loom__mem_series *s = loom__mem_series_at(m, i);
    if (s->device == LOOM__MEM_HOST && s->pid != pid) return 1;
  }
  return 0;
}

const char *loom__mem_device_name(const loom_trace *t, const loom__mem *m,
                                  const loom__mem_series *s, char *buf, size_t n) {
  int64_t device = s->device;
  if (device == LOOM__MEM_HOST && !other_host(m, s->pid)) return "host";
  if (device == LOOM__MEM_HOST) {
    snprintf(buf, n, "host (pid %lld)", (long long)s->pid);
    return buf;
  }
  for (size_t i = 0; i < t->nprocs; i++)
    if (t->procs[i].pid == device && t->procs[i].name) return loom__trace_cstr(t, t->procs[i].name);
  for (size_t i = 0; i < t->ndevs; i++)
    if (t->devs[i].pid == device && t->devs[i].name) return loom__trace_cstr(t, t->devs[i].name);
  snprintf(buf, n, "device %lld", (long long)device);
  return buf;
}

void loom__mem_keys_find(loom__mem_keys *k, const loom_trace *t) {
  if (t->strs.n == k->nstrs) return;
  k->nstrs = t->strs.n;
  const loom__strtab *s = &t->strs;
  if (!k->addr) k->addr = loom__strtab_find(s, "addr", 4);
  if (!k->bytes) k->bytes = loom__strtab_find(s, "bytes", 5);
  if (!k->device) k->device = loom__strtab_find(s, "device", 6);
  if (!k->kind) k->kind = loom__strtab_find(s, "memory_kind", 11);
  if (!k->reserved) k->reserved = loom__strtab_find(s, "reserved", 8);
  if (!k->at_start) k->at_start = loom__strtab_find(s, "live_at_start", 13);
  if (!k->dflt_device) k->dflt_device = loom__strtab_find(s, "device", 6);
  if (!k->dflt_host) k->dflt_host = loom__strtab_find(s, "host", 4);
}

static uint64_t uval(const loom__targ *a) {
  if (a->type == LOOM_ARG_DOUBLE) return a->v.d > 0 ? (uint64_t)a->v.d : 0;
  if (a->type == LOOM_ARG_INT) return a->v.i < 0 ? (uint64_t)-a->v.i : (uint64_t)a->v.i;
  return a->type == LOOM_ARG_UINT ? a->v.u : 0;
}

static int negative(const loom__targ *a) {
  return (a->type == LOOM_ARG_INT && a->v.i < 0) || (a->type == LOOM_ARG_DOUBLE && a->v.d < 0);
}

int loom__mem_read(const loom__mem_keys *k, const loom__ev *e, const loom__targ *args,
                   loom__mem_ev *out) {
  memset(out, 0, sizeof *out);
  out->ts = e->ts;
  out->call = e->name;
  out->src = e->src;
  out->device = LOOM__MEM_HOST;
  unsigned roles = LOOM__EV_ROLE_OF(e);
  int neg = 0;
  for (uint16_t i = 0; i < e->nargs; i++) {
    const loom__targ *a = &args[i];
    if (!a->key) continue;
    if (a->key == k->addr) out->addr = a->type == LOOM_ARG_DOUBLE ? (uint64_t)a->v.d : a->v.u;
    else if (a->key == k->bytes) out->bytes = uval(a), neg = negative(a);
    else if (a->key == k->device && a->type != LOOM_ARG_STRING)
      out->device = a->type == LOOM_ARG_DOUBLE ? (int64_t)a->v.d : a->v.i;
    else if (a->key == k->kind && a->type == LOOM_ARG_STRING && !a->json) out->kind = a->v.s;
    else if (a->key == k->reserved && a->type != LOOM_ARG_STRING) {
      out->reserved = uval(a);
      out->flags |= LOOM__MEM_HAS_RESERVED;
    } else if (a->key == k->at_start && a->type != LOOM_ARG_STRING && uval(a))
      out->flags |= LOOM__MEM_AT_START;
  }
  /* marks say what it is; a record without them by the sign of its bytes
   * (a Kineto [memory] event's negative "Bytes" is a free) */
  if (roles & LOOM_RECORD_F_FREE) out->flags |= LOOM__MEM_FREE;
  else if (roles & LOOM_RECORD_F_ALLOC) out->flags |= LOOM__MEM_ALLOC;
  else out->flags |= neg ? LOOM__MEM_FREE : LOOM__MEM_ALLOC;
  if (out->flags & LOOM__MEM_FREE) out->flags &= (uint8_t)~LOOM__MEM_AT_START;
  /* the default kind spelt out is the same series as the default */
  if (out->kind && out->kind == (out->device == LOOM__MEM_HOST ? k->dflt_host : k->dflt_device))
    out->kind = 0;
  return 0;
}

size_t loom__mem_events(const loom_trace *t) {
  size_t n = 0;
  for (size_t i = 0; i < t->nev; i++) n += t->ev[i].kind == LOOM_KIND_MEMORY;
  return n;
}

/* ---- the walk over a trace in memory ------------------------------------------ */
typedef struct wev {
  loom__mem_ev e;
  size_t ev;
} wev;

typedef struct wframe {
  int64_t end;
  uint32_t name;
  uint8_t kind;
} wframe;

static int host_range(const loom_trace *t, const loom__ev *e) {
  return e->ph == LOOM__PH_COMPLETE && e->track < t->ntracks &&
         t->tracks[e->track].device == LOOM_DEVICE_HOST &&
         (e->kind == LOOM_KIND_CPU_OP || e->kind == LOOM_KIND_USER_RANGE);
}

/* The op and range open on the thread around memory event e (frames:
 * the thread's open ranges, outermost first). */
static void enclosing(const loom_trace *t, const wframe *st, size_t n, loom__mem_ev *e) {
  for (size_t i = n; i-- > 0;) {
    if (!e->op && st[i].kind == LOOM_KIND_CPU_OP) e->op = st[i].name;
    if (!e->range && st[i].kind == LOOM_KIND_USER_RANGE &&
        !loom__mem_is_step(loom__trace_cstr(t, st[i].name)))
      e->range = st[i].name;
  }
}

/* Memory events of t with their op and range, in t's track order. */
static int collect(const loom_trace *t, const uint32_t *idx, size_t n, wev *out, size_t *nout) {
  loom__mem_keys k = {0};
  loom__mem_keys_find(&k, t);
  wframe *st = NULL;
  size_t nst = 0, cap = 0;
  uint32_t track = UINT32_MAX;
  for (size_t i = 0; i < n; i++) {
    const loom__ev *e = &t->ev[idx[i]];
    if (e->track != track) nst = 0, track = e->track;
    while (nst && st[nst - 1].end <= e->ts) nst--;
    if (e->kind != LOOM_KIND_MEMORY) {
      wframe f = {e->ts + e->dur, e->name, e->kind};
      if (LOOM__PUSH(st, nst, cap, f)) {
        free(st);
        return -1;
      }
      continue;
    }
    wev *w = &out[*nout];
    if (loom__mem_read(&k, e, &t->args[e->args_off], &w->e)) continue;
    w->ev = idx[i];
    if (w->e.device == LOOM__MEM_HOST) w->e.pid = t->tracks[e->track].pid; /* each its own */
    if (!(w->e.flags & LOOM__MEM_AT_START)) enclosing(t, st, nst, &w->e); /* made before */
    ++*nout;
  }
  free(st);
  return 0;
}

static int cmp_wev(const void *pa, const void *pb) {
  const wev *a = pa, *b = pb;
  if (a->e.ts != b->e.ts) return a->e.ts < b->e.ts ? -1 : 1;
  return a->ev < b->ev ? -1 : a->ev > b->ev;
}

static _Thread_local const loom__ev *step_ev;
static int cmp_step(const void *pa, const void *pb) {
  const loom__ev *a = &step_ev[*(const uint32_t *)pa], *b = &step_ev[*(const uint32_t *)pb];
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

/* Each event's step: the last step begun at or before it, if not ended
 * (as `loom report` finds it). */
static void steps(const loom_trace *t, uint32_t *sidx, size_t ns, wev *w, size_t n) {
  step_ev = t->ev;
  if (ns > 1) qsort(sidx, ns, sizeof *sidx, cmp_step);
  size_t cur = 0;
  int have = 0;
  for (size_t i = 0; i < n; i++) {
    while (cur + have < ns && t->ev[sidx[cur + have]].ts <= w[i].e.ts) cur += have, have = 1;
    const loom__ev *s = have ? &t->ev[sidx[cur]] : NULL;
    w[i].e.step = s && w[i].e.ts < s->ts + s->dur ? s->name : 0;
  }
}

/* The span the timeline covers: the trace's, widened to its memory events. */
static void span_of(const loom_trace *t, const wev *w, size_t n, int64_t *t0, int64_t *t1) {
  *t0 = t->end_ns > t->start_ns ? t->start_ns : INT64_MAX;
  *t1 = t->end_ns > t->start_ns ? t->end_ns : INT64_MIN;
  if (n && w[0].e.ts < *t0) *t0 = w[0].e.ts;
  if (n && w[n - 1].e.ts + 1 > *t1) *t1 = w[n - 1].e.ts + 1;
  if (!n && *t0 > *t1) *t0 = *t1 = 0;
}

static int feed(loom__mem *m, const wev *w, size_t n, loom__mem_fn fn, void *ud) {
  for (size_t i = 0; i < n; i++) {
    loom__mem_after af;
    long s = loom__mem_add(m, &w[i].e, &af);
    if (s < 0) return -1;
    int rc = fn ? fn(ud, w[i].ev, &w[i].e, s, &af) : 0;
    if (rc) return rc;
  }
  return loom__mem_finish(m);
}

int loom__mem_walk(const loom_trace *t, size_t nbuckets, loom__mem_fn fn, void *ud,
                   loom__mem **out) {
  if (out) *out = NULL;
  size_t nmem = 0, nr = 0, ns = 0, nw = 0;
  for (size_t i = 0; i < t->nev; i++) {
    nmem += t->ev[i].kind == LOOM_KIND_MEMORY;
    nr += host_range(t, &t->ev[i]);
  }
  uint32_t *idx = malloc((nmem + nr + 1) * sizeof *idx), *sidx = malloc((nr + 1) * sizeof *sidx);
  wev *w = malloc((nmem + 1) * sizeof *w);
  int rc = -1;
  if (!idx || !sidx || !w) goto done;
  size_t k = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    if (e->kind == LOOM_KIND_MEMORY || host_range(t, e)) idx[k++] = (uint32_t)i;
    if (host_range(t, e) && loom__mem_is_step(loom__trace_cstr(t, e->name)))
      sidx[ns++] = (uint32_t)i;
  }
  loom__ev_sort_indices(t, idx, k);
  if (collect(t, idx, k, w, &nw)) goto done;
  if (nw > 1) qsort(w, nw, sizeof *w, cmp_wev);
  steps(t, sidx, ns, w, nw);
  int64_t t0, t1;
  span_of(t, w, nw, &t0, &t1);
  loom__mem *m = loom__mem_new(t0, t1, nbuckets);
  if (!m) goto done;
  rc = feed(m, w, nw, fn, ud);
  if (rc || !out) loom__mem_free(m);
  else *out = m;
done:
  free(idx);
  free(sidx);
  free(w);
  return rc;
}
