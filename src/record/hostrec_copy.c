/*
 * hostrec_copy.c - copies of the threads' host record buffers while they
 * record (ring mode's dumps: loom__hostrec_ring_copy), and the buffers of
 * the current session (loom__hostrec_threads).  The owners go on writing:
 * a copy takes each buffer's list of chunks under its lock and reads the
 * records published before its write position.
 */
#include <stdlib.h>
#include <string.h>

#include "hostrec_int.h"
#include "util/util.h"

/* The chunks to copy of t, oldest first, up to the one pos is in (t->mu
 * held; the records are read after it is released); SIZE_MAX when out of
 * memory. */
static size_t snap_list(loom__tbuf *t, loom__chunk ***list, loom__hrec **pos) {
  size_t n = 0, cap = 0;
  *list = NULL;
  *pos = atomic_load_explicit(&t->pos, memory_order_acquire);
  if (!*pos) return 0; /* a first chunk may be linked, nothing in it published */
  for (loom__chunk *c = t->head; c; c = c->next) {
    if (LOOM__PUSH(*list, n, cap, c) != 0) {
      free(*list);
      *list = NULL;
      return SIZE_MAX;
    }
    if (*pos >= c->recs && *pos <= c->recs + c->cap) break; /* the current one */
  }
  return n;
}

/* 1: t holds no records of session ep (nothing copied). */
static int copy_one(loom__tbuf *t, unsigned ep, loom__ring_copy *out) {
  loom__chunk **list;
  loom__hrec *pos;
  pthread_mutex_lock(&t->mu);
  if (t->epoch != ep) { /* set by its owner under mu */
    pthread_mutex_unlock(&t->mu);
    return 1;
  }
  size_t n = snap_list(t, &list, &pos);
  uint64_t over = atomic_load_explicit(&t->overwritten, memory_order_relaxed);
  pthread_mutex_unlock(&t->mu);
  if (n == SIZE_MAX) return -1;
  /* The records before pos were published by its release store; the owner
   * writes only past it, and recycles nothing while dump_active is set. */
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    loom__chunk *c = list[i];
    size_t from = i == 0 && over ? c->skip : 0;
    size_t to = pos >= c->recs && pos <= c->recs + c->cap ? (size_t)(pos - c->recs) : c->cap;
    total += to > from ? to - from : 0;
  }
  loom__chunk *dst = malloc(sizeof *dst + (total ? total : 1) * sizeof(loom__hrec));
  if (!dst) {
    free(list);
    return -1;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    loom__chunk *c = list[i];
    size_t from = i == 0 && over ? c->skip : 0;
    size_t to = pos >= c->recs && pos <= c->recs + c->cap ? (size_t)(pos - c->recs) : c->cap;
    if (to > from) memcpy(dst->recs + k, c->recs + from, (to - from) * sizeof(loom__hrec));
    k += to > from ? to - from : 0;
  }
  free(list);
  dst->next = NULL;
  dst->cap = (uint32_t)total;
  dst->skip = 0;
  memset(&out->view, 0, sizeof out->view);
  out->chunk = dst;
  out->view.head = out->view.tail = dst;
  atomic_store_explicit(&out->view.pos, dst->recs + total, memory_order_relaxed);
  out->view.epoch = t->epoch;
  out->view.tid = t->tid;
  int exited = atomic_load_explicit(&t->exited, memory_order_acquire);
  atomic_store_explicit(&out->view.exited, exited, memory_order_relaxed);
  if (exited) memcpy(out->view.name, t->name, sizeof t->name); /* else read live */
  atomic_store_explicit(&out->view.dropped, atomic_load(&t->dropped), memory_order_relaxed);
  atomic_store_explicit(&out->view.overwritten, over, memory_order_relaxed);
  return 0;
}

loom__ring_copy *loom__hostrec_ring_copy(size_t *n) {
  *n = 0;
  unsigned ep = atomic_load(&loom__hr_epoch);
  size_t nt = 0, cap = 0;
  loom__tbuf **th = NULL;
  pthread_mutex_lock(&loom__hr_list_mu);
  int oom = 0;
  for (loom__tbuf *t = loom__hr_threads; t && !oom; t = t->next)
    oom = LOOM__PUSH(th, nt, cap, t) != 0;
  pthread_mutex_unlock(&loom__hr_list_mu);
  loom__ring_copy *out = nt && !oom ? calloc(nt, sizeof *out) : NULL;
  if (!out) {
    free(th);
    if (nt || oom) *n = SIZE_MAX;
    return NULL;
  }
  /* Set before any list is read: an owner then sees it under t->mu, after
   * our snapshot of its list, and recycles nothing we copy. */
  atomic_fetch_add(&loom__hr_dump_active, 1);
  size_t k = 0;
  int rc = 0;
  for (size_t i = 0; i < nt && rc >= 0; i++)
    if ((rc = copy_one(th[i], ep, &out[k])) == 0) k++;
  atomic_fetch_sub(&loom__hr_dump_active, 1);
  free(th);
  if (rc < 0) { /* out of memory: no copy rather than a part */
    for (size_t i = 0; i < k; i++) free(out[i].chunk);
    free(out);
    *n = SIZE_MAX;
    return NULL;
  }
  *n = k;
  return out;
}

loom__tbuf **loom__hostrec_threads(size_t *n) {
  unsigned ep = atomic_load(&loom__hr_epoch);
  pthread_mutex_lock(&loom__hr_list_mu);
  size_t cnt = 0, cap = 0;
  loom__tbuf **arr = NULL;
  int oom = 0;
  for (loom__tbuf *t = loom__hr_threads; t && !oom; t = t->next)
    oom = t->epoch == ep && LOOM__PUSH(arr, cnt, cap, t) != 0;
  pthread_mutex_unlock(&loom__hr_list_mu);
  if (oom) {
    free(arr);
    arr = NULL;
    cnt = SIZE_MAX;
  }
  *n = cnt;
  return arr;
}
