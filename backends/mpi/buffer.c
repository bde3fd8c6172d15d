/*
 * buffer.c - per-thread record buffers of the MPI backend.
 *
 * host->emit copies and interns every argument under a lock: a few hundred
 * ns for an MPI record of six arguments, more than the call it describes.
 * So a wrapper only appends its record to its thread's chunk, and flush
 * hands them all to host->emit after the session stopped.  A record is its
 * two times, a pointer to its layout (name, kind, arg keys and types, all
 * literals, shared by every call of that shape) and one 8-byte value per
 * argument: 72 bytes for a six-argument call instead of 176 with the keys
 * and types copied each time, and the bytes written are most of what a
 * record costs once the chunk is out of the cache.  Chunks are allocated
 * when one fills, never per call.  When the session is destroyed they go to
 * a pool (up to POOL_MAX) that the next session reuses: the first touch of
 * fresh memory (a page fault every ~30 records) costs more than the record.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mpil.h"

/* One chunk is one 2 MiB huge page where the kernel has them (THP in
 * "madvise" mode, the default): its first touch is one fault that clears
 * 2 MiB, where 4 KiB pages fault every ~57 records at 10-30 us a fault on a
 * busy VM, which made a process's first session cost hundreds of ns per
 * record.  Elsewhere the same mapping simply has small pages. */
#define CHUNK_BYTES ((size_t)2 << 20)

typedef struct chunk {
  struct chunk *next;
  uint32_t tid;
  size_t cap;
  atomic_size_t used; /* published after each record is complete */
  _Alignas(8) unsigned char data[];
} chunk;

#define MAXARGS MPIL_MAXARGS

struct mpil_layout {
  const char *name;
  uint16_t kind, nargs;
  int16_t wait_at; /* index of the wait_start_ns argument, -1 if none */
  uint32_t types;  /* as mpil_call's */
  const char *keys[MAXARGS];
  struct mpil_layout *next;
};

typedef struct rec {
  uint64_t t0, t1;
  const mpil_layout *lay;
  uint64_t v[]; /* one per argument, the bits of loom_arg.v */
} rec;

#define POOL_MAX 32 /* chunks kept for the next session: 64 MiB */

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static chunk *chunks, *pool;
static unsigned npool;
static MPIL_TLS chunk *cur;
static MPIL_TLS unsigned cur_gen; /* session of cur: never read a freed chunk */

/* The key whose value is a raw monotonic time, converted at flush. */
const char mpil_key_wait_start[] = "wait_start_ns";

