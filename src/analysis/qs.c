/*
 * qs.c - quantiles of durations in bounded memory.
 *
 * The first LOOM__QS_EXACT values are kept and give exact quantiles.  Past
 * that the values move into a log histogram: exact below 256 ns, then 256
 * buckets per power of two (a bucket's middle is within 0.2% of its
 * values; quantiles interpolate between them as numpy does), 1 KiB per octave in
 * use.  So a name costs at most 8 KiB of exact values, or a few KiB of
 * histogram: memory follows the number of distinct names, not of events.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

enum { SUB = 256, NOCT = 64 - 8 + 1 }; /* block 0: values below 256; block k: octave k + 7 */

static size_t bucket_of(int64_t v) {
  if (v < SUB) return v < 0 ? 0 : (size_t)v;
  int e = 63 - __builtin_clzll((uint64_t)v); /* >= 8 */
  return (size_t)(e - 7) * SUB + (size_t)((uint64_t)v >> (e - 8) & (SUB - 1));
}

static double bucket_mid(size_t b) {
  if (b < SUB) return (double)b;
  size_t e = b / SUB + 7, m = b % SUB;
  double lo = ldexp((double)(SUB + m), (int)e - 8), w = ldexp(1.0, (int)e - 8);
  return lo + w / 2;
}

/* Octave blocks are allocated when first used: durations of one kernel
 * span a few octaves, so a histogram costs a few KiB. */
static int hist_add(loom__qs *q, int64_t v) {
  size_t b = bucket_of(v), blk = b / SUB;
  if (!q->hist[blk] && !(q->hist[blk] = calloc(SUB, sizeof **q->hist))) return -1;
  q->hist[blk][b % SUB]++;
  return 0;
}

static int to_hist(loom__qs *q) {
  q->hist = calloc(NOCT, sizeof *q->hist);
  if (!q->hist) return -1;
  for (size_t i = 0; i < q->nvals; i++)
    if (hist_add(q, q->vals[i])) return -1;
  free(q->vals);
  q->vals = NULL;
  q->nvals = q->cap = 0;
  return 0;
}

int loom__qs_add(loom__qs *q, int64_t v) {
  if (!q->n || v < q->min) q->min = v;
  if (!q->n || v > q->max) q->max = v;
  q->n++;
  q->sum += v;
  q->sumsq += (double)v * (double)v;
  if (q->hist) return hist_add(q, v);
  if (q->nvals == LOOM__QS_EXACT) return to_hist(q) ? -1 : hist_add(q, v);
  return LOOM__PUSH(q->vals, q->nvals, q->cap, v);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The middle of the bucket holding the value of rank k (0-based). */
static double hist_rank(const loom__qs *q, uint64_t k) {
  uint64_t seen = 0;
  for (size_t b = 0; b < NOCT * SUB; b++) {
    if (!q->hist[b / SUB]) {
      b += SUB - 1;
      continue;
    }
    seen += q->hist[b / SUB][b % SUB];
    if (seen > k) return bucket_mid(b);
  }
  return (double)q->max;
}

double loom__qs_quantile(loom__qs *q, double p) {
  if (!q->n) return 0;
  if (p <= 0) return (double)q->min;
  if (p >= 1) return (double)q->max;
  if (!q->hist) {
    qsort(q->vals, q->nvals, sizeof *q->vals, cmp_i64); /* cheap when sorted */
    double pos = p * (double)(q->nvals - 1);
    size_t lo = (size_t)pos;
    double f = pos - (double)lo;
    if (lo + 1 >= q->nvals) return (double)q->vals[q->nvals - 1];
    return (double)q->vals[lo] + f * (double)(q->vals[lo + 1] - q->vals[lo]);
  }
  /* numpy's rule on the bucket middles: the values at ranks lo and lo + 1,
   * each within half a bucket (0.2%), interpolated */
  double pos = p * (double)(q->n - 1);
  uint64_t lo = (uint64_t)pos;
  double f = pos - (double)lo, v_lo = hist_rank(q, lo);
  double v = f > 0 && lo + 1 < q->n ? v_lo + f * (hist_rank(q, lo + 1) - v_lo) : v_lo;
  return v < (double)q->min ? (double)q->min : v > (double)q->max ? (double)q->max : v;
}

double loom__qs_mean(const loom__qs *q) { return q->n ? (double)q->sum / (double)q->n : 0; }

double loom__qs_stddev(const loom__qs *q) {
  if (q->n < 2) return 0;
  double m = loom__qs_mean(q), v = q->sumsq / (double)q->n - m * m;
  return v > 0 ? sqrt(v) : 0;
}

int loom__qs_exact(const loom__qs *q) { return q->hist == NULL; }

void loom__qs_each(loom__qs *q, void (*fn)(void *ctx, double v, uint64_t count), void *ctx) {
  if (!q->hist) {
    qsort(q->vals, q->nvals, sizeof *q->vals, cmp_i64);
    for (size_t i = 0, j; i < q->nvals; i = j) {
      for (j = i + 1; j < q->nvals && q->vals[j] == q->vals[i];) j++;
      fn(ctx, (double)q->vals[i], j - i);
    }
    return;
  }
  for (size_t b = 0; b < NOCT * SUB; b++) {
    if (!q->hist[b / SUB]) {
      b += SUB - 1;
      continue;
    }
    if (q->hist[b / SUB][b % SUB]) fn(ctx, bucket_mid(b), q->hist[b / SUB][b % SUB]);
  }
}

void loom__qs_free(loom__qs *q) {
  free(q->vals);
  for (size_t i = 0; q->hist && i < NOCT; i++) free(q->hist[i]);
  free(q->hist);
  memset(q, 0, sizeof *q);
}
