/*
 * memledger.c - the allocations live now (loom_memory_alloc minus
 * loom_memory_free), kept while a session in window or ring mode runs, so
 * that a window or a ring dump starts from what was live at its start: its
 * trace holds only the records of its own span (a window records nothing
 * before it begins; a ring overwrites its oldest records), and the ledger
 * says what was allocated before and not freed (collect_host.c turns that
 * into "live_at_start" allocations).  Sessions that record from start to
 * stop do not need it and do not pay for it.
 *
 * Called from the allocation calls of any thread, possibly from inside a
 * malloc hook: no malloc here.  The table is split in stripes by address,
 * each an open-addressing table (linear probing, backward-shift deletion)
 * with its own spin lock, grown by mmap.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "record.h"
#include "util/util.h"

#define STRIPES 64
#define MIN_SLOTS 256

typedef struct stripe {
  atomic_flag lock;
  loom__mem_live *slot; /* a slot is used when its ts is not 0 */
  size_t cap, n;
  char pad[32];
} stripe;

static stripe stripes[STRIPES];
static atomic_int ledger_on;

static inline int used(const loom__mem_live *e) { return e->ts != 0; }

static inline uint64_t key_hash(uint64_t addr, int32_t dev) {
  return loom__hash_u64(addr ^ ((uint64_t)(uint32_t)dev << 48));
}

static inline stripe *stripe_of(uint64_t h) { return &stripes[(h >> 58) & (STRIPES - 1)]; }

static inline void lock(stripe *s) {
  while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)) {
  }
}

static inline void unlock(stripe *s) { atomic_flag_clear_explicit(&s->lock, memory_order_release); }

static loom__mem_live *map_slots(size_t cap) {
  void *p = mmap(NULL, cap * sizeof(loom__mem_live), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static loom__mem_live *find(stripe *s, uint64_t addr, int32_t dev, uint64_t h) {
  for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    loom__mem_live *e = &s->slot[i];
    if (!used(e) || (e->addr == addr && e->device == dev)) return e;
  }
}

/* Doubles s's table (its lock held); 0, or -1 when no memory can be had. */
static int grow(stripe *s) {
  size_t cap = s->cap ? s->cap * 2 : MIN_SLOTS;
  loom__mem_live *old = s->slot, *nw = map_slots(cap);
  if (!nw) return -1;
  size_t ocap = s->cap;
  s->slot = nw, s->cap = cap;
  for (size_t i = 0; i < ocap; i++)
    if (used(&old[i])) *find(s, old[i].addr, old[i].device, key_hash(old[i].addr,
                                                                     old[i].device)) = old[i];
  if (old) munmap(old, ocap * sizeof *old);
  return 0;
}

void loom__memledger_alloc(const loom__mem_live *a) {
  uint64_t h = key_hash(a->addr, a->device);
  stripe *s = stripe_of(h);
  lock(s);
  if ((s->n + 1) * 4 <= s->cap * 3 || grow(s) == 0) { /* full: this one is not known */
    loom__mem_live *e = find(s, a->addr, a->device, h);
    if (!used(e)) s->n++;
    *e = *a; /* an address allocated twice without a free: the later one */
    if (!e->ts) e->ts = 1;
  }
  unlock(s);
}

int loom__memledger_free(uint64_t addr, int32_t dev, loom__mem_live *out) {
  uint64_t h = key_hash(addr, dev);
  stripe *s = stripe_of(h);
  int found = 0;
  lock(s);
  if (s->cap) {
    loom__mem_live *e = find(s, addr, dev, h);
    if ((found = used(e))) {
      *out = *e;
      size_t i = (size_t)(e - s->slot), j = i, m = s->cap - 1;
      for (;;) { /* backward shift: no tombstones */
        j = (j + 1) & m;
        if (!used(&s->slot[j])) break;
        size_t home = key_hash(s->slot[j].addr, s->slot[j].device) & m;
        if (((j - home) & m) >= ((j - i) & m)) s->slot[i] = s->slot[j], i = j;
      }
      memset(&s->slot[i], 0, sizeof s->slot[i]);
      s->n--;
    }
  }
  unlock(s);
  return found;
}

static void clear_all(void) {
  for (int k = 0; k < STRIPES; k++) {
    stripe *s = &stripes[k];
    lock(s);
    if (s->slot) munmap(s->slot, s->cap * sizeof *s->slot);
    s->slot = NULL, s->cap = s->n = 0;
    unlock(s);
  }
}

void loom__memledger_start(void) {
  clear_all();
  atomic_store(&ledger_on, 1);
  loom__hostrec_memory_mode(1);
}

void loom__memledger_stop(void) {
  if (!atomic_exchange(&ledger_on, 0)) return;
  loom__hostrec_memory_mode(0);
  clear_all();
}

/* In a child forked without exec: a stripe may have been locked by a thread
 * that is not there; the tables (the parent's) go with the next start. */
void loom__memledger_forked(void) {
  atomic_store(&ledger_on, 0);
  for (int k = 0; k < STRIPES; k++) atomic_flag_clear(&stripes[k].lock);
}

loom__mem_live *loom__memledger_snapshot(size_t *n) {
  *n = 0;
  if (!atomic_load(&ledger_on)) return NULL;
  size_t cap = 0, k = 0;
  loom__mem_live *v = NULL;
  for (int i = 0; i < STRIPES; i++) {
    stripe *s = &stripes[i];
    lock(s); /* no allocation under the lock: the array is sized first */
    size_t need = k + s->n;
    unlock(s);
    if (need > cap) {
      cap = need + need / 2 + 64;
      loom__mem_live *nv = realloc(v, cap * sizeof *v);
      if (!nv) {
        free(v);
        *n = SIZE_MAX;
        return NULL;
      }
      v = nv;
    }
    lock(s);
    for (size_t j = 0; j < s->cap && k < cap; j++)
      if (used(&s->slot[j])) v[k++] = s->slot[j];
    unlock(s);
  }
  *n = k;
  return v;
}
