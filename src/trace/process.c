/*
 * process.c - the processing every trace gets after collection, whatever
 * backend produced its records: ordering, external ids, host -> device flows
 * and projection of user ranges onto device queues (Kineto's
 * gpu_user_annotation).  See loom__trace_process() in trace.h.
 */
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define NONE UINT32_MAX

static int kind_rank(uint8_t kind) {
  /* For equal start and duration: ranges enclose ops enclose calls. */
  switch (kind) {
  case LOOM_KIND_USER_RANGE: return 0;
  case LOOM_KIND_CPU_OP: return 1;
  default: return 2;
  }
}

int loom__ev_cmp_track_time(const loom__ev *a, const loom__ev *b) {
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  int ra = kind_rank(a->kind), rb = kind_rank(b->kind);
  if (ra != rb) return ra < rb ? -1 : 1;
  /* args_off grows with insertion order: keeps the sort deterministic. */
  if (a->args_off != b->args_off) return a->args_off < b->args_off ? -1 : 1;
  return 0;
}

static int is_host_call(const loom_trace *t, const loom__ev *e) {
  return (e->kind == LOOM_KIND_RUNTIME || e->kind == LOOM_KIND_DRIVER) &&
         t->tracks[e->track].device == LOOM_DEVICE_HOST;
}

static int is_range(const loom__ev *e) {
  return e->ph == LOOM__PH_COMPLETE &&
         (e->kind == LOOM_KIND_CPU_OP || e->kind == LOOM_KIND_USER_RANGE);
}

/* Sweeps one host track in time order with a stack of open ranges: fills in
 * external ids of runtime calls and memory events (the innermost op's), and
 * for each call the innermost enclosing user range (encl); parent[] chains
 * user ranges to their enclosing one. */
static int sweep_track(loom_trace *t, size_t lo, size_t hi, uint32_t *encl,
                       uint32_t *parent, uint32_t **stack, size_t *cap) {
  size_t depth = 0;
  for (size_t i = lo; i < hi; i++) {
    loom__ev *e = &t->ev[i];
    while (depth > 0) {
      const loom__ev *top = &t->ev[(*stack)[depth - 1]];
      if (top->ts + top->dur > e->ts ||
          (top->dur == 0 && top->ts == e->ts))
        break;
      depth--;
    }
    if (e->kind == LOOM_KIND_MEMORY && !e->external_id) { /* the op that allocated */
      for (size_t k = depth; k-- > 0 && !e->external_id;)
        if (t->ev[(*stack)[k]].kind == LOOM_KIND_CPU_OP)
          e->external_id = t->ev[(*stack)[k]].external_id;
    } else if (is_host_call(t, e)) {
      for (size_t k = depth; k-- > 0;) {
        const loom__ev *r = &t->ev[(*stack)[k]];
        if (r->kind == LOOM_KIND_CPU_OP && !e->external_id) {
          e->external_id = r->external_id;
        }
        if (r->kind == LOOM_KIND_USER_RANGE && encl[i] == NONE) encl[i] = (*stack)[k];
      }
    }
    if (is_range(e)) {
      if (e->kind == LOOM_KIND_USER_RANGE) {
        for (size_t k = depth; k-- > 0;) {
          if (t->ev[(*stack)[k]].kind == LOOM_KIND_USER_RANGE) {
            parent[i] = (*stack)[k];
            break;
          }
        }
      }
      size_t d = depth;
      if (LOOM__PUSH(*stack, d, *cap, (uint32_t)i) != 0) return -1;
      depth = d;
    }
  }
  return 0;
}


typedef struct proj {
  uint32_t range, track;
  int64_t lo, hi;
} proj;

static int project(loom_trace *t, uint32_t range, const loom__ev *d,
                   loom__map *index, proj **projs, size_t *n, size_t *cap) {
  uint64_t key = ((uint64_t)range << 32 | d->track) + 1;
  uint64_t *slot = loom__map_get(index, key);
  int64_t end = d->ts + d->dur;
  if (slot) {
    proj *p = &(*projs)[*slot];
    if (d->ts < p->lo) p->lo = d->ts;
    if (end > p->hi) p->hi = end;
    return 0;
  }
  proj p = {range, d->track, d->ts, end};
  if (LOOM__PUSH(*projs, *n, *cap, p) != 0) return -1;
  return loom__map_put(index, key, *n - 1);
  (void)t;
}

