/*
 * xsort_merge.c - the external sort's output (xsort.c sorts and spills).
 *
 * At the finish the last buffer is sorted in memory and every run is merged
 * with it through a binary heap, each run read back in blocks.  With BLOCK
 * records or more, a thread of its own does the merging (or, with no run
 * spilled, the gathering of the last buffer in its order, whose reads miss
 * the cache) into up to OUT_BLOCKS blocks that the reader takes in turn, so
 * that the two overlap.  The heap compares by the merge's order (the sort's
 * own through the context taken at the finish, or the caller's).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "xsort_int.h"

/* Makes r's block hold its next record whole (when records are left),
 * reading on in the file.  0, or -1 (err says). */
static int fill(loom__xsort *s, xrun *r) {
  size_t head = s->ops->rec_size;
  while (r->taken < r->n) {
    size_t have = r->end - r->at;
    size_t need = have >= head ? loom__xsort_size(s, r->blk + r->at) : head;
    if (have >= need) return 0;
    if (r->at) memmove(r->blk, r->blk + r->at, have);
    r->at = 0;
    r->end = have;
    if (need > r->cap) {
      unsigned char *p = realloc(r->blk, need);
      if (!p) {
        s->oom = 1;
        snprintf(s->err, sizeof s->err, "out of memory reading the sort's temporary file back");
        return -1;
      }
      r->blk = p;
      r->cap = need;
    }
    size_t want = r->cap - r->end;
    if (want > r->len - r->read) want = (size_t)(r->len - r->read);
    ssize_t got =
        want ? pread(fileno(s->spill), r->blk + r->end, want, (off_t)(r->off + r->read)) : 0;
    if (got <= 0 || (size_t)got != want) {
      snprintf(s->err, sizeof s->err, "cannot read the sort's temporary file back: %s",
               got < 0 ? strerror(errno) : "short read");
      return -1;
    }
    r->read += want;
    r->end += want;
  }
  return 0;
}

static const void *head(const loom__xsort *s, uint32_t i) {
  if (i == s->nruns) return s->tail_at < s->in.n ? s->in.p + s->in.keys[s->tail_at].off : NULL;
  const xrun *r = &s->runs[i];
  return r->taken < r->n ? r->blk + r->at : NULL;
}

static int less(const loom__xsort *s, uint32_t a, uint32_t b) {
  return s->mcmp(head(s, a), head(s, b), s->mctx) < 0;
}

