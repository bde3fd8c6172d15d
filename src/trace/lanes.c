/*
 * lanes.c - device work that overlaps on one track goes on lanes of it.
 *
 * A queue that runs commands at once (an out-of-order OpenCL queue, a Level
 * Zero command list without barriers, a vendor's engine) gives its track
 * slices that overlap without nesting.  trace_processor drops such slices
 * from JSON (slice_drop_overlapping_complete_event) and chrome://tracing
 * draws them over one another, so whatever backend recorded them, work that
 * overlaps other work on its track moves to "<track> lane k" (k = 2, 3, ...)
 * on the same device: the first lane where it overlaps nothing, or lies
 * inside a range (a debug label, a projected user range) and nothing else.
 * Taken in start order, first fit uses as many lanes as work ever ran at
 * once.  Projected user ranges (made from the work, per track, after it
 * moved) never cross work on their track, but one can cross another, or a
 * label there: such a range goes on a lane of ranges of its own.  `loom report`
 * counts a queue's lanes as the queue.
 */
#include <stdio.h>
#include <stdlib.h>

#include "trace.h"

typedef struct slot {
  int64_t end;
  int work;
} slot;

typedef struct lane {
  uint32_t track;
  slot *st;
  size_t n, cap;
} lane;

typedef struct sweep {
  loom_trace *t;
  loom__lanes *made;
  uint32_t base;
  lane *l;
  size_t nl, cap;
  /* the ranges pass: the ranges recorded on device tracks (labels), by
   * track and start, and those of the base track */
  const uint32_t *fixed;
  size_t nfixed, f0, f1;
} sweep;

/* Past this many labels of a track to compare with, a projection goes on a
 * lane of ranges without looking (bounded work; never wrong). */
#define MAX_LOOK 4096

static int is_work(const loom__ev *e) {
  return e->kind != LOOM_KIND_USER_RANGE && e->kind != LOOM_KIND_CPU_OP;
}

/* The base track's next lane, "<name> lane k", on a tid no track of its
 * device uses. */
static int new_lane(sweep *w, uint32_t *out) {
  loom_trace *t = w->t;
  loom__track b = t->tracks[w->base];
  int64_t tid = b.tid;
  for (size_t i = 0; i < t->ntracks; i++)
    if (t->tracks[i].pid == b.pid && t->tracks[i].tid > tid) tid = t->tracks[i].tid;
  if (tid == INT64_MAX) return -1;
  char name[256];
  const char *base = b.name ? loom__trace_cstr(t, b.name) : "queue";
  snprintf(name, sizeof name, "%s lane %u", base, ++w->made->k[w->base]);
  return loom__trace_track(t, b.pid, tid + 1, name, b.device, out);
}

/* Whether e crosses (overlaps without nesting) a label of the base track. */
static int crosses_label(const sweep *w, const loom__ev *e) {
  int64_t s = e->ts, end = e->ts + e->dur;
  for (size_t i = w->f0; i < w->f1; i++) {
    const loom__ev *f = &w->t->ev[w->fixed[i]];
    int64_t fe = f->ts + f->dur;
    if (f->ts >= end) break;
    if (i - w->f0 >= MAX_LOOK) return 1;
    if ((f->ts < s && s < fe && fe < end) || (s < f->ts && f->ts < end && end < fe)) return 1;
  }
  return 0;
}

/* Puts e on the first lane of w where it overlaps nothing or lies inside a
 * range alone (and, in the ranges pass, crosses no label of the track),
 * making a lane when none has room. */
