/*
 * record.h - the recording layer: the process-wide string interner and the
 * per-thread host record buffers behind the instrumentation calls of loom.h.
 *
 * Hot path contract: when no session records, an instrumentation call costs
 * one predictable branch on loom__rec_on.  When one does, a call writes one
 * fixed-size record into the calling thread's current chunk: no lock, no
 * allocation after the thread's first chunk (unless the chunk fills), no
 * system call.  The session collects the chunks after stop.
 */
#ifndef LOOM_RECORD_H
#define LOOM_RECORD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "loom/plugin.h"

/* ---- interner (thread-safe; strings live until the process exits) ------- */
uint32_t loom__intern(const char *s, size_t len);
const char *loom__intern_get(uint32_t id);
/* Copies every string interned so far into the arena (arena.c, when it
 * opens); later ones are copied as they are interned. */
void loom__intern_mirror(void);

/* ---- host records ------------------------------------------------------- */
enum {
  LOOM__HR_PUSH = 1,     /* name; a: 0 */
  LOOM__HR_POP = 2,
  LOOM__HR_BEGIN = 3,    /* name; a: range id */
  LOOM__HR_END = 4,      /* a: range id */
  LOOM__HR_INSTANT = 5,  /* name */
  LOOM__HR_COUNTER = 6,  /* name; a: double bits */
  LOOM__HR_OP_BEGIN = 7, /* name; a: external id; with LOOM__HR_F_ARG0 its
                            first argument inline (below) */
  LOOM__HR_OP_END = 8,
  LOOM__HR_STEP = 9,     /* a: step number */
  LOOM__HR_ARG = 10,     /* name: key id (interned); a: value; spare: type;
                            belongs to the OP_BEGIN before it */
  LOOM__HR_RAW = 11,     /* name: loom_raw_format_fn; spare: nraw; ts, a: the
                            first LOOM__RAW_HEAD raw bytes, the rest in the
                            loom__raw_slots(nraw) records after it (the last
                            may be partial; they may span chunks); belongs to
                            the OP_BEGIN before it */
  LOOM__HR_MEM = 12,     /* loom_memory_alloc/free: name: addr; a: bytes;
                            spare: device (int32); flags: LOOM__HR_F_FREE,
                            the loom_memory_kind << LOOM__HR_MEM_KIND_SHIFT */
  LOOM__HR_MEMX = 13,    /* what a MEM or BMEM record right after it adds,
                            when it has more: name: the same addr; a:
                            reserved bytes; ts: for a free, the host ticks of
                            the allocation it frees (the ledger's), else 0;
                            spare: before a BMEM free, that allocation's
                            call name (the ledger's), else 0 */
  LOOM__HR_BMEM = 14,    /* a backend's memory record (host->memory): name:
                            addr; a: bytes (low 48 bits) and the device (high
                            16, LOOM__BMEM_HOST_DEV: host memory); spare: the
                            call's interned name; flags: LOOM__HR_F_FREE, the
                            kind << LOOM__HR_MEM_KIND_SHIFT, the backend's
                            producer number (its trace src, 1..31) <<
                            LOOM__HR_BMEM_SRC_SHIFT, its "heap" + 1 (0:
                            none; 1..31) << LOOM__HR_BMEM_HEAP_SHIFT */
  LOOM__HR_BCALL = 15    /* a backend's host call (host->call): ts: its
                            start; a: its end (host ticks); name: its
                            correlation; spare: its interned name; flags:
                            its marks (LOOM_RECORD_F_*, bits 0-8), its kind
                            (LOOM__HR_BCALL_KIND_SHIFT: 0 runtime, 1 driver,
                            2 sync) and its backend's producer number <<
                            LOOM__HR_BMEM_SRC_SHIFT */
};
#define LOOM__HR_BCALL_ROLES 0x1ffu
#define LOOM__HR_BCALL_KIND_SHIFT 9
#define LOOM__HR_F_FREE 4u     /* on a MEM: a free, not an allocation */
#define LOOM__HR_MEM_KIND_SHIFT 8
#define LOOM__HR_BMEM_SRC_SHIFT 11
#define LOOM__HR_BMEM_HEAP_SHIFT 3
#define LOOM__BMEM_SRC_MAX 31u
#define LOOM__BMEM_HEAP_MAX 31u
#define LOOM__BMEM_BYTES_MAX ((1ull << 48) - 1)
#define LOOM__BMEM_HOST_DEV 0xffffu
#define LOOM__RAW_HEAD 16u
#define LOOM__HR_F_ID 1u /* name holds an interned id, not a pointer */
#define LOOM__HR_F_STEP_END 2u /* on a STEP: closes the step, opens none */
/* On an OP_BEGIN with LOOM__HR_F_ID: its first argument, a LOOM_ARG_INT of
 * 0..UINT32_MAX (PyTorch's sequence number), is in the record itself: its
 * key's interned id in name's upper 32 bits (the op's name id in the lower),
 * its value in spare.  One record an op fewer: its 32 bytes are most of what
 * a fresh page of records costs per op. */