/* CHUNK_BYTES at a CHUNK_BYTES boundary (a huge page needs one). */
static chunk *chunk_alloc(void) {
  size_t sz = CHUNK_BYTES;
  unsigned char *p = mmap(NULL, 2 * sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  unsigned char *a = (unsigned char *)(((uintptr_t)p + sz - 1) & ~(uintptr_t)(sz - 1));
  if (a > p) munmap(p, (size_t)(a - p));
  if (p + 2 * sz > a + sz) munmap(a + sz, (size_t)(p + 2 * sz - (a + sz)));
#ifdef MADV_HUGEPAGE
  madvise(a, sz, MADV_HUGEPAGE); /* a refusal leaves small pages: fine */
#endif
  return (chunk *)a;
}

static chunk *new_chunk(unsigned gen) {
  pthread_mutex_lock(&list_mu);
  chunk *k = pool;
  if (k) pool = k->next, npool--;
  pthread_mutex_unlock(&list_mu);
  if (!k && !(k = chunk_alloc())) return NULL;
  k->tid = mpil_host->thread_id();
  k->cap = CHUNK_BYTES - sizeof *k;
  atomic_store(&k->used, 0);
  pthread_mutex_lock(&list_mu);
  int live = mpil_on() == gen; /* not a session that stopped meanwhile */
  if (live) k->next = chunks, chunks = k;
  else k->next = pool, pool = k, npool++;
  pthread_mutex_unlock(&list_mu);
  if (!live) return NULL;
  cur = k;
  cur_gen = gen;
  return k;
}

/* Layouts ever seen, never freed: a few per call site (optional args). */
static pthread_mutex_t lay_mu = PTHREAD_MUTEX_INITIALIZER;
static mpil_layout *layouts;

static int same(const mpil_layout *l, const mpil_call *c, const char *name, int kind) {
  if (!l || l->name != name || l->kind != kind || l->nargs != c->n || l->types != c->types)
    return 0;
  for (uint32_t i = 0; i < c->n; i++)
    if (l->keys[i] != c->k[i]) return 0;
  return 1;
}

static const mpil_layout *layout_of(const mpil_call *c, const char *name, int kind) {
  pthread_mutex_lock(&lay_mu);
  mpil_layout *l = layouts;
  while (l && !same(l, c, name, kind)) l = l->next;
  if (!l && (l = calloc(1, sizeof *l))) {
    *l = (mpil_layout){.name = name, .kind = (uint16_t)kind, .nargs = (uint16_t)c->n,
                       .wait_at = -1, .types = c->types, .next = layouts};
    for (uint32_t i = 0; i < c->n; i++) {
      l->keys[i] = c->k[i];
      if (c->k[i] == mpil_key_wait_start) l->wait_at = (int16_t)i;
    }
    layouts = l;
  }
  pthread_mutex_unlock(&lay_mu);
  return l;
}

static void to_args(const char *const *keys, uint32_t types, const uint64_t *v, uint32_t n,
                    loom_arg *a) {
  for (uint32_t i = 0; i < n; i++)
    a[i] = (loom_arg){.key = keys[i], .type = (loom_arg_type)((types >> (2 * i)) & 3), .v.u = v[i]};
}

void mpil_call_args(const mpil_call *c, loom_arg *a) { to_args(c->k, c->types, c->v, c->n, a); }

void mpil_emit(mpil_site *site, const mpil_call *c, const char *name, int kind, uint64_t end) {
  const mpil_layout *l = atomic_load_explicit(&site->last, memory_order_acquire);
  if (__builtin_expect(!same(l, c, name, kind), 0)) {
    if (!(l = layout_of(c, name, kind))) {
      if (mpil_on() == c->gen) mpil_host->count_lost(mpil_self, 1, "out of memory");
      return;
    }
    atomic_store_explicit(&site->last, l, memory_order_release);
  }
  size_t need = sizeof(rec) + c->n * sizeof(uint64_t);
  chunk *k = cur_gen == c->gen ? cur : NULL;
  size_t used = k ? atomic_load_explicit(&k->used, memory_order_relaxed) : 0;
  if (__builtin_expect(!k || k->cap - used < need, 0)) {
    if (!(k = new_chunk(c->gen))) {
      if (mpil_on() == c->gen) mpil_host->count_lost(mpil_self, 1, "out of memory");
      return;
    }
    used = 0;
  }
  rec *r = (rec *)(k->data + used);
  r->t0 = c->t0;
  r->t1 = end;
  r->lay = l;
  memcpy(r->v, c->v, c->n * sizeof(uint64_t));
  atomic_store_explicit(&k->used, used + need, memory_order_release);
}

/* Names are literals: a few distinct pointers, interned and given their
 * marks (roles.c) once each. */
static loom_string_id name_id(const char *name, const char **keys, loom_string_id *ids,
                              uint16_t *marks, int *n, uint16_t *mark) {
  for (int i = 0; i < *n; i++)
    if (keys[i] == name) return *mark = marks[i], ids[i];
  loom_string_id id = mpil_host->intern(mpil_self, name, SIZE_MAX);
  *mark = mpil_roles(name);
  if (*n < 64) keys[*n] = name, ids[*n] = id, marks[(*n)++] = *mark;
  return id;
}

void mpil_buffer_flush(void) {
  const char *keys[64];
  loom_string_id ids[64];
  uint16_t marks[64], mark;
  int nids = 0;
  pthread_mutex_lock(&list_mu);
  for (chunk *k = chunks; k; k = k->next) {
    size_t used = atomic_load_explicit(&k->used, memory_order_acquire);
    for (size_t at = 0; at < used;) {
      const rec *h = (const rec *)(k->data + at);
      const mpil_layout *l = h->lay;
      loom_arg a[MAXARGS];
      to_args(l->keys, l->types, h->v, l->nargs, a);
      if (l->wait_at >= 0) /* a raw clock reading: the trace shows epoch ns */
        a[l->wait_at].v.i = mpil_host->clock_to_epoch_ns(mpil_self, mpil_clk, h->v[l->wait_at]);
      loom_string_id name = name_id(l->name, keys, ids, marks, &nids, &mark);
      loom_record r = {.struct_size = sizeof r,
                       .kind = l->kind,
                       .flags = mark,
                       .clock = mpil_clk,
                       .device = LOOM_DEVICE_HOST,
                       .tid = k->tid,
                       .start = h->t0,
                       .end = h->t1,
                       .name = name,
                       .nargs = l->nargs,
                       .category = "mpi",
                       .args = a};
      mpil_host->emit(mpil_self, &r);
      at += sizeof *h + l->nargs * sizeof(uint64_t);
    }
  }
  pthread_mutex_unlock(&list_mu);
}

void mpil_buffer_free(void) {
  chunk *drop = NULL;
  pthread_mutex_lock(&list_mu);
  while (chunks) {
    chunk *k = chunks;
    chunks = k->next;
    if (npool < POOL_MAX) k->next = pool, pool = k, npool++;
    else k->next = drop, drop = k;
  }
  pthread_mutex_unlock(&list_mu);
  while (drop) {
    chunk *n = drop->next;
    munmap(drop, CHUNK_BYTES);
    drop = n;
  }
}
