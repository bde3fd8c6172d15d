/*
 * clock.h - clocks: reading the standard domains, the session timeline that
 * maps each of them to Unix epoch ns (pairs taken at start and stop), and a
 * backend's declared clock with its sync points (clock.c).
 */
#ifndef LOOM_CLOCK_H
#define LOOM_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "loom/plugin.h"

uint64_t loom__clock_now(loom_clock_domain d);

/* A pair of readings (domain, realtime) taken as close together as possible. */
typedef struct loom__clock_pair {
  uint64_t dom;
  int64_t real;
} loom__clock_pair;

/* Real time read on both sides of a read of domain d (the TSC's without a
 * sample, clocklog.h), the tightest of five tries: the pair, with the two
 * real-time reads' gap in *gap. */
loom__clock_pair loom__clock_take_pair(loom_clock_domain d, uint64_t *gap);

/* Map from every standard domain to epoch ns, from pairs taken at session
 * start and stop; before stop the slope of the domain's nominal rate is
 * used (the TSC's measured once per process, over a 2 ms nap, when first
 * needed: a ring dump or window while recording, or a session shorter than
 * 100 us).  After stop, the TSC and MONOTONIC_RAW, which no time daemon
 * adjusts, also follow the knots where real time changed its rate. */
typedef struct loom__timeline {
  loom__clock_pair start[4], stop[4];
  int have_stop;
  /* Knots of real time against the tick counter (base/clocklog.h) kept
   * while the session ran: [knot_lo, knot_hi) lie strictly between the TSC
   * pairs, used for TSC and MONOTONIC_RAW after stop.  knots_lost: the log
   * overwrote some before the stop (the line through start and stop there). */
  uint64_t knot_from, knot_lo, knot_hi;
  int knot_pid, knots_lost;
  /* Test-only option test_clock_shift=OFFSET_NS:PPM: the whole timeline
   * reads real + shift_ns + shift_ppm * 1e-6 * (real - start), as if the
   * process ran on another host (kept across loom__timeline_begin). */
  int64_t shift_ns;
  double shift_ppm;
} loom__timeline;

void loom__timeline_begin(loom__timeline *tl);
void loom__timeline_end(loom__timeline *tl);
/* Parses test_clock_shift's value into tl; -1 when malformed. */
int loom__timeline_set_shift(loom__timeline *tl, const char *spec);
int64_t loom__timeline_convert(const loom__timeline *tl, loom_clock_domain d,
                               uint64_t ts);
/* Takes knots [from, to) of the log for tl (set by begin and end; tests). */
void loom__timeline_knots(loom__timeline *tl, uint64_t from, uint64_t to);
/* How many knots tl uses. */
uint64_t loom__timeline_nknots(const loom__timeline *tl);

/* A backend's declared clock. */
typedef struct loom__sync {
  uint64_t dev;
  int64_t epoch; /* converted when the point is added */
  loom_clock_domain host_domain;
  uint64_t host_ts;
} loom__sync;

typedef struct loom__clock {
  loom_clock_domain domain;
  char *name;
  loom__sync *sync;
  size_t nsync, cap_sync;
  double ns_per_tick;            /* clock_set_rate; 0 = not declared */
  uint64_t (*auto_read)(loom_backend *b, void *ctx); /* clock_auto_sync */
  void *auto_ctx;
  loom_clock_domain auto_domain;
  void *arena;                   /* its copy in the arena (bkarena.c), or NULL */
} loom__clock;

/* Converts ts of a declared clock to epoch ns; for device clocks the sync
 * points (re-converted with the final timeline) are interpolated. */
int64_t loom__clock_convert(const loom__timeline *tl, loom__clock *c,
                            uint64_t ts);
/* Sorts a device clock's sync points and converts them (after stop). */
void loom__clock_finalize(const loom__timeline *tl, loom__clock *c);
/* What is wrong with a device clock's description, as a sentence for a
 * warning (buf), or NULL when it converts exactly: no sync point, one point
 * and no rate, a declared rate that disagrees with the fit by over 1%. */
const char *loom__clock_problem(const loom__clock *c, char *buf, size_t n);

#endif
