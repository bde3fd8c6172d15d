/*
 * esort.c - external sort of analysis records by time.
 *
 * Records fill a buffer; a full buffer is handed to a worker thread that
 * sorts it and appends it to one temporary file as a run, while the reader
 * fills the other.  At the end the last buffer is sorted in memory and every
 * run is merged with it (esort_merge.c).
 * Memory: the `budget` holds the two buffers and the sort keys of one (128
 * bytes a record), plus one block per run.  The worker compares names
 * through a copy of the string table's id -> pointer array taken at the
 * hand-off (the strings themselves never move; the array does, as the
 * reader interns more).
 *
 * Order: start time; then longer first (a parent before its children); then
 * host nesting rank of the kind (range, op, runtime call); then name, track,
 * correlation, bytes and stream.  All of it is content, so the same trace
 * read from different formats yields the same sequence (records equal in
 * every field are interchangeable).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "esort_int.h"

static _Thread_local names cmp_names;

static int cmp_qsort(const void *pa, const void *pb) { return loom__esort_cmp(pa, pb, &cmp_names); }

/* ---- sorting one buffer ----------------------------------------------------
 * By start time first with an LSD radix sort of (time, index) keys (the
 * passes over bytes every time shares are skipped), then each run of equal
 * times by the whole order.  The records stay where they are: a run is
 * written out in that order, the last buffer is read through it.  Without
 * memory for the keys: qsort. */

static _Thread_local const loom__arec *cmp_base;

static int cmp_key(const void *pa, const void *pb) {
  return loom__esort_cmp(&cmp_base[((const skey *)pa)->i], &cmp_base[((const skey *)pb)->i], &cmp_names);
}

static skey *radix(skey *a, skey *tmp, size_t n) {
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
    skey *x = a;
    a = tmp;
    tmp = x;
  }
  return a;
}

static void ties(const loom__arec *r, skey *key, size_t n) {
  for (size_t j = 0, e; j < n; j = e) {
    for (e = j + 1; e < n && key[e].k == key[j].k; e++) {}
    if (e - j > 16) {
      qsort(key + j, e - j, sizeof *key, cmp_key);
      continue;
    }
    for (size_t a = j + 1; a < e; a++) /* insertion sort: runs are short */
      for (size_t b = a; b > j && loom__esort_cmp(&r[key[b - 1].i], &r[key[b].i], &cmp_names) > 0; b--) {
        skey x = key[b];
        key[b] = key[b - 1];
        key[b - 1] = x;
      }
  }
}

/* The order of r[0..n): a malloc'd array whose k-th entry's i is the index
 * of the k-th record (free it), or NULL when there was no memory for the
 * keys: then r itself is sorted (qsort). */
skey *loom__esort_order(loom__arec *r, size_t n, names nm) {
  cmp_names = nm;
  cmp_base = r;
  skey *a = n > 1 ? malloc(2 * n * sizeof *a) : NULL;
  if (!a) {
    if (n > 1) qsort(r, n, sizeof *r, cmp_qsort);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) a[i].k = (uint64_t)r[i].ts ^ (1ull << 63), a[i].i = i;
  skey *key = radix(a, a + n, n);
  ties(r, key, n);
  if (key != a) memcpy(a, key, n * sizeof *a);
  skey *o = realloc(a, n * sizeof *a); /* the other half held the radix passes */
  return o ? o : a;
}

/* Writes r[0..n) to f in the order, gathering blocks of records (reading
 * them in order lets the misses overlap; moving them in place would not). */
static int write_ordered(FILE *f, const loom__arec *r, const skey *order, size_t n) {
  if (!order) return fwrite(r, sizeof *r, n, f) == n ? 0 : -1;
  loom__arec *blk = malloc(BLOCK * sizeof *blk);
  if (!blk) return -1;
  int rc = 0;
  for (size_t at = 0; at < n && !rc; at += BLOCK) {
    size_t m = n - at < BLOCK ? n - at : BLOCK;
    for (size_t k = 0; k < m; k++) blk[k] = r[order[at + k].i];
    rc = fwrite(blk, sizeof *blk, m, f) == m ? 0 : -1;
  }
  free(blk);
  return rc;
}

