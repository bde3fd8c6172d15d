/*
 * xsort.c - the external sort's input side (xsort.h): records fill a
 * buffer; a full buffer is handed to a worker thread that sorts it and
 * appends it to one temporary file as a run, while the caller fills the
 * other.  The worker compares through a snapshot of the caller's context
 * taken at the hand-off (the caller goes on changing its own, as the
 * report's reader interns names).  The temporary file is in $TMPDIR (else
 * /tmp) and unlinked as soon as it is open: nothing is left behind,
 * whatever happens.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xsort_int.h"

/* ---- sorting one buffer ----------------------------------------------------
 * By key first with an LSD radix sort of the keys (the passes over bytes
 * every key shares are skipped), then each run of equal keys by the whole
 * order.  The records stay where they are: a run is written out in the keys'
 * order, the last buffer is read through it.  Without memory for the radix
 * passes: qsort of the keys. */

typedef struct cmp_with {
  const unsigned char *base;
  xsort_cmp cmp;
  const void *ctx;
} cmp_with;

static _Thread_local cmp_with tl; /* qsort's comparator has no context */

static int cmp_key(const void *pa, const void *pb) {
  const xkey *a = pa, *b = pb;
  if (a->k != b->k) return a->k < b->k ? -1 : 1;
  return tl.cmp(tl.base + a->off, tl.base + b->off, tl.ctx);
}

