/*
 * xsort.h - the one external sort: records of any layout (fixed size, or a
 * header that says the size) in an order the caller defines, in bounded
 * memory.  `loom report` sorts its compact records with it
 * (analysis/esort.c) and `loom merge` its events with their arguments
 * (merge/merge.c).
 *
 * Records fill a buffer; a full buffer is sorted and appended as a run to one
 * temporary file by a worker thread while the caller fills the other buffer.
 * At the finish the last buffer is sorted in memory and merged with every
 * run; a thread of its own does that merging ahead of the reader when there
 * are records enough (xsort_merge.c).  Memory: the budget holds the two
 * buffers and the sort keys of one, plus one read block per run.
 */
#ifndef LOOM_XSORT_H
#define LOOM_XSORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct loom__xsort_ops {
  /* Every record's size; with size(), the smallest record and the bytes of
   * its head that size() reads.  A multiple of 8, as size() returns. */
  size_t rec_size;
  /* The bytes of the record r (NULL: every record is rec_size bytes). */
  size_t (*size)(const void *r);
  /* The mean size of a record, for dividing the budget (0: rec_size). */
  size_t mean_size;
  /* The order: by the key given to loom__xsort_add first, then anything
   * else; 0 only for records that may come out either way.  ctx: what
   * snap() returned, or the context itself without snap. */
  int (*cmp)(const void *a, const void *b, const void *ctx);
  /* A copy of the context that stays valid while the caller goes on
   * changing its own (taken when records go to the worker and at the
   * finish); NULL when out of memory.  release() frees it. */
  void *(*snap)(const void *ctx);
  void (*release)(void *snap);
} loom__xsort_ops;

typedef struct loom__xsort loom__xsort;

/* budget: bytes kept in memory (at least 1024 records); ops must outlive
 * the sort.  NULL when out of memory. */
loom__xsort *loom__xsort_new(const loom__xsort_ops *ops, const void *ctx, size_t budget);
/* The context cmp is given from now on (the same order over other data). */
void loom__xsort_set_ctx(loom__xsort *s, const void *ctx);
/* Room for a record of size bytes, ordered first by key: the caller writes
 * the record there before the next call.  NULL on failure (error says). */
void *loom__xsort_add(loom__xsort *s, int64_t key, size_t size);
/* The records added so far never share a run with later ones (a run is
 * spilled now when any are in memory).  0, or -1 (error says). */
int loom__xsort_cut(loom__xsort *s);
/* Merges the runs by cmp(a, b, ctx) instead of the sort's order: an order
 * that agrees with it within each run (loom merge shifts each input's
 * times once every input is read; its runs never mix inputs). */
void loom__xsort_merge_by(loom__xsort *s, int (*cmp)(const void *a, const void *b, const void *ctx),
                          const void *ctx);
/* Ends input; then loom__xsort_next yields the records in order.  0, or -1. */
int loom__xsort_finish(loom__xsort *s);
/* The next record, valid until the next call; NULL at the end or when a
 * run cannot be read back (error says). */
const void *loom__xsort_next(loom__xsort *s);
/* "" when nothing failed; else why.  A merging thread is stopped first. */
const char *loom__xsort_error(loom__xsort *s);
/* 1 when the failure was memory (else a temporary file). */
int loom__xsort_out_of_memory(const loom__xsort *s);
/* Runs to merge (spilled and the one in memory) and runs spilled. */
void loom__xsort_runs(const loom__xsort *s, uint64_t *runs, uint64_t *spilled);
void loom__xsort_free(loom__xsort *s);

#endif
