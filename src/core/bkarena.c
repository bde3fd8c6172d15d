/*
 * bkarena.c - what backends hand to the core, kept in the shared-memory
 * arena under `loom record` (record/arena.h, docs/survival.md), so that a
 * process killed while recording leaves its backends' records too.
 *
 * A backend's records and arguments (loom__bsess.recs/args) are arrays in
 * the arena instead of the heap; loom__abk describes them.  A record is
 * published by the counts in the current view (nargs, then nrecs, release
 * stores after the record is written), so a half-written one is never read.
 * An array that grows, or that ring mode compacts, is written in a new
 * block and published in the other view before the old block is freed: the
 * reader always sees a whole array.  Clocks (with their sync points),
 * devices and resources are small objects written once and published by
 * their valid word; a clock that changes is written anew (its later seq
 * wins).  Everything here runs under the backend's lock (b->mu), the same
 * lock the live path takes; no syscall is added per record (the arena's
 * allocator runs only when an array grows or a ring compacts).
 *
 * When the arena cannot serve a block (disk full), the backend's records go
 * on in the heap as before: the salvager counts them lost (abk.held).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "record/arena.h"

#define MIN_RECS 256

static _Atomic uint64_t serials;

/* Frees an arena object of this process's arena (a forked child's copies
 * of its parent's are left alone). */
void loom__bkarena_forget(void *p) {
  if (p && loom__arena_pid() == (int32_t)getpid() && loom__arena_owns(p)) loom__arena_free(p);
}

static void copy_name(char *dst, size_t n, const char *s) {
  size_t l = s ? strlen(s) : 0;
  if (l >= n) l = n - 1;
  if (l) memcpy(dst, s, l);
  dst[l] = 0;
}

static void mirror_lost(loom__abk *a, const loom__bsess *bs) {
  for (size_t i = 0; i < sizeof bs->lost_by / sizeof bs->lost_by[0]; i++) {
    if (!bs->lost_by[i].reason) break;
    if (strncmp(a->lost_by[i].reason, bs->lost_by[i].reason, sizeof a->lost_by[i].reason - 1))
      copy_name(a->lost_by[i].reason, sizeof a->lost_by[i].reason, bs->lost_by[i].reason);
    atomic_store_explicit(&a->lost_by[i].n, bs->lost_by[i].n, memory_order_release);
  }
  atomic_store_explicit(&a->lost, bs->lost, memory_order_release);
}

/* Called when a backend of a device runtime (device type other than "cpu")
 * hands the core its first record of a session, or a device: its runtime
 * is in use in this process (declaring clocks at configure is not).
 * loom-preload starts its signal watcher then, and only then (a process
 * that never uses a device runtime gets no loom thread:
 * tools/loom/preload.c). */
static void (*_Atomic device_hook)(void);

void loom__bkarena_set_device_hook(void (*fn)(void)) {
  atomic_store(&device_hook, fn);
}

static void device_in_use(const loom_backend *b) {
  void (*fn)(void) = atomic_load(&device_hook);
  if (fn && b->ops.device_type && strcmp(b->ops.device_type, "cpu") != 0) fn();
}

/* b's arena descriptor, made the first time (b->mu held); NULL when there
 * is no arena (records stay in the heap, as without loom record). */
static loom__abk *abk_of(loom_backend *b, loom__bsess *bs) {
  if (bs->abk || bs->abk_tried) return bs->abk;
  bs->abk_tried = 1;
  if (!loom__arena_on() || bs->nrecs) return NULL;
  loom__abk *a = loom__arena_alloc(LOOM__AO_BK, sizeof *a);
  if (!a) return NULL;
  a->src = bs->src;
  a->serial = atomic_fetch_add(&serials, 1) + 1;
  copy_name(a->name, sizeof a->name, b->ops.name);
  copy_name(a->device_type, sizeof a->device_type, b->ops.device_type);
  copy_name(a->runtime_cat, sizeof a->runtime_cat, b->ops.runtime_category);
  copy_name(a->driver_cat, sizeof a->driver_cat, b->ops.driver_category);
  mirror_lost(a, bs);
  atomic_store_explicit(&a->valid, 1, memory_order_release);
  bs->abk = a;
  bs->in_arena = 1;
  free(bs->recs); /* empty (nrecs is 0); from here on the arrays are the arena's */
  free(bs->args);
  bs->recs = NULL, bs->args = NULL;
  bs->cap_recs = bs->cap_args = 0;
  return a;
}

