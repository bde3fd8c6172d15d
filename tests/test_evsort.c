/*
 * test_evsort.c - the order of a trace's events (src/trace/evsort.c), which
 * every saved trace is put in: indices sorted by the radix sort come back in
 * exactly the order a plain sort with step 1's comparator gives (track,
 * start, longer first, ranges before ops before calls, insertion order,
 * then the lower index).  Random events on a few tracks with many equal
 * starts (runs of ties short and long), negative starts, a subset of the
 * indices in any order, and the ways around the radix sort: a trace whose
 * times span 2^62 ns (track and time do not fit one key) and a small one.
 * And the permutation that puts them there (loom__trace_permute, in place):
 * every event where the order says, flows following their events; and
 * loom__trace_sort, which merges a tail into events already in order: the
 * order of a sort of all, flows following.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "loom/loom.h"
#include "trace/trace.h"

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static const loom__ev *plain_ev;
static int plain_cmp(const void *pa, const void *pb) {
  uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  int c = loom__ev_cmp_track_time(&plain_ev[a], &plain_ev[b]);
  return c ? c : a < b ? -1 : a > b;
}

static const uint8_t kinds[] = {LOOM_KIND_USER_RANGE, LOOM_KIND_CPU_OP, LOOM_KIND_RUNTIME,
                                LOOM_KIND_KERNEL};

/* n events; starts drawn from `spread` values (few: many ties) from base,
 * or anywhere in +-2^62 when wide. */
static loom_trace *random_trace(size_t n, uint32_t tracks, uint64_t spread, int64_t base,
                                int wide, uint64_t *seed) {
  loom_trace *t = loom__trace_new();
  assert_non_null(t);
  t->ev = loom__array_alloc(n, sizeof *t->ev);
  assert_non_null(t->ev);
  t->cap_ev = n, t->nev = n;
  for (size_t i = 0; i < n; i++) {
    loom__ev *e = &t->ev[i];
    memset(e, 0, sizeof *e);
    e->track = (uint32_t)(rnd(seed) % tracks);
    e->ts = wide ? (int64_t)(rnd(seed) >> 1) - ((int64_t)1 << 62)
                 : base + (int64_t)(rnd(seed) % spread);
    e->dur = (int64_t)(rnd(seed) % 4);
    e->kind = kinds[rnd(seed) % 4];
    e->args_off = (uint32_t)(rnd(seed) % 3); /* ties on it too */
  }
  return t;
}

static void check(const loom_trace *t, uint32_t *idx, size_t n) {
  uint32_t *want = malloc((n + 1) * sizeof *want);
  assert_non_null(want);
  memcpy(want, idx, n * sizeof *idx);
  plain_ev = t->ev;
  qsort(want, n, sizeof *want, plain_cmp);
  loom__ev_sort_indices(t, idx, n);
  for (size_t i = 0; i < n; i++)
    if (idx[i] != want[i])
      fail_msg("position %zu of %zu: index %u, expected %u", i, n, idx[i], want[i]);
  free(want);
}

static void sort_all(size_t n, uint32_t tracks, uint64_t spread, int64_t base, int wide) {
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ n ^ spread;
  loom_trace *t = random_trace(n, tracks, spread, base, wide, &seed);
  uint32_t *idx = malloc((n + 1) * sizeof *idx);
  assert_non_null(idx);
  for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
  check(t, idx, n);
  free(idx);
  loom_trace_free(t);
}

static void test_many_ties(void **st) {
  (void)st;
  sort_all(200000, 5, 50, 1700000000000000000, 0);  /* runs of ~800 equal starts */
  sort_all(200000, 3, 300000, 1700000000000000000, 0); /* short runs */
}

static void test_spread(void **st) {
  (void)st;
  sort_all(100000, 700, (uint64_t)1 << 40, -5000000000, 0); /* several digits, negative starts */
  sort_all(100000, 1, 1, 42, 0);                             /* one start: every key equal */
}

static void test_fallbacks(void **st) {
  (void)st;
  sort_all(50000, 4, 0, 0, 1); /* 2^62 ns apart with 4 tracks: no single key */
  sort_all(40, 3, 10, 7, 0);   /* small: no keys */
}

/* A subset of the indices, in any order (lanes and the memory walk sort
 * some of a trace's events). */
static void test_subset(void **st) {
  (void)st;
  uint64_t seed = 77;
  size_t n = 60000, k = 0;
  loom_trace *t = random_trace(n, 6, 5000, 1000, 0, &seed);
  uint32_t *idx = malloc(n * sizeof *idx);
  assert_non_null(idx);
  for (size_t i = n; i-- > 0;)
    if (rnd(&seed) % 3 == 0) idx[k++] = (uint32_t)i;
  check(t, idx, k);
  free(idx);
  loom_trace_free(t);
}

/* loom__trace_permute, in place: new event i is old event order[i] for a
 * random permutation with fixed points, long cycles and swaps, and flows
 * follow their events. */
