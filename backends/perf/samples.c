/*
 * samples.c - where the reader puts the samples it copies out of the rings,
 * and the worker that unwinds them while the program runs (perf.live).
 *
 * Each sample is its own allocation: its header, and its raw bytes (the
 * call chain, the registers and the copy of the user stack, 16 KiB by
 * default).  The reader appends it to its list and hands it to the worker
 * through a single-producer, single-consumer queue of pointers; the worker
 * unwinds it (live.c), keeps its frames and frees the raw bytes, so that
 * perf.memory holds many times more samples.  The worker uses at most a
 * quarter of one CPU (its own CPU time against the time since it started,
 * beyond a first burst of 200 ms; it naps when ahead), so the work the
 * flush would do after the program is done while it runs, on a CPU it
 * leaves idle when it has one;
 * the reader is never held up by it (a full queue leaves samples raw), and
 * a sample the worker did not reach is unwound at flush.  (Not SCHED_IDLE:
 * on a machine kept busy by others, such as the ranks of a job
 * busy-polling in MPI_Finalize, a stop would wait on it for seconds, and an
 * unprivileged thread cannot leave that policy again.)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define QCAP 65536 /* samples waiting for the worker */
/* CPU time the worker may use beyond its quarter: the first samples cost
 * most (each library's symbols and unwinding tables are read once). */
#define BURST_NS 200000000ull

struct pf_store {
  pf_events *ev;
  uint64_t cap;                /* perf.memory */
  atomic_uint_fast64_t bytes;  /* headers, raw bytes and frames kept */
  pf_sample **v;               /* the reader's, in arrival order */
  size_t n, cap_v;
  pf_unwind_fn unwind;
  void *ud;
  pf_sample **q;
  atomic_size_t head, tail;    /* the worker takes at head, the reader puts at tail */
  pthread_t worker;
  int have_worker;
  atomic_int stop, ready;
  pid_t worker_tid;
  pthread_mutex_t nap_mu;      /* stop ends the worker's nap at once */
  pthread_cond_t nap_cv;
};

/* The worker's nap of ms, or until stop. */
static void nap_ms(pf_store *st, long ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += ms * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&st->nap_mu);
  if (!atomic_load(&st->stop)) pthread_cond_timedwait(&st->nap_cv, &st->nap_mu, &ts);
  pthread_mutex_unlock(&st->nap_mu);
}

/* The raw bytes of sample s: call chain, registers, stack copy. */
static size_t raw_bytes(const pf_sample *s) {
  return (size_t)(s->nchain + s->nregs) * 8 + s->stack_len;
}

/* The worker's unwinding of s: frames kept, raw bytes given back; a sample
 * the unwinder leaves (SIZE_MAX) or memory refuses stays raw. */
static void unwind_one(pf_store *st, pf_sample *s) {
  const uint64_t *pcs = NULL;
  size_t k = st->unwind(st->ev, st->ud, s, &pcs);
  if (k == SIZE_MAX) return;
  uint64_t *copy = k ? malloc(k * sizeof *copy) : NULL;
  if (k && !copy) return;
  if (k) memcpy(copy, pcs, k * sizeof *copy);
  size_t raw = raw_bytes(s);
  free(s->raw);
  s->raw = NULL;
  s->pcs = copy;
  s->npcs = (uint32_t)k;
  s->unwound = 1;
  atomic_fetch_add(&st->bytes, k * sizeof *copy);
  atomic_fetch_sub(&st->bytes, raw);
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg) {
  pf_store *st = arg;
  st->worker_tid = (pid_t)syscall(SYS_gettid);
  uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
  atomic_store(&st->ready, 1);
  while (!atomic_load_explicit(&st->stop, memory_order_relaxed)) {
    size_t h = atomic_load_explicit(&st->head, memory_order_relaxed);
    if (h == atomic_load_explicit(&st->tail, memory_order_acquire)) {
      st->unwind(st->ev, st->ud, NULL, NULL); /* idle: get ready */
      nap_ms(st, 5);
      continue;
    }
    if (clock_ns(CLOCK_THREAD_CPUTIME_ID) * 4 > clock_ns(CLOCK_MONOTONIC) - t0 + BURST_NS * 4) {
      nap_ms(st, 5); /* a quarter of a CPU used (beyond the first burst) */
      continue;
    }
    unwind_one(st, st->q[h & (QCAP - 1)]);
    atomic_store_explicit(&st->head, h + 1, memory_order_release);
  }
  return NULL;
}

pf_store *pf_store_new(pf_events *ev, uint64_t cap, pf_unwind_fn unwind, void *ud) {
  pf_store *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  st->ev = ev;
  st->cap = cap;
  st->unwind = unwind;
  st->ud = ud;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&st->nap_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&st->nap_mu, NULL);
  if (unwind && (st->q = malloc(QCAP * sizeof *st->q)) &&
      pthread_create(&st->worker, NULL, worker_main, st) == 0) {
    st->have_worker = 1;
    while (!atomic_load(&st->ready)) sched_yield();
  }
  return st;
}

int pf_store_add(pf_store *st, const pf_sample *h, const uint8_t *chain, const uint8_t *regs,
                 const uint8_t *stack) {
  size_t raw = raw_bytes(h);
  if (atomic_load(&st->bytes) + raw + sizeof(pf_sample) > st->cap) return 1;
  if (pf_grow((void **)&st->v, &st->cap_v, st->n + 1, sizeof *st->v)) return -1;
  pf_sample *s = malloc(sizeof *s);
  uint8_t *d = malloc(raw ? raw : 1);
  if (!s || !d) {
    free(s);
    free(d);
    return -1;
  }
  *s = *h;
  s->raw = d;
  memcpy(d, chain, (size_t)h->nchain * 8);
  if (h->nregs) memcpy(d + (size_t)h->nchain * 8, regs, (size_t)h->nregs * 8);
  if (h->stack_len) memcpy(d + (size_t)(h->nchain + h->nregs) * 8, stack, h->stack_len);
  atomic_fetch_add(&st->bytes, raw + sizeof *s);
  st->v[st->n++] = s;
  size_t t = atomic_load_explicit(&st->tail, memory_order_relaxed);
  if (st->have_worker && t - atomic_load_explicit(&st->head, memory_order_acquire) < QCAP) {
    st->q[t & (QCAP - 1)] = s;
    atomic_store_explicit(&st->tail, t + 1, memory_order_release);
  }
  return 0;
}

void pf_store_stop(pf_store *st) {
  if (!st || !st->have_worker) return;
  pthread_mutex_lock(&st->nap_mu);
  atomic_store(&st->stop, 1);
  pthread_cond_signal(&st->nap_cv);
  pthread_mutex_unlock(&st->nap_mu);
  pthread_join(st->worker, NULL);
  st->have_worker = 0;
}

void pf_store_free(pf_store *st) {
  if (!st) return;
  pf_store_stop(st);
  for (size_t i = 0; i < st->n; i++) {
    free(st->v[i]->raw);
    free(st->v[i]->pcs);
    free(st->v[i]);
  }
  free(st->v);
  free(st->q);
  pthread_cond_destroy(&st->nap_cv);
  pthread_mutex_destroy(&st->nap_mu);
  free(st);
}

size_t pf_store_n(const pf_store *st) { return st ? st->n : 0; }
const pf_sample *pf_store_at(const pf_store *st, size_t i) { return st->v[i]; }
pid_t pf_store_worker_tid(const pf_store *st) { return st ? st->worker_tid : 0; }