uint64_t loom__bkarena_serial(loom_backend *b, loom__bsess *bs) {
  device_in_use(b); /* a device or queue of its runtime */
  loom__abk *a = abk_of(b, bs);
  return a ? a->serial : 0;
}

/* Publishes arrays recs/args (caps cr/ca) in the view that is not current,
 * then makes it current; frees the old blocks that were replaced. */
static void swap_arrays(loom__bsess *bs, loom__drec *recs, size_t cr, loom__targ *args,
                        size_t ca) {
  loom__abk *a = bs->abk;
  uint32_t cur = atomic_load_explicit(&a->view, memory_order_relaxed);
  loom__abk_view *v = &a->v[!cur];
  v->recs = (uint64_t)(uintptr_t)recs;
  v->args = (uint64_t)(uintptr_t)args;
  atomic_store_explicit(&v->nargs, bs->nargs, memory_order_relaxed);
  atomic_store_explicit(&v->nrecs, bs->nrecs, memory_order_relaxed);
  atomic_store_explicit(&a->view, !cur, memory_order_release);
  if (recs != bs->recs) loom__bkarena_forget(bs->recs);
  if (args != bs->args) loom__bkarena_forget(bs->args);
  bs->recs = recs, bs->cap_recs = cr;
  bs->args = args, bs->cap_args = ca;
}

/* The arena could not serve a block: the arrays move to the heap, the
 * arena's view is emptied and every record held from now on is counted. */
static int detach(loom__bsess *bs) {
  loom__abk *a = bs->abk;
  size_t cr = bs->cap_recs ? bs->cap_recs : MIN_RECS, ca = bs->cap_args ? bs->cap_args : MIN_RECS;
  loom__drec *r = malloc(cr * sizeof *r);
  loom__targ *g = malloc(ca * sizeof *g);
  if (!r || !g) {
    free(r);
    free(g);
    return -1; /* the arena arrays stay; the record is lost (out of memory) */
  }
  if (bs->nrecs) memcpy(r, bs->recs, bs->nrecs * sizeof *r);
  if (bs->nargs) memcpy(g, bs->args, bs->nargs * sizeof *g);
  loom__abk_view *v = &a->v[atomic_load_explicit(&a->view, memory_order_relaxed)];
  atomic_store_explicit(&v->nrecs, 0, memory_order_release);
  atomic_fetch_add_explicit(&a->held, bs->nrecs, memory_order_relaxed);
  loom__bkarena_forget(bs->recs);
  loom__bkarena_forget(bs->args);
  bs->recs = r, bs->cap_recs = cr;
  bs->args = g, bs->cap_args = ca;
  bs->in_arena = 0;
  return 0;
}

/* A new array block's pages made present in one call (once per growth),
 * not one fault per page under the records: a fault on a shared file page
 * costs more than on anonymous memory (as for host chunks, arena.c). */