static void sift_down(loom__xsort *s, size_t i) {
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

/* Takes run i's head (the top of the heap) off and restores the heap; at a
 * read error the output ends there (err says why). */
static void pop(loom__xsort *s, uint32_t i) {
  if (i == s->nruns) {
    s->tail_at++;
  } else {
    xrun *r = &s->runs[i];
    r->at += loom__xsort_size(s, r->blk + r->at);
    r->taken++;
    if (fill(s, r) != 0) {
      s->nheap = 0;
      return;
    }
  }
  if (!head(s, i)) s->heap[0] = s->heap[--s->nheap];
  if (s->nheap) sift_down(s, 0);
}

/* The next record in order, valid until the next call (its run moves on
 * then); NULL at the end. */
static const void *next_ref(loom__xsort *s) {
  if (!s->nruns) return s->tail_at < s->in.n ? s->in.p + s->in.keys[s->tail_at++].off : NULL;
  if (s->pending) pop(s, s->pend);
  s->pending = 0;
  if (!s->nheap) return NULL;
  s->pending = 1;
  s->pend = s->heap[0];
  return head(s, s->pend);
}

/* ---- handing records out ----------------------------------------------- */

/* Fills the block of slot until it is full or the records end (then 1);
 * a record that does not fit waits in held for the next block. */
static int produce(loom__xsort *s, size_t slot) {
  size_t len = 0;
  for (;;) {
    const unsigned char *r = s->held ? s->held : next_ref(s);
    s->held = NULL;
    if (!r) break;
    size_t sz = loom__xsort_size(s, r);
    if (len + sz > s->ocap[slot]) {
      if (len) {
        s->held = r;
        s->olen[slot] = len;
        return 0;
      }
      unsigned char *p = realloc(s->ob[slot], sz); /* a record larger than a block */
      if (!p) {
        s->oom = 1;
        snprintf(s->err, sizeof s->err, "out of memory handing a record of %zu bytes on", sz);
        break;
      }
      s->ob[slot] = p;
      s->ocap[slot] = sz;
    }
    memcpy(s->ob[slot] + len, r, sz);
    len += sz;
  }
  s->olen[slot] = len;
  return 1;
}

/* The merging thread: fills free blocks until the records end or the
 * reader stops. */
static void *merge_run(void *arg) {
  loom__xsort *s = arg;
  for (int last = 0; !last;) {
    pthread_mutex_lock(&s->mu);
    while (!s->mstop && s->produced - s->consumed == OUT_BLOCKS)
      pthread_cond_wait(&s->freed, &s->mu);
    int stop = s->mstop;
    pthread_mutex_unlock(&s->mu);
    if (stop) break;
    size_t slot = s->produced % OUT_BLOCKS;
    last = produce(s, slot);
    pthread_mutex_lock(&s->mu);
    s->produced++;
    s->mdone = last;
    pthread_cond_signal(&s->full);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}

/* Starts the merging thread when there are records enough; without it (or
 * without memory or a thread) the reader merges itself. */
static void start_merging(loom__xsort *s) {
  uint64_t total = s->in.n;
  for (size_t i = 0; i < s->nruns; i++) total += s->runs[i].n;
  if (total < OUT_MIN) return;
  for (int i = 0; i < OUT_BLOCKS; i++) {
    if (!(s->ob[i] = malloc(BLOCK * s->ops->rec_size))) return;
    s->ocap[i] = BLOCK * s->ops->rec_size;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->full, NULL);
  pthread_cond_init(&s->freed, NULL);
  s->merging = loom__thread_start(&s->mth, merge_run, s) == 0;
  if (!s->merging) {
    pthread_cond_destroy(&s->freed);
    pthread_cond_destroy(&s->full);
    pthread_mutex_destroy(&s->mu);
  }
}

void loom__xsort_stop_merging(loom__xsort *s) {
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
static const void *next_handed(loom__xsort *s) {
  size_t slot = s->consumed % OUT_BLOCKS;
  if (!s->have_cur || s->cur_at == s->olen[slot]) {
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
    if (!s->olen[slot]) return NULL;
  }
  const unsigned char *r = s->ob[slot] + s->cur_at;
  s->cur_at += loom__xsort_size(s, r);
  return r;
}

const void *loom__xsort_next(loom__xsort *s) {
  return s->merging ? next_handed(s) : next_ref(s);
}

/* The heap over the runs and the last buffer, each run's first record
 * read; a run's block holds BLOCK records of rec_size, less when the budget
 * shared among the runs is smaller (an eighth of it, at least 16 KiB). */
static int make_heap(loom__xsort *s) {
  if (!(s->heap = malloc((s->nruns + 1) * sizeof *s->heap))) return -1;
  if (fflush(s->spill) != 0) {
    snprintf(s->err, sizeof s->err, "cannot write the sort's temporary file: %s", strerror(errno));
    return -1;
  }
  size_t blk = s->budget / 8 / (s->nruns + 1);
  if (blk > BLOCK * s->ops->rec_size) blk = BLOCK * s->ops->rec_size;
  if (blk < (16u << 10)) blk = 16u << 10;
  for (size_t i = 0; i < s->nruns; i++) {
    if (!(s->runs[i].blk = malloc(blk))) return -1;
    s->runs[i].cap = blk;
    if (fill(s, &s->runs[i]) != 0) return -1;
  }
  for (uint32_t i = 0; i <= s->nruns; i++)
    if (head(s, i)) s->heap[s->nheap++] = i;
  for (size_t i = s->nheap / 2; i-- > 0;) sift_down(s, i);
  return 0;
}

int loom__xsort_start_merge(loom__xsort *s) {
  if (s->nruns && make_heap(s) != 0) {
    if (!s->err[0]) {
      s->oom = 1;
      snprintf(s->err, sizeof s->err, "out of memory reading the sort's runs back");
    }
    return -1;
  }
  start_merging(s);
  return 0;
}
