/*
 * test_esort.c - the report's external sort on its own: records in a
 * random order, with ties on time broken by the rest of the order (longer
 * first, the kind's nesting rank, the name's text), come back in exactly
 * that order, whether they stay in memory or spill to many runs, through
 * the merging thread (4096 records or more) or without it.  A reader that
 * stops early (the pass ends on an error) can still ask for the sort's
 * error and free it while the merging thread has blocks ready: run under
 * ThreadSanitizer by CI, with no report of a race, and under ASan with no
 * leak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/analysis.h"
#include "loom/loom.h"

static const char *const names[] = {"zeta", "alpha", "mid", "beta"};
static loom__strtab strs;
static uint32_t ids[4];

#define MEM ((size_t)64 << 20) /* a budget that holds every record here */

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* The expected order, written out plainly (esort.c's comment). */
static int rank(uint8_t kind) {
  switch (kind) {
  case LOOM_KIND_USER_RANGE: return 0;
  case LOOM_KIND_CPU_OP: return 1;
  case LOOM_KIND_RUNTIME: return 2;
  default: return 6; /* LOOM_KIND_KERNEL */
  }
}

static int expected(const void *pa, const void *pb) {
  const loom__arec *a = pa, *b = pb;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  if (rank(a->kind) != rank(b->kind)) return rank(a->kind) < rank(b->kind) ? -1 : 1;
  int c = strcmp(loom__strtab_get(&strs, a->name), loom__strtab_get(&strs, b->name));
  if (c) return c;
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  return a->corr < b->corr ? -1 : a->corr > b->corr;
}

/* n records, times drawn from a small range so that many tie. */
static loom__arec *records(size_t n, uint64_t seed) {
  static const uint8_t kinds[] = {LOOM_KIND_USER_RANGE, LOOM_KIND_CPU_OP, LOOM_KIND_RUNTIME, LOOM_KIND_KERNEL};
  loom__arec *r = calloc(n, sizeof *r);
  assert_non_null(r);
  for (size_t i = 0; i < n; i++) {
    uint64_t x = rnd(&seed);
    r[i].ts = (int64_t)(x % (n / 4 + 1)) - 1000;
    r[i].dur = (int64_t)(x >> 20) % 3;
    r[i].kind = kinds[(x >> 24) % 4];
    r[i].name = ids[(x >> 28) % 4];
    r[i].track = (uint32_t)(x >> 32) % 3;
    r[i].corr = i + 1; /* distinct: the order is total */
  }
  return r;
}

static void sorted_back(size_t n, size_t budget) {
  loom__arec *r = records(n, 0x1234567 + n + budget);
  loom__esort *s = loom__esort_new(&strs, budget);
  assert_non_null(s);
  for (size_t i = 0; i < n; i++) assert_int_equal(loom__esort_add(s, &r[i]), 0);
  assert_int_equal(loom__esort_finish(s), 0);
  qsort(r, n, sizeof *r, expected);
  size_t k = 0;
  for (const loom__arec *x; (x = loom__esort_next(s)); k++) {
    assert_true(k < n);
    assert_int_equal(x->corr, r[k].corr);
  }
  assert_int_equal(k, n);
  assert_null(loom__esort_next(s)); /* and stays at the end */
  assert_string_equal(loom__esort_error(s), "");
  loom__esort_free(s);
  free(r);
}

static void test_in_memory(void **state) {
  (void)state;
  sorted_back(100, MEM);     /* below the merging thread's threshold */
  sorted_back(4095, MEM);
  sorted_back(4096, MEM);    /* exactly one block */
  sorted_back(50000, MEM);   /* many blocks, gathered on the thread */
}

static void test_spilled(void **state) {
  (void)state;
  /* the smallest budget: 1024 records a buffer, so 48 runs and a tail */
  sorted_back(50000, 1);
  sorted_back(8192, 1);      /* runs only, the tail empty */
}

/* The reader stops after a few records: the error is asked for and the
 * sort freed while the merging thread has more ready. */
static void test_stop_early(void **state) {
  (void)state;
  static const size_t budgets[] = {1, MEM}; /* spilled, in memory */
  for (int b = 0; b < 2; b++) {
    size_t budget = budgets[b];
    size_t n = 60000;
    loom__arec *r = records(n, 99 + (uint64_t)b);
    loom__esort *s = loom__esort_new(&strs, budget);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++) assert_int_equal(loom__esort_add(s, &r[i]), 0);
    assert_int_equal(loom__esort_finish(s), 0);
    for (int i = 0; i < 10; i++) assert_non_null(loom__esort_next(s));
    assert_string_equal(loom__esort_error(s), "");
    loom__esort_free(s);
    free(r);
  }
}

int main(void) {
  for (int i = 0; i < 4; i++) ids[i] = loom__strtab_intern(&strs, names[i], strlen(names[i]));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_in_memory),
      cmocka_unit_test(test_spilled),
      cmocka_unit_test(test_stop_early),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  loom__strtab_free(&strs);
  return rc;
}