static void *prefault(void *p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (p) {
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, e = (uintptr_t)p + bytes;
    (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
  }
#else
  (void)bytes;
#endif
  return p;
}

static size_t grown(size_t cap, size_t want) {
  size_t c = cap ? cap : MIN_RECS;
  while (c < want) c *= 2;
  return c;
}

/* Address space (and file, a hole) kept behind a new array so that it grows
 * in place: the backend's cap, at most ROOM_MAX (past it, a grown array is
 * copied once into a block 16 times as large). */
#define ROOM_MAX ((size_t)256 << 20)
static size_t room_for(const loom__bsess *bs, size_t bytes) {
  const struct loom_session *s = bs->s;
  uint64_t cap = s->ring ? s->ring_bk_bytes : s->bk_cap;
  uint64_t room = bytes > ROOM_MAX / 16 ? (uint64_t)bytes * 16 : ROOM_MAX;
  return (size_t)(room < cap ? room : cap);
}

/* Array *p (capacity *cap of size-byte elements, in the arena) grown to cr
 * elements: in place when its block has room (the new pages made present),
 * else a new block (the caller copies into it).  NULL: none can be had. */
static void *grow_array(loom__bsess *bs, void *p, size_t cap, size_t cr, size_t size,
                        uint32_t kind) {
  if (cr == cap) return p;
  if (p && loom__arena_grow(p, cr * size) == 0) {
    prefault((char *)p + cap * size, (cr - cap) * size);
    return p;
  }
  return prefault(loom__arena_alloc_room(kind, cr * size, room_for(bs, cr * size)), cr * size);
}

int loom__bkarena_reserve(loom_backend *b, loom__bsess *bs, size_t nargs) {
  if (LOOM__UNLIKELY(bs->nrecs == 0)) device_in_use(b); /* its first record */
  abk_of(b, bs);
  size_t wr = bs->nrecs + 1, wa = bs->nargs + nargs;
  if (!bs->in_arena) { /* the heap, as always */
    if (wr > bs->cap_recs &&
        loom__grow((void **)&bs->recs, &bs->cap_recs, wr, sizeof *bs->recs))
      return -1;
    if (wa > bs->cap_args &&
        loom__grow((void **)&bs->args, &bs->cap_args, wa, sizeof *bs->args))
      return -1;
    return 0;
  }
  if (wr <= bs->cap_recs && wa <= bs->cap_args) return 0;
  size_t cr = wr > bs->cap_recs ? grown(bs->cap_recs, wr) : bs->cap_recs;
  size_t ca = wa > bs->cap_args ? grown(bs->cap_args, wa) : bs->cap_args;
  loom__drec *r = grow_array(bs, bs->recs, bs->cap_recs, cr, sizeof *r, LOOM__AO_BKREC);
  loom__targ *g = grow_array(bs, bs->args, bs->cap_args, ca, sizeof *g, LOOM__AO_BKARG);
  if ((!r && cr) || (!g && ca)) {
    if (r != bs->recs) loom__bkarena_forget(r);
    if (g != bs->args) loom__bkarena_forget(g);
    bs->cap_recs = r == bs->recs ? cr : bs->cap_recs; /* grown in place: kept */
    bs->cap_args = g == bs->args ? ca : bs->cap_args;
    return detach(bs) ? -1 : loom__bkarena_reserve(b, bs, nargs);
  }
  if (r == bs->recs && g == bs->args) { /* both grown in place: nothing moves */
    bs->cap_recs = cr, bs->cap_args = ca;
    return 0;
  }
  if (r != bs->recs && bs->nrecs) memcpy(r, bs->recs, bs->nrecs * sizeof *r);
  if (g != bs->args && bs->nargs) memcpy(g, bs->args, bs->nargs * sizeof *g);
  swap_arrays(bs, r, cr, g, ca);
  return 0;
}

/* The record just appended is whole: it becomes readable. */
void loom__bkarena_publish(loom_backend *b, loom__bsess *bs) {
  loom__abk *a = bs->abk;
  if (!a) { /* no arena descriptor: only counted */
    loom__arena_bk_held(&bs->arena_slot, b->ops.name, 1);
    return;
  }
  if (!bs->in_arena) {
    atomic_fetch_add_explicit(&a->held, 1, memory_order_relaxed);
    return;
  }
  loom__abk_view *v = &a->v[atomic_load_explicit(&a->view, memory_order_relaxed)];
  atomic_store_explicit(&v->nargs, bs->nargs, memory_order_release);
  atomic_store_explicit(&v->nrecs, bs->nrecs, memory_order_release);
}

/* Ring mode drops the k oldest records and their a arguments.  In the
 * arena the kept ones are copied to new blocks (the old ones stay whole
 * until the new are published); 1 when done here, 0 when the caller moves
 * them in place (heap arrays). */
int loom__bkarena_drop_oldest(loom__bsess *bs, size_t k, size_t a) {
  loom__abk *ab = bs->abk;
  if (!ab) return 0;
  if (!bs->in_arena) {
    atomic_fetch_sub_explicit(&ab->held, k, memory_order_relaxed);
    return 0;
  }
  loom__drec *r = bs->cap_recs ? loom__arena_alloc(LOOM__AO_BKREC, bs->cap_recs * sizeof *r) : NULL;
  loom__targ *g = bs->cap_args ? loom__arena_alloc(LOOM__AO_BKARG, bs->cap_args * sizeof *g) : NULL;
  if ((!r && bs->cap_recs) || (!g && bs->cap_args)) {
    loom__bkarena_forget(r);
    loom__bkarena_forget(g);
    if (detach(bs) == 0) atomic_fetch_sub_explicit(&ab->held, k, memory_order_relaxed);
    else {
      /* no heap either: the view is emptied while the arrays move */
      loom__abk_view *v = &ab->v[atomic_load_explicit(&ab->view, memory_order_relaxed)];
      atomic_store_explicit(&ab->moving, bs->nrecs - k, memory_order_relaxed);
      atomic_store_explicit(&v->nrecs, 0, memory_order_release);
    }
    return 0;
  }
  size_t nr = bs->nrecs - k, na = bs->nargs - a;
  if (nr) memcpy(r, bs->recs + k, nr * sizeof *r);
  if (na) memcpy(g, bs->args + a, na * sizeof *g);
  for (size_t i = 0; i < nr; i++) r[i].args_off -= (uint32_t)a;
  bs->nrecs = nr, bs->nargs = na;
  swap_arrays(bs, r, bs->cap_recs, g, bs->cap_args);
  return 1;
}

void loom__bkarena_ring_state(loom__bsess *bs) {
  loom__abk *a = bs->abk;
  if (!a) return;
  atomic_store_explicit(&a->overwritten, bs->overwritten, memory_order_relaxed);
  if (atomic_load_explicit(&a->moving, memory_order_relaxed) && bs->in_arena) {
    loom__bkarena_publish(NULL, bs);
    atomic_store_explicit(&a->moving, 0, memory_order_release);
  }
}

void loom__bkarena_lost(loom_backend *b, loom__bsess *bs) {
  loom__abk *a = abk_of(b, bs);
  if (a) mirror_lost(a, bs);
}

/* Clock idx of bs changed (declared, a sync point, a rate): written anew. */
void loom__bkarena_clock(loom_backend *b, loom__bsess *bs, size_t idx) {
  loom__abk *a = abk_of(b, bs);
  if (!a || idx >= bs->nclocks) return;
  loom__clock *c = &bs->clocks[idx];
  size_t n = c->nsync;
  loom__aclk *k = loom__arena_alloc(LOOM__AO_CLK, sizeof *k + (n ? n : 1) * sizeof(loom__async));
  if (!k) return; /* the old copy stays: its records convert with fewer points */
  k->index = (uint32_t)idx;
  k->bk = a->serial;
  k->seq = loom__arena_seq();
  k->domain = (uint32_t)c->domain;
  k->cap = (uint32_t)(n ? n : 1);
  copy_name(k->name, sizeof k->name, c->name);
  uint64_t bits;
  memcpy(&bits, &c->ns_per_tick, sizeof bits);
  atomic_store_explicit(&k->rate_bits, bits, memory_order_relaxed);
  for (size_t i = 0; i < n; i++)
    k->sync[i] = (loom__async){c->sync[i].dev, c->sync[i].host_ts, c->sync[i].epoch,
                               (uint32_t)c->sync[i].host_domain, 0};
  atomic_store_explicit(&k->nsync, (uint32_t)n, memory_order_relaxed);
  atomic_store_explicit(&k->valid, 1, memory_order_release);
  loom__bkarena_forget(c->arena);
  c->arena = k;
}

void *loom__bkarena_device(uint64_t serial, uint32_t index, const loom__sdev *d) {
  if (!serial) return NULL;
  loom__adev *a = loom__arena_alloc(LOOM__AO_DEV, sizeof *a + d->nprops * sizeof(loom__targ));
  if (!a) return NULL;
  a->index = index;
  a->bk = serial;
  copy_name(a->name, sizeof a->name, d->name);
  copy_name(a->vendor, sizeof a->vendor, d->vendor);
  copy_name(a->type, sizeof a->type, d->type);
  a->nprops = (uint32_t)d->nprops;
  if (d->nprops) memcpy(a->props, d->props, d->nprops * sizeof(loom__targ));
  atomic_store_explicit(&a->valid, 1, memory_order_release);
  return a;
}

void *loom__bkarena_resource(uint64_t serial, uint32_t index, const loom__sres *r) {
  if (!serial) return NULL;
  loom__ares *a = loom__arena_alloc(LOOM__AO_RES, sizeof *a);
  if (!a) return NULL;
  a->index = index;
  a->device = r->device;
  a->native_id = r->native_id;
  copy_name(a->name, sizeof a->name, r->name);
  atomic_store_explicit(&a->valid, 1, memory_order_release);
  return a;
}

/* The backend leaves the session: its arena objects go, its arrays are
 * freed where they live (b->mu need not be held: nothing emits any more). */
void loom__bkarena_close(loom__bsess *bs) {
  for (size_t i = 0; i < bs->nclocks; i++) loom__bkarena_forget(bs->clocks[i].arena);
  if (bs->in_arena) {
    loom__bkarena_forget(bs->recs);
    loom__bkarena_forget(bs->args);
    bs->recs = NULL, bs->args = NULL;
  }
  loom__bkarena_forget(bs->abk);
  bs->abk = NULL;
}
