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
 *
 * A whole trace is sorted by loom__trace_sort, which finds most of it in
 * order already: a session collects each thread's events in the order of
 * their starts (collect_host.c), and what comes after them (backends' and
 * adapters' events, window copies) is a small tail.  The events in order up
 * front stay; the tail is sorted on its own and merged in from the back,
 * each event moving once in address order.  Only a trace less than half in
 * order is sorted whole and permuted (trace.c).
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
  size_t in_order = 1; /* most come in order (events in order, indices rising) */
  while (in_order < n && cmp_index(&idx[in_order - 1], &idx[in_order]) < 0) in_order++;
  if (in_order >= n) return;
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

/* How many events lead in order. */
static size_t sorted_prefix(const loom_trace *t) {
  size_t i = 1;
  while (i < t->nev && loom__ev_cmp_track_time(&t->ev[i - 1], &t->ev[i]) <= 0) i++;
  return t->nev ? i : 0;
}

/* The events past the first p, sorted, merged into those from the back;
 * flows renumbered.  The same order as sorting all: on a tie the event in
 * the prefix (the lower index) stays first. */
static int merge_tail(loom_trace *t, size_t p) {
  size_t n = t->nev, m = n - p, i = p, j = m, w = n;
  uint32_t *order = malloc(m * sizeof *order), *to = NULL;
  loom__ev *tail = malloc(m * sizeof *tail);
  if (order && tail && t->nflows) to = malloc(n * sizeof *to);
  if (!order || !tail || (t->nflows && !to)) {
    free(order);
    free(tail);
    return -1;
  }
  for (size_t k = 0; k < m; k++) order[k] = (uint32_t)(p + k);
  loom__ev_sort_indices(t, order, m);
  for (size_t k = 0; k < m; k++) tail[k] = t->ev[order[k]];
  while (j > 0) { /* w == i + j: everything at w and past it is placed */
    if (i > 0 && loom__ev_cmp_track_time(&t->ev[i - 1], &tail[j - 1]) > 0) {
      t->ev[--w] = t->ev[--i];
      if (to) to[i] = (uint32_t)w;
    } else {
      t->ev[--w] = tail[--j];
      if (to) to[order[j]] = (uint32_t)w;
    }
  }
  for (size_t k = 0; to && k < i; k++) to[k] = (uint32_t)k;
  for (size_t k = 0; k < t->nflows; k++)
    t->flows[k].from = to[t->flows[k].from], t->flows[k].to = to[t->flows[k].to];
  free(to);
  free(tail);
  free(order);
  return 0;
}

int loom__trace_sort(loom_trace *t) {
  size_t p = sorted_prefix(t);
  if (p >= t->nev) return 0;
  if (p >= t->nev / 2) return merge_tail(t, p);
  uint32_t *order = malloc((t->nev + 1) * sizeof *order);
  if (!order) return -1;
  for (size_t i = 0; i < t->nev; i++) order[i] = (uint32_t)i;
  loom__ev_sort_indices(t, order, t->nev);
  int rc = loom__trace_permute(t, order);
  free(order);
  return rc;
}
