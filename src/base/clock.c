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
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "base/clock.h"
#include "util/util.h"

static uint64_t ts_of(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t read_tsc(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return ts_of(CLOCK_MONOTONIC_RAW);
#endif
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
static loom__clock_pair take_pair(loom_clock_domain d) {
  loom__clock_pair best = {0, 0};
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t r0 = ts_of(CLOCK_REALTIME);
    uint64_t x = loom__clock_now(d);
    uint64_t r1 = ts_of(CLOCK_REALTIME);
    if (r1 - r0 < best_gap) {
      best_gap = r1 - r0;
      best.dom = x;
      best.real = (int64_t)(r0 + (r1 - r0) / 2);
    }
  }
  return best;
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
  for (int d = 0; d < 4; d++) tl->start[d] = take_pair((loom_clock_domain)d);
}

void loom__timeline_end(loom__timeline *tl) {
  for (int d = 0; d < 4; d++) tl->stop[d] = take_pair((loom_clock_domain)d);
  tl->have_stop = 1;
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

static int64_t to_real(const loom__timeline *tl, loom_clock_domain d, uint64_t ts) {
  if (d == LOOM_CLOCK_REALTIME) return (int64_t)ts;
  if ((unsigned)d > LOOM_CLOCK_TSC) return (int64_t)ts;
  const loom__clock_pair *a = &tl->start[d], *b = &tl->stop[d];
  double slope = 1.0;
  /* Pairs closer than 1 ms would make a noisy slope: keep the nominal one
   * (the TSC's measured only then: a session that stops pays no nap). */
  if (tl->have_stop && b->real - a->real > 1000000 && b->dom > a->dom)
    slope = (double)(b->real - a->real) / (double)(b->dom - a->dom);
  else if (d == LOOM_CLOCK_TSC)
    slope = tsc_rate();
  double delta = (double)(int64_t)(ts - a->dom);
  return a->real + (int64_t)(delta * slope + (delta >= 0 ? 0.5 : -0.5));
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
