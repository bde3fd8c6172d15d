/*
 * test_clock.c - host times against real time when a time daemon changes
 * real time's rate during a session (base/clocklog.c, base/clock.c).
 *
 * The log and the map, on made-up pairs: a steady clock with noise keeps no
 * knot; one whose rate flips between +400 and -400 ppm every 20 ms (as a
 * daemon slewing does, only more often) keeps a few knots a flip and maps
 * every tick within 150 ns of the real time at it, where the straight line
 * through start and stop is off by microseconds.
 *
 * And a real session while this test flips the kernel's clock frequency
 * (adjtimex, root only: skipped elsewhere; ctest runs it alone): each range
 * starts, in the trace, between the two CLOCK_REALTIME readings the program
 * took around its push, within 150 ns, and the trace says how many times
 * the rate changed.  Before the knots, ranges were placed up to 4 us off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timex.h>
#include <time.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/clock.h"
#include "loom/loom.h"
#include "record/record.h"
#include "base/clocklog.h"

enum { FLIP_NS = 20000000, SPAN_NS = 300000000, BURST_NS = 1000000, EVERY_NS = 30000000 };

/* Made-up ticks run at 2.5 a ns (a 2.5 GHz TSC). */
static uint64_t ticks_of(int64_t ns) { return (uint64_t)ns * 5 / 2; }

/* Real time at ns (from the start) whose rate flips between 1 + ppm and
 * 1 - ppm every FLIP_NS. */
static int64_t real_at(int64_t ns, double ppm) {
  int64_t base = 1700000000000000000, whole = ns / FLIP_NS, part = ns % FLIP_NS;
  double r = 0;
  for (int64_t i = 0; i < whole; i++) r += FLIP_NS * (1 + (i % 2 ? -ppm : ppm) * 1e-6);
  r += (double)part * (1 + (whole % 2 ? -ppm : ppm) * 1e-6);
  return base + (int64_t)r;
}

static uint64_t rnd_state = 12345;
static int64_t noise(void) { /* -10..10 ns */
  rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
  return (int64_t)((rnd_state >> 33) % 21) - 10;
}

/* Whether the program records at ns: always, or (bursts) for BURST_NS of
 * every EVERY_NS, 7 ms in. */
static int recording(int64_t ns, int bursts) {
  return !bursts || (ns % EVERY_NS >= 7000000 && ns % EVERY_NS < 7000000 + BURST_NS);
}

/* A timeline over made-up pairs of a clock at ppm, taken as the recording
 * threads take them (one a PERIOD while recording); the largest distance of
 * a tick recorded from its real time, with the knots (bent) or without. */
static double worst_error(double ppm, int bursts, uint64_t *knots, int bent) {
  loom__timeline tl = {0};
  uint64_t from = loom__clk_count();
  int64_t step = LOOM__CLK_PERIOD * 2 / 5 + 1234, next = 0;
  loom__clk_reset();
  loom__clk_anchor(ticks_of(0), real_at(0, ppm), 10);
  for (int64_t ns = 1; ns < SPAN_NS; ns += 997)
    if (recording(ns, bursts) && ns >= next) { /* the first event a PERIOD on */
      loom__clk_feed(ticks_of(ns), real_at(ns, ppm) + noise(), 10);
      next = ns + step;
    }
  loom__clk_anchor(ticks_of(SPAN_NS), real_at(SPAN_NS, ppm), 10);
  tl.start[LOOM_CLOCK_TSC] = (loom__clock_pair){ticks_of(0), real_at(0, ppm)};
  tl.stop[LOOM_CLOCK_TSC] = (loom__clock_pair){ticks_of(SPAN_NS), real_at(SPAN_NS, ppm)};
  tl.have_stop = 1;
  loom__timeline_knots(&tl, from, bent ? loom__clk_count() : from);
  *knots = loom__timeline_nknots(&tl);
  double worst = 0;
  for (int64_t ns = 0; ns <= SPAN_NS; ns += 997) {
    if (!recording(ns, bursts)) continue;
    double e = (double)(loom__timeline_convert(&tl, LOOM_CLOCK_TSC, ticks_of(ns)) -
                        real_at(ns, ppm));
    if (e < 0) e = -e;
    if (e > worst) worst = e;
  }
  return worst;
}

