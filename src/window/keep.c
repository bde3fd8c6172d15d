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
 * A dump cut to its last seconds starts from the memory live then: each
 * allocation before the cut and not freed by it reappears at the cut,
 * flagged "live_at_start" (as a window's do, collect_host.c).
 * Also here: a trigger on a ring-mode process (loom__trigger_ring_dump).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "base/clock.h"
#include "trace/trace.h"
#include "window/trigger.h"
#include "window/window.h"

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

/* ---- memory live at the cut ---------------------------------------------------- */
typedef struct mem_ids {
  uint32_t addr, device, live, at;
} mem_ids;

static uint64_t mem_arg(const loom_trace *t, const loom__ev *e, uint32_t key, int *has) {
  for (uint32_t k = 0; k < e->nargs; k++) {
    const loom__targ *a = &t->args[e->args_off + k];
    if (a->key == key && a->type != LOOM_ARG_STRING && a->type != LOOM_ARG_DOUBLE) {
      if (has) *has = 1;
      return a->v.u;
    }
  }
  if (has) *has = 0;
  return 0;
}

static _Thread_local const loom_trace *by_ts_t;
static int cmp_ts(const void *pa, const void *pb) {
  const loom__ev *a = &by_ts_t->ev[*(const uint32_t *)pa], *b = &by_ts_t->ev[*(const uint32_t *)pb];
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

/* Copies allocation event i to since, flagged live_at_start with its time
 * (kept when it was flagged already). */
static int live_copy(loom_trace *t, size_t i, int64_t since, const mem_ids *id) {
  loom__ev e = t->ev[i];
  int64_t at = e.ts;
  int had = 0;
  uint64_t was = mem_arg(t, &t->ev[i], id->at, &had);
  if (had) at = (int64_t)was;
  uint32_t off = e.args_off, n = e.nargs;
  e.ts = since;
  if (loom__trace_add_ev(t, &e)) return -1;
  for (uint32_t k = 0; k < n; k++) {
    loom__targ a = t->args[off + k];
    if (a.key == id->live || a.key == id->at) continue; /* added again below */
    if (loom__trace_add_arg(t, &a)) return -1;
  }
  return loom__trace_add_arg_int(t, "live_at_start", 1) ||
                 loom__trace_add_arg_int(t, "allocated_at_ns", at) ? -1 : 0;
}

/* The allocations before since that no free before it ended, copied to
 * since; *added: how many. */
static int live_at_since(loom_trace *t, int64_t since, size_t *added) {
  *added = 0;
  size_t n = 0, nev = t->nev;
  uint32_t *idx = malloc((nev + 1) * sizeof *idx);
  if (!idx) return -1;
  for (size_t i = 0; i < nev; i++)
    if (t->ev[i].kind == LOOM_KIND_MEMORY && t->ev[i].ts < since) idx[n++] = (uint32_t)i;
  by_ts_t = t;
  qsort(idx, n, sizeof *idx, cmp_ts);
  mem_ids id = {loom__trace_str(t, "addr"), loom__trace_str(t, "device"),
                loom__trace_str(t, "live_at_start"), loom__trace_str(t, "allocated_at_ns")};
  loom__map live = {0}; /* (producer, device, addr) -> event index + 1 */
  int rc = 0;
  for (size_t k = 0; k < n && rc == 0; k++) {
    const loom__ev *e = &t->ev[idx[k]];
    uint64_t key = loom__hash_u64(mem_arg(t, e, id.addr, NULL) ^
                                  loom__hash_u64(mem_arg(t, e, id.device, NULL) ^
                                                 ((uint64_t)e->src << 48)));
    key = key ? key : 1;
    if (LOOM__EV_ROLE_OF(e) & LOOM_RECORD_F_ALLOC) rc = loom__map_put(&live, key, idx[k] + 1ull);
    else loom__map_del(&live, key);
  }
  for (size_t k = 0; k < n && rc == 0; k++) { /* in time order: the copies too */
    const loom__ev *e = &t->ev[idx[k]];
    if (!(LOOM__EV_ROLE_OF(e) & LOOM_RECORD_F_ALLOC)) continue;
    uint64_t key = loom__hash_u64(mem_arg(t, e, id.addr, NULL) ^
                                  loom__hash_u64(mem_arg(t, e, id.device, NULL) ^
                                                 ((uint64_t)e->src << 48)));
    uint64_t *v = loom__map_get(&live, key ? key : 1);
    if (!v || *v != idx[k] + 1ull) continue;
    rc = live_copy(t, idx[k], since, &id);
    ++*added;
  }
  loom__map_free(&live);
  free(idx);
  return rc;
}


int loom__trace_keep(loom_trace *t, uint32_t kinds, int64_t since_ns, uint64_t *removed) {
  *removed = 0;
  if (!t || (!kinds && since_ns == INT64_MIN) || !t->nev) return 0;
  size_t added = 0;
  if (since_ns != INT64_MIN && live_at_since(t, since_ns, &added)) return -1;
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
  return added ? loom__trace_sort(t) : 0;
}

/* The kinds a request kept (ACTIVITY_TYPES): said in the trace, with what
 * was left out (not lost silently). */
void loom__window_keep_kinds(loom_trace *t, uint32_t kinds, unsigned seq) {
  if (!kinds) return;
  uint64_t gone = 0;
  char k[256], msg[400];
  loom__kinds_format(kinds, k, sizeof k);
  if (loom__trace_keep(t, kinds, INT64_MIN, &gone) != 0) {
    loom__log(LOOM_SEV_WARNING, "window %u: out of memory selecting kinds %s; all kept", seq, k);
    return;
  }
  snprintf(msg, sizeof msg, "this window keeps only the record kinds asked for (%s, from "
           "ACTIVITY_TYPES): %llu events of other kinds are left out", k,
           (unsigned long long)gone);
  if (loom__trace_add_meta(t, "loom_window_kinds", k) || loom__trace_add_warning(t, msg))
    loom__log(LOOM_SEV_WARNING, "window %u: out of memory labelling its trace", seq);
}

int loom__trigger_ring_dump(const loom__window_req *r, int64_t last_ns) {
  loom__clear_error();
  if (!loom__ring_active())
    return loom__fail(LOOM_ESTATE, "no session records in ring mode (mode=ring)");
  if (r->steps > 0 || r->start_step >= 0 || r->delay_ns > 0)
    return loom__fail(LOOM_EINVAL, "this process records in ring mode (a flight recorder): a "
                      "trigger dumps what its ring holds now; --steps, --start-step and --delay "
                      "ask for a window ahead, which it does not record (ask with nothing, or "
                      "--duration SEC for the last SEC seconds it holds)");
  char what[160] = "loom trigger: a dump of the ring";
  if (last_ns > 0)
    snprintf(what, sizeof what, "loom trigger: a dump of the ring, its last %.3f s",
             (double)last_ns * 1e-9);
  loom_trace *t = loom__ring_dump(what);
  if (!t) return loom__fail(LOOM_ESTATE, "the ring dump failed: %s", loom_last_error());
  uint64_t gone = 0;
  if (last_ns > 0) {
    int64_t end = t->end_ns > 0 ? t->end_ns : (int64_t)loom__clock_now(LOOM_CLOCK_REALTIME);
    char v[32], msg[300];
    if (loom__trace_keep(t, 0, end - last_ns, &gone) == 0) {
      snprintf(v, sizeof v, "%lld", (long long)last_ns);
      snprintf(msg, sizeof msg, "this dump keeps the ring's last %.3f s (asked): %llu older "
               "events the ring held are left out", (double)last_ns * 1e-9,
               (unsigned long long)gone);
      if (loom__trace_add_meta(t, "ring_dump_last_ns", v) || loom__trace_add_warning(t, msg))
        loom__log(LOOM_SEV_WARNING, "ring dump: out of memory labelling its trace");
    }
  }
  loom__window_keep_kinds(t, r->kinds & LOOM_KINDS_ALL, 0);
  loom__trigger_write(t, r->out, what); /* takes t; the done function tells a waiter */
  return LOOM_OK;
}
