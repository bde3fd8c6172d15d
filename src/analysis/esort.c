/*
 * esort.c - external sort of analysis records by time.
 *
 * Records fill a buffer of `budget` bytes; a full buffer is sorted and
 * written to one temporary file as a run.  At the end the last buffer is
 * sorted in memory and every run is merged through a binary heap, each run
 * read back in small blocks.  Memory: the buffer plus one block per run.
 *
 * Order: start time; then longer first (a parent before its children); then
 * host nesting rank of the kind (range, op, runtime call); then name, track,
 * correlation, bytes and stream.  All of it is content, so the same trace
 * read from different formats yields the same sequence (records equal in
 * every field are interchangeable).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"

enum { BLOCK = 4096 }; /* records read back per run at a time */

typedef struct run {
  uint64_t off, n;    /* first record in the file, count */
  uint64_t next;      /* records already read into blk */
  loom__arec *blk;
  size_t at, len;
} run;

struct loom__esort {
  const loom__strtab *strs;
  loom__arec *buf;
  size_t n, cap, limit; /* limit: records in memory before a spill */
  FILE *spill;
  run *runs;
  size_t nruns, cap_runs;
  uint32_t *heap;     /* run indices (the in-memory tail is run nruns) */
  size_t nheap;
  size_t tail_at;
  int finished;
  char err[256];
};

static const uint8_t nest_rank[LOOM_KIND_COUNT_] = {
    [LOOM_KIND_USER_RANGE] = 0, [LOOM_KIND_CPU_OP] = 1, [LOOM_KIND_RUNTIME] = 2,
    [LOOM_KIND_DRIVER] = 3,     [LOOM_KIND_SYNC] = 4,   [LOOM_KIND_COLLECTIVE] = 5,
    [LOOM_KIND_KERNEL] = 6,     [LOOM_KIND_MEMCPY] = 7, [LOOM_KIND_MEMSET] = 8,
    [LOOM_KIND_INSTANT] = 9,    [LOOM_KIND_COUNTER] = 10, [LOOM_KIND_OVERHEAD] = 11,
    [LOOM_KIND_MARKER] = 12};

static _Thread_local const loom__strtab *cmp_strs;

static int cmp_rec(const loom__arec *a, const loom__arec *b, const loom__strtab *strs) {
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  if (a->kind != b->kind) return nest_rank[a->kind] < nest_rank[b->kind] ? -1 : 1;
  if (a->name != b->name) {
    int c = strcmp(loom__strtab_get(strs, a->name), loom__strtab_get(strs, b->name));
    if (c) return c;
  }
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->corr != b->corr) return a->corr < b->corr ? -1 : 1;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
  return a->stream < b->stream ? -1 : a->stream > b->stream; /* else: identical */
}

static int cmp_qsort(const void *pa, const void *pb) { return cmp_rec(pa, pb, cmp_strs); }

static void sort_buf(loom__esort *s) {
  cmp_strs = s->strs;
  if (s->n > 1) qsort(s->buf, s->n, sizeof *s->buf, cmp_qsort);
}

loom__esort *loom__esort_new(const loom__strtab *strs, size_t budget) {
  loom__esort *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->strs = strs;
  s->limit = budget / sizeof(loom__arec);
  if (s->limit < 1024) s->limit = 1024;
  return s;
}

const char *loom__esort_error(const loom__esort *s) { return s->err; }
size_t loom__esort_runs(const loom__esort *s) { return s->nruns; }

static int spill(loom__esort *s) {
  if (!s->spill && !(s->spill = tmpfile())) {
    snprintf(s->err, sizeof s->err, "cannot create a temporary file to sort the trace "
             "(TMPDIR=%s): %s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", strerror(errno));
    return -1;
  }
  sort_buf(s);
  run r = {0};
  r.n = s->n;
  r.off = s->nruns ? s->runs[s->nruns - 1].off + s->runs[s->nruns - 1].n : 0;
  if (fwrite(s->buf, sizeof *s->buf, s->n, s->spill) != s->n ||
      LOOM__PUSH(s->runs, s->nruns, s->cap_runs, r)) {
    snprintf(s->err, sizeof s->err, "cannot write the sort's temporary file: %s",
             strerror(errno ? errno : ENOSPC));
    return -1;
  }
  s->n = 0;
  return 0;
}

int loom__esort_add(loom__esort *s, const loom__arec *r) {
  if (s->n == s->cap) {
    if (s->cap < s->limit) { /* grow up to the budget: small traces stay small */
      size_t c = s->cap ? s->cap * 2 : 4096;
      if (c > s->limit) c = s->limit;
      loom__arec *nb = realloc(s->buf, c * sizeof *nb);
      if (!nb) return -1;
      s->buf = nb;
      s->cap = c;
    } else if (spill(s) != 0) {
      return -1;
    }
  }
  s->buf[s->n++] = *r;
  return 0;
}

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
  if (i == s->nruns) return s->tail_at < s->n ? &s->buf[s->tail_at] : NULL;
  const run *r = &s->runs[i];
  return r->at < r->len ? &r->blk[r->at] : NULL;
}

static int less(const loom__esort *s, uint32_t a, uint32_t b) {
  return cmp_rec(head(s, a), head(s, b), s->strs) < 0;
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

int loom__esort_finish(loom__esort *s) {
  sort_buf(s);
  s->finished = 1;
  if (!s->nruns) return 0;
  s->heap = malloc((s->nruns + 1) * sizeof *s->heap);
  if (!s->heap) return -1;
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

const loom__arec *loom__esort_next(loom__esort *s) {
  if (!s->nruns) return s->tail_at < s->n ? &s->buf[s->tail_at++] : NULL;
  if (!s->nheap) return NULL;
  /* The record handed out stays valid until the next call: copy it out of
   * the block before the block is refilled. */
  static _Thread_local loom__arec out;
  uint32_t i = s->heap[0];
  out = *head(s, i);
  if (i == s->nruns) {
    s->tail_at++;
  } else {
    run *r = &s->runs[i];
    if (++r->at == r->len && r->next < r->n && fill(s, r) != 0) return NULL;
  }
  if (!head(s, i)) s->heap[0] = s->heap[--s->nheap];
  if (s->nheap) sift_down(s, 0);
  return &out;
}

void loom__esort_free(loom__esort *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nruns; i++) free(s->runs[i].blk);
  free(s->runs);
  free(s->heap);
  free(s->buf);
  if (s->spill) fclose(s->spill);
  free(s);
}