void loom__esort_names(loom__esort *s, const loom__strtab *strs) { s->strs = strs; }

loom__esort *loom__esort_new(const loom__strtab *strs, size_t budget) {
  loom__esort *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->strs = strs;
  /* two buffers, and the sort's keys for one of them */
  s->limit = budget / (2 * sizeof(loom__arec) + 2 * sizeof(skey));
  if (s->limit < 1024) s->limit = 1024;
  return s;
}

/* The error, "" when none; a merging thread is stopped first, so that what
 * it may still write is not read at the same time (a pass that ends early). */
const char *loom__esort_error(loom__esort *s) {
  loom__esort_stop_merging(s);
  return s->err;
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

/* Sorts wbuf and appends it to the spill file as a run (the worker). */
static void *spill_run(void *arg) {
  loom__esort *s = arg;
  names nm = {(char *const *)s->wnames, s->nwnames};
  if (!s->spill && !(s->spill = spill_file())) {
    snprintf(s->err, sizeof s->err, "cannot create a temporary file to sort the trace in %s "
             "(set TMPDIR, or give --sort-memory more): %s", tmp_dir(), strerror(errno));
    s->werr = -1;
    return NULL;
  }
  skey *order = loom__esort_order(s->wbuf, s->wn, nm);
  run r = {0};
  r.n = s->wn;
  r.off = s->nruns ? s->runs[s->nruns - 1].off + s->runs[s->nruns - 1].n : 0;
  int wrote = write_ordered(s->spill, s->wbuf, order, s->wn);
  free(order);
  if (wrote != 0 || LOOM__PUSH(s->runs, s->nruns, s->cap_runs, r)) {
    snprintf(s->err, sizeof s->err, "cannot write the sort's temporary file: %s",
             strerror(errno ? errno : ENOSPC));
    s->werr = -1;
  }
  return NULL;
}

/* Waits for the worker; its buffer becomes the spare.  0 or -1 (its error). */
int loom__esort_wait_worker(loom__esort *s) {
  if (s->running) pthread_join(s->th, NULL);
  s->running = 0;
  if (s->wbuf) {
    free(s->spare);
    s->spare = s->wbuf;
    s->wbuf = NULL;
  }
  free(s->wnames);
  s->wnames = NULL;
  return s->werr;
}

/* Hands the full buffer to the worker and goes on with the spare. */
static int spill(loom__esort *s) {
  if (loom__esort_wait_worker(s) != 0) return -1;
  names nm = loom__esort_names_now(s);
  s->nwnames = nm.n;
  s->wnames = malloc((nm.n ? nm.n : 1) * sizeof *s->wnames);
  loom__arec *next = s->spare ? s->spare : malloc(s->limit * sizeof *next);
  if (!s->wnames || !next) {
    if (next != s->spare) free(next);
    return -1;
  }
  if (nm.n) memcpy(s->wnames, nm.p, nm.n * sizeof *s->wnames);
  s->spare = NULL;
  s->wbuf = s->buf;
  s->wn = s->n;
  s->buf = next;
  s->cap = s->limit;
  s->n = 0;
  if (pthread_create(&s->th, NULL, spill_run, s) == 0) s->running = 1;
  else spill_run(s); /* no thread: do it here */
  return s->werr;
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

void loom__esort_free(loom__esort *s) {
  if (!s) return;
  loom__esort_stop_merging(s);
  loom__esort_wait_worker(s);
  for (int i = 0; i < OUT_BLOCKS; i++) free(s->ob[i]);
  free(s->fnames);
  free(s->spare);
  for (size_t i = 0; i < s->nruns; i++) free(s->runs[i].blk);
  free(s->runs);
  free(s->heap);
  free(s->buf);
  free(s->order);
  if (s->spill) fclose(s->spill);
  free(s);
}
