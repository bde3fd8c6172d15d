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

static int same(const struct mspace *c, const loom__mem_ev *e) {
  return c->device == e->device && c->kind == e->kind && c->src == e->src && c->call == e->call;
}

/* The index of (device, kind, producer, call) among the memory records'
 * (at most 65536: past them, the call is not told apart). */
static long mspace(an *a, loom__mem_ev *e) {
  if (a->nmsp && same(&a->msp[a->last_msp], e)) return (long)a->last_msp;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < a->nmsp; i++)
      if (same(&a->msp[i], e)) return (long)(a->last_msp = i);
    if (a->nmsp < 65536) break;
    e->call = 0;
  }
  struct mspace z = {e->device, e->kind, e->call, e->src};
  if (LOOM__PUSH(a->msp, a->nmsp, a->cap_msp, z)) return -1;
  return (long)(a->last_msp = a->nmsp - 1);
}

int loom__an_keep_memory(an *a, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  loom__mem_keys_find(&a->mkeys, t);
  loom__mem_ev m;
  if (loom__mem_read(&a->mkeys, e, args, &m)) return 0;
  long sp = mspace(a, &m);
  if (sp < 0) return -1;
  loom__arec r = {.ts = e->ts, .dur = -(int64_t)(++a->mseq), .corr = m.addr, .bytes = m.bytes,
                  .name = (uint32_t)m.reserved, .track = e->track,
                  .stream = (uint32_t)(m.reserved >> 32), .kind = LOOM_KIND_MEMORY,
                  .cls = (uint8_t)sp, .hta = (uint8_t)(sp >> 8), .role = m.flags};
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
  if (!rep->mem && !(rep->mem = loom__mem_new(rep->t0, rep->t1, LOOM__NBUCKETS))) {
    a->oom = 1;
    return;
  }
  const struct mspace *sp = &a->msp[r->cls | (size_t)r->hta << 8];
  loom__mem_ev e = {.ts = r->ts, .addr = r->corr, .bytes = r->bytes,
                    .reserved = r->name | (uint64_t)r->stream << 32, .device = sp->device,
                    .kind = sp->kind, .call = sp->call, .src = sp->src, .flags = r->role};
  if (e.device == LOOM__MEM_HOST && r->track < a->t->ntracks)
    e.pid = a->t->tracks[r->track].pid; /* each process's host memory its own */
  if (!(e.flags & LOOM__MEM_AT_START)) enclosing(a, r, &e);
  int32_t s = loom__an_step_at(a, r->ts);
  e.step = s >= 0 ? rep->steps[s].name : 0;
  if (loom__mem_add(rep->mem, &e, NULL) < 0) a->oom = 1;
}