static void test_steady(void **st) {
  (void)st;
  uint64_t knots = 0;
  double e = worst_error(0, 0, &knots, 1);
  printf("steady clock: %llu knots, worst error %.0f ns\n", (unsigned long long)knots, e);
  assert_int_equal(knots, 0);
  assert_true(e <= 2);
}

static void flipping(int bursts, double most_ns, int most_knots) {
  uint64_t knots = 0, none = 0;
  double e = worst_error(400, bursts, &knots, 1), line = worst_error(400, bursts, &none, 0);
  printf("+-400 ppm every 20 ms over 300 ms, %s: %llu knots, worst error %.0f ns "
         "(the line through start and stop: %.0f ns)\n", bursts ? "1 ms bursts" : "all along",
         (unsigned long long)knots, e, line);
  assert_int_equal(none, 0);
  assert_true(line > 1000);
  assert_true(e <= most_ns);
  assert_true(knots <= (uint64_t)most_knots);
}

static void test_flipping(void **st) {
  (void)st;
  flipping(0, 150, 3 * (SPAN_NS / FLIP_NS));
}

/* Events only in short bursts: after each burst's last pair they ran at the
 * rate before it, not at the average over the gap up to the next pair (that
 * put them up to 109 ns off here). */
static void test_bursts(void **st) {
  (void)st;
  flipping(1, 50, 4 * (SPAN_NS / EVERY_NS) + 2);
}

/* ---- a real session under a flipping kernel clock ------------------------ */

static long set_freq(long freq) {
  struct timex tx = {.modes = ADJ_FREQUENCY, .freq = freq};
  return adjtimex(&tx);
}

static int64_t now_real(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

enum { RANGES = 3000 };
static int64_t before[RANGES], after[RANGES];

static void spin_ns(int64_t ns) {
  int64_t end = now_real() + ns;
  while (now_real() < end) {}
}

static void test_session(void **st) {
  (void)st;
  struct timex tx = {0};
  adjtimex(&tx);
  long orig = tx.freq;
  if (set_freq(orig) < 0) {
    printf("adjtimex: %s: the session under a flipping clock is not tried\n", strerror(errno));
    skip();
  }
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .name = "clock"};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  int64_t flip_at = now_real() + FLIP_NS;
  int sign = 1, flips = 0;
  for (int i = 0; i < RANGES; i++) {
    if (now_real() >= flip_at) {
      set_freq(orig + sign * 400L * 65536);
      sign = -sign, flips++;
      flip_at = now_real() + FLIP_NS;
    }
    before[i] = now_real();
    loom_range_push("r");
    after[i] = now_real();
    spin_ns(50000);
    loom_range_pop();
  }
  set_freq(orig);
  loom_trace *t = NULL;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  loom_session_destroy(s);
  int64_t worst = 0;
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (strcmp(v.name, "r")) continue;
    assert_true(n < RANGES);
    int64_t off = v.start_ns < before[n] ? before[n] - v.start_ns
                  : v.start_ns > after[n] ? v.start_ns - after[n] : 0;
    if (off > worst) worst = off;
    n++;
  }
  const char *changes = "0";
  for (size_t i = 0; i < loom_trace_meta_count(t); i++) {
    const char *k = NULL, *v = NULL;
    loom_trace_meta(t, i, &k, &v);
    if (!strcmp(k, "clock_knots")) changes = v;
  }
  printf("%d flips: %zu ranges, the farthest %lld ns outside its readings; "
         "clock_knots %s\n", flips, n, (long long)worst, changes);
  assert_int_equal(n, RANGES);
  assert_true(flips >= 5);
  /* Without an invariant TSC the recorder reads CLOCK_MONOTONIC, which the
   * kernel slews as it slews real time: nothing to bend, no knot. */
  if (loom__hostrec_domain() == LOOM_CLOCK_TSC) assert_true(atoi(changes) >= flips);
  assert_true(worst <= 150);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steady),
      cmocka_unit_test(test_flipping),
      cmocka_unit_test(test_bursts),
      cmocka_unit_test(test_session),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
