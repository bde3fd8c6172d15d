/*
 * test_map.c - loom's u64 map (src/util) against a plain array, in both of
 * its placements: hashed keys, and keys that come in runs (eight
 * consecutive keys on one home line, as `loom report` keeps the correlation
 * ids of launches in flight).  Random puts, slots, gets and deletes over
 * keys drawn so that runs of consecutive ids, ids that differ in the high
 * bits only, and key 0 all occur; after every step the map must say exactly
 * what the array says, so a deletion that broke a probe chain (the backward
 * shift) is caught at the next lookup of a key behind it.  Every so often
 * the map is emptied for reuse (loom__map_clear, as each step's graph of the
 * critical path does) and must then hold nothing and take keys again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/util.h"

enum { DOMAIN = 4096, STEPS = 400000 };

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* The i-th key of the domain: runs of 16 consecutive ids at scattered
 * bases, some bases sharing their low 32 bits, and key 0. */
static uint64_t key_of(size_t i) {
  if (i == 0) return 0;
  uint64_t base = (uint64_t)(i / 16) * 1000003u;
  if ((i / 16) % 3 == 0) base = (uint64_t)(i / 16) << 40;
  return base + i % 16 + 1;
}

static void check_all(const loom__map *m, const uint64_t *val, const char *have) {
  size_t n = 0;
  for (size_t i = 0; i < DOMAIN; i++) {
    uint64_t *v = loom__map_get(m, key_of(i));
    if (have[i]) {
      assert_non_null(v);
      assert_int_equal(*v, val[i]);
    } else {
      assert_null(v);
    }
    n += have[i] && key_of(i) != 0;
  }
  assert_int_equal(m->n, n);
}

static void against_array(int runs) {
  loom__map m = {0};
  m.runs = runs;
  static uint64_t val[DOMAIN];
  static char have[DOMAIN];
  memset(have, 0, sizeof have);
  uint64_t s = 0x9e3779b97f4a7c15ull + (uint64_t)runs;
  for (size_t step = 0; step < STEPS; step++) {
    uint64_t r = rnd(&s);
    /* any key of the domain; its run (16 keys) is swept by case 3 */
    size_t i = (size_t)(r >> 20) % DOMAIN;
    switch (r % 4) {
    case 0:
      assert_int_equal(loom__map_put(&m, key_of(i), r), 0);
      have[i] = 1, val[i] = r;
      break;
    case 1: {
      int added;
      uint64_t *v = loom__map_slot(&m, key_of(i), &added);
      assert_non_null(v);
      assert_int_equal(added, !have[i]);
      if (added) assert_int_equal(*v, 0);
      else assert_int_equal(*v, val[i]);
      *v = r ^ 1;
      have[i] = 1, val[i] = r ^ 1;
      break;
    }
    case 2:
      assert_int_equal(loom__map_del(&m, key_of(i)), have[i]);
      have[i] = 0;
      break;
    default: /* a FIFO-like sweep: delete a run in order, as pruning does */
      for (size_t k = i & ~(size_t)15; k < (i & ~(size_t)15) + 16; k++) {
        assert_int_equal(loom__map_del(&m, key_of(k)), have[k]);
        have[k] = 0;
      }
      break;
    }
    if (step % 4000 == 0) check_all(&m, val, have);
    if (step % 50000 == 49999) {
      loom__map_clear(&m);
      memset(have, 0, sizeof have);
      assert_int_equal(m.runs, runs);
      check_all(&m, val, have);
    }
  }
  check_all(&m, val, have);
  /* filled with every key, then emptied in key order */
  for (size_t i = 0; i < DOMAIN; i++) {
    assert_int_equal(loom__map_put(&m, key_of(i), i), 0);
    have[i] = 1, val[i] = i;
  }
  check_all(&m, val, have);
  for (size_t i = 0; i < DOMAIN; i++) {
    assert_int_equal(loom__map_del(&m, key_of(i)), 1);
    have[i] = 0;
    if (i % 512 == 0) check_all(&m, val, have);
  }
  check_all(&m, val, have);
  loom__map_free(&m);
}

static void test_hashed(void **state) {
  (void)state;
  against_array(0);
}

static void test_runs(void **state) {
  (void)state;
  against_array(1);
}

/* A map emptied keeps its slots while it was well filled, and gives its
 * memory back when it held far fewer keys than its room; either way it is
 * empty, keeps its placement, and takes keys again. */
static void test_clear(void **state) {
  (void)state;
  loom__map m = {0};
  m.runs = 1;
  for (uint64_t k = 0; k < 1000; k++) assert_int_equal(loom__map_put(&m, k, k + 7), 0);
  size_t cap = m.cap;
  loom__map_clear(&m);
  assert_int_equal(m.cap, cap); /* kept: 999 keys in it */
  assert_int_equal(m.n, 0);
  assert_int_equal(m.runs, 1);
  for (uint64_t k = 0; k < 1000; k++) assert_null(loom__map_get(&m, k));
  assert_int_equal(loom__map_put(&m, 5, 1), 0);
  assert_int_equal(*loom__map_get(&m, 5), 1);
  loom__map_clear(&m); /* 1 key in room for over a thousand: freed */
  assert_int_equal(m.cap, 0);
  assert_int_equal(m.runs, 1);
  assert_null(loom__map_get(&m, 5));
  assert_int_equal(loom__map_put(&m, 5, 2), 0);
  assert_int_equal(*loom__map_get(&m, 5), 2);
  loom__map_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hashed),
      cmocka_unit_test(test_runs),
      cmocka_unit_test(test_clear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
