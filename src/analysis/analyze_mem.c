/*
 * analyze_mem.c - memory events in `loom report`'s streaming pass: each is
 * read into a record of the external sort (analyze_int.h says how its
 * fields are used), and in the time-ordered pass given the op and range
 * open on its thread and the step it fell in, then handed to the
 * accounting of trace/memory.h.  Memory: the accounting's, never the
 * number of events.
 */
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"

/* The index of (device, kind, producer) among the memory records' spaces. */
static long mspace(an *a, const loom__mem_ev *e) {
  if (a->nmsp) {
    const struct mspace *c = &a->msp[a->last_msp];
    if (c->device == e->device && c->kind == e->kind && c->src == e->src) return (long)a->last_msp;
  }
  for (size_t i = 0; i < a->nmsp; i++)
    if (a->msp[i].device == e->device && a->msp[i].kind == e->kind && a->msp[i].src == e->src)
      return (long)(a->last_msp = i);
  struct mspace z = {e->device, e->kind, e->src};
  if (LOOM__PUSH(a->msp, a->nmsp, a->cap_msp, z)) return -1;
  return (long)(a->last_msp = a->nmsp - 1);
}

int loom__an_keep_memory(an *a, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  loom__mem_keys_find(&a->mkeys, t);
  loom__mem_ev m;
  if (loom__mem_read(&a->mkeys, e, args, &m)) return 0;
  long sp = mspace(a, &m);
  if (sp < 0) return -1;
  loom__arec r = {.ts = e->ts, .bytes = m.bytes, .name = e->name, .track = e->track,
                  .stream = (uint32_t)sp, .kind = LOOM_KIND_MEMORY};
  if (m.flags & LOOM__MEM_HAS_RESERVED) {
    r.dur = -(int64_t)(++a->mseq);
    r.corr = m.reserved;
    r.role = LOOM__AN_MEM_RESERVED;
    if (loom__esort_add(a->es, &r)) return -1;
  }
  r.dur = -(int64_t)(++a->mseq);
  r.corr = m.addr;
  r.role = (uint8_t)(m.flags & ~LOOM__MEM_HAS_RESERVED);
  a->rep->nkept++;
  return loom__esort_add(a->es, &r);
}

/* The op and user range (not a step) open on the record's thread. */
static void enclosing(an *a, const loom__arec *r, loom__mem_ev *e) {
  hstate *h = &a->hs[r->track];
  while (h->n && h->st[h->n - 1].end <= r->ts) loom__an_finalize(a, &h->st[--h->n]);
  for (size_t i = h->n; i-- > 0 && (!e->op || !e->range);) {
    const frame *f = &h->st[i];
    if (!e->op && f->kind == LOOM_KIND_CPU_OP) e->op = f->name;
    if (!e->range && f->kind == LOOM_KIND_USER_RANGE &&
        !(loom__an_name_flags(a, a->t, f->name) & NF_STEP))
      e->range = f->name;
  }
}

void loom__an_memory(an *a, const loom__arec *r) {
  loom__report *rep = a->rep;
  if (r->role & LOOM__AN_MEM_RESERVED) { /* the next record's pool level */
    a->mres = r->corr;
    a->has_mres = 1;
    return;
  }
  if (!rep->mem && !(rep->mem = loom__mem_new(rep->t0, rep->t1, LOOM__NBUCKETS))) {
    a->oom = 1;
    return;
  }
  const struct mspace *sp = &a->msp[r->stream];
  loom__mem_ev e = {.ts = r->ts, .addr = r->corr, .bytes = r->bytes, .device = sp->device,
                    .kind = sp->kind, .call = r->name, .src = sp->src, .flags = r->role};
  if (a->has_mres) {
    e.reserved = a->mres;
    e.flags |= LOOM__MEM_HAS_RESERVED;
    a->has_mres = 0;
  }
  enclosing(a, r, &e);
  int32_t s = loom__an_step_at(a, r->ts);
  e.step = s >= 0 ? rep->steps[s].name : 0;
  if (loom__mem_add(rep->mem, &e, NULL) < 0) a->oom = 1;
}
