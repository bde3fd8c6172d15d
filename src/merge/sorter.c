/*
 * sorter.c - the external sort of loom merge: records (an event or a flow
 * end, with its arguments) of one input at a time fill a buffer of the sort
 * budget; a full buffer, and the buffer at the end of each input, is sorted
 * and appended to one temporary file as a run, except the last input's last
 * buffer, which stays in memory.  Runs never mix inputs: each input's clock
 * relation is known only once it is read, and a monotonic shift keeps a
 * run sorted, so the merge compares shifted times without sorting again.
 *
 * The temporary file is in $TMPDIR (else /tmp) and unlinked as soon as it
 * is open: nothing is left behind, whatever happens.  Runs are read back
 * in blocks by pread, so memory is the buffer plus one block per run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "merge/merge.h"
#include "util/util.h"

typedef struct skey {
  int64_t ts, dur;
  uint64_t seq;
  size_t off;
} skey;

static size_t rec_size(const loom__mrec *r) { return sizeof *r + r->e.nargs * sizeof(loom__targ); }

static const char *tmp_dir(void) {
  const char *d = getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

int loom__sorter_init(loom__sorter *s, uint64_t budget) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
  if (budget < (1u << 20)) budget = 1u << 20;
  s->budget = budget;
  /* three quarters for the records, one for their sort keys: allocated
   * now, touched (resident) only as far as they fill */
  s->cap = (size_t)(budget / 4 * 3);
  s->cap_keys = (size_t)(budget / 4 / sizeof(skey));
  s->arena = malloc(s->cap);
  s->keys = malloc(s->cap_keys * sizeof(skey));
  if (!s->arena || !s->keys)
    return s->status = loom__fail(LOOM_ENOMEM, "out of memory for a sort buffer of %llu bytes",
                                  (unsigned long long)budget);
  return 0;
}

