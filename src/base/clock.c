/*
 * clock.c - clock domains and their conversion to one session timeline.
 *
 * The timeline is Unix epoch nanoseconds.  For each standard domain the core
 * takes (domain, CLOCK_REALTIME) pairs at session start and at stop; a
 * timestamp is mapped linearly through the two pairs, so a rate difference
 * (drift) between the domain and real time is interpolated, not ignored.
 * Device clocks are described by sync points (device ts, host ts in a
 * standard domain) that backends provide; between points the map is
 * piecewise linear, outside it extends the nearest segment.
 *
 * The TSC and MONOTONIC_RAW tick at one rate; real time runs at whatever
 * rate a time daemon sets, and may change it during a session.  The knots
 * the recording threads found (base/clocklog.c) bend the line through the
 * start and stop pairs where it did: a time u on that line is corrected by
 * D(u), the knots' distance from the line, interpolated between them (0 at
 * start and stop).
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "base/clock.h"
#include "base/clocklog.h"
#include "util/util.h"

static uint64_t ts_of(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The tick counter as it is (what pairs are taken with). */
static uint64_t tsc_raw(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return ts_of(CLOCK_MONOTONIC_RAW);
#endif
}

/* A read of the TSC domain: a sample of real time's rate when one is due
 * (clocklog.h). */
static uint64_t read_tsc(void) {
  uint64_t t = tsc_raw();
  loom__clk_tick(t);
  return t;
}

uint64_t loom__clock_now(loom_clock_domain d) {
  switch (d) {
  case LOOM_CLOCK_MONOTONIC: return ts_of(CLOCK_MONOTONIC);
  case LOOM_CLOCK_MONOTONIC_RAW: return ts_of(CLOCK_MONOTONIC_RAW);
  case LOOM_CLOCK_REALTIME: return ts_of(CLOCK_REALTIME);
  case LOOM_CLOCK_TSC: return read_tsc();
  default: return 0;
  }
}

/* Real time read on both sides of the domain read; the tightest of a few
 * tries wins, and the midpoint is taken as the matching real time. */
loom__clock_pair loom__clock_take_pair(loom_clock_domain d, uint64_t *gap) {
  loom__clock_pair best = {0, 0};
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t r0 = ts_of(CLOCK_REALTIME);
    uint64_t x = d == LOOM_CLOCK_TSC ? tsc_raw() : loom__clock_now(d);
    uint64_t r1 = ts_of(CLOCK_REALTIME);
    if (r1 - r0 < best_gap) {
      best_gap = r1 - r0;
      best.dom = x;
      best.real = (int64_t)(r0 + (r1 - r0) / 2);
    }
  }
  *gap = best_gap;
  return best;
}

/* Every domain's pair into at; the TSC's kept as a knot. */
static void take_pairs(loom__clock_pair *at) {
  uint64_t gap = 0;
  for (int d = 0; d < 4; d++) {
    at[d] = loom__clock_take_pair((loom_clock_domain)d, &gap);
    if (d == LOOM_CLOCK_TSC) loom__clk_anchor(at[d].dom, at[d].real, (int64_t)(gap / 2));
  }
}

static double tsc_rate(void) {
  static _Atomic double rate; /* ns per tick, measured once */
  double r = atomic_load_explicit(&rate, memory_order_relaxed);
  if (r > 0) return r;
  uint64_t m0 = ts_of(CLOCK_MONOTONIC_RAW), t0 = read_tsc();
  struct timespec nap = {0, 2000000};
  nanosleep(&nap, NULL);
  uint64_t m1 = ts_of(CLOCK_MONOTONIC_RAW), t1 = read_tsc();
  r = t1 > t0 ? (double)(m1 - m0) / (double)(t1 - t0) : 1.0;
  atomic_store_explicit(&rate, r, memory_order_relaxed);
  return r;
}

void loom__timeline_begin(loom__timeline *tl) {
  int64_t shift = tl->shift_ns;
  double ppm = tl->shift_ppm;
  memset(tl, 0, sizeof *tl);
  tl->shift_ns = shift;
  tl->shift_ppm = ppm;
  tl->knot_from = loom__clk_count();
  tl->knot_pid = (int)getpid();
  take_pairs(tl->start);
}

void loom__timeline_end(loom__timeline *tl) {
  take_pairs(tl->stop);
  tl->have_stop = 1;
  /* A timeline begun in another process (salvage) has none of its knots. */
  uint64_t to = tl->knot_pid == (int)getpid() ? loom__clk_count() : tl->knot_from;
  loom__timeline_knots(tl, tl->knot_from, to);
}

