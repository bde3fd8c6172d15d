/*
 * cpu.c - CPU samples and OS counters for the report (cpu.h).
 */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

const char *const loom__cpu_ctr_keys[LOOM__CPU_NCTR] = {"context_switches", "page_faults",
                                                        "cpu_migrations"};

void loom__cpu_init(loom__rcpu *c) {
  memset(c, 0, sizeof *c);
  loom__samples_init(&c->s);
}

void loom__cpu_free(loom__rcpu *c) {
  loom__samples_free(&c->s);
  loom__map_free(&c->stack_of);
  loom__map_free(&c->fn_of);
  loom__map_free(&c->slot_of);
  loom__map_free(&c->hit_of);
  loom__map_free(&c->ctr_of);
  free(c->smp);
  free(c->frame_fn);
  free(c->fns);
  free(c->slots);
  free(c->hits);
  free(c->ent);
  free(c->flame);
  free(c->ctr);
  memset(c, 0, sizeof *c);
}

/* ---- while streaming ------------------------------------------------------- */
static int counter(loom__rcpu *c, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  loom__cctr *k = NULL;
  for (uint16_t i = 0; i < e->nargs; i++) {
    const char *key = loom__trace_cstr(t, args[i].key);
    int w = 0;
    while (w < LOOM__CPU_NCTR && strcmp(key, loom__cpu_ctr_keys[w])) w++;
    if (w == LOOM__CPU_NCTR) continue;
    uint64_t v = args[i].type == LOOM_ARG_DOUBLE
                     ? (args[i].v.d > 0 && args[i].v.d < 1.8e19 ? (uint64_t)args[i].v.d : 0)
                 : args[i].type == LOOM_ARG_INT  ? (args[i].v.i > 0 ? (uint64_t)args[i].v.i : 0)
                 : args[i].type == LOOM_ARG_UINT ? args[i].v.u
                                                 : 0;
    if (!k) {
      uint64_t *at = loom__map_get(&c->ctr_of, e->track);
      if (!at) {
        loom__cctr z = {.track = e->track};
        if (LOOM__PUSH(c->ctr, c->nctr, c->cap_ctr, z) ||
            loom__map_put(&c->ctr_of, e->track, c->nctr))
          return -1;
        at = loom__map_get(&c->ctr_of, e->track);
      }
      k = &c->ctr[*at - 1];
    }
    if (v > k->v[w]) k->v[w] = v; /* counts since the start: the largest is the total */
    k->seen[w] = 1;
  }
  return 0;
}

static uint32_t fn_of_frame(loom__rcpu *c, uint32_t frame) {
  if (frame < c->nframe_fn) return c->frame_fn[frame];
  char buf[600];
  const char *label = loom__samples_frame_label(&c->s, frame, buf, sizeof buf);
  uint32_t lid = loom__strtab_intern(&c->s.strs, label, strlen(label));
  if (!lid) return UINT32_MAX;
  uint64_t key = (uint64_t)lid << 32 | c->s.frames[frame].module;
  uint64_t *at = loom__map_get(&c->fn_of, key);
  if (!at) {
    loom__cfn f = {lid, c->s.frames[frame].module};
    if (LOOM__PUSH(c->fns, c->nfns, c->cap_fns, f) || loom__map_put(&c->fn_of, key, c->nfns))
      return UINT32_MAX;
    at = loom__map_get(&c->fn_of, key);
  }
  return (uint32_t)(*at - 1);
}

/* Every frame known so far gets its function. */
static int map_frames(loom__rcpu *c) {
  if (c->nframe_fn >= c->s.nframes) return 0;
  uint32_t *p = realloc(c->frame_fn, c->s.nframes * sizeof *p);
  if (!p) return -1;
  c->frame_fn = p;
  while (c->nframe_fn < c->s.nframes) {
    uint32_t f = fn_of_frame(c, (uint32_t)c->nframe_fn);
    if (f == UINT32_MAX) return -1;
    c->frame_fn[c->nframe_fn++] = f;
  }
  return 0;
}

int loom__cpu_event(loom__rcpu *c, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  if (e->kind == LOOM_KIND_COUNTER) return counter(c, t, e, args);
  if (e->kind != LOOM_KIND_SAMPLE) return 0;
  uint32_t site = 0;
  for (uint16_t i = 0; i < e->nargs; i++) {
    if (args[i].type != LOOM_ARG_STRING || strcmp(loom__trace_cstr(t, args[i].key), "stack"))
      continue;
    const char *text = loom__trace_cstr(t, args[i].v.s);
    size_t len = loom__strtab_len(&t->strs, args[i].v.s);
    uint32_t id = loom__strtab_intern(&c->s.strs, text, len);
    if (!id && len) return -1;
    uint64_t *known = loom__map_get(&c->stack_of, id);
    if (known) site = (uint32_t)*known;
    else {
      long leaf = loom__samples_parse(&c->s, text, len);
      if (leaf < 0) return -1;
      site = (uint32_t)leaf;
      if (loom__map_put(&c->stack_of, id, site) || map_frames(c)) return -1;
    }
  }
  if (!site) c->nempty++;
  loom__csmp s = {e->ts, e->track, site};
  return LOOM__PUSH(c->smp, c->nsmp, c->cap_smp, s) ? -1 : 0;
}

/* ---- the pass over slices --------------------------------------------------- */
static int cmp_smp(const void *pa, const void *pb) {
  const loom__csmp *a = pa, *b = pb;
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return a->site < b->site ? -1 : a->site > b->site;
}

static long slot(loom__rcpu *c, uint32_t group, uint32_t key) {
  uint64_t k = (uint64_t)group << 32 | key;
  uint64_t *at = loom__map_get(&c->slot_of, k);
  if (at) return (long)(*at - 1);
  loom__cslot z = {.group = group, .key = key};
  if (LOOM__PUSH(c->slots, c->nslots, c->cap_slots, z) || loom__map_put(&c->slot_of, k, c->nslots))
    return -1;
  return (long)c->nslots - 1;
}