static int link_producer(loom_trace *t, uint16_t src, const uint32_t *encl,
                         const uint32_t *parent, loom__map *pindex, proj **projs,
                         size_t *nproj, size_t *cap_proj) {
  loom__map calls = {0};
  int rc = 0;
  size_t nev = t->nev;
  for (size_t i = 0; i < nev && rc == 0; i++) {
    const loom__ev *e = &t->ev[i];
    if (e->src == src && e->correlation && is_host_call(t, e))
      rc = loom__map_put(&calls, e->correlation, i);
  }
  for (size_t i = 0; i < nev && rc == 0; i++) {
    loom__ev *d = &t->ev[i];
    if (d->src != src || !d->correlation ||
        t->tracks[d->track].device == LOOM_DEVICE_HOST || d->ph != LOOM__PH_COMPLETE)
      continue;
    uint64_t *call = loom__map_get(&calls, d->correlation);
    if (!call) continue;
    const loom__ev *c = &t->ev[*call];
    if (!d->external_id) d->external_id = c->external_id;
    loom__flow f = {(uint32_t)*call, (uint32_t)i, t->nflows + 1};
    rc = LOOM__PUSH(t->flows, t->nflows, t->cap_flows, f);
    for (uint32_t r = encl[*call]; r != NONE && rc == 0; r = parent[r])
      rc = project(t, r, d, pindex, projs, nproj, cap_proj);
  }
  loom__map_free(&calls);
  return rc;
}

int loom__trace_process(loom_trace *t) {
  if (t->nev > UINT32_MAX - 1) return -1;
  if (t->nev > 1 && loom__trace_sort(t) != 0) return -1;
  size_t nev = t->nev;
  uint32_t *encl = malloc((nev + 1) * sizeof *encl);
  uint32_t *parent = malloc((nev + 1) * sizeof *parent);
  uint32_t *stack = NULL;
  size_t cap = 0;
  int rc = (encl && parent) ? 0 : -1;
  if (rc == 0) {
    memset(encl, 0xff, (nev + 1) * sizeof *encl);
    memset(parent, 0xff, (nev + 1) * sizeof *parent);
  }
  for (size_t lo = 0; lo < nev && rc == 0;) {
    size_t hi = lo;
    while (hi < nev && t->ev[hi].track == t->ev[lo].track) hi++;
    if (t->tracks[t->ev[lo].track].device == LOOM_DEVICE_HOST)
      rc = sweep_track(t, lo, hi, encl, parent, &stack, &cap);
    lo = hi;
  }
  loom__lanes made = {0};
  if (rc == 0) rc = loom__lanes_work(t, &made);
  /* Producers are few: link each on its own so correlation ids of two
   * backends never meet. */
  uint16_t maxsrc = 0;
  for (size_t i = 0; i < nev; i++)
    if (t->ev[i].src > maxsrc) maxsrc = t->ev[i].src;
  loom__map pindex = {0};
  proj *projs = NULL;
  size_t nproj = 0, cap_proj = 0;
  for (uint32_t s = 0; s <= maxsrc && rc == 0; s++)
    rc = link_producer(t, (uint16_t)s, encl, parent, &pindex, &projs, &nproj,
                       &cap_proj);
  uint32_t cat = rc == 0 ? loom__trace_str(t, "gpu_user_annotation") : 0;
  for (size_t i = 0; i < nproj && rc == 0; i++) {
    const loom__ev *r = &t->ev[projs[i].range];
    loom__ev e = {.ts = projs[i].lo, .dur = projs[i].hi - projs[i].lo,
                  .external_id = r->external_id, .name = r->name, .cat = cat,
                  .track = projs[i].track, .kind = LOOM_KIND_USER_RANGE,
                  .ph = LOOM__PH_COMPLETE, .src = r->src,
                  .flags = LOOM__EV_PROJECTED};
    rc = loom__trace_add_ev(t, &e);
  }
  if (rc == 0) rc = loom__lanes_ranges(t, nev, &made);
  if (rc == 0 && made.moved) rc = loom__trace_sort(t); /* in track order again */
  loom__lanes_free(&made);
  free(projs);
  loom__map_free(&pindex);
  free(stack);
  free(encl);
  free(parent);
  return rc;
}
