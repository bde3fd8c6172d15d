/*
 * esort_int.h - the external sort's state, shared by esort.c (filling,
 * sorting and spilling runs) and esort_merge.c (merging them back and
 * handing records out).
 */
#ifndef LOOM_ESORT_INT_H
#define LOOM_ESORT_INT_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "analysis.h"

enum { BLOCK = 4096 }; /* records read back per run at a time */
enum { OUT_BLOCKS = 4, OUT_MIN = BLOCK }; /* blocks handed out; records below which no thread */

typedef struct run {
  uint64_t off, n;    /* first record in the file, count */
  uint64_t next;      /* records already read into blk */
  loom__arec *blk;
  size_t at, len;
} run;

typedef struct skey {
  uint64_t k, i;
} skey;

struct loom__esort {
  const loom__strtab *strs;
  loom__arec *buf;
  size_t n, cap, limit; /* limit: records in memory before a spill */
  /* the run being sorted and written by the worker */
  loom__arec *wbuf, *spare;
  size_t wn;
  const char **wnames;
  size_t nwnames;
  pthread_t th;
  int running, werr;
  FILE *spill;
  run *runs;
  size_t nruns, cap_runs;
  uint32_t *heap;     /* run indices (the in-memory tail is run nruns) */
  size_t nheap;
  size_t tail_at;
  skey *order;        /* the order of buf once finished (NULL: buf is sorted) */
  char **fnames;      /* names by id, copied at the finish: the reader interns more */
  size_t nfnames;
  /* the merging thread: blocks produced and consumed, in a ring */
  pthread_t mth;
  int merging, mdone, mstop, have_cur;
  pthread_mutex_t mu;
  pthread_cond_t full, freed;
  loom__arec *ob[OUT_BLOCKS];
  size_t olen[OUT_BLOCKS], produced, consumed, cur_at;
  char err[256];
};

static const uint8_t loom__esort_rank[LOOM_KIND_COUNT_] = {
    [LOOM_KIND_USER_RANGE] = 0, [LOOM_KIND_CPU_OP] = 1, [LOOM_KIND_RUNTIME] = 2,
    [LOOM_KIND_DRIVER] = 3,     [LOOM_KIND_SYNC] = 4,   [LOOM_KIND_COLLECTIVE] = 5,
    [LOOM_KIND_KERNEL] = 6,     [LOOM_KIND_MEMCPY] = 7, [LOOM_KIND_MEMSET] = 8,
    [LOOM_KIND_INSTANT] = 9,    [LOOM_KIND_COUNTER] = 10, [LOOM_KIND_OVERHEAD] = 11,
    [LOOM_KIND_MARKER] = 12, [LOOM_KIND_SAMPLE] = 13};

/* Names by id: the string table's own array, or the worker's copy. */
typedef struct names {
  char *const *p;
  size_t n;
} names;

static inline const char *loom__esort_name(const names *nm, uint32_t id) {
  return id && id < nm->n ? nm->p[id] : "";
}

static inline int loom__esort_cmp(const loom__arec *a, const loom__arec *b, const names *nm) {
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  if (a->kind != b->kind) return loom__esort_rank[a->kind] < loom__esort_rank[b->kind] ? -1 : 1;
  if (a->name != b->name) {
    int c = strcmp(loom__esort_name(nm, a->name), loom__esort_name(nm, b->name));
    if (c) return c;
  }
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->corr != b->corr) return a->corr < b->corr ? -1 : 1;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
  return a->stream < b->stream ? -1 : a->stream > b->stream; /* else: identical */
}

static inline names loom__esort_names_now(const loom__esort *s) {
  names nm = {s->strs->strs, s->strs->n};
  return nm;
}

/* Record k of r in the order (NULL: r is in order). */
static inline const loom__arec *loom__esort_at(const loom__arec *r, const skey *order, size_t k) {
  return order ? &r[order[k].i] : &r[k];
}

/* esort.c: the order of r[0..n) (see there); the last buffer's at the finish. */
skey *loom__esort_order(loom__arec *r, size_t n, names nm);
/* esort.c: waits for the spilling worker; 0 or -1 (its error). */
int loom__esort_wait_worker(loom__esort *s);
/* esort_merge.c: stops the merging thread, if any. */
void loom__esort_stop_merging(loom__esort *s);

#endif
