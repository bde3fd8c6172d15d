/*
 * hostrec.c - per-thread host record buffers and the instrumentation calls
 * of loom.h (range push/pop, begin/end, framework ops, instants, counters,
 * steps, allocations).
 *
 * Each thread owns a loom__tbuf, created at its first record and linked into
 * a process-wide list.  Records go into fixed-size chunks; the owner publishes
 * its write position with a release store and the session reads it with an
 * acquire load after stop, so no lock is taken while recording.  A thread
 * that exits keeps its buffer (marked exited) until the session collected it.
 * Buffers are reset lazily by their owner when it sees a new session epoch.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "arena.h"
#include "base/clocklog.h"
#include "hostrec_int.h"
#include "record.h"
#include "util/util.h"

/* The default (dynamic) TLS model, not initial-exec: libloom must also load
 * with dlopen (Python's `import loom`), where a static TLS block of this
 * size cannot be had.  Built with TLS descriptors (-mtls-dialect=gnu2,
 * CMakeLists.txt), an access in a library loaded at start is one indirect
 * call that returns the static offset. */
#define TLS __thread

/* ---- shared state -------------------------------------------------------- */
static atomic_int rec_on;            /* the exported calls' one idle branch */
atomic_uint loom__hr_epoch;          /* session number (hostrec_int.h) */
static atomic_uint_fast64_t bytes_used;
static atomic_uint_fast64_t chunk_bytes = 256 * 1024, cap_bytes;
static atomic_uint_fast64_t step_no;
/* Ring mode (constant through a session); live: threads recording now, for
 * each one's share of the budget; dump_active: a copy is under way. */
static atomic_int ring_on;
static _Atomic(const loom__ring_hooks *) ring_hooks; /* never NULL again once set */
atomic_int loom__hr_dump_active; /* hostrec_int.h */
static atomic_uint ring_live;
/* rec_on is REC_WATCH while ring mode watches a named range (slow_range) */
enum { REC_WATCH = 2 };
static _Atomic(const char *) watch_name;
static atomic_uint watch_id;
/* Set while the window controller (src/window/trigger.c) waits for or
 * counts steps: only loom_step and loom_step_mark read it, never the hot
 * path. */
static _Atomic(loom__step_fn) step_watch;
/* The memory calls' one branch: MEM_REC while rec_on, MEM_LEDGER while a
 * session in window or ring mode keeps the ledger (memledger.c). */
enum { MEM_REC = 1, MEM_LEDGER = 2 };
static atomic_uint mem_on;

/* loom.h's inline idle check: loom_active_v1 mirrors rec_on, step_watch and
 * mem_on's ledger bit, published after every change to them.  publish()
 * stores again until what it computed from is unchanged: of several
 * threads publishing at once, the last store's recheck (all seq_cst) sees
 * every change made before it, so the flag ends right.  No lock: it also
 * runs in a forked child. */
uint32_t loom_active_v1;

static uint32_t active_now(void) {
  return (atomic_load(&rec_on) ? LOOM_ACTIVE_HOST : 0) |
         (atomic_load(&step_watch) ? LOOM_ACTIVE_STEPS : 0) |
         (atomic_load(&mem_on) & MEM_LEDGER ? LOOM_ACTIVE_MEMORY : 0);
}

static void publish(void) {
  uint32_t v;
  do {
    v = active_now();
    __atomic_store_n(&loom_active_v1, v, __ATOMIC_SEQ_CST);
  } while (active_now() != v);
}

pthread_mutex_t loom__hr_list_mu = PTHREAD_MUTEX_INITIALIZER; /* hostrec_int.h */
loom__tbuf *loom__hr_threads;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static _Atomic(const loom__ext_hook *) hooks[LOOM__MAX_HOOKS];
static atomic_int nhooks;

/* ---- per-thread state ---------------------------------------------------- */
static TLS loom__tbuf *tls_buf;
static TLS int tls_dead;   /* the thread is exiting: record nothing more */
static TLS uint32_t tls_tid;
#define OP_STACK 64
static TLS uint64_t op_stack[OP_STACK];
static TLS uint32_t op_depth;
/* slow_range's watch (see watch_push) */
static TLS struct wslot { uint64_t ts; int match; } wstack[OP_STACK];
static TLS uint32_t wdepth;
static TLS const char *wc_ptr; /* the last pointer name compared, and its answer */
static TLS int wc_match;

/* ---- clock ----------------------------------------------------------------- */
static int use_tsc = -1;

static int tsc_invariant(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (getenv("LOOM_NO_TSC")) return 0;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d)) return (d >> 8) & 1;
#endif
  return 0;
}

loom_clock_domain loom__hostrec_domain(void) {
  if (use_tsc < 0) use_tsc = tsc_invariant();
  return use_tsc ? LOOM_CLOCK_TSC : LOOM_CLOCK_MONOTONIC;
}