void loom__timeline_knots(loom__timeline *tl, uint64_t from, uint64_t to) {
  const loom__clock_pair *a = &tl->start[LOOM_CLOCK_TSC], *b = &tl->stop[LOOM_CLOCK_TSC];
  loom__clk_knot k;
  tl->knot_from = from;
  tl->knot_lo = tl->knot_hi = from;
  tl->knots_lost = 0;
  for (uint64_t i = from; i < to; i++) {
    if (!loom__clk_knot_at(i, &k)) {
      tl->knots_lost = 1;
      tl->knot_lo = tl->knot_hi = i + 1;
      continue;
    }
    if (k.ticks <= a->dom) tl->knot_lo = i + 1;
    if (k.ticks < b->dom) tl->knot_hi = i + 1;
  }
  if (tl->knot_hi < tl->knot_lo) tl->knot_hi = tl->knot_lo;
}

uint64_t loom__timeline_nknots(const loom__timeline *tl) {
  return tl->knot_hi - tl->knot_lo;
}

int loom__timeline_set_shift(loom__timeline *tl, const char *spec) {
  char *end;
  errno = 0;
  long long off = strtoll(spec, &end, 10);
  if (errno || end == spec || (*end && *end != ':')) return -1;
  double ppm = 0;
  if (*end == ':') {
    const char *p = end + 1;
    ppm = strtod(p, &end);
    if (end == p || *end || !(ppm > -1e6 && ppm < 1e6)) return -1;
  }
  tl->shift_ns = (int64_t)off;
  tl->shift_ppm = ppm;
  return 0;
}

/* The test-only shift of the whole timeline (identity unless set). */
static int64_t shifted(const loom__timeline *tl, int64_t real) {
  if (!tl->shift_ns && tl->shift_ppm == 0) return real;
  double since = (double)(real - tl->start[LOOM_CLOCK_REALTIME].real);
  return real + tl->shift_ns + (int64_t)(tl->shift_ppm * 1e-6 * since);
}

/* The line through tl's start and stop pairs of domain d at ts, in ns from
 * d's start (epoch ns as a double would keep only ~256 ns). */
static double on_line(const loom__timeline *tl, loom_clock_domain d, uint64_t ts) {
  const loom__clock_pair *a = &tl->start[d], *b = &tl->stop[d];
  double slope = 1.0;
  /* Between the pairs a line through them is off by no more than they are
   * (~20 ns), where the nominal rate is off by the daemon's slew (up to
   * 500 ppm: 250 ns in a 0.5 ms session); past them the error grows with
   * the distance over the span, so pairs closer than 100 us keep the
   * nominal rate (the TSC's measured only then: a session that stops pays
   * no nap). */
  if (tl->have_stop && b->real - a->real > 100000 && b->dom > a->dom)
    slope = (double)(b->real - a->real) / (double)(b->dom - a->dom);
  else if (d == LOOM_CLOCK_TSC)
    slope = tsc_rate();
  return (double)(int64_t)(ts - a->dom) * slope;
}

/* Knot i as (its time on the TSC's line, its distance from it), in ns from
 * the TSC's start. */
static int knot_uv(const loom__timeline *tl, uint64_t i, double *u, double *v) {
  loom__clk_knot k;
  if (!loom__clk_knot_at(i, &k)) return 0;
  *u = on_line(tl, LOOM_CLOCK_TSC, k.ticks);
  *v = (double)(k.real - tl->start[LOOM_CLOCK_TSC].real) - *u;
  return 1;
}

/* The segment a thread used last (events come in time order, so the next
 * is most often in it): its timeline and its ends as (u, v). */
static _Thread_local struct {
  const loom__timeline *tl;
  uint64_t lo, hi, dom;
  double u0, v0, u1, v1;
} seg;

/* Finds the segment holding u: between knots lo-1 and lo (start or stop
 * where there is none); 0 when a knot was overwritten meanwhile. */
static int find_segment(const loom__timeline *tl, double u) {
  uint64_t lo = tl->knot_lo, hi = tl->knot_hi;
  double x, y;
  while (lo < hi) { /* the first knot past u */
    uint64_t mid = lo + (hi - lo) / 2;
    if (!knot_uv(tl, mid, &x, &y)) return 0;
    if (x <= u) lo = mid + 1;
    else hi = mid;
  }
  seg.u0 = 0, seg.v0 = 0, seg.v1 = 0;
  seg.u1 = (double)(tl->stop[LOOM_CLOCK_TSC].real - tl->start[LOOM_CLOCK_TSC].real);
  if (lo > tl->knot_lo && !knot_uv(tl, lo - 1, &seg.u0, &seg.v0)) return 0;
  if (lo < tl->knot_hi && !knot_uv(tl, lo, &seg.u1, &seg.v1)) return 0;
  seg.tl = tl, seg.lo = tl->knot_lo, seg.hi = tl->knot_hi, seg.dom = tl->start[LOOM_CLOCK_TSC].dom;
  return 1;
}

