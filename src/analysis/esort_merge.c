/*
 * esort_merge.c - the external sort's output (esort.c sorts and spills).
 *
 * At the finish the last buffer is sorted in memory and every run is merged
 * with it through a binary heap, each run read back in blocks of BLOCK
 * records.  With BLOCK records or more, a thread of its own does the
 * merging (or, with no run spilled, the gathering of the last buffer in its
 * order, whose reads miss the cache) into up to OUT_BLOCKS blocks that the
 * reader takes in turn, so that the two overlap.  The heap compares names
 * through a copy of the string table's id -> pointer array taken at the
 * finish: the reader goes on interning strings.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "esort_int.h"

static int fill(loom__esort *s, run *r) {
  size_t want = r->n - r->next < BLOCK ? (size_t)(r->n - r->next) : BLOCK;
  r->at = 0;
  r->len = want;
  if (!want) return 0;
  off_t at = (off_t)((r->off + r->next) * sizeof(loom__arec));
  size_t bytes = want * sizeof(loom__arec);
  ssize_t got = pread(fileno(s->spill), r->blk, bytes, at);
  if (got != (ssize_t)bytes) {
    snprintf(s->err, sizeof s->err, "cannot read the sort's temporary file back: %s",
             got < 0 ? strerror(errno) : "short read");
    return -1;
  }
  r->next += want;
  return 0;
}

static const loom__arec *head(const loom__esort *s, uint32_t i) {
  if (i == s->nruns) return s->tail_at < s->n ? loom__esort_at(s->buf, s->order, s->tail_at) : NULL;
  const run *r = &s->runs[i];
  return r->at < r->len ? &r->blk[r->at] : NULL;
}

static int less(const loom__esort *s, uint32_t a, uint32_t b) {
  names nm = {(char *const *)s->fnames, s->nfnames};
  return loom__esort_cmp(head(s, a), head(s, b), &nm) < 0;
}

static void sift_down(loom__esort *s, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < s->nheap && less(s, s->heap[l], s->heap[m])) m = l;
    if (l + 1 < s->nheap && less(s, s->heap[l + 1], s->heap[m])) m = l + 1;
    if (m == i) return;
    uint32_t t = s->heap[i];
    s->heap[i] = s->heap[m];
    s->heap[m] = t;
    i = m;
  }
}

/* Copies the next record in order to *out: 1, or 0 at the end (or when a
 * run cannot be read back: s->err says so). */
static int next_into(loom__esort *s, loom__arec *out) {
  if (!s->nruns) {
    if (s->tail_at == s->n) return 0;
    *out = *loom__esort_at(s->buf, s->order, s->tail_at++);
    return 1;
  }
  if (!s->nheap) return 0;
  uint32_t i = s->heap[0];
  *out = *head(s, i); /* before the block it is in is refilled */
  if (i == s->nruns) {
    s->tail_at++;
  } else {
    run *r = &s->runs[i];
    if (++r->at == r->len && r->next < r->n && fill(s, r) != 0) return 0;
  }
  if (!head(s, i)) s->heap[0] = s->heap[--s->nheap];
  if (s->nheap) sift_down(s, 0);
  return 1;
}

/* ---- handing records out ----------------------------------------------- */

/* The merging thread: fills free blocks until the records end (a block
 * shorter than the others is the last) or the reader stops. */
