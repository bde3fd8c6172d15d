/*
 * clocklog.c - the knots of real time against the tick counter (clocklog.h).
 *
 * A sample is due every LOOM__CLK_PERIOD ticks: the recording thread that
 * first sees a tick count past loom__clk_due takes it (one compare-and-swap
 * elects it; the pair is loom__clock_take_pair's, ~0.2 us, every ~0.4 ms of
 * recording; nothing while no one records).  Which pairs become knots is a swing door: the
 * slopes a line from the last knot may take and still pass within TOL (plus
 * each pair's uncertainty) of every pair since narrow with each pair; when
 * none is left, the pair before the one that closed them is a knot and the
 * next line starts there.  The knots are a ring of LOOM__CLK_KNOTS, written
 * under a try-lock (a sample that finds it taken is skipped) and published
 * by a count that readers load before and after reading an entry.
 */
#include <math.h>

#include "base/clock.h"
#include "clocklog.h"

atomic_uint_fast64_t loom__clk_due;

static atomic_flag busy = ATOMIC_FLAG_INIT;
static atomic_uint_fast64_t nknots; /* ever kept */
static uint64_t first;              /* the first since loom__clk_reset */
static loom__clk_knot ring[LOOM__CLK_KNOTS];

/* The swing door: the last knot, the last pair, the slopes still open. */
static struct {
  int have;
  loom__clk_knot k, p;
  double lo, hi;
} door;

static void push(loom__clk_knot k) {
  uint64_t n = atomic_load_explicit(&nknots, memory_order_relaxed);
  if (n > first && k.ticks <= ring[(n - 1) % LOOM__CLK_KNOTS].ticks) return; /* kept already */
  ring[n % LOOM__CLK_KNOTS] = k;
  atomic_store_explicit(&nknots, n + 1, memory_order_release);
}

/* The slopes (ns per tick) of lines from the knot that pass within tol of
 * the pair (t, r). */
static void slopes(uint64_t t, int64_t r, double tol, double *lo, double *hi) {
  double dt = (double)(t - door.k.ticks), dr = (double)(r - door.k.real);
  *lo = (dr - tol) / dt, *hi = (dr + tol) / dt;
}

/* No pair for a while after p: no one recorded then, but the events after
 * p that did not need a sample (up to LOOM__CLK_PERIOD ticks of them) ran
 * at the rate before p, not at the average over the gap.  p is a knot, and
 * so is the point a PERIOD later on the line to p; the gap is bridged from
 * there. */
static void gap_after(const loom__clk_knot *p) {
  double rate = (double)(p->real - door.k.real) / (double)(p->ticks - door.k.ticks);
  loom__clk_knot end = {p->ticks + LOOM__CLK_PERIOD,
                        p->real + (int64_t)(rate * LOOM__CLK_PERIOD + 0.5)};
  push(*p);
  push(end);
  door.k = door.p = end;
  door.lo = -INFINITY, door.hi = INFINITY;
}

static void feed_locked(uint64_t t, int64_t r, int64_t err) {
  double tol = LOOM__CLK_TOL + (double)err, lo, hi;
  if (!door.have) {
    door.have = 1, door.k = door.p = (loom__clk_knot){t, r};
    door.lo = -INFINITY, door.hi = INFINITY;
    return;
  }
  if (t <= door.p.ticks) return; /* read before the last pair: out of order */
  if (t - door.p.ticks > 2 * (uint64_t)LOOM__CLK_PERIOD && door.p.ticks > door.k.ticks)
    gap_after(&door.p);
  slopes(t, r, tol, &lo, &hi);
  if (lo < door.lo) lo = door.lo;
  if (hi > door.hi) hi = door.hi;
  if (lo > hi) { /* no line from the knot fits: the last pair is one */
    push(door.p);
    door.k = door.p;
    slopes(t, r, tol, &lo, &hi);
  }
  door.lo = lo, door.hi = hi, door.p = (loom__clk_knot){t, r};
}

void loom__clk_feed(uint64_t ticks, int64_t real, int64_t err) {
  if (atomic_flag_test_and_set_explicit(&busy, memory_order_acquire)) return;
  feed_locked(ticks, real, err);
  atomic_flag_clear_explicit(&busy, memory_order_release);
}

void loom__clk_anchor(uint64_t ticks, int64_t real, int64_t err) {
  /* Waits a little for a sampling thread; a lock held forever (a fork in
   * the middle of a sample) costs the anchor only. */
  for (int i = 0; atomic_flag_test_and_set_explicit(&busy, memory_order_acquire); i++)
    if (i == 100000) return;
  feed_locked(ticks, real, err);
  if (door.p.ticks == ticks) {
    push(door.p);
    door.k = door.p, door.lo = -INFINITY, door.hi = INFINITY;
  }
  atomic_flag_clear_explicit(&busy, memory_order_release);
}

void loom__clk_sample(uint64_t ticks) {
  uint_fast64_t due = atomic_load_explicit(&loom__clk_due, memory_order_relaxed);
  if (ticks < due || !atomic_compare_exchange_strong_explicit(&loom__clk_due, &due,
                                                              ticks + LOOM__CLK_PERIOD,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed))
    return;
  uint64_t gap = 0;
  loom__clock_pair p = loom__clock_take_pair(LOOM_CLOCK_TSC, &gap);
  if (gap < 5000) loom__clk_feed(p.dom, p.real, (int64_t)gap / 2); /* else: preempted */
}

uint64_t loom__clk_count(void) { return atomic_load_explicit(&nknots, memory_order_acquire); }

int loom__clk_knot_at(uint64_t i, loom__clk_knot *out) {
  uint64_t n = loom__clk_count();
  if (i >= n || n - i > LOOM__CLK_KNOTS) return 0;
  *out = ring[i % LOOM__CLK_KNOTS];
  return loom__clk_count() - i <= LOOM__CLK_KNOTS;
}

void loom__clk_reset(void) {
  while (atomic_flag_test_and_set_explicit(&busy, memory_order_acquire)) {}
  door.have = 0;
  first = atomic_load(&nknots);
  atomic_store(&loom__clk_due, 0);
  atomic_flag_clear_explicit(&busy, memory_order_release);
}