/* count random flows between t's n events; returns a copy of them. */
static loom__flow *random_flows(loom_trace *t, size_t n, size_t count, uint64_t *seed) {
  t->nflows = count;
  t->flows = calloc(count + 1, sizeof *t->flows);
  loom__flow *copy = malloc((count + 1) * sizeof *copy);
  assert_non_null(t->flows);
  assert_non_null(copy);
  for (size_t f = 0; f < count; f++)
    t->flows[f] = (loom__flow){(uint32_t)(rnd(seed) % n), (uint32_t)(rnd(seed) % n), f + 1};
  if (count) memcpy(copy, t->flows, count * sizeof *copy);
  return copy;
}

/* Each flow joins the events it joined before (correlation: old index + 1). */
static void flows_follow(const loom_trace *t, loom__flow *before) {
  for (size_t f = 0; f < t->nflows; f++) {
    assert_int_equal(t->ev[t->flows[f].from].correlation, before[f].from + 1);
    assert_int_equal(t->ev[t->flows[f].to].correlation, before[f].to + 1);
  }
  free(before);
}

static void test_permute(void **st) {
  (void)st;
  uint64_t seed = 91;
  for (size_t n = 0; n < 3000; n = n * 3 + 1) {
    loom_trace *t = random_trace(n, 4, 100000, 0, 0, &seed);
    for (size_t i = 0; i < n; i++) t->ev[i].correlation = i + 1; /* who it was */
    uint32_t *order = malloc((n + 1) * sizeof *order);
    loom__ev *old = malloc((n + 1) * sizeof *old);
    assert_non_null(order);
    assert_non_null(old);
    if (n) memcpy(old, t->ev, n * sizeof *old);
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) { /* Fisher-Yates, leaving some alone */
      size_t j = rnd(&seed) % i;
      if (rnd(&seed) % 4 == 0) continue;
      uint32_t x = order[i - 1];
      order[i - 1] = order[j];
      order[j] = x;
    }
    loom__flow *oldf = random_flows(t, n, n / 2, &seed);
    assert_int_equal(loom__trace_permute(t, order), 0);
    for (size_t i = 0; i < n; i++)
      assert_memory_equal(&t->ev[i], &old[order[i]], sizeof *old);
    flows_follow(t, oldf);
    free(old);
    free(order);
    loom_trace_free(t);
  }
}

/* loom__trace_sort of a trace whose first `lead` events are in order and
 * the rest random: the events and flows of a sort of them all (qsort of
 * the indices with the comparator, ties by index). */
static void sort_with_lead(size_t n, size_t lead, uint32_t tracks, uint64_t spread,
                           uint64_t *seed) {
  loom_trace *t = random_trace(n, tracks, spread, 0, 0, seed);
  uint32_t *order = malloc((n + 1) * sizeof *order);
  loom__ev *old = malloc((n + 1) * sizeof *old);
  assert_non_null(order);
  assert_non_null(old);
  for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
  plain_ev = t->ev;
  qsort(order, lead, sizeof *order, plain_cmp); /* the lead in order */
  for (size_t i = 0; i < lead; i++) old[i] = t->ev[order[i]];
  if (lead) memcpy(t->ev, old, lead * sizeof *old);
  for (size_t i = 0; i < n; i++) t->ev[i].correlation = i + 1; /* who it was */
  if (n) memcpy(old, t->ev, n * sizeof *old);
  qsort(order, n, sizeof *order, plain_cmp); /* what a sort of all gives */
  loom__flow *oldf = random_flows(t, n, n / 3, seed);
  assert_int_equal(loom__trace_sort(t), 0);
  for (size_t i = 0; i < n; i++)
    if (memcmp(&t->ev[i], &old[order[i]], sizeof *old))
      fail_msg("n %zu lead %zu: position %zu holds event %llu, expected %u", n, lead, i,
               (unsigned long long)t->ev[i].correlation - 1, order[i]);
  flows_follow(t, oldf);
  free(old);
  free(order);
  loom_trace_free(t);
}

/* In order already, a short or long tail after it (merged in), less than
 * half in order (sorted whole); few and many ties, one and many tracks. */
static void test_trace_sort(void **st) {
  (void)st;
  uint64_t seed = 7;
  static const double leads[] = {0, 0.2, 0.49, 0.5, 0.8, 0.97, 1};
  for (size_t n = 1; n < 5000; n = n * 4 + 3)
    for (size_t k = 0; k < sizeof leads / sizeof *leads; k++) {
      sort_with_lead(n, (size_t)(leads[k] * (double)n), 1, 50, &seed);
      sort_with_lead(n, (size_t)(leads[k] * (double)n), 5, 100000, &seed);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_permute),
      cmocka_unit_test(test_trace_sort),
      cmocka_unit_test(test_many_ties),
      cmocka_unit_test(test_spread),
      cmocka_unit_test(test_fallbacks),
      cmocka_unit_test(test_subset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
