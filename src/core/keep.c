/*
 * keep.c - what a triggered window or dump keeps of the trace built for it
 * (trigger.h, loom__trace_keep): the record kinds a request selected
 * (Kineto's ACTIVITY_TYPES) and, for a ring dump, only its last seconds.
 *
 * It works on the finished trace, so the session's own kinds, its backends
 * and the rings are not touched: the next window records what the session
 * records.  Events are compacted in place, flows renumbered to the events
 * they join and dropped with either end; arguments stay where they are
 * (an event names its own), the ones of dropped events are not written.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core.h"
#include "trigger.h"

static int kind_kept(const loom__ev *e, uint32_t kinds) {
  return !kinds || e->kind == LOOM_KIND_MARKER || (kinds & LOOM_KIND_BIT(e->kind));
}

/* Time: an event that began at or after since (complete ranges only);
 * device work goes with the host call that launched it (a flow into it
 * from a call that began earlier drops it too). */
static void keep_since(const loom_trace *t, uint8_t *keep, int64_t since) {
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].ts < since) keep[i] = 0;
  for (size_t i = 0; i < t->nflows; i++) {
    const loom__flow *f = &t->flows[i];
    if (f->from < t->nev && f->to < t->nev && !keep[f->from] &&
        loom__kind_on_device(t->ev[f->to].kind))
      keep[f->to] = 0;
  }
}

int loom__trace_keep(loom_trace *t, uint32_t kinds, int64_t since_ns, uint64_t *removed) {
  *removed = 0;
  if (!t || (!kinds && since_ns == INT64_MIN) || !t->nev) return 0;
  uint8_t *keep = malloc(t->nev);
  uint32_t *at = malloc(t->nev * sizeof *at);
  if (!keep || !at) {
    free(keep);
    free(at);
    return -1;
  }
  for (size_t i = 0; i < t->nev; i++) keep[i] = (uint8_t)kind_kept(&t->ev[i], kinds);
  if (since_ns != INT64_MIN) keep_since(t, keep, since_ns);
  size_t n = 0;
  for (size_t i = 0; i < t->nev; i++) {
    at[i] = (uint32_t)n;
    if (keep[i]) t->ev[n++] = t->ev[i];
  }
  *removed = t->nev - n;
  t->nev = n;
  size_t nf = 0;
  for (size_t i = 0; i < t->nflows; i++) {
    loom__flow f = t->flows[i];
    if (f.from >= *removed + n || f.to >= *removed + n || !keep[f.from] || !keep[f.to]) continue;
    f.from = at[f.from];
    f.to = at[f.to];
    t->flows[nf++] = f;
  }
  t->nflows = nf;
  if (since_ns != INT64_MIN && since_ns > t->start_ns) t->start_ns = since_ns;
  free(keep);
  free(at);
  return 0;
}