#define LOOM__HR_F_ARG0 8u

typedef struct loom__hrec {
  uint64_t ts;   /* host clock ticks (loom__hostrec_domain) */
  uint64_t name; /* const char * or interned id (LOOM__HR_F_ID) */
  uint64_t a;
  uint16_t type;
  uint16_t flags;
  uint32_t spare;
} loom__hrec;

/* Records after a RAW record that carry the rest of its bytes. */
static inline uint32_t loom__raw_slots(uint32_t nraw) {
  return nraw > LOOM__RAW_HEAD
             ? (uint32_t)((nraw - LOOM__RAW_HEAD + sizeof(loom__hrec) - 1) / sizeof(loom__hrec))
             : 0;
}

typedef struct loom__chunk {
  struct loom__chunk *next;
  uint32_t cap;
  /* Leading records that belong to an op begun in the chunk before (its
   * arguments and raw bytes, written across the boundary): in ring mode,
   * once that chunk is overwritten they are skipped with it. */
  uint32_t skip;
  loom__hrec recs[];
} loom__chunk;

/* Memory for host record chunks (and the tbufs' chunk lists).  Every chunk
 * hostrec.c uses comes from here: malloc by default; under `loom record` from
 * the process's shared-memory arena (arena.c), so that the records outlive a
 * killed process.  bytes: sizeof(loom__chunk) + cap * sizeof(loom__hrec).
 * NULL when none can be had. */
loom__chunk *loom__chunk_alloc(size_t bytes);
/* A chunk of `bytes` whose pages a thread of loom's made present ahead of
 * use (pager.c), or NULL (none ready; the caller allocates its own, and
 * *behind says whether the pager runs, so that one will be ready soon);
 * asks for the next ones. */
void *loom__pager_take(size_t bytes, int *behind);
void loom__pager_forked(void);
/* Whether the pager runs or would start at the next take (the arena is on
 * and the process has threads besides the caller). */
int loom__pager_would_run(void);
/* Chunk memory as loom__chunk_alloc, its pages not made present and its
 * contents undefined: for chunks filled whole by loom__copy_to_cold before
 * they are linked (a staged thread's, hostrec.c). */
loom__chunk *loom__chunk_alloc_cold(size_t bytes);
void loom__chunk_free(loom__chunk *c);

typedef struct loom__tbuf {
  _Atomic(loom__hrec *) pos; /* next free slot; published with release */
  loom__hrec *end;           /* end of the current chunk */
  loom__chunk *head, *tail;  /* chunks of this session, in order */
  loom__chunk *pending;      /* allocated for a multi-record op, not yet linked */
  uint32_t epoch;            /* session the chunks belong to */
  int capped;                /* an op was dropped whole: take nothing more */
  _Atomic uint64_t dropped;  /* records lost to the memory cap */
  pid_t tid;
  _Atomic int exited;
  char name[32];             /* thread name at first use / exit */
  struct loom__icache *icache; /* the owner's intern cache (hostrec.c) */
  /* Ring mode: the owner changes the chunk list (link, recycle) under mu,
   * at chunk boundaries only; a dump snapshots the list under it. */
  pthread_mutex_t mu;
  uint32_t nchunks;              /* chunks linked (ring mode) */
  _Atomic uint64_t overwritten;  /* records recycled away (ring mode) */
  struct loom__tbuf *next;   /* process-wide list */
  /* Staged (hostrec.c, where no pager runs, never in ring mode): the
   * owner writes only into its tail chunk; a full tail's records are
   * copied by the kernel into a fresh chunk linked before it, and the
   * tail is written again from its start.  before: the chunk linked
   * before the tail (the owner's). */
  uint32_t staged;
  loom__chunk *before;
} loom__tbuf;

