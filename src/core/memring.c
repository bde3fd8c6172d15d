/*
 * memring.c - a backend's memory records in ring mode: the ring drops its
 * oldest records to stay within its size (host.c, ring_make_room), and a
 * dump must still start from the memory live at its start.  Before records
 * are dropped their allocations are kept aside (with the reserved arguments
 * only) and their frees end the allocations kept so; what is aside is live
 * at the ring's cut, and a dump's trace gets it there, flagged
 * "live_at_start" (collect.c, as the host's get it in collect_host.c).
 * Everything here runs under the backend's lock.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* An allocation's identity among a backend's: its device and address. */
static uint64_t key_args(const loom__targ *a, uint32_t n) {
  static _Atomic uint32_t ids[2];
  if (!atomic_load_explicit(&ids[1], memory_order_relaxed)) {
    atomic_store(&ids[0], loom__intern("addr", SIZE_MAX));
    atomic_store(&ids[1], loom__intern("device", SIZE_MAX));
  }
  uint64_t addr = 0, dev = UINT64_MAX;
  for (uint32_t i = 0; i < n; i++) {
    if (a[i].key == atomic_load(&ids[0])) addr = a[i].v.u;
    else if (a[i].key == atomic_load(&ids[1])) dev = a[i].v.u;
  }
  uint64_t k = loom__hash_u64(addr ^ loom__hash_u64(dev));
  return k ? k : 1;
}

/* Keeps allocation d aside (its arguments that say what it is). */
static int keep(loom__bsess *bs, const loom__drec *d, uint64_t key) {
  static const char *const reserved[] = {"addr", "bytes", "device", "memory_kind", "reserved"};
  loom__bmem m = {.d = *d};
  m.d.nargs = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    const loom__targ *a = &bs->args[d->args_off + i];
    const char *k = loom__intern_get(a->key);
    for (size_t r = 0; k && r < 5 && m.d.nargs < 5; r++)
      if (!strcmp(k, reserved[r])) m.args[m.d.nargs++] = *a;
  }
  uint64_t *at = loom__map_get(&bs->gone_by_key, key);
  if (at) { /* allocated again without a free: the later one */
    bs->gone_mem[*at - 1] = m;
    return 0;
  }
  if (LOOM__PUSH(bs->gone_mem, bs->ngone, bs->cap_gone, m)) return -1;
  return loom__map_put(&bs->gone_by_key, key, bs->ngone);
}

/* Ends the allocation kept aside under key, if there is one. */
static void end(loom__bsess *bs, uint64_t key) {
  uint64_t *at = loom__map_get(&bs->gone_by_key, key);
  if (!at) return;
  size_t i = (size_t)*at - 1;
  loom__map_del(&bs->gone_by_key, key);
  if (i + 1 < bs->ngone) { /* the last one takes its place */
    bs->gone_mem[i] = bs->gone_mem[bs->ngone - 1];
    const loom__bmem *m = &bs->gone_mem[i];
    uint64_t *moved = loom__map_get(&bs->gone_by_key, key_args(m->args, m->d.nargs));
    if (moved) *moved = i + 1;
  }
  bs->ngone--;
}

void loom__bmem_fold(loom__bsess *bs, size_t k) {
  for (size_t i = 0; i < k; i++) {
    const loom__drec *d = &bs->recs[i];
    if (d->kind != LOOM_KIND_MEMORY) continue;
    uint64_t key = key_args(d->nargs ? bs->args + d->args_off : NULL, d->nargs);
    if (!(d->roles & LOOM_RECORD_F_ALLOC)) end(bs, key);
    else keep(bs, d, key); /* out of memory: its free will read as unknown */
  }
}

int loom__bmem_copy(loom__bsess *dst, const loom__bsess *src) {
  dst->gone_mem = NULL;
  dst->ngone = dst->cap_gone = 0;
  memset(&dst->gone_by_key, 0, sizeof dst->gone_by_key);
  if (!src->ngone) return 0;
  dst->gone_mem = malloc(src->ngone * sizeof *dst->gone_mem);
  if (!dst->gone_mem) return -1;
  memcpy(dst->gone_mem, src->gone_mem, src->ngone * sizeof *dst->gone_mem);
  dst->ngone = dst->cap_gone = src->ngone;
  return 0;
}

void loom__bmem_free(loom__bsess *bs) {
  free(bs->gone_mem);
  bs->gone_mem = NULL;
  bs->ngone = bs->cap_gone = 0;
  loom__map_free(&bs->gone_by_key);
}