static inline uint64_t now(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (LOOM__LIKELY(use_tsc > 0)) {
    uint64_t t = __rdtsc();
    loom__clk_tick(t); /* real time's rate watched (clocklog.h) */
    return t;
  }
#endif
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t loom__tid(void) {
  if (LOOM__UNLIKELY(!tls_tid)) tls_tid = (uint32_t)syscall(SYS_gettid);
  return tls_tid;
}

/* ---- buffers ------------------------------------------------------------- */
/* Chunk memory: the shared-memory arena when it is on (under `loom record`,
 * so the records outlive a killed process), else malloc (also when the
 * arena cannot grow: the live trace keeps those records). */
loom__chunk *loom__chunk_alloc(size_t bytes) {
  if (loom__arena_on()) {
    loom__chunk *c = loom__arena_alloc(LOOM__AO_CHUNK, bytes);
    if (c) return c;
  }
  return malloc(bytes);
}

loom__chunk *loom__chunk_alloc_cold(size_t bytes) {
  if (loom__arena_on()) {
    loom__chunk *c = loom__arena_alloc_cold(LOOM__AO_CHUNK, bytes);
    if (c) return c;
  }
  return malloc(bytes);
}

void loom__chunk_free(loom__chunk *c) {
  if (loom__arena_owns(c)) loom__arena_free(c);
  else free(c);
}

/* Thread buffers live with their chunks: the salvager finds them there. */
static loom__tbuf *tbuf_alloc(void) {
  loom__tbuf *t = loom__arena_on() ? loom__arena_alloc(LOOM__AO_TBUF, sizeof *t) : NULL;
  return t ? t : calloc(1, sizeof *t);
}

static void tbuf_free(loom__tbuf *t) {
  if (loom__arena_owns(t)) loom__arena_free(t);
  else free(t);
}

static void thread_exit(void *p) {
  loom__tbuf *t = p;
  if (t->epoch == atomic_load(&loom__hr_epoch)) atomic_fetch_sub(&ring_live, 1);
  pthread_getname_np(pthread_self(), t->name, sizeof t->name);
  atomic_store_explicit(&t->exited, 1, memory_order_release);
  tls_buf = NULL;
  tls_dead = 1;
}

static void make_key(void) { pthread_key_create(&exit_key, thread_exit); }

static void free_chunks(loom__tbuf *t) {
  for (loom__chunk *c = t->head, *nx; c; c = nx) {
    nx = c->next;
    atomic_fetch_sub(&bytes_used, sizeof *c + c->cap * sizeof(loom__hrec));
    loom__chunk_free(c);
  }
  for (loom__chunk *c = t->pending, *nx; c; c = nx) {
    nx = c->next;
    atomic_fetch_sub(&bytes_used, sizeof *c + c->cap * sizeof(loom__hrec));
    loom__chunk_free(c);
  }
  t->head = t->tail = t->pending = t->before = NULL;
  atomic_store_explicit(&t->pos, NULL, memory_order_relaxed);
  t->end = NULL;
  t->capped = 0;
}

/* Slow path: the thread has no buffer for this session yet. */
static loom__tbuf *acquire(void) {
  if (tls_dead) return NULL;
  loom__tbuf *t = tls_buf;
  if (!t) {
    t = tbuf_alloc();
    if (!t) return NULL;
    t->tid = (pid_t)loom__tid();
    pthread_mutex_init(&t->mu, NULL);
    pthread_getname_np(pthread_self(), t->name, sizeof t->name);
    pthread_once(&key_once, make_key);
    pthread_setspecific(exit_key, t);
    pthread_mutex_lock(&loom__hr_list_mu);
    t->next = loom__hr_threads;
    loom__hr_threads = t;
    pthread_mutex_unlock(&loom__hr_list_mu);
    tls_buf = t;
    pthread_mutex_lock(&t->mu);
  } else {
    pthread_mutex_lock(&t->mu);
    free_chunks(t);
  }
  t->epoch = atomic_load_explicit(&loom__hr_epoch, memory_order_relaxed);
  t->nchunks = 0;
  /* staged where no pager makes chunks present for it (a single-threaded
   * process, or no arena), so that the thread pays no fault per page */
  t->staged = !atomic_load(&ring_on) && !loom__pager_would_run();
  atomic_store_explicit(&t->dropped, 0, memory_order_relaxed);
  atomic_store_explicit(&t->overwritten, 0, memory_order_relaxed);
  pthread_mutex_unlock(&t->mu);
  atomic_fetch_add(&ring_live, 1);
  op_depth = 0;
  wdepth = 0;
  return t;
}

static size_t chunk_recs(void) {
  size_t n = atomic_load_explicit(&chunk_bytes, memory_order_relaxed) / sizeof(loom__hrec);
  return n < 16 ? 16 : n;
}

/* A new chunk within the memory cap (any size when force), not yet linked
 * (NULL: over the cap or out of memory): one the pager made ready (pager.c)
 * when there is one; while the pager is behind, a quarter of a chunk
 * (bridge), whose new pages the thread pays, until its next one is ready.
 * Ring mode takes no bridge (its budget counts whole chunks).  A staged
 * thread's (cold) is whole and left untouched: the kernel fills it. */
static loom__chunk *alloc_chunk(int force, int bridge, int cold) {
  size_t n = chunk_recs();
  size_t bytes = sizeof(loom__chunk) + n * sizeof(loom__hrec);
  int behind = 0;
  loom__chunk *c = !cold && loom__arena_on() ? loom__pager_take(bytes, &behind) : NULL;
  if (!c && behind && bridge && n >= 64) {
    n /= 4;
    bytes = sizeof(loom__chunk) + n * sizeof(loom__hrec);
  }
  uint64_t used = atomic_fetch_add(&bytes_used, bytes) + bytes;
  uint64_t cap = atomic_load_explicit(&cap_bytes, memory_order_relaxed);
  if (force || !cap || used <= cap) {
    if (!c) c = cold ? loom__chunk_alloc_cold(bytes) : loom__chunk_alloc(bytes);
  } else if (c) {
    loom__chunk_free(c);
    c = NULL;
  }
  if (!c) {
    atomic_fetch_sub(&bytes_used, bytes);
    return NULL;
  }
  c->next = NULL;
  c->cap = (uint32_t)n;
  c->skip = 0;
  return c;
}

/* Ring mode: a chunk for t, not linked (t->mu held).  Under its share and
 * the budget a new one; else its oldest chunk, recycled (its records are
 * counted overwritten), and the chunks it holds beyond its share freed
 * (threads that started later lowered it, or a dump made it take new ones).
 * Every thread may hold two chunks, so that one full chunk is always kept;
 * during a dump nothing is recycled (the copy reads them): a new chunk is
 * taken instead. */
static loom__chunk *ring_take(loom__tbuf *t) {
  size_t bytes = sizeof(loom__chunk) + chunk_recs() * sizeof(loom__hrec);
  uint64_t cap = atomic_load_explicit(&cap_bytes, memory_order_relaxed);
  unsigned live = atomic_load_explicit(&ring_live, memory_order_relaxed);
  uint64_t share = cap / bytes / (live ? live : 1);
  if (share < 2) share = 2;
  loom__chunk *c = NULL;
  if (t->nchunks < 2 || atomic_load(&loom__hr_dump_active)) return alloc_chunk(1, 0, 0);
  if (t->nchunks < share && (c = alloc_chunk(0, 0, 0))) return c;
  for (;;) {
    c = t->head;
    t->head = c->next;
    t->nchunks--;
    atomic_fetch_add_explicit(&t->overwritten, c->cap, memory_order_relaxed);
    if (t->nchunks < share || t->nchunks <= 2) break;
    atomic_fetch_sub(&bytes_used, bytes);
    loom__chunk_free(c);
  }
  c->next = NULL;
  c->skip = 0;
  return c;
}

static loom__chunk *new_chunk(loom__tbuf *t) {
  if (!atomic_load_explicit(&ring_on, memory_order_relaxed))
    return alloc_chunk(0, !t->staged, t->staged);
  pthread_mutex_lock(&t->mu);
  loom__chunk *c = ring_take(t);
  pthread_mutex_unlock(&t->mu);
  return c;
}

/* Makes c the thread's current chunk; returns its first slot.  In ring
 * mode under t->mu: a dump may be walking the list. */
static loom__hrec *link_chunk(loom__tbuf *t, loom__chunk *c) {
  int ring = atomic_load_explicit(&ring_on, memory_order_relaxed);
  if (ring) pthread_mutex_lock(&t->mu);
  if (t->tail) t->tail->next = c;
  else t->head = c;
  t->tail = c;
  t->nchunks++;
  if (ring) pthread_mutex_unlock(&t->mu);
  t->end = c->recs + c->cap;
  return c->recs;
}

/* A staged thread's full tail s: its records go to the fresh chunk f (a
 * copy the kernel writes: no fault per page in this thread), linked before
 * s, and s is written again from its first slot.  The published position
 * moves to f first: a reader (the salvager after a kill) never sees s's
 * records twice, and one that comes between the two stores finds the
 * position in no chunk and takes them all whole (salvage.c). */
static loom__hrec *stage_flip(loom__tbuf *t, loom__chunk *f) {
  loom__chunk *s = t->tail;
  f->next = s;
  f->skip = 0;
  loom__copy_to_cold(f->recs, s->recs, (size_t)s->cap * sizeof(loom__hrec));
  loom__hrec *pos = atomic_load_explicit(&t->pos, memory_order_relaxed);
  if (pos > s->recs && pos <= s->recs + s->cap)
    atomic_store_explicit(&t->pos, f->recs + (pos - s->recs), memory_order_release);
  __atomic_store_n(t->before ? &t->before->next : &t->head, f, __ATOMIC_RELEASE);
  t->before = f;
  t->nchunks++;
  return s->recs;
}

/* Slow path: the current chunk is full (or there is none).  A staged
 * thread whose session stopped takes no record more (a reader may be
 * copying its tail): the call came after the stop. */
static loom__hrec *grow(loom__tbuf *t) {
  int flip = t->staged && t->tail;
  if (flip && !atomic_load_explicit(&rec_on, memory_order_relaxed)) return NULL;
  loom__chunk *c = t->capped ? NULL : new_chunk(t);
  if (!c) {
    atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
    return NULL;
  }
  return flip ? stage_flip(t, c) : link_chunk(t, c);
}

static inline loom__hrec *reserve(loom__tbuf **tp) {
  loom__tbuf *t = tls_buf;
  if (LOOM__UNLIKELY(!t ||
                     t->epoch != atomic_load_explicit(&loom__hr_epoch, memory_order_relaxed))) {
    t = acquire();
    if (!t) return NULL;
  }
  loom__hrec *r = atomic_load_explicit(&t->pos, memory_order_relaxed);
  if (LOOM__UNLIKELY(r == t->end)) {
    r = grow(t);
    if (!r) return NULL;
  }
  *tp = t;
  return r;
}

static inline void fill_rec(loom__hrec *r, uint64_t ts, uint16_t type, uint16_t flags,
                            uint64_t name, uint64_t a, uint32_t spare) {
  r->ts = ts;
  r->name = name;
  r->a = a;
  r->type = type;
  r->flags = flags;
  r->spare = spare;
}

static inline void put_at(uint64_t ts, uint16_t type, uint16_t flags, uint64_t name, uint64_t a,
                          uint32_t spare) {
  loom__tbuf *t;
  loom__hrec *r = reserve(&t);
  if (!r) return;
  fill_rec(r, ts, type, flags, name, a, spare);
  atomic_store_explicit(&t->pos, r + 1, memory_order_release);
}

static inline void put(uint16_t type, uint16_t flags, uint64_t name, uint64_t a) {
  put_at(now(), type, flags, name, a, 0);
}

/* The calling thread's buffer for this session (NULL: none can be had). */
static inline loom__tbuf *cur_buf(void) {
  loom__tbuf *t = tls_buf;
  if (LOOM__UNLIKELY(!t || t->epoch != atomic_load_explicit(&loom__hr_epoch, memory_order_relaxed)))
    t = acquire();
  return t;
}

#define IDLE() LOOM__UNLIKELY(!atomic_load_explicit(&rec_on, memory_order_relaxed))

/* ---- session control ------------------------------------------------------- */
void loom__hostrec_resume(uint64_t chunk, uint64_t cap) {
  loom__hostrec_release();
  loom__hostrec_domain();
  atomic_store(&chunk_bytes, chunk ? chunk : 256 * 1024);
  atomic_store(&cap_bytes, cap);
  atomic_store(&ring_live, 0);
  loom__arena_epoch(atomic_fetch_add(&loom__hr_epoch, 1) + 1);
  atomic_store(&rec_on, atomic_load(&ring_on) && atomic_load(&watch_name) ? REC_WATCH : 1);
  atomic_fetch_or(&mem_on, MEM_REC);
  publish();
}

void loom__hostrec_start(uint64_t chunk, uint64_t cap) {
  atomic_store(&step_no, 0);
  loom__hostrec_resume(chunk, cap);
}

void loom__hostrec_reset_steps(void) { atomic_store(&step_no, 0); }

void loom__hostrec_watch_steps(loom__step_fn fn) {
  atomic_store(&step_watch, fn);
  publish();
}

void loom__hostrec_stop(void) {
  atomic_store(&rec_on, 0);
  atomic_fetch_and(&mem_on, ~(unsigned)MEM_REC);
  publish();
}

void loom__hostrec_memory_mode(int ledger) {
  if (ledger) atomic_fetch_or(&mem_on, MEM_LEDGER);
  else atomic_fetch_and(&mem_on, ~(unsigned)MEM_LEDGER);
  publish();
}

void loom__hostrec_set_ring(const loom__ring_hooks *h) {
  if (h) atomic_store(&ring_hooks, h);
  atomic_store(&ring_on, h != NULL);
}

uint64_t loom__hostrec_now(void) { return now(); }

void loom__hostrec_release(void) {
  pthread_mutex_lock(&loom__hr_list_mu);
  for (loom__tbuf **pp = &loom__hr_threads; *pp;) {
    loom__tbuf *t = *pp;
    if (atomic_load_explicit(&t->exited, memory_order_acquire)) {
      *pp = t->next;
      free_chunks(t);
      free(t->icache);
      tbuf_free(t);
    } else {
      pp = &t->next;
    }
  }
  pthread_mutex_unlock(&loom__hr_list_mu);
}

void loom__hostrec_set_hooks(const loom__ext_hook *const *h, size_t n) {
  atomic_store(&nhooks, 0);
  if (n > LOOM__MAX_HOOKS) n = LOOM__MAX_HOOKS;
  for (size_t i = 0; i < n; i++) atomic_store(&hooks[i], h[i]);
  atomic_store(&nhooks, (int)n);
}

/* A reader that loaded an older count may see a newer entry: still a valid
 * hook of a registered backend (entries live forever). */
static inline const loom__ext_hook *hook(int i) {
  return atomic_load_explicit(&hooks[i], memory_order_acquire);
}

/* A forked child must not write (or later save) the parent's records: it
 * starts with recording off and forgets the parent's buffers. */
/* What a forked child forgets in both ways it is told of a fork (this
 * file's atfork handler, loom__hostrec_forked): recording off, the parent's
 * buffers, ledger, pager and hooks gone. */
static void forget_parent(void) {
  atomic_store(&rec_on, 0);
  atomic_store(&mem_on, 0);
  loom__memledger_forked();
  loom__pager_forked();
  atomic_store(&step_watch, NULL);
  publish();
  pthread_mutex_init(&loom__hr_list_mu, NULL);
  loom__hr_threads = NULL;
  tls_buf = NULL;
  atomic_store(&bytes_used, 0);
  atomic_store(&nhooks, 0);
}

static void fork_child(void) {
  forget_parent();
  atomic_fetch_add(&loom__hr_epoch, 1);
}

__attribute__((constructor)) static void hostrec_init(void) {
  pthread_atfork(NULL, NULL, fork_child);
}

/* ---- per-thread intern cache ------------------------------------------------
 * The strings an adapter passes on every op (its name, argument keys, shape
 * strings built in a reused buffer) are interned through a per-thread cache
 * so that repeated strings skip the interner's lock.  2-way set associative,
 * allocated with the thread's buffer (freed with it): a model's working set
 * (~150 distinct names and shape strings for a small CNN) fits without the
 * conflict misses a small direct-mapped table has.  A hit is checked against
 * the interned copy, so the cache is exact whatever the caller's buffers hold. */
#define ICACHE_SETS 256
typedef struct icache_slot {
  const char *str; /* the interned copy (never freed) */
  uint32_t id, len, tag;
} icache_slot;
#define PCACHE_SLOTS 64
struct loom__icache {
  icache_slot set[ICACHE_SETS][2];
  /* by the caller's pointer first: literal keys and names that live in the
   * framework (PyTorch's schema names) hit here without hashing; the hit is
   * still checked by content */
  struct pslot { const char *ptr, *str; uint32_t id; } by_ptr[PCACHE_SLOTS];
};

static inline uint64_t str_hash(const char *s, size_t n) { return loom__hash_words(s, n); }

/* *str: the interned copy (NULL when len does not fit the cache). */
static uint32_t intern_by_content(loom__tbuf *t, const char *s, const char **str) {
  size_t len = strlen(s);
  *str = NULL;
  if (LOOM__UNLIKELY(len > UINT32_MAX)) return loom__intern(s, len);
  uint64_t h = str_hash(s, len);
  icache_slot *w = t->icache->set[h & (ICACHE_SETS - 1)];
  uint32_t tag = (uint32_t)(h >> 32);
  for (int i = 0; i < 2; i++)
    if (w[i].id && w[i].tag == tag && w[i].len == len && !memcmp(w[i].str, s, len)) {
      if (i) { /* most recently used first */
        icache_slot x = w[1];
        w[1] = w[0];
        w[0] = x;
      }
      *str = w[0].str;
      return w[0].id;
    }
  uint32_t id = loom__intern(s, len);
  if (id) {
    w[1] = w[0];
    w[0] = (icache_slot){loom__intern_get(id), id, (uint32_t)len, tag};
    *str = w[0].str;
  }
  return id;
}

static uint32_t intern_cached(loom__tbuf *t, const char *s) {
  if (LOOM__UNLIKELY(!t->icache) && !(t->icache = calloc(1, sizeof *t->icache)))
    return loom__intern(s, SIZE_MAX);
  size_t slot = (size_t)(loom__hash_u64((uint64_t)(uintptr_t)s) & (PCACHE_SLOTS - 1));
  struct pslot *p = &t->icache->by_ptr[slot];
  if (p->ptr == s && !strcmp(p->str, s)) return p->id;
  const char *str;
  uint32_t id = intern_by_content(t, s, &str);
  if (id && str) p->ptr = s, p->str = str, p->id = id;
  return id;
}

/* ---- ring mode's slow_range watch (rec_on == REC_WATCH) --------------------
 * Ranges are pushed and popped without their names on the pop, so while a
 * named range is watched each thread keeps a small stack of which open
 * ranges are that one and when they began.  Only then: the idle branch is
 * unchanged, and a recording call reads rec_on once more after its record. */

void loom__hostrec_watch_range(const char *name) {
  atomic_store(&watch_name, name);
  atomic_store(&watch_id, name ? loom__intern(name, SIZE_MAX) : 0);
}

static int watched(uint64_t name, uint16_t flags) {
  if (flags & LOOM__HR_F_ID)
    return (uint32_t)name == atomic_load_explicit(&watch_id, memory_order_relaxed);
  const char *p = (const char *)(uintptr_t)name;
  if (p != wc_ptr) {
    const char *w = atomic_load_explicit(&watch_name, memory_order_relaxed);
    wc_ptr = p;
    wc_match = p && w && !strcmp(p, w);
  }
  return wc_match;
}

static void watch_push(uint64_t name, uint16_t flags) {
  if (wdepth < OP_STACK) wstack[wdepth] = (struct wslot){now(), watched(name, flags)};
  wdepth++;
}

static void watch_pop(void) {
  if (!wdepth) return;
  wdepth--;
  const loom__ring_hooks *h = atomic_load_explicit(&ring_hooks, memory_order_relaxed);
  if (wdepth < OP_STACK && wstack[wdepth].match && h)
    h->range(atomic_load_explicit(&watch_name, memory_order_relaxed), wstack[wdepth].ts, now());
}

/* ---- the instrumentation API -------------------------------------------- */
/* rec_on read again (not kept from the idle branch: that would cost the
 * idle call a register save); before a push's record, so that its name need
 * not outlive the record's write. */
#define WATCHING() LOOM__UNLIKELY(atomic_load_explicit(&rec_on, memory_order_relaxed) == REC_WATCH)

void loom_range_push(const char *name) {
  if (IDLE()) return;
  if (WATCHING()) watch_push((uint64_t)(uintptr_t)name, 0);
  put(LOOM__HR_PUSH, 0, (uint64_t)(uintptr_t)name, 0);
}

void loom_range_push_id(loom_string_id name) {
  if (IDLE()) return;
  if (WATCHING()) watch_push(name, LOOM__HR_F_ID);
  put(LOOM__HR_PUSH, LOOM__HR_F_ID, name, 0);
}

void loom_range_push_str(const char *name) {
  if (IDLE()) return;
  loom__tbuf *t = cur_buf();
  if (!t) return;
  uint32_t id = intern_cached(t, name ? name : "");
  if (WATCHING()) watch_push(id, LOOM__HR_F_ID);
  put(LOOM__HR_PUSH, LOOM__HR_F_ID, id, 0);
}

void loom_range_pop(void) {
  if (IDLE()) return;
  put(LOOM__HR_POP, 0, 0, 0);
  if (WATCHING()) watch_pop();
}

void loom_range_begin(uint64_t id, const char *name) {
  if (IDLE()) return;
  put(LOOM__HR_BEGIN, 0, (uint64_t)(uintptr_t)name, id);
}

void loom_range_end(uint64_t id) {
  if (IDLE()) return;
  put(LOOM__HR_END, 0, 0, id);
}

/* The op's external id on the thread's op stack, and for the backends that
 * hooked it. */
static inline void op_push(uint64_t ext) {
  if (op_depth < OP_STACK) op_stack[op_depth] = ext;
  op_depth++;
  int n = atomic_load_explicit(&nhooks, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    const loom__ext_hook *k = hook(i);
    if (k) k->push(k->b, ext);
  }
}

static inline void op_begin_at(uint64_t ts, uint16_t flags, uint64_t name, uint64_t ext,
                               uint32_t spare) {
  put_at(ts, LOOM__HR_OP_BEGIN, flags, name, ext, spare);
  op_push(ext);
}

/* An argument's value as a record holds it (strings interned); 0 for a type
 * loom does not record. */
static inline int arg_value(loom__tbuf *t, const loom_arg *a, uint64_t *v) {
  switch (a->type) {
  case LOOM_ARG_INT: *v = (uint64_t)a->v.i; return 1;
  case LOOM_ARG_UINT: *v = a->v.u; return 1;
  case LOOM_ARG_DOUBLE: memcpy(v, &a->v.d, sizeof *v); return 1;
  case LOOM_ARG_STRING: *v = intern_cached(t, a->v.s ? a->v.s : ""); return 1;
  default: return 0;
  }
}

static inline void op_begin(uint16_t flags, uint64_t name, uint64_t ext) {
  op_begin_at(now(), flags, name, ext, 0);
}

void loom_op_begin(const char *name, uint64_t ext) {
  if (IDLE()) return;
  op_begin(0, (uint64_t)(uintptr_t)name, ext);
}

void loom_op_begin_id(loom_string_id name, uint64_t ext) {
  if (IDLE()) return;
  op_begin(LOOM__HR_F_ID, name, ext);
}

/* 1 when the first argument goes inline in the op's record
 * (LOOM__HR_F_ARG0); then *name carries its key's id beside the op's. */
static inline int arg0_inline(loom__tbuf *t, const loom_arg *args, uint32_t n, uint64_t *name,
                              uint32_t *v) {
  if (!n || !args || args[0].type != LOOM_ARG_INT || args[0].v.i < 0 ||
      args[0].v.i > (int64_t)UINT32_MAX)
    return 0;
  *name |= (uint64_t)intern_cached(t, args[0].key ? args[0].key : "?") << 32;
  *v = (uint32_t)args[0].v.i;
  return 1;
}

/* The arguments are records after the op's, with its timestamp (one clock
 * read per op); the first one inline when it can be. */
void loom_op_begin_args(const char *name, uint64_t ext, const loom_arg *args, uint32_t n) {
  if (IDLE()) return;
  loom__tbuf *t = cur_buf();
  if (!t) return;
  uint64_t ts = now(), nm = intern_cached(t, name ? name : "");
  uint32_t v0 = 0;
  int inl = arg0_inline(t, args, n, &nm, &v0);
  op_begin_at(ts, LOOM__HR_F_ID | (inl ? LOOM__HR_F_ARG0 : 0), nm, ext, v0);
  for (uint32_t i = (uint32_t)inl; i < n && args; i++) {
    uint64_t v = 0;
    if (!arg_value(t, &args[i], &v)) continue;
    put_at(ts, LOOM__HR_ARG, LOOM__HR_F_ID, intern_cached(t, args[i].key ? args[i].key : "?"),
           v, (uint32_t)args[i].type);
  }
}

/* ---- ops with raw arguments (loom_op_begin_raw) -----------------------------
 * The op, its arguments and its raw bytes take several consecutive records;
 * they are reserved together, across chunks when the current one is short,
 * so that the memory cap drops an op whole: when it cannot have them all the
 * thread takes no record more this session (a later smaller record would
 * otherwise land without its op, e.g. an end closing the parent op). */
typedef struct wcur {
  loom__tbuf *t;
  loom__hrec *p;
  int started; /* the op's first record is written */
  int linked;  /* chunks linked after it (their first records are the op's) */
} wcur;

/* Has n slots ready from t->pos on: the current chunk's rest plus pending
 * chunks.  0, or -1 (nothing written, the thread is capped). */
static int reserve_span(loom__tbuf *t, size_t n) {
  loom__hrec *pos = atomic_load_explicit(&t->pos, memory_order_relaxed);
  size_t have = pos ? (size_t)(t->end - pos) : 0;
  for (loom__chunk *c = t->pending; c; c = c->next) have += c->cap;
  loom__chunk **tail = &t->pending;
  while (*tail) tail = &(*tail)->next;
  while (have < n) {
    loom__chunk *c = t->capped ? NULL : new_chunk(t);
    if (!c) {
      t->capped = 1;
      if (pos) t->end = pos; /* nothing more goes into this chunk either */
      atomic_fetch_add_explicit(&t->dropped, n, memory_order_relaxed);
      return -1;
    }
    *tail = c;
    tail = &c->next;
    have += c->cap;
  }
  return 0;
}

static inline loom__hrec *wnext(wcur *w) {
  if (LOOM__UNLIKELY(!w->p || w->p == w->t->end)) {
    loom__chunk *c = w->t->pending; /* reserve_span made sure there is one */
    w->t->pending = c->next;
    c->next = NULL;
    if (w->t->staged && w->t->tail) { /* the op goes on in the tail */
      w->p = stage_flip(w->t, c);
      w->started = 1;
      return w->p++;
    }
    /* all of it the op's until it ends (then set exactly); not the chunk
     * the op begins in */
    c->skip = w->started ? c->cap : 0;
    w->linked += w->started;
    w->p = link_chunk(w->t, c);
  }
  w->started = 1;
  return w->p++;
}

static inline void wput(wcur *w, uint64_t ts, uint16_t type, uint16_t flags, uint64_t name,
                        uint64_t a, uint32_t spare) {
  fill_rec(wnext(w), ts, type, flags, name, a, spare);
}

static inline int arg_ok(const loom_arg *a) {
  return a->type == LOOM_ARG_INT || a->type == LOOM_ARG_UINT || a->type == LOOM_ARG_DOUBLE ||
         a->type == LOOM_ARG_STRING;
}

void loom_op_begin_raw(const char *name, uint64_t ext, const loom_arg *args, uint32_t n,
                       const void *raw, uint32_t nraw, loom_raw_format_fn format) {
  if (IDLE()) return;
  loom__tbuf *t = cur_buf();
  if (!t) return;
  uint64_t ts = now();
  if (!format || (nraw && !raw) || nraw > LOOM_RAW_MAX) format = NULL, nraw = 0;
  size_t need = 1 + (format ? 1 + loom__raw_slots(nraw) : 0);
  if (!args) n = 0;
  uint64_t nm = intern_cached(t, name ? name : "");
  uint32_t v0 = 0;
  int inl = arg0_inline(t, args, n, &nm, &v0);
  for (uint32_t i = (uint32_t)inl; i < n; i++) need += arg_ok(&args[i]);
  if (reserve_span(t, need) == 0) {
    wcur w = {t, atomic_load_explicit(&t->pos, memory_order_relaxed), 0, 0};
    wput(&w, ts, LOOM__HR_OP_BEGIN, LOOM__HR_F_ID | (inl ? LOOM__HR_F_ARG0 : 0), nm, ext, v0);
    for (uint32_t i = (uint32_t)inl; i < n; i++) {
      uint64_t v = 0;
      if (!arg_value(t, &args[i], &v)) continue;
      wput(&w, ts, LOOM__HR_ARG, LOOM__HR_F_ID, intern_cached(t, args[i].key ? args[i].key : "?"),
           v, (uint32_t)args[i].type);
    }
    if (format) {
      const unsigned char *b = raw;
      uint64_t head[2] = {0, 0};
      uint32_t k = nraw < LOOM__RAW_HEAD ? nraw : LOOM__RAW_HEAD;
      if (k) memcpy(head, b, k);
      wput(&w, head[0], LOOM__HR_RAW, 0, (uint64_t)(uintptr_t)format, head[1], nraw);
      for (uint32_t off = k; off < nraw; off += (uint32_t)sizeof(loom__hrec)) {
        uint32_t m = nraw - off < sizeof(loom__hrec) ? nraw - off : (uint32_t)sizeof(loom__hrec);
        memcpy(wnext(&w), b + off, m);
      }
    }
    if (w.linked) t->tail->skip = (uint32_t)(w.p - t->tail->recs);
    atomic_store_explicit(&t->pos, w.p, memory_order_release);
  }
  op_push(ext);
}

void loom_op_end(void) {
  if (IDLE()) return;
  put(LOOM__HR_OP_END, 0, 0, 0);
  if (op_depth) op_depth--;
  int n = atomic_load_explicit(&nhooks, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    const loom__ext_hook *k = hook(i);
    if (k) k->pop(k->b);
  }
}

uint64_t loom_op_current(void) {
  if (IDLE() || !op_depth || !tls_buf ||
      tls_buf->epoch != atomic_load_explicit(&loom__hr_epoch, memory_order_relaxed))
    return 0;
  return op_depth <= OP_STACK ? op_stack[op_depth - 1] : 0;
}

void loom_instant(const char *name) {
  if (IDLE()) return;
  put(LOOM__HR_INSTANT, 0, (uint64_t)(uintptr_t)name, 0);
}

void loom_counter(const char *name, double value) {
  if (IDLE()) return;
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  put(LOOM__HR_COUNTER, 0, (uint64_t)(uintptr_t)name, bits);
}

/* ---- memory (loom_memory_alloc/free) ----------------------------------------
 * One MEM record; a MEMX record before it when there is more to say (a
 * pool's reserved bytes, the allocation time of what a free frees).  MEMX
 * goes first so that MEM is never written without it: a collector that sees
 * a MEM with no MEMX of the same address just before has nothing more. */
static inline void mem_record(uint64_t ts, uint16_t flags, uint64_t addr, uint64_t bytes,
                              int32_t device, uint64_t reserved, uint64_t alloc_ts) {
  if (LOOM__UNLIKELY(reserved || alloc_ts)) put_at(alloc_ts, LOOM__HR_MEMX, 0, addr, reserved, 0);
  put_at(ts, LOOM__HR_MEM, flags, addr, bytes, (uint32_t)device);
}

static inline uint16_t mem_flags(loom_memory_kind kind) {
  return (uint16_t)(((unsigned)kind & 7u) << LOOM__HR_MEM_KIND_SHIFT);
}

void loom_memory_alloc(uint64_t addr, uint64_t bytes, loom_memory_kind kind, int32_t device,
                       uint64_t reserved) {
  unsigned m = atomic_load_explicit(&mem_on, memory_order_relaxed);
  if (LOOM__UNLIKELY(!m)) return;
  uint64_t ts = now();
  if (m & MEM_LEDGER) {
    loom__mem_live e = {addr, bytes, reserved, ts, device < 0 ? -1 : device, loom__tid(),
                        (uint16_t)kind, 0, 0};
    loom__memledger_alloc(&e);
  }
  if (m & MEM_REC) mem_record(ts, mem_flags(kind), addr, bytes, device, reserved, 0);
}

void loom_memory_free(uint64_t addr, uint64_t bytes, loom_memory_kind kind, int32_t device,
                      uint64_t reserved) {
  unsigned m = atomic_load_explicit(&mem_on, memory_order_relaxed);
  if (LOOM__UNLIKELY(!m)) return;
  uint64_t ts = now(), alloc_ts = 0;
  loom__mem_live e;
  if ((m & MEM_LEDGER) && loom__memledger_free(addr, device < 0 ? -1 : device, &e)) {
    alloc_ts = e.ts;
    if (!bytes) bytes = e.bytes;
  }
  if (m & MEM_REC)
    mem_record(ts, mem_flags(kind) | LOOM__HR_F_FREE, addr, bytes, device, reserved, alloc_ts);
}

/* A backend's record (host->memory): one BMEM, after a MEMX when there is
 * more to say, as mem_record. */
int loom__hostrec_bk_memory(loom__mem_live *m, int is_free) {
  unsigned on = atomic_load_explicit(&mem_on, memory_order_relaxed);
  if (LOOM__UNLIKELY(!on)) return 0;
  if (!m->ts) m->ts = now();
  uint64_t alloc_ts = 0;
  uint32_t alloc_name = 0;
  if (on & MEM_LEDGER) {
    loom__mem_live e;
    if (!is_free) {
      m->tid = loom__tid();
      loom__memledger_alloc(m);
    } else if (loom__memledger_free(m->addr, m->device, &e)) {
      alloc_ts = e.ts;
      alloc_name = e.name;
      if (!m->bytes) m->bytes = e.bytes;
    }
  }
  if (!(on & MEM_REC)) return 1;
  if (LOOM__UNLIKELY(m->reserved || alloc_ts))
    put_at(alloc_ts, LOOM__HR_MEMX, 0, m->addr, m->reserved, alloc_name);
  uint16_t fl = (uint16_t)((is_free ? LOOM__HR_F_FREE : 0) |
                           mem_flags((loom_memory_kind)LOOM__MEM_KIND(m->kind)) |
                           (m->src << LOOM__HR_BMEM_SRC_SHIFT) |
                           (LOOM__MEM_HEAP1(m->kind) << LOOM__HR_BMEM_HEAP_SHIFT));
  uint64_t a = (m->bytes & LOOM__BMEM_BYTES_MAX) | ((uint64_t)(m->device & 0xffff) << 48);
  put_at(m->ts, LOOM__HR_BMEM, fl, m->addr, a, m->name);
  return 1;
}

int loom__hostrec_bk_call(uint16_t flags, uint32_t name, uint64_t t0, uint64_t t1,
                          uint64_t corr) {
  if (IDLE()) return 0;
  put_at(t0, LOOM__HR_BCALL, flags, corr, t1, name);
  return 1;
}

/* A window that ends at a step boundary (trigger.c) closes the step in
 * progress here, so the window's last step is complete. */
void loom__hostrec_step_end(void) {
  if (IDLE()) return;
  put(LOOM__HR_STEP, LOOM__HR_F_STEP_END, 0, 0);
}

/* Ring mode's slow-step watch, when ring mode is on. */
static void ring_step(uint64_t step, uint64_t ts) {
  if (!atomic_load_explicit(&ring_on, memory_order_relaxed)) return;
  const loom__ring_hooks *h = atomic_load_explicit(&ring_hooks, memory_order_relaxed);
  if (h) h->step(step, ts);
}

void loom_step(void) {
  loom__step_fn watch = atomic_load_explicit(&step_watch, memory_order_relaxed);
  if (IDLE() && LOOM__LIKELY(!watch)) return;
  uint64_t n = atomic_fetch_add(&step_no, 1);
  if (LOOM__UNLIKELY(watch != NULL)) {
    watch(n); /* may end a window (closing step n-1) or begin one */
    if (IDLE()) return;
  }
  uint64_t ts = now();
  put_at(ts, LOOM__HR_STEP, 0, 0, n, 0);
  ring_step(n, ts);
}

void loom_step_mark(uint64_t step) {
  loom__step_fn watch = atomic_load_explicit(&step_watch, memory_order_relaxed);
  if (LOOM__UNLIKELY(watch != NULL)) watch(step);
  /* the framework's own step (PyTorch's ProfilerStep#N): the slow-step watch */
  if (!IDLE()) ring_step(step, now());
}

/* In a child forked without exec: the buffers of the list are the parent's
 * (it writes their records), the parent's other threads do not exist here,
 * and this thread's cached id is the parent's.  Forget them all (not freed:
 * another thread may have held list_mu at the fork) and stop recording, so
 * that a new session in the child starts from nothing. */
void loom__hostrec_forked(void) {
  if (tls_buf) pthread_setspecific(exit_key, NULL);
  forget_parent();
  for (int i = 0; i < LOOM__MAX_HOOKS; i++) atomic_store(&hooks[i], NULL);
  tls_dead = 0;
  tls_tid = 0;
  op_depth = 0;
  loom__thread_names_forked();
}
