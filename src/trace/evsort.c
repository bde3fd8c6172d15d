/*
 * evsort.c - events in step 1's order (loom__ev_cmp_track_time: track,
 * start, longer first, ranges before ops before calls, insertion order).
 *
 * The trace is sorted once per save, with hundreds of thousands to millions
 * of events, and lanes, the memory walk and windows sort indices of some:
 * on 1.2M nested ops (bench/bench_evsort) qsort through a comparator called
 * by pointer costs 31-34 ns an event moving the 56-byte events and 38-41
 * moving indices, this 20-22.  The
 * indices are sorted by a 64-bit key, the track above the start's offset from
 * the earliest start, with a stable LSD radix sort (11-bit digits, a digit
 * every key shares skipped); keys that are equal (the same track and start)
 * are then put in order by the comparator, the lower index first on a tie,
 * so the result is qsort's with that comparator exactly.  Where track and
 * time do not fit one key together (a trace spanning ~days with thousands of
 * tracks, or a hostile one), or memory for the keys is short, it is qsort.
 */
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "util/util.h"

enum { DIGIT = 11, BUCKETS = 1 << DIGIT, MAXPASS = (64 + DIGIT - 1) / DIGIT, SMALL = 64 };

static _Thread_local const loom__ev *sort_ev;

static int cmp_index(const void *pa, const void *pb) {
  uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  int c = loom__ev_cmp_track_time(&sort_ev[a], &sort_ev[b]);
  return c ? c : a < b ? -1 : a > b;
}

static int bits_of(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }

/* The key of each index (track above the start's offset from lo), or 0
 * when they do not fit in 64 bits. */
static int make_keys(const loom__ev *ev, const uint32_t *idx, size_t n, uint64_t *key) {
  int64_t lo = ev[idx[0]].ts, hi = lo;
  uint32_t maxtrack = 0;
  for (size_t i = 0; i < n; i++) {
    const loom__ev *e = &ev[idx[i]];
    lo = e->ts < lo ? e->ts : lo;
    hi = e->ts > hi ? e->ts : hi;
    maxtrack = e->track > maxtrack ? e->track : maxtrack;
  }
  int tbits = bits_of((uint64_t)hi - (uint64_t)lo);
  if (tbits + bits_of(maxtrack) > 64) return 0;
  for (size_t i = 0; i < n; i++) {
    const loom__ev *e = &ev[idx[i]];
    uint64_t t = tbits == 64 ? 0 : (uint64_t)e->track << tbits;
    key[i] = t | ((uint64_t)e->ts - (uint64_t)lo);
  }
  return 1;
}

/* Stable LSD radix sort of the (key, idx) pairs, with key2 and idx2 as
 * room and count for the digits' counts; the result in key and idx. */
static void radix(uint64_t *key, uint32_t *idx, uint64_t *key2, uint32_t *idx2,
                  uint32_t (*count)[BUCKETS], size_t n) {
  uint64_t any = 0;
  for (size_t i = 0; i < n; i++) any |= key[i];
  int passes = (bits_of(any) + DIGIT - 1) / DIGIT;
  memset(count, 0, (size_t)passes * sizeof *count);
  for (size_t i = 0; i < n; i++)
    for (int p = 0; p < passes; p++) count[p][(key[i] >> (p * DIGIT)) & (BUCKETS - 1)]++;
  uint64_t *k = key, *k2 = key2;
  uint32_t *x = idx, *x2 = idx2;
  for (int p = 0; p < passes; p++) {
    uint32_t *c = count[p], sum = 0;
    if (c[(k[0] >> (p * DIGIT)) & (BUCKETS - 1)] == n) continue; /* one digit for all */
    for (int b = 0; b < BUCKETS; b++) {
      uint32_t m = c[b];
      c[b] = sum, sum += m;
    }
    for (size_t i = 0; i < n; i++) {
      uint32_t at = c[(k[i] >> (p * DIGIT)) & (BUCKETS - 1)]++;
      k2[at] = k[i], x2[at] = x[i];
    }
    uint64_t *tk = k;
    uint32_t *tx = x;
    k = k2, k2 = tk, x = x2, x2 = tx;
  }
  if (k != key) {
    memcpy(key, k, n * sizeof *key);
    memcpy(idx, x, n * sizeof *idx);
  }
}

/* Runs of equal keys, in the comparator's order. */
static void ties(uint32_t *idx, const uint64_t *key, size_t n) {
  for (size_t lo = 0, hi; lo < n; lo = hi) {
    for (hi = lo + 1; hi < n && key[hi] == key[lo];) hi++;
    if (hi - lo < 2) continue;
    if (hi - lo > 16) {
      qsort(idx + lo, hi - lo, sizeof *idx, cmp_index);
      continue;
    }
    for (size_t i = lo + 1; i < hi; i++)
      for (size_t j = i; j > lo && cmp_index(&idx[j - 1], &idx[j]) > 0; j--) {
        uint32_t x = idx[j]; idx[j] = idx[j - 1], idx[j - 1] = x;
      }
  }
}

void loom__ev_sort_indices(const loom_trace *t, uint32_t *idx, size_t n) {
  sort_ev = t->ev;
  if (n < 2) return;
  uint64_t *key = n >= SMALL ? loom__array_alloc(2 * n, sizeof *key) : NULL;
  uint32_t *idx2 = key ? loom__array_alloc(n, sizeof *idx2) : NULL;
  uint32_t(*count)[BUCKETS] = idx2 ? malloc(MAXPASS * sizeof *count) : NULL; /* 48 KiB */
  if (!count || !make_keys(t->ev, idx, n, key)) {
    qsort(idx, n, sizeof *idx, cmp_index);
  } else {
    radix(key, idx, key + n, idx2, count, n);
    ties(idx, key, n);
  }
  free(count);
  if (idx2) loom__array_free(idx2, n, sizeof *idx2);
  if (key) loom__array_free(key, 2 * n, sizeof *key);
}