/* Which clock host records use. */
loom_clock_domain loom__hostrec_domain(void);

/* Enables recording for a new session.  chunk_bytes: size of each chunk;
 * cap_bytes: total bytes of chunks across threads (0 = unbounded). */
void loom__hostrec_start(uint64_t chunk_bytes, uint64_t cap_bytes);
/* Same, keeping the step count (a window within a session, trigger.c). */
void loom__hostrec_resume(uint64_t chunk_bytes, uint64_t cap_bytes);
/* Step numbers start again from 0 (a session in window mode starts). */
void loom__hostrec_reset_steps(void);
/* The layer above hears of steps only through the hooks it sets here (the
 * recorder calls nothing above it).  fn (NULL: nobody) is told of every
 * step loom_step and loom_step_mark begin: the window controller
 * (src/window/trigger.c) counts steps and begins and ends windows at them. */
typedef void (*loom__step_fn)(uint64_t step);
void loom__hostrec_watch_steps(loom__step_fn fn);
/* Closes the calling thread's step in progress (a window ends at a step). */
void loom__hostrec_step_end(void);
/* Disables recording. */
void loom__hostrec_stop(void);

/* ---- ring mode (flight recorder; src/window/ring.c drives it) -----------
 * Set before loom__hostrec_start: cap_bytes is then the ring's budget for
 * all threads together; a thread whose share (budget / threads recording,
 * at least two chunks) is used recycles its own oldest chunk into its tail
 * instead of taking a new one, so the hot path stays lock-free and the
 * steady state allocates nothing.  The hooks (NULL: ring mode off) are how
 * the recorder tells ring mode what it watches; they must stay valid until
 * the process exits. */
typedef struct loom__ring_hooks {
  /* The step loom_step (or loom_step_mark) just began: slow steps. */
  void (*step)(uint64_t step, uint64_t ts);
  /* A range loom__hostrec_watch_range named ended (host ticks). */
  void (*range)(const char *name, uint64_t begin, uint64_t end);
} loom__ring_hooks;
void loom__hostrec_set_ring(const loom__ring_hooks *hooks);
/* A thread's kept records, copied while its owner may go on writing. */
typedef struct loom__ring_copy {
  loom__tbuf view;        /* head = one chunk holding the copy; pos at its end */
  loom__chunk *chunk;     /* heap (free it) */
} loom__ring_copy;
/* Copies every thread's kept records of the recording session (array, the
 * caller frees each chunk and the array).  While it copies, an owner that
 * fills a chunk takes a new one instead of recycling (the budget may be
 * exceeded by a chunk per thread meanwhile), so the copy never races a
 * write.  NULL with *n = 0 when there is nothing, SIZE_MAX when out of
 * memory. */
loom__ring_copy *loom__hostrec_ring_copy(size_t *n);
/* Ring mode's slow_range: the range named name (kept by the caller until
 * the next call; NULL: none) is watched from the next loom__hostrec_start;
 * each one that ends is told to the ring hooks' range with its begin and
 * end (host ticks). */
void loom__hostrec_watch_range(const char *name);
/* Host clock ticks now (loom__hostrec_domain). */
uint64_t loom__hostrec_now(void);
/* Snapshot of the buffers holding records of the last session (caller frees
 * the array).  Valid until loom__hostrec_release.  NULL with *n = SIZE_MAX
 * when out of memory. */
loom__tbuf **loom__hostrec_threads(size_t *n);
/* Frees the buffers of threads that exited. */
void loom__hostrec_release(void);

