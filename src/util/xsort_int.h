/*
 * xsort_int.h - the external sort's state, shared by xsort.c (filling,
 * sorting and spilling runs) and xsort_merge.c (merging them back and
 * handing records out).
 */
#ifndef LOOM_XSORT_INT_H
#define LOOM_XSORT_INT_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "xsort.h"

enum { BLOCK = 4096 }; /* records of rec_size in a block handed out or read back */
enum { OUT_BLOCKS = 4, OUT_MIN = BLOCK }; /* blocks handed out; records below which no thread */

/* A record's sort key and place: k is the key with its sign bit flipped
 * (unsigned order is then signed order), off its first byte in the buffer. */
typedef struct xkey {
  uint64_t k, off;
} xkey;

/* Records and their keys (in the order they came until sorted). */
typedef struct xbuf {
  unsigned char *p;
  size_t len, cap;
  xkey *keys;
  size_t n, cap_keys;
} xbuf;

/* A run in the temporary file, read back through blk: while records are
 * left, blk holds the next one whole from at. */
typedef struct xrun {
  uint64_t off, len, n; /* first byte in the file, bytes, records */
  uint64_t read, taken; /* bytes read into blk, records handed on */
  unsigned char *blk;
  size_t at, end, cap;
} xrun;

typedef int (*xsort_cmp)(const void *a, const void *b, const void *ctx);

struct loom__xsort {
  const loom__xsort_ops *ops;
  const void *ctx;
  size_t budget, limit, limit_bytes; /* per buffer: records, bytes */
  xbuf in;                           /* being filled; at the finish the last run */
  /* the run being sorted and written by the worker */
  xbuf w, spare;
  xkey *tmp;                         /* the radix passes' scratch (xsort.c) */
  size_t cap_tmp;
  void *wsnap;
  pthread_t th;
  int running, werr, oom;
  FILE *spill;
  uint64_t file_len;
  xrun *runs;
  size_t nruns, cap_runs;
  uint32_t *heap; /* run indices (the in-memory tail is run nruns) */
  size_t nheap, tail_at;
  xsort_cmp mcmp; /* the merge's order and its context */
  const void *mctx;
  void *fsnap;        /* the context taken at the finish */
  int pending;        /* the record handed out last is still the head of run pend */
  uint32_t pend;
  const void *held;   /* the merging thread's record that did not fit its block */
  /* the merging thread: blocks produced and consumed, in a ring */
  pthread_t mth;
  int merging, mdone, mstop, have_cur;
  pthread_mutex_t mu;
  pthread_cond_t full, freed;
  unsigned char *ob[OUT_BLOCKS];
  size_t ocap[OUT_BLOCKS], olen[OUT_BLOCKS], produced, consumed, cur_at;
  char err[256];
};

static inline size_t loom__xsort_size(const loom__xsort *s, const void *r) {
  return s->ops->size ? s->ops->size(r) : s->ops->rec_size;
}

/* xsort.c: sorts b's keys into the order. */
void loom__xsort_order(loom__xsort *s, xbuf *b, const void *ctx);
/* xsort.c: waits for the spilling worker; 0 or -1 (its error). */
int loom__xsort_wait_worker(loom__xsort *s);
/* xsort_merge.c: stops the merging thread, if any. */
void loom__xsort_stop_merging(loom__xsort *s);
/* xsort_merge.c: the heap over the runs; 0 or -1. */
int loom__xsort_start_merge(loom__xsort *s);

#endif