static int hit(loom__rcpu *c, uint32_t sl, uint32_t site) {
  uint64_t k = (uint64_t)sl << 32 | site;
  uint64_t *at = loom__map_get(&c->hit_of, k);
  if (at) {
    c->hits[*at - 1].n++;
    return 0;
  }
  loom__chit h = {sl, site, 1};
  return LOOM__PUSH(c->hits, c->nhits, c->cap_hits, h) || loom__map_put(&c->hit_of, k, c->nhits)
             ? -1
             : 0;
}

int loom__cpu_sorted(loom__rcpu *c) {
  if (!c->nsmp) return 0;
  qsort(c->smp, c->nsmp, sizeof *c->smp, cmp_smp);
  if (slot(c, LOOM__CPU_ALL, 0) != 0) return -1;
  c->slots[0].n = c->nsmp;
  for (size_t i = 0; i < c->nsmp; i++)
    if (hit(c, 0, c->smp[i].site)) return -1;
  return 0;
}

/* First sample at or after (track, ts). */
static size_t lower(const loom__rcpu *c, uint32_t track, int64_t ts) {
  size_t lo = 0, hi = c->nsmp;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const loom__csmp *s = &c->smp[mid];
    if (s->track < track || (s->track == track && s->ts < ts)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int loom__cpu_slice(loom__rcpu *c, uint32_t group, uint32_t key, uint32_t track, int64_t ts,
                    int64_t dur) {
  if (!c->nsmp || dur <= 0) return 0;
  size_t lo = lower(c, track, ts), hi = lower(c, track, ts + dur);
  if (lo >= hi) return 0;
  long sl = slot(c, group, key);
  if (sl < 0) return -1;
  loom__cslot *s = &c->slots[sl];
  if (s->last_track == track + 1 && s->last_hi > lo)
    lo = s->last_hi; /* nested in one of its name */
  if (s->last_track != track + 1 || hi > s->last_hi) s->last_hi = hi;
  s->last_track = track + 1;
  if (lo >= hi) return 0;
  s->n += hi - lo;
  for (size_t i = lo; i < hi; i++)
    if (hit(c, (uint32_t)sl, c->smp[i].site)) return -1;
  return 0;
}

const loom__cslot *loom__cpu_slot(const loom__rcpu *c, uint32_t group, uint32_t key) {
  uint64_t *at = loom__map_get(&c->slot_of, (uint64_t)group << 32 | key);
  return at ? &c->slots[*at - 1] : NULL;
}

/* ---- functions per slot ------------------------------------------------------ */
static int add_fn(loom__rcpu *c, loom__map *ent_of, uint32_t sl, uint32_t fn, uint64_t self,
                  uint64_t total) {
  uint64_t k = (uint64_t)sl << 32 | fn;
  uint64_t *at = loom__map_get(ent_of, k);
  if (!at) {
    loom__centry z = {sl, fn, 0, 0};
    if (LOOM__PUSH(c->ent, c->nent, c->cap_ent, z) || loom__map_put(ent_of, k, c->nent)) return -1;
    at = loom__map_get(ent_of, k);
  }
  c->ent[*at - 1].self += self;
  c->ent[*at - 1].total += total;
  return 0;
}

static _Thread_local const loom__rcpu *sort_cpu;
static int cmp_ent(const void *pa, const void *pb) {
  const loom__centry *a = pa, *b = pb;
  if (a->slot != b->slot) return a->slot < b->slot ? -1 : 1;
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  if (a->self != b->self) return a->self > b->self ? -1 : 1;
  const loom__strtab *s = &sort_cpu->s.strs;
  int d = strcmp(loom__strtab_get(s, sort_cpu->fns[a->fn].label),
                 loom__strtab_get(s, sort_cpu->fns[b->fn].label));
  return d ? d
           : strcmp(loom__strtab_get(s, sort_cpu->fns[a->fn].module),
                    loom__strtab_get(s, sort_cpu->fns[b->fn].module));
}

static int functions(loom__rcpu *c) {
  loom__map ent_of = {0};
  uint32_t *stamp = calloc(c->nfns + 1, sizeof *stamp);
  int rc = stamp ? 0 : -1;
  for (size_t h = 0; rc == 0 && h < c->nhits; h++) {
    const loom__chit *x = &c->hits[h];
    if (!x->site) continue;
    uint32_t leaf = c->frame_fn[c->s.sites[x->site - 1].frame];
    for (uint32_t at = x->site; rc == 0 && at; at = c->s.sites[at - 1].parent) {
      uint32_t fn = c->frame_fn[c->s.sites[at - 1].frame];
      if (stamp[fn] == h + 1) continue; /* a recursive function counts once per stack */
      stamp[fn] = (uint32_t)h + 1;
      rc = add_fn(c, &ent_of, x->slot, fn, fn == leaf ? x->n : 0, x->n);
    }
  }
  free(stamp);
  loom__map_free(&ent_of);
  if (rc) return rc;
  sort_cpu = c;
  if (c->nent > 1) qsort(c->ent, c->nent, sizeof *c->ent, cmp_ent);
  for (size_t i = 0; i < c->nent; i++) {
    loom__cslot *s = &c->slots[c->ent[i].slot];
    if (!s->ne) s->e0 = i;
    s->ne++;
  }
  return 0;
}

int loom__cpu_finish(loom__rcpu *c) {
  if (!c->nsmp) return 0;
  if (c->nhits > UINT32_MAX - 2) return -1;
  if (functions(c)) return -1;
  return loom__cpu_flame(c);
}