/* Backends to tell about framework ops (their push/pop_external slots). */
typedef struct loom__ext_hook {
  void (*push)(loom_backend *b, uint64_t external_id);
  void (*pop)(loom_backend *b);
  loom_backend *b;
} loom__ext_hook;
#define LOOM__MAX_HOOKS 16
/* hooks point at entries that stay valid until the process exits. */
void loom__hostrec_set_hooks(const loom__ext_hook *const *hooks, size_t n);

/* The name loom_thread_name gave thread tid (an interned id), or 0. */
uint32_t loom__thread_name(uint64_t tid);
/* Copies the names given so far to this process's arena (once per arena);
 * later ones are copied as they are given. */
void loom__thread_names_mirror(void);

/* In a child forked without exec (src/session/fork.c): forgets the parent's
 * buffers and this thread's cached id, and stops recording. */
void loom__hostrec_forked(void);

/* ---- the ledger of live allocations (memledger.c) ------------------------
 * Kept while a session in window or ring mode runs (its start to its stop):
 * loom_memory_alloc/free update it whether a window records or not, so that
 * a window's trace can start from what was live (collect_host.c). */
typedef struct loom__mem_live {
  uint64_t addr, bytes, reserved;
  uint64_t ts;     /* host ticks of the allocation (never 0 in the ledger) */
  int32_t device;  /* -1: host memory; a backend's: loom__mem_bkdev */
  uint32_t tid;    /* the thread that allocated */
  uint16_t kind;   /* loom_memory_kind; a backend's: its "heap" + 1 << 8 */
  uint16_t src;    /* 0: loom_memory_alloc; else the backend's producer number */
  uint32_t name;   /* a backend's: the call's interned name */
} loom__mem_live;

/* The device of a backend's allocation as the ledger keys it: its producer
 * number and device (LOOM__BMEM_HOST_DEV: host memory) in one positive
 * number that no framework's device number (loom_memory_alloc's) reaches,
 * so one runtime's handles never meet another's. */
static inline int32_t loom__mem_bkdev(uint32_t src, uint32_t dev16) {
  return (int32_t)((src << 16) | (dev16 & 0xffffu));
}
/* A backend's allocation (src != 0): the device it names, -1 for host. */
static inline int32_t loom__mem_bkdev_device(int32_t bkdev) {
  uint32_t d = (uint32_t)bkdev & 0xffffu;
  return d == LOOM__BMEM_HOST_DEV ? -1 : (int32_t)d;
}
/* Records a backend's allocation or free (host->memory's fast path) in the
 * calling thread's buffer, with the ledger when one is kept: m's addr,
 * bytes (<= LOOM__BMEM_BYTES_MAX), reserved, ts (host ticks, 0: now),
 * device (loom__mem_bkdev), kind, src (1..LOOM__BMEM_SRC_MAX) and name.
 * 1 when done (recorded, or outside a window: only the ledger), 0 when the
 * host recorder is off (the caller takes the slow way). */
int loom__hostrec_bk_memory(loom__mem_live *m, int is_free);
/* A backend's host call (host->call) as one BCALL record: flags as the
 * record's; 0 when the host is not recorded (the caller emits it). */
int loom__hostrec_bk_call(uint16_t flags, uint32_t name, uint64_t t0, uint64_t t1,
                          uint64_t corr);
#define LOOM__MEM_KIND(k) ((k) & 0xffu)
#define LOOM__MEM_HEAP1(k) ((uint32_t)(k) >> 8)
void loom__memledger_start(void);
void loom__memledger_stop(void);
/* In a child forked without exec (hostrec.c's fork handlers). */
void loom__memledger_forked(void);
void loom__memledger_alloc(const loom__mem_live *a);
/* Removes the allocation at (addr, dev) into *out: 1, or 0 when unknown. */
int loom__memledger_free(uint64_t addr, int32_t dev, loom__mem_live *out);
/* The allocations live now (caller frees; NULL with *n 0 when the ledger is
 * off or empty, *n SIZE_MAX when out of memory). */
loom__mem_live *loom__memledger_snapshot(size_t *n);
/* The ledger tells the memory calls to keep it (1) or not (0). */
void loom__hostrec_memory_mode(int ledger);

/* The calling thread's OS id, cached. */
uint32_t loom__tid(void);

#endif
