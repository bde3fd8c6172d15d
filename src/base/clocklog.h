/*
 * clocklog.h - where real time changed its rate against the tick counter
 * while recording (clocklog.c).
 *
 * Host records are stamped with the tick counter (TSC; CLOCK_MONOTONIC_RAW
 * where there is none), which no one adjusts, and mapped to CLOCK_REALTIME,
 * the trace's timeline.  A time daemon (chrony, systemd-timesyncd) speeds
 * real time up or slows it down by up to 500 ppm, and changes that rate when
 * it likes: then a line through pairs taken at session start and stop puts
 * an event hundreds of ns to µs from the real time the program read at the
 * same moment, before the op that encloses it or, between ranks, a receive
 * before its send.  So the recording threads take a (ticks, real) pair
 * every PERIOD ticks as they record, and the log keeps the knots: the pairs
 * where the straight line from the previous knot stops fitting (by more
 * than TOL plus the pair's own uncertainty).  Real time is then the line
 * through the knots.  With a steady clock no pair is kept.
 */
#ifndef LOOM_CLOCKLOG_H
#define LOOM_CLOCKLOG_H

#include <stdatomic.h>
#include <stdint.h>

#include "util/util.h"

enum { LOOM__CLK_PERIOD = 1 << 20, /* ticks between samples: ~0.4 ms at 2.6 GHz */
       LOOM__CLK_TOL = 40,         /* ns a point may stray from its line */
       LOOM__CLK_KNOTS = 1 << 16 };

/* A knot: ticks and the real time (epoch ns) at them. */
typedef struct loom__clk_knot {
  uint64_t ticks;
  int64_t real;
} loom__clk_knot;

extern atomic_uint_fast64_t loom__clk_due;
void loom__clk_sample(uint64_t ticks);
/* A recording thread read ticks: a sample when one is due. */
static inline void loom__clk_tick(uint64_t ticks) {
  if (LOOM__UNLIKELY(ticks >= atomic_load_explicit(&loom__clk_due, memory_order_relaxed)))
    loom__clk_sample(ticks);
}

/* A pair known good (a session's start or stop): kept as a knot. */
void loom__clk_anchor(uint64_t ticks, int64_t real, int64_t err);
/* One pair into the log (a sample; tests), err its uncertainty in ns. */
void loom__clk_feed(uint64_t ticks, int64_t real, int64_t err);

/* Knots ever kept (their index: the i-th is loom__clk_knot_at(i)). */
uint64_t loom__clk_count(void);
/* Knot i, 0 when it is no longer in the log (LOOM__CLK_KNOTS later ones
 * overwrote it). */
int loom__clk_knot_at(uint64_t i, loom__clk_knot *out);
/* Forgets every knot and sample (tests). */
void loom__clk_reset(void);

#endif