static xkey *radix(xkey *a, xkey *tmp, size_t n) {
  uint64_t or = 0, and = ~0ull;
  for (size_t i = 0; i < n; i++) or |= a[i].k, and &= a[i].k;
  for (int b = 0; b < 64; b += 8) {
    if (!(((or ^ and) >> b) & 0xff)) continue;
    size_t at[256] = {0}, sum = 0;
    for (size_t i = 0; i < n; i++) at[(a[i].k >> b) & 0xff]++;
    for (int d = 0; d < 256; d++) {
      size_t c = at[d];
      at[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) tmp[at[(a[i].k >> b) & 0xff]++] = a[i];
    xkey *x = a;
    a = tmp;
    tmp = x;
  }
  return a;
}

static void ties(xkey *key, size_t n) {
  for (size_t j = 0, e; j < n; j = e) {
    for (e = j + 1; e < n && key[e].k == key[j].k; e++) {}
    if (e - j > 16) {
      qsort(key + j, e - j, sizeof *key, cmp_key);
      continue;
    }
    for (size_t a = j + 1; a < e; a++) /* insertion sort: runs are short */
      for (size_t b = a;
           b > j && tl.cmp(tl.base + key[b - 1].off, tl.base + key[b].off, tl.ctx) > 0; b--) {
        xkey x = key[b];
        key[b] = key[b - 1];
        key[b - 1] = x;
      }
  }
}

/* The radix passes' scratch is kept from one sort to the next (the worker's
 * and the finish's never overlap): fresh pages cost a fault each, and on a
 * virtual machine each first touch of a page costs far more than the sort's
 * pass over it.  When the passes end in the scratch, it and the buffer's
 * keys trade places instead of being copied back. */
void loom__xsort_order(loom__xsort *s, xbuf *b, const void *ctx) {
  size_t n = b->n;
  if (n < 2) return;
  tl = (cmp_with){b->p, s->ops->cmp, ctx};
  if (s->cap_tmp < n) {
    xkey *t = loom__big_resize(s->tmp, s->cap_tmp * sizeof *t, n * sizeof *t);
    if (!t) {
      qsort(b->keys, n, sizeof *b->keys, cmp_key);
      return;
    }
    s->tmp = t;
    s->cap_tmp = n;
  }
  xkey *key = radix(b->keys, s->tmp, n);
  ties(key, n);
  if (key != b->keys) {
    s->tmp = b->keys;
    b->keys = key;
    size_t c = s->cap_tmp;
    s->cap_tmp = b->cap_keys;
    b->cap_keys = c;
  }
}

/* ---- the buffers and the worker ------------------------------------------ */

static void xbuf_free(xbuf *b) {
  loom__big_free(b->p, b->cap);
  loom__big_free(b->keys, b->cap_keys * sizeof *b->keys);
}

loom__xsort *loom__xsort_new(const loom__xsort_ops *ops, const void *ctx, size_t budget) {
  loom__xsort *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->ops = ops;
  s->ctx = ctx;
  s->budget = budget;
  /* two buffers, and the sort's keys for one of them */
  size_t mean = ops->mean_size ? ops->mean_size : ops->rec_size;
  s->limit = budget / (2 * mean + 2 * sizeof(xkey));
  if (s->limit < 1024) s->limit = 1024;
  s->limit_bytes = s->limit * mean;
  return s;
}

void loom__xsort_set_ctx(loom__xsort *s, const void *ctx) { s->ctx = ctx; }

int loom__xsort_out_of_memory(const loom__xsort *s) { return s->oom; }

const char *loom__xsort_error(loom__xsort *s) {
  loom__xsort_stop_merging(s); /* what it may still write is not read at the same time */
  return s->err;
}

void loom__xsort_runs(const loom__xsort *s, uint64_t *runs, uint64_t *spilled) {
  *spilled = s->nruns;
  *runs = s->nruns + (s->in.n != 0);
}

static int no_memory(loom__xsort *s) {
  s->oom = 1;
  if (!s->err[0]) snprintf(s->err, sizeof s->err, "out of memory sorting the records");
  return -1;
}

static const char *tmp_dir(void) {
  const char *d = getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

/* An unnamed file in $TMPDIR (removed as soon as it is open). */
static FILE *spill_file(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/loom-sort-XXXXXX", tmp_dir());
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  unlink(path);
  FILE *f = fdopen(fd, "w+b");
  if (!f) close(fd);
  return f;
}

/* Writes b's records to f in its keys' order, gathering blocks of records
 * (reading them in order lets the misses overlap; moving them would not). */
static int write_ordered(const loom__xsort *s, FILE *f, const xbuf *b) {
  size_t cap = BLOCK * s->ops->rec_size, len = 0;
  unsigned char *blk = malloc(cap);
  if (!blk) return -1;
  int rc = 0;
  for (size_t k = 0; k < b->n && !rc; k++) {
    const unsigned char *r = b->p + b->keys[k].off;
    size_t sz = loom__xsort_size(s, r);
    if (len + sz > cap && len) {
      rc = fwrite(blk, 1, len, f) == len ? 0 : -1;
      len = 0;
    }
    if (sz > cap) { /* a record larger than the block goes alone */
      if (!rc && fwrite(r, 1, sz, f) != sz) rc = -1;
      continue;
    }
    memcpy(blk + len, r, sz);
    len += sz;
  }
  if (!rc && len) rc = fwrite(blk, 1, len, f) == len ? 0 : -1;
  free(blk);
  return rc;
}

/* Sorts w and appends it to the spill file as a run (the worker). */
static void *spill_run(void *arg) {
  loom__xsort *s = arg;
  if (!s->spill && !(s->spill = spill_file())) {
    snprintf(s->err, sizeof s->err, "cannot create a temporary file to sort the trace in %s "
             "(set TMPDIR, or give --sort-memory more): %s", tmp_dir(), strerror(errno));
    s->werr = -1;
    return NULL;
  }
  loom__xsort_order(s, &s->w, s->wsnap ? s->wsnap : s->ctx);
  xrun r = {.off = s->file_len, .len = s->w.len, .n = s->w.n};
  if (write_ordered(s, s->spill, &s->w) != 0 || LOOM__PUSH(s->runs, s->nruns, s->cap_runs, r)) {
    snprintf(s->err, sizeof s->err, "cannot write the sort's temporary file: %s",
             strerror(errno ? errno : ENOSPC));
    s->werr = -1;
    return NULL;
  }
  s->file_len += s->w.len;
  return NULL;
}

static void release_snap(const loom__xsort *s, void **snap) {
  if (*snap && s->ops->release) s->ops->release(*snap);
  *snap = NULL;
}

int loom__xsort_wait_worker(loom__xsort *s) {
  if (s->running) pthread_join(s->th, NULL);
  s->running = 0;
  if (s->w.p || s->w.keys) { /* its buffer becomes the spare */
    xbuf_free(&s->spare);
    s->spare = s->w;
    s->spare.len = s->spare.n = 0;
    memset(&s->w, 0, sizeof s->w);
  }
  release_snap(s, &s->wsnap);
  return s->werr;
}

/* Hands the buffer being filled to the worker and goes on with the spare. */
static int spill(loom__xsort *s) {
  if (loom__xsort_wait_worker(s) != 0) return -1;
  if (s->ops->snap && !(s->wsnap = s->ops->snap(s->ctx))) return no_memory(s);
  s->w = s->in;
  s->in = s->spare;
  memset(&s->spare, 0, sizeof s->spare);
  errno = 0;
  if (loom__thread_start(&s->th, spill_run, s) == 0) s->running = 1;
  else spill_run(s); /* no thread: do it here */
  return s->werr;
}

/* Room for one more record of sz bytes in b, up to the buffer's limits. */
static int make_room(loom__xsort *s, xbuf *b, size_t sz) {
  if (b->len + sz > b->cap) {
    size_t c = b->cap ? b->cap * 2 : BLOCK * s->ops->rec_size;
    if (c > s->limit_bytes) c = s->limit_bytes;
    if (c < b->len + sz) c = b->len + sz;
    unsigned char *p = loom__big_resize(b->p, b->cap, c);
    if (!p) return no_memory(s);
    b->p = p;
    b->cap = c;
  }
  if (b->n == b->cap_keys) { /* grow up to the budget: small inputs stay small */
    size_t c = b->cap_keys ? b->cap_keys * 2 : BLOCK;
    if (c > s->limit) c = s->limit;
    xkey *k = loom__big_resize(b->keys, b->cap_keys * sizeof *k, c * sizeof *k);
    if (!k) return no_memory(s);
    b->keys = k;
    b->cap_keys = c;
  }
  return 0;
}

void *loom__xsort_add(loom__xsort *s, int64_t key, size_t size) {
  if (s->in.n && (s->in.n == s->limit || s->in.len + size > s->limit_bytes) && spill(s) != 0)
    return NULL;
  if (size > s->limit_bytes) s->limit_bytes = size; /* one record larger than a buffer */
  if (make_room(s, &s->in, size) != 0) return NULL;
  xbuf *b = &s->in;
  b->keys[b->n++] = (xkey){(uint64_t)key ^ (1ull << 63), b->len};
  void *r = b->p + b->len;
  b->len += size;
  return r;
}

int loom__xsort_cut(loom__xsort *s) { return s->in.n ? spill(s) : 0; }

void loom__xsort_merge_by(loom__xsort *s, xsort_cmp cmp, const void *ctx) {
  s->mcmp = cmp;
  s->mctx = ctx;
}

int loom__xsort_finish(loom__xsort *s) {
  if (loom__xsort_wait_worker(s) != 0) return -1;
  xbuf_free(&s->spare);
  memset(&s->spare, 0, sizeof s->spare);
  if (s->ops->snap && !(s->fsnap = s->ops->snap(s->ctx))) return no_memory(s);
  if (!s->mcmp) {
    s->mcmp = s->ops->cmp;
    s->mctx = s->fsnap ? s->fsnap : s->ctx;
  }
  loom__xsort_order(s, &s->in, s->fsnap ? s->fsnap : s->ctx);
  loom__big_free(s->tmp, s->cap_tmp * sizeof *s->tmp); /* the last sort: not needed again */
  s->tmp = NULL;
  s->cap_tmp = 0;
  return loom__xsort_start_merge(s);
}

void loom__xsort_free(loom__xsort *s) {
  if (!s) return;
  loom__xsort_stop_merging(s);
  loom__xsort_wait_worker(s);
  for (int i = 0; i < OUT_BLOCKS; i++) free(s->ob[i]);
  release_snap(s, &s->fsnap);
  xbuf_free(&s->spare);
  for (size_t i = 0; i < s->nruns; i++) free(s->runs[i].blk);
  free(s->runs);
  free(s->heap);
  xbuf_free(&s->in);
  loom__big_free(s->tmp, s->cap_tmp * sizeof *s->tmp);
  if (s->spill) fclose(s->spill);
  free(s);
}
