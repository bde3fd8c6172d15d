/*
 * esort.c - the report's records in time order, through the one external
 * sort (util/xsort.h); this file says only the order and how names are
 * compared.
 *
 * Order: start time; then longer first (a parent before its children); then
 * host nesting rank of the kind (range, op, runtime call); then name, track,
 * correlation, bytes and stream.  All of it is content, so the same trace
 * read from different formats yields the same sequence (records equal in
 * every field are interchangeable).  Names are compared through a copy of
 * the string table's id -> pointer array, taken when records go to the
 * sort's worker and at the finish: the strings themselves never move, the
 * array does, as the reader interns more.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "util/xsort.h"

static const uint8_t kind_rank[LOOM_KIND_COUNT_] = {
    [LOOM_KIND_USER_RANGE] = 0, [LOOM_KIND_CPU_OP] = 1,       [LOOM_KIND_RUNTIME] = 2,
    [LOOM_KIND_DRIVER] = 3,     [LOOM_KIND_SYNC] = 4,         [LOOM_KIND_COLLECTIVE] = 5,
    [LOOM_KIND_KERNEL] = 6,     [LOOM_KIND_MEMCPY] = 7,       [LOOM_KIND_MEMSET] = 8,
    [LOOM_KIND_INSTANT] = 9,    [LOOM_KIND_COUNTER] = 10,     [LOOM_KIND_OVERHEAD] = 11,
    [LOOM_KIND_MARKER] = 12,    [LOOM_KIND_SAMPLE] = 13,      [LOOM_KIND_MEMORY] = 14};

/* Names by id: a copy of the string table's array. */
typedef struct names {
  size_t n;
  char *p[];
} names;

static const char *name_of(const names *nm, uint32_t id) {
  return id && id < nm->n ? nm->p[id] : "";
}

static int cmp_rec(const void *pa, const void *pb, const void *ctx) {
  const loom__arec *a = pa, *b = pb;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  if (a->kind != b->kind) return kind_rank[a->kind] < kind_rank[b->kind] ? -1 : 1;
  if (a->name != b->name) {
    int c = strcmp(name_of(ctx, a->name), name_of(ctx, b->name));
    if (c) return c;
  }
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->corr != b->corr) return a->corr < b->corr ? -1 : 1;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
  return a->stream < b->stream ? -1 : a->stream > b->stream; /* else: identical */
}

static void *snap_names(const void *ctx) {
  const loom__strtab *strs = ctx;
  names *nm = malloc(sizeof *nm + (strs->n ? strs->n : 1) * sizeof *nm->p);
  if (!nm) return NULL;
  nm->n = strs->n;
  if (strs->n) memcpy(nm->p, strs->strs, strs->n * sizeof *nm->p);
  return nm;
}

static const loom__xsort_ops arec_order = {
    .rec_size = sizeof(loom__arec), .cmp = cmp_rec, .snap = snap_names, .release = free};

struct loom__esort {
  loom__xsort *x;
};

loom__esort *loom__esort_new(const loom__strtab *strs, size_t budget) {
  loom__esort *s = malloc(sizeof *s);
  if (s && !(s->x = loom__xsort_new(&arec_order, strs, budget))) {
    free(s);
    s = NULL;
  }
  return s;
}

void loom__esort_names(loom__esort *s, const loom__strtab *strs) {
  loom__xsort_set_ctx(s->x, strs);
}

int loom__esort_add(loom__esort *s, const loom__arec *r) {
  loom__arec *to = loom__xsort_add(s->x, r->ts, sizeof *r);
  if (!to) return -1;
  *to = *r;
  return 0;
}

int loom__esort_finish(loom__esort *s) { return loom__xsort_finish(s->x); }

const loom__arec *loom__esort_next(loom__esort *s) { return loom__xsort_next(s->x); }

/* Out of memory is no message here: the report says so itself. */
const char *loom__esort_error(loom__esort *s) {
  const char *e = loom__xsort_error(s->x);
  return loom__xsort_out_of_memory(s->x) ? "" : e;
}

void loom__esort_free(loom__esort *s) {
  if (!s) return;
  loom__xsort_free(s->x);
  free(s);
}