static int place(sweep *w, loom__ev *e) {
  int64_t end = e->ts + e->dur;
  for (size_t k = 0;; k++) {
    if (k == w->nl) {
      lane nl = {0};
      if (k == 0) nl.track = e->track;
      else if (new_lane(w, &nl.track)) return -1;
      if (LOOM__PUSH(w->l, w->nl, w->cap, nl)) return -1;
    }
    lane *l = &w->l[k];
    while (l->n && l->st[l->n - 1].end <= e->ts) l->n--;
    if (k == 0 && w->fixed && crosses_label(w, e)) continue;
    if (l->n && (l->st[l->n - 1].end < end || l->st[l->n - 1].work)) continue;
    slot s = {end, is_work(e)};
    if (LOOM__PUSH(l->st, l->n, l->cap, s)) return -1;
    if (k) w->made->moved++;
    e->track = l->track;
    return 0;
  }
}

static void reset(sweep *w, uint32_t base) {
  w->base = base;
  if (w->fixed) { /* the base track's labels */
    size_t lo = 0, hi = w->nfixed;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (w->t->ev[w->fixed[mid]].track < base) lo = mid + 1;
      else hi = mid;
    }
    w->f0 = w->f1 = lo;
    while (w->f1 < w->nfixed && w->t->ev[w->fixed[w->f1]].track == base) w->f1++;
  }
  for (size_t k = 0; k < w->nl; k++) free(w->l[k].st);
  w->nl = 0;
}

static int make_room(loom_trace *t, loom__lanes *made) {
  if (made->n >= t->ntracks) return 0;
  uint32_t *k = realloc(made->k, t->ntracks * sizeof *k);
  if (!k) return -1;
  for (size_t i = made->n; i < t->ntracks; i++) k[i] = 1;
  made->k = k;
  made->n = t->ntracks;
  return 0;
}

/* Sweeps the events at idx[0..n) (or t->ev[0..n) when idx is NULL), in
 * order of track, then start, longer first. */
static int sweep_all(loom_trace *t, loom__lanes *made, const uint32_t *idx, size_t n,
                     const uint32_t *fixed, size_t nfixed) {
  if (make_room(t, made)) return -1;
  sweep w = {t, made, UINT32_MAX, NULL, 0, 0, fixed, nfixed, 0, 0};
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    loom__ev *e = &t->ev[idx ? idx[i] : i];
    if (e->ph != LOOM__PH_COMPLETE || t->tracks[e->track].device == LOOM_DEVICE_HOST) continue;
    if (e->track != w.base) reset(&w, e->track); /* e is not placed yet: its own track */
    rc = place(&w, e);
  }
  reset(&w, UINT32_MAX);
  free(w.l);
  return rc;
}

int loom__lanes_work(loom_trace *t, loom__lanes *made) {
  return sweep_all(t, made, NULL, t->nev, NULL, 0);
}

int loom__lanes_ranges(loom_trace *t, size_t first, loom__lanes *made) {
  if (first >= t->nev) return 0;
  size_t n = t->nev - first, nfixed = 0;
  for (size_t i = 0; i < first; i++) {
    const loom__ev *e = &t->ev[i];
    nfixed +=
        e->ph == LOOM__PH_COMPLETE && !is_work(e) && t->tracks[e->track].device != LOOM_DEVICE_HOST;
  }
  uint32_t *idx = malloc(n * sizeof *idx), *fixed = malloc((nfixed + 1) * sizeof *fixed);
  if (!idx || !fixed) {
    free(idx);
    free(fixed);
    return -1;
  }
  for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)(first + i);
  for (size_t i = 0, k = 0; i < first; i++) {
    const loom__ev *e = &t->ev[i];
    if (e->ph == LOOM__PH_COMPLETE && !is_work(e) && t->tracks[e->track].device != LOOM_DEVICE_HOST)
      fixed[k++] = (uint32_t)i;
  }
  loom__ev_sort_indices(t, idx, n);
  loom__ev_sort_indices(t, fixed, nfixed);
  int rc = sweep_all(t, made, idx, n, fixed, nfixed);
  free(idx);
  free(fixed);
  return rc;
}

void loom__lanes_free(loom__lanes *made) {
  free(made->k);
  made->k = NULL;
  made->n = 0;
}
