/*
 * buffer.c - per-thread record buffers of the MPI backend.
 *
 * host->emit copies and interns every argument under a lock: a few hundred
 * ns for an MPI record of six arguments, more than the call it describes.
 * So a wrapper only appends its record (times, name, arguments whose keys
 * and string values are literals) to its thread's chunk, and flush hands
 * them all to host->emit after the session stopped.  Chunks are allocated
 * when one fills, never per call.  When the session is destroyed they go to
 * a pool (up to POOL_MAX) that the next session reuses: the first touch of
 * fresh memory (a page fault every ~30 records) costs more than the record.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mpil.h"

#define CHUNK_BYTES (256 * 1024)

typedef struct chunk {
  struct chunk *next;
  uint32_t tid;
  size_t cap;
  atomic_size_t used; /* published after each record is complete */
  _Alignas(8) unsigned char data[];
} chunk;

typedef struct hdr {
  uint64_t t0, t1;
  const char *name;
  uint16_t kind, nargs;
} hdr;

#define POOL_MAX 256 /* chunks kept for the next session: 64 MiB */

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static chunk *chunks, *pool;
static unsigned npool;
static MPIL_TLS chunk *cur;
static MPIL_TLS unsigned cur_gen; /* session of cur: never read a freed chunk */

/* The key whose value is a raw monotonic time, converted at flush. */
const char mpil_key_wait_start[] = "wait_start_ns";

static chunk *new_chunk(unsigned gen) {
  pthread_mutex_lock(&list_mu);
  chunk *k = pool;
  if (k) pool = k->next, npool--;
  pthread_mutex_unlock(&list_mu);
  if (!k && !(k = malloc(sizeof *k + CHUNK_BYTES))) return NULL;
  k->tid = mpil_host->thread_id();
  k->cap = CHUNK_BYTES;
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

void mpil_emit(mpil_call *c, const char *name, int kind, uint64_t end) {
  size_t need = sizeof(hdr) + c->n * sizeof(loom_arg);
  chunk *k = cur_gen == c->gen ? cur : NULL;
  size_t used = k ? atomic_load_explicit(&k->used, memory_order_relaxed) : 0;
  if (!k || k->cap - used < need) {
    if (!(k = new_chunk(c->gen))) {
      if (mpil_on() == c->gen) mpil_host->count_lost(mpil_self, 1, "out of memory");
      return;
    }
    used = 0;
  }
  hdr *h = (hdr *)(k->data + used);
  *h = (hdr){.t0 = c->t0, .t1 = end, .name = name, .kind = (uint16_t)kind,
             .nargs = (uint16_t)c->n};
  memcpy(h + 1, c->a, c->n * sizeof(loom_arg));
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
      hdr *h = (hdr *)(k->data + at);
      loom_arg *a = (loom_arg *)(h + 1);
      for (uint16_t i = 0; i < h->nargs; i++)
        if (a[i].key == mpil_key_wait_start)
          a[i].v.i = mpil_host->clock_to_epoch_ns(mpil_self, mpil_clk, (uint64_t)a[i].v.i);
      loom_string_id name = name_id(h->name, keys, ids, marks, &nids, &mark);
      loom_record r = {.struct_size = sizeof r,
                       .kind = h->kind,
                       .flags = mark,
                       .clock = mpil_clk,
                       .device = LOOM_DEVICE_HOST,
                       .resource = k->tid,
                       .start = h->t0,
                       .end = h->t1,
                       .name = name,
                       .nargs = h->nargs,
                       .category = "mpi",
                       .args = a};
      mpil_host->emit(mpil_self, &r);
      at += sizeof *h + h->nargs * sizeof(loom_arg);
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
    free(drop);
    drop = n;
  }
}