static int cmp_key(const void *pa, const void *pb) {
  const skey *a = pa, *b = pb;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1; /* parents first */
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int io_fail(loom__sorter *s, const char *what) {
  s->status = loom__fail(LOOM_EIO, "loom merge: cannot %s the sort's temporary file in %s (set "
                         "TMPDIR, or give --sort-memory more): %s", what, tmp_dir(), strerror(errno));
  return s->status;
}

static int open_spill(loom__sorter *s) {
  char path[4096];
  snprintf(path, sizeof path, "%s/loom-merge-XXXXXX", tmp_dir());
  s->fd = mkstemp(path);
  if (s->fd < 0) return io_fail(s, "create");
  unlink(path); /* gone when closed, also on error or crash */
  return 0;
}

/* Writes the sorted buffer as one run. */
static int spill(loom__sorter *s) {
  if (!s->nkeys) return 0;
  if (s->fd < 0 && open_spill(s)) return s->status;
  qsort(s->keys, s->nkeys, sizeof(skey), cmp_key);
  loom__mrun run = {.input = s->cur_input, .off = s->file_len};
  enum { CHUNK = 1 << 20 };
  char *chunk = malloc(CHUNK);
  if (!chunk) return s->status = loom__fail(LOOM_ENOMEM, "out of memory writing a sort run");
  size_t n = 0;
  for (size_t i = 0; i <= s->nkeys; i++) {
    const loom__mrec *r = i < s->nkeys ? (const loom__mrec *)(s->arena + ((skey *)s->keys)[i].off) : NULL;
    size_t sz = r ? rec_size(r) : 0;
    if (n && (!r || n + sz > CHUNK)) {
      ssize_t w = pwrite(s->fd, chunk, n, (off_t)s->file_len);
      if (w != (ssize_t)n) {
        free(chunk);
        if (w >= 0) errno = ENOSPC;
        return io_fail(s, "write");
      }
      s->file_len += n;
      n = 0;
    }
    if (!r) break;
    if (sz > CHUNK) { /* a record larger than the chunk goes alone */
      if (pwrite(s->fd, r, sz, (off_t)s->file_len) != (ssize_t)sz) {
        free(chunk);
        return io_fail(s, "write");
      }
      s->file_len += sz;
      continue;
    }
    memcpy(chunk + n, r, sz);
    n += sz;
  }
  free(chunk);
  run.len = s->file_len - run.off;
  run.n = s->nkeys;
  if (LOOM__PUSH(s->runs, s->nruns, s->cap_runs, run)) return s->status = loom__fail(LOOM_ENOMEM, "out of memory");
  s->spilled++;
  s->len = 0;
  s->nkeys = 0;
  return 0;
}

int loom__sorter_add(loom__sorter *s, uint32_t input, uint64_t seq, const loom__ev *e, const loom__targ *args) {
  size_t sz = sizeof(loom__mrec) + e->nargs * sizeof(loom__targ);
  if (s->nkeys && (s->len + sz > s->cap || s->nkeys == s->cap_keys) && spill(s)) return s->status;
  if (sz > s->cap) { /* one record larger than the budget: the budget grows */
    void *p = realloc(s->arena, sz);
    if (!p) return s->status = loom__fail(LOOM_ENOMEM, "out of memory for a record of %zu bytes", sz);
    s->arena = p;
    s->cap = sz;
  }
  s->cur_input = input;
  loom__mrec *r = (loom__mrec *)(s->arena + s->len);
  r->seq = seq;
  r->input = input;
  r->e = *e;
  if (e->nargs) memcpy(r + 1, args, e->nargs * sizeof *args);
  ((skey *)s->keys)[s->nkeys++] = (skey){e->ts, e->dur, seq, s->len};
  /* records stay 8-byte aligned (sz is a multiple of 8) */
  s->len += sz;
  return 0;
}

int loom__sorter_end_input(loom__sorter *s, int last) {
  if (!last) return spill(s);
  qsort(s->keys, s->nkeys, sizeof(skey), cmp_key); /* the in-memory run */
  return 0;
}

/* ---- reading back ------------------------------------------------------- */
static int refill(loom__sorter *s, loom__mrun *r, size_t need) {
  size_t left = r->blen - r->bat;
  if (left) memmove(r->blk, r->blk + r->bat, left);
  r->bat = 0;
  r->blen = left;
  if (need > r->bcap) {
    void *p = realloc(r->blk, need);
    if (!p) return s->status = loom__fail(LOOM_ENOMEM, "out of memory reading a sort run");
    r->blk = p;
    r->bcap = need;
  }
  size_t want = r->bcap - r->blen;
  if (want > r->len - r->read) want = (size_t)(r->len - r->read);
  ssize_t got = want ? pread(s->fd, r->blk + r->blen, want, (off_t)(r->off + r->read)) : 0;
  if (got < 0 || (size_t)got != want) {
    if (got >= 0) errno = EIO;
    return io_fail(s, "read");
  }
  r->read += want;
  r->blen += want;
  return 0;
}

const loom__mrec *loom__sorter_run_next(loom__sorter *s, loom__mrun *r) {
  if (r->memory) {
    if (r->at == r->n) return NULL;
    return (const loom__mrec *)(s->arena + ((skey *)s->keys)[r->at++].off);
  }
  if (r->at == r->n) return NULL;
  if (r->cur_size) r->bat += r->cur_size;
  if (r->blen - r->bat < sizeof(loom__mrec) && refill(s, r, sizeof(loom__mrec))) return NULL;
  loom__mrec h;
  memcpy(&h, r->blk + r->bat, sizeof h);
  size_t sz = rec_size(&h);
  if (r->blen - r->bat < sz && refill(s, r, sz)) return NULL;
  r->cur_size = sz;
  r->at++;
  return (const loom__mrec *)(r->blk + r->bat);
}

int loom__sorter_finish(loom__sorter *s) {
  if (s->nkeys) {
    loom__mrun run = {.input = s->cur_input, .n = s->nkeys, .memory = 1};
    if (LOOM__PUSH(s->runs, s->nruns, s->cap_runs, run)) return s->status = loom__fail(LOOM_ENOMEM, "out of memory");
  }
  /* one block per spilled run, from an eighth of the budget, 16 KiB-1 MiB */
  size_t blk = (size_t)(s->budget / 8 / (s->nruns + 1));
  if (blk < (16u << 10)) blk = 16u << 10;
  if (blk > (1u << 20)) blk = 1u << 20;
  for (size_t i = 0; i < s->nruns; i++) {
    loom__mrun *r = &s->runs[i];
    if (r->memory) continue;
    r->blk = malloc(blk);
    if (!r->blk) return s->status = loom__fail(LOOM_ENOMEM, "out of memory reading the sort runs");
    r->bcap = blk;
  }
  return 0;
}

void loom__sorter_free(loom__sorter *s) {
  for (size_t i = 0; i < s->nruns; i++) free(s->runs[i].blk);
  free(s->runs);
  free(s->arena);
  free(s->keys);
  if (s->fd >= 0) close(s->fd);
  memset(s, 0, sizeof *s);
  s->fd = -1;
}