/* D(u): the knots' distance from the line, interpolated at u. */
static double bend(const loom__timeline *tl, double u) {
  double end = (double)(tl->stop[LOOM_CLOCK_TSC].real - tl->start[LOOM_CLOCK_TSC].real);
  if (u <= 0 || u >= end) return 0;
  int same = seg.tl == tl && seg.lo == tl->knot_lo && seg.hi == tl->knot_hi &&
             seg.dom == tl->start[LOOM_CLOCK_TSC].dom && u >= seg.u0 && u < seg.u1;
  if (!same && !find_segment(tl, u)) {
    seg.tl = NULL;
    return 0;
  }
  return seg.u1 > seg.u0 ? seg.v0 + (seg.v1 - seg.v0) * (u - seg.u0) / (seg.u1 - seg.u0) : seg.v0;
}

static int64_t to_real(const loom__timeline *tl, loom_clock_domain d, uint64_t ts) {
  if (d == LOOM_CLOCK_REALTIME) return (int64_t)ts;
  if ((unsigned)d > LOOM_CLOCK_TSC) return (int64_t)ts;
  int64_t at = tl->start[d].real;
  double u = on_line(tl, d, ts);
  if (tl->have_stop && tl->knot_hi > tl->knot_lo &&
      (d == LOOM_CLOCK_TSC || d == LOOM_CLOCK_MONOTONIC_RAW))
    u += bend(tl, (double)(at - tl->start[LOOM_CLOCK_TSC].real) + u);
  return at + (int64_t)(u >= 0 ? u + 0.5 : u - 0.5);
}

int64_t loom__timeline_convert(const loom__timeline *tl, loom_clock_domain d,
                               uint64_t ts) {
  return shifted(tl, to_real(tl, d, ts));
}

static int cmp_sync(const void *pa, const void *pb) {
  const loom__sync *a = pa, *b = pb;
  return a->dev < b->dev ? -1 : a->dev > b->dev;
}

void loom__clock_finalize(const loom__timeline *tl, loom__clock *c) {
  if (c->domain != LOOM_CLOCK_DEVICE) return;
  if (c->nsync) qsort(c->sync, c->nsync, sizeof *c->sync, cmp_sync);
  for (size_t i = 0; i < c->nsync; i++)
    c->sync[i].epoch = loom__timeline_convert(tl, c->sync[i].host_domain,
                                              c->sync[i].host_ts);
}

int64_t loom__clock_convert(const loom__timeline *tl, loom__clock *c,
                            uint64_t ts) {
  if (c->domain != LOOM_CLOCK_DEVICE)
    return loom__timeline_convert(tl, c->domain, ts);
  if (c->nsync == 0) return (int64_t)ts; /* reported by the session */
  const loom__sync *s = c->sync;
  if (c->nsync == 1) { /* an offset, at the declared rate (else ns, warned) */
    double delta = (double)(int64_t)(ts - s[0].dev);
    double rate = c->ns_per_tick > 0 ? c->ns_per_tick : 1.0;
    return s[0].epoch + (int64_t)(delta * rate + (delta >= 0 ? 0.5 : -0.5));
  }
  /* Binary search for the segment [i, i+1] holding ts (clamped). */
  size_t lo = 0, hi = c->nsync - 1;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (s[mid].dev <= ts) lo = mid;
    else hi = mid;
  }
  const loom__sync *a = &s[lo], *b = &s[hi];
  if (b->dev == a->dev) return a->epoch + (int64_t)(ts - a->dev);
  double slope = (double)(b->epoch - a->epoch) / (double)(b->dev - a->dev);
  double delta = (double)(int64_t)(ts - a->dev);
  return a->epoch + (int64_t)(delta * slope + (delta >= 0 ? 0.5 : -0.5));
}

/* The fit's rate over the whole span (first to last point), ns per tick. */
static double fit_rate(const loom__clock *c) {
  const loom__sync *a = &c->sync[0], *b = &c->sync[c->nsync - 1];
  if (b->dev == a->dev) return 0;
  return (double)(b->epoch - a->epoch) / (double)(b->dev - a->dev);
}

const char *loom__clock_problem(const loom__clock *c, char *buf, size_t n) {
  if (c->domain != LOOM_CLOCK_DEVICE) return NULL;
  if (c->nsync == 0) {
    snprintf(buf, n, "device clock '%s' has no sync point, so its times cannot be "
             "converted; they are taken as epoch ns and are likely wrong "
             "(give clock_sync points or clock_auto_sync)", c->name);
    return buf;
  }
  if (c->nsync == 1 && !(c->ns_per_tick > 0)) {
    snprintf(buf, n, "device clock '%s' has one sync point and no rate, so it is "
             "assumed to tick in ns; its times are wrong if it does not (declare "
             "clock_set_rate or give a second sync point)", c->name);
    return buf;
  }
  double fit = c->nsync >= 2 ? fit_rate(c) : 0;
  if (c->ns_per_tick > 0 && fit > 0 && fabs(fit / c->ns_per_tick - 1.0) > 0.01) {
    snprintf(buf, n, "device clock '%s': declared rate %.6g ns per tick disagrees "
             "with its sync points (%.6g ns per tick) by more than 1%%; the sync "
             "points are used", c->name, c->ns_per_tick, fit);
    return buf;
  }
  return NULL;
}
