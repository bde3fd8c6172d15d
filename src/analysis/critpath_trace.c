/*
 * critpath_trace.c - `loom report --critical-path-trace OUT`: the input trace written
 * again as Chrome JSON with the critical paths marked, as Holistic Trace Analysis's
 * overlaid trace is: an argument "critical": 1 on each event on a path and a flow
 * (category "critical_path") for each dependency of a path between two events: thread
 * order, launch, queue order, cross-queue wait, sync (nesting is left to the slices).
 * Events are found again by their key (process, thread, start, duration, name), which the
 * walk kept; the output is written as a stream from the loaded trace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "base/base.h"
#include "export/export.h"
#include "loom/loom.h"

uint64_t loom__cp_key(int64_t pid, int64_t tid, int64_t ts, int64_t dur, const char *name) {
  int64_t k[4] = {pid, tid, ts, dur};
  uint64_t h = loom__hash_bytes(k, sizeof k);
  return loom__hash_u64(h ^ loom__hash_bytes(name, strlen(name))) | 1;
}

static uint64_t ev_key(const loom_trace *t, const loom__ev *e) {
  const loom__track *k = &t->tracks[e->track];
  return loom__cp_key(k->pid, k->tid, e->ts, e->dur, loom__trace_cstr(t, e->name));
}

/* An event as read, with "critical": 1 when it is on a path. */
static int put_event(loom__jstream *w, const loom_trace *t, const loom__ev *e, uint32_t crit,
                     int on) {
  const loom__targ *args = t->args + e->args_off;
  if (!on) {
    loom__jstream_event(w, e, args);
    return 0;
  }
  loom__targ *a = malloc(((size_t)e->nargs + 1) * sizeof *a);
  if (!a) return -1;
  memcpy(a, args, e->nargs * sizeof *a);
  a[e->nargs] = (loom__targ){.key = crit, .type = LOOM_ARG_INT, .v.i = 1};
  loom__ev x = *e;
  x.nargs++;
  loom__jstream_event(w, &x, a);
  free(a);
  return 0;
}

/* The trace's own flows, as its writer gives them. */
static void put_flow(loom__jstream *w, const loom_trace *t, const loom__flow *f) {
  const loom__ev *a = &t->ev[f->from], *b = &t->ev[f->to];
  const loom__track *x = &t->tracks[a->track], *y = &t->tracks[b->track];
  if ((LOOM__EV_ROLE_OF(a) & LOOM_RECORD_F_SEND) ||
      (x->device == LOOM_DEVICE_HOST && y->device == LOOM_DEVICE_HOST && x->pid != y->pid)) {
    loom__jstream_message(w, f->id, a->cat, a->track, a->ts, b->track, b->ts, b->dur);
    return;
  }
  int64_t end = b->ts >= a->ts ? b->ts : b->ts + (b->dur > 0 ? b->dur - 1 : 0);
  loom__jstream_flow(w, 's', f->id, a->track, a->ts, 0, 0, 0);
  loom__jstream_flow(w, 'f', f->id, b->track, end, 1, 0, 0);
}

/* The paths' dependency edges as flows (event index per key in at), each named after its
 * type ("critical_path: sync"), in category "critical_path".  A flow leaves its event at the
 * node's time, an end node's a nanosecond before (a slice holds its start, not its end). */
static int put_path_flows(loom__jstream *w, loom_trace *t, const loom__cpres *r,
                          const loom__map *at, uint32_t cat) {
  uint32_t names[LOOM__CPE_COUNT_];
  for (int i = 0; i < LOOM__CPE_COUNT_; i++) {
    char buf[64];
    snprintf(buf, sizeof buf, "critical_path: %s", loom__cpe_name[i]);
    names[i] = loom__trace_str(t, buf);
  }
  uint64_t id = t->nflows + 1;
  for (size_t i = 0; i < r->nedges; i++) {
    const loom__cpedge *x = &r->edges[i];
    uint64_t *a = loom__map_get(at, x->from), *b = loom__map_get(at, x->to);
    if (!a || !b) continue;
    const loom__ev *f = &t->ev[*a - 1], *g = &t->ev[*b - 1];
    int64_t from = x->from_t > f->ts && x->from_t == f->ts + f->dur ? x->from_t - 1 : x->from_t;
    loom__jstream_flow(w, 's', id, f->track, from, 0, names[x->type], cat);
    loom__jstream_flow(w, 'f', id, g->track, x->to_t, 1, names[x->type], cat);
    id++;
  }
  return 0;
}

loom_status loom__cp_write_trace(const loom__cpres *r, const char *in, const char *out) {
  loom_trace *t;
  loom_status st = loom_trace_load(in, &t);
  if (st != LOOM_OK) return st;
  uint32_t crit = loom__trace_str(t, "critical"), name = loom__trace_str(t, "critical_path");
  for (int i = 0; i < LOOM__CPE_COUNT_; i++) { /* every string in t before the header */
    char buf[64];
    snprintf(buf, sizeof buf, "critical_path: %s", loom__cpe_name[i]);
    loom__trace_str(t, buf);
  }
  loom__map at = {0};
  for (size_t i = 0; i < t->nev; i++) {
    uint64_t k = ev_key(t, &t->ev[i]);
    if (loom__map_get(&r->on_path, k) && !loom__map_get(&at, k) &&
        loom__map_put(&at, k, i + 1)) {
      loom__map_free(&at);
      loom_trace_free(t);
      return loom__fail(LOOM_ENOMEM, "out of memory marking %s", in);
    }
  }
  loom__jstream *w;
  size_t n = strlen(out); /* gzip level 6 for a .gz name, else plain (-1) */
  int gz = n > 3 && !strcmp(out + n - 3, ".gz") ? 6 : -1;
  if ((st = loom__jstream_open(&w, t, out, gz)) != LOOM_OK) goto done;
  int bad = 0;
  for (size_t i = 0; i < t->nev && !bad; i++) {
    /* events alike in every part of the key (calls of no length at one time) are all
     * marked: the path passed through each */
    int on = loom__map_get(&r->on_path, ev_key(t, &t->ev[i])) != NULL;
    bad = put_event(w, t, &t->ev[i], crit, on);
  }
  for (size_t i = 0; i < t->nflows; i++) put_flow(w, t, &t->flows[i]);
  put_path_flows(w, t, r, &at, name);
  if (bad) {
    loom__jstream_abort(w);
    st = loom__fail(LOOM_ENOMEM, "out of memory writing %s", out);
  } else {
    st = loom__jstream_close(w);
  }
done:
  loom__map_free(&at);
  loom_trace_free(t);
  return st;
}