static void *merge_run(void *arg) {
  loom__esort *s = arg;
  for (int last = 0; !last;) {
    pthread_mutex_lock(&s->mu);
    while (!s->mstop && s->produced - s->consumed == OUT_BLOCKS) pthread_cond_wait(&s->freed, &s->mu);
    int stop = s->mstop;
    pthread_mutex_unlock(&s->mu);
    if (stop) break;
    size_t slot = s->produced % OUT_BLOCKS, k = 0;
    while (k < BLOCK && next_into(s, &s->ob[slot][k])) k++;
    last = k < BLOCK;
    pthread_mutex_lock(&s->mu);
    s->olen[slot] = k;
    s->produced++;
    s->mdone = last;
    pthread_cond_signal(&s->full);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}

/* Starts the merging thread when there are records enough; without it (or
 * without memory or a thread) the reader merges itself. */
static void start_merging(loom__esort *s) {
  uint64_t total = s->n;
  for (size_t i = 0; i < s->nruns; i++) total += s->runs[i].n;
  if (total < OUT_MIN) return;
  for (int i = 0; i < OUT_BLOCKS; i++)
    if (!(s->ob[i] = malloc(BLOCK * sizeof(loom__arec)))) return;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->full, NULL);
  pthread_cond_init(&s->freed, NULL);
  s->merging = pthread_create(&s->mth, NULL, merge_run, s) == 0;
  if (!s->merging) {
    pthread_cond_destroy(&s->freed);
    pthread_cond_destroy(&s->full);
    pthread_mutex_destroy(&s->mu);
  }
}

void loom__esort_stop_merging(loom__esort *s) {
  if (!s->merging) return;
  pthread_mutex_lock(&s->mu);
  s->mstop = 1;
  pthread_cond_signal(&s->freed);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->mth, NULL);
  pthread_cond_destroy(&s->freed);
  pthread_cond_destroy(&s->full);
  pthread_mutex_destroy(&s->mu);
  s->merging = 0;
}

/* The next record from the merging thread's blocks: the block in use is
 * given back when the call after its last record comes. */
static const loom__arec *next_handed(loom__esort *s) {
  size_t slot = s->consumed % OUT_BLOCKS;
  if (s->have_cur && s->cur_at < s->olen[slot]) return &s->ob[slot][s->cur_at++];
  pthread_mutex_lock(&s->mu);
  if (s->have_cur) {
    s->consumed++;
    s->have_cur = 0;
    pthread_cond_signal(&s->freed);
  }
  while (s->consumed == s->produced && !s->mdone) pthread_cond_wait(&s->full, &s->mu);
  int none = s->consumed == s->produced;
  pthread_mutex_unlock(&s->mu);
  if (none) return NULL;
  slot = s->consumed % OUT_BLOCKS;
  s->have_cur = 1;
  s->cur_at = 0;
  return s->olen[slot] ? &s->ob[slot][s->cur_at++] : NULL;
}

const loom__arec *loom__esort_next(loom__esort *s) {
  if (s->merging) return next_handed(s);
  static _Thread_local loom__arec out; /* valid until the next call */
  return next_into(s, &out) ? &out : NULL;
}

/* The heap over the runs and the last buffer, each run's first block read;
 * its names are a copy of the string table's array (the reader goes on
 * interning). */
static int make_heap(loom__esort *s, names nm) {
  if (!(s->fnames = malloc((nm.n ? nm.n : 1) * sizeof *s->fnames))) return -1;
  if (nm.n) memcpy(s->fnames, nm.p, nm.n * sizeof *s->fnames);
  s->nfnames = nm.n;
  if (!(s->heap = malloc((s->nruns + 1) * sizeof *s->heap))) return -1;
  fflush(s->spill);
  for (size_t i = 0; i < s->nruns; i++) {
    if (!(s->runs[i].blk = malloc(BLOCK * sizeof(loom__arec)))) return -1;
    if (fill(s, &s->runs[i]) != 0) return -1;
  }
  for (uint32_t i = 0; i <= s->nruns; i++)
    if (head(s, i)) s->heap[s->nheap++] = i;
  for (size_t i = s->nheap / 2; i-- > 0;) sift_down(s, i);
  return 0;
}

int loom__esort_finish(loom__esort *s) {
  if (loom__esort_wait_worker(s) != 0) return -1;
  free(s->spare);
  s->spare = NULL;
  names nm = loom__esort_names_now(s);
  s->order = loom__esort_order(s->buf, s->n, nm);
  if (s->nruns && make_heap(s, nm) != 0) return -1;
  start_merging(s);
  return 0;
}
