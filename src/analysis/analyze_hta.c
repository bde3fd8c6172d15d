/*
 * analyze_hta.c - the Holistic Trace Analysis figures of the analysis pass,
 * by HTA's own rules (documented with the code that reproduces them).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"

/* Holistic Trace Analysis 0.6.1: every event with a stream (syncs too, even
 * host events that carry one), in its scope (without the last profiler step
 * unless asked), for the whole trace like HTA's rank.  When any timestamp
 * of the trace is fractional, every event is first rounded to whole
 * microseconds, start up and end down (HTA's round_down_time_stamps). */
static void hta_span(const an *a, int64_t ts, int64_t dur, int64_t *s, int64_t *e) {
  if (!a->fractional) {
    *s = ts;
    *e = ts + dur;
    return;
  }
  /* HTA's times are doubles of microseconds: at 16 digits their step is
   * 0.25 us, and ts + dur is rounded to it before the floor. */
  int64_t w = ts >= 0 ? ts / 1000 : -((-ts + 999) / 1000);
  double t = (double)w + (double)(ts - w * 1000) / 1000.0, end = t + (double)dur / 1000.0;
  *s = (int64_t)ceil(t) * 1000;
  *e = (int64_t)floor(end) * 1000;
}

/* HTA's kernel type, by its name lists; loom's own traces add their marks
 * (communication) and copies and fills of a known category that carry a
 * "direction" or were launched by a call marked memory. */
static unsigned hta_type(an *a, const loom__arec *r, const launch *l) {
  unsigned nf = loom__an_name_flags(a, a->t, r->name);
  if (r->kind == LOOM_KIND_COLLECTIVE || (r->role & LOOM_RECORD_F_COMM)) return LOOM__HTA_COMM;
  if ((r->kind == LOOM_KIND_MEMCPY || r->kind == LOOM_KIND_MEMSET) &&
      !(r->hta & LOOM__AREC_HTA_STRUCT) && ((r->role >> LOOM__AREC_DIR_SHIFT) || (l && l->memory)))
    return LOOM__HTA_MEMORY;
  return NF_HTA_TYPE(nf);
}

static int64_t ceil_us_if(const an *a, int64_t ns) { return a->fractional ? ceil_us(ns) : ns; }

/* The end of the step that ends last, as HTA sees it. */
static int64_t hta_last_end(const an *a) {
  int64_t s, e;
  hta_span(a, a->last_end_step[0], a->last_end_step[1], &s, &e);
  return e;
}

static loom__hstream *hta_stream(an *a, int64_t stream) {
  loom__rhta *h = &a->rep->hta;
  uint64_t key = (uint64_t)stream + 2;
  uint64_t *si = loom__map_get(&a->hstream_of, key);
  if (!si) {
    loom__hstream z;
    memset(&z, 0, sizeof z);
    z.stream = stream;
    if (LOOM__PUSH(h->streams, h->nstreams, a->cap_hstreams, z) ||
        loom__map_put(&a->hstream_of, key, h->nstreams)) {
      a->oom = 1;
      return NULL;
    }
    si = loom__map_get(&a->hstream_of, key);
  }
  return &h->streams[*si - 1];
}

/* The idle-time breakdown: kernels, copies and fills (HTA's categories)
 * in time order per stream; the gap since the previous row's end (not a
 * running maximum) is host_wait when the launch call began after that end,
 * kernel_wait when under 30 us, else other; the first row is "other". */
static void hta_idle(an *a, const loom__arec *r, const launch *l, int64_t s, int64_t e) {
  loom__hstream *st = hta_stream(a, r->stream);
  if (!st) return;
  if (st->has_prev) {
    int64_t idle = s - st->prev_end, ls = 0, le;
    if (l) hta_span(a, l->ts, l->dur, &ls, &le);
    int c = l && ls > st->prev_end ? 0 : idle < HTA_CONSECUTIVE_NS ? 1 : 2;
    st->idle[c] += idle;
    st->nidle[c]++;
    st->seen[c] = 1;
  } else {
    st->seen[2] = 1;
  }
  st->prev_end = e;
  st->has_prev = 1;
}

/* Launch statistics: delay = max(0, device start - call end) (HTA PR #214). */
static void hta_launch(an *a, const launch *l, int64_t s, int64_t e) {
  loom__rhta *h = &a->rep->hta;
  int64_t ls, le;
  hta_span(a, l->ts, l->dur, &ls, &le);
  int64_t delay = s - le, cdur = le - ls;
  if (delay < 0) delay = 0;
  h->launches++;
  if (loom__qs_add(&h->delay, delay)) a->oom = 1;
  if (cdur > HTA_RUNTIME_CUTOFF_NS) h->long_runtime++;
  if (delay > HTA_DELAY_CUTOFF_NS) h->long_delay++;
  if (cdur <= HTA_RUNTIME_CUTOFF_NS && e - s < cdur) h->short_kernels++;
}

void loom__an_hta_event(an *a, const loom__arec *r) {
  loom__rhta *h = &a->rep->hta;
  uint64_t *li = r->corr ? loom__map_get(&a->inflight, r->corr) : NULL;
  const launch *l = li ? &a->ls[*li - 1] : NULL;
  /* With two or more steps HTA keeps the device events whose correlation
   * id one of its kept host events has: those that began before the last
   * step (after its end with the last step in).  Events without an id
   * match the host events without one (HTA duplicates them once per such
   * event; loom counts them once). */
  if (a->hta_filter && r->corr) {
    int64_t ls, le, lim = a->hta_filter == 1 ? ceil_us_if(a, a->last_step_ts) : hta_last_end(a);
    if (!l) return;
    hta_span(a, l->ts, l->dur, &ls, &le);
    if (a->hta_filter == 1 ? ls >= lim : ls > lim) return;
  }
  int64_t s, e, gap;
  hta_span(a, r->ts, r->dur, &s, &e);
  unsigned type = hta_type(a, r, l);
  if (type != LOOM__HTA_OTHER)
    for (unsigned m = 1; m < 8; m++)
      if (m & (1u << (type == LOOM__HTA_COMPUTE ? 0 : type == LOOM__HTA_COMM ? 1 : 2)))
        uset_add(&a->hu[m], s, e, &gap);
  uset_add(&a->hall, s, e, &gap);
  widen(&h->first, &h->last, &h->nevents, s, e);
  if (r->hta & LOOM__AREC_HTA_IDLE) hta_idle(a, r, l, s, e);
  if (l && l->is_launch) hta_launch(a, l, s, e);
}

