/*
 * memory.h - what a trace's memory events (LOOM_KIND_MEMORY) add up to, the
 * same for every producer: per device and memory kind (a "series"), the
 * bytes in use over time (and a pool's reserved bytes), the peak with its
 * time and the op, user range and step it fell in, the allocations still
 * live at the end (leaks) with the op that made them, frees of addresses
 * never seen allocated (counted and kept as examples, never dropped), and
 * the ops that allocated most and that held most at the peak.
 *
 * The accounting (loom__mem_*) is fed events in time order with the op,
 * range and step its caller found for each: `loom report` from its sorted
 * pass over a streamed file, loom__mem_walk from a trace in memory (`loom
 * record`'s summary, loom_trace_memory, Python's p.trace.memory()).  It
 * keeps the live allocations, a tally per (series, op) and a fixed number
 * of timeline buckets: memory follows those, never the number of events.
 * Strings are ids of the caller's string table; the accounting never reads
 * them.
 */
#ifndef LOOM_TRACE_MEMORY_H
#define LOOM_TRACE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"

/* What a memory event is (loom__mem_ev.flags). */
enum {
  LOOM__MEM_ALLOC = 1,
  LOOM__MEM_FREE = 2,
  /* Live at the window's start (the "live_at_start" argument: a window or a
   * ring dump opens with what was live then): in use from the start, not an
   * allocation of the window; no op is looked up for it (it was made before
   * the window: op 0 unless the caller knows it). */
  LOOM__MEM_AT_START = 4,
  LOOM__MEM_HAS_RESERVED = 8 /* reserved holds the pool's bytes after it */
};

/* The device of host memory (an event without a "device" argument). */
#define LOOM__MEM_HOST INT64_MIN
/* Frees of unknown addresses kept as examples per series (all are counted). */
#define LOOM__MEM_EXAMPLES 16

typedef struct loom__mem_ev {
  int64_t ts;
  uint64_t addr, bytes, reserved;
  int64_t device;   /* the device's pid in the trace, LOOM__MEM_HOST for host memory */
  int64_t pid;      /* host memory: its process's pid (each process's host memory is a
                       series of its own), else 0 */
  uint32_t kind;    /* memory kind (string id; 0 = the default, see loom__mem_kind_name) */
  uint32_t call;    /* the call that allocated or freed (the event's name) */
  uint32_t op;      /* innermost framework op open on its thread, 0 = none */
  uint32_t range;   /* innermost user range (not a step) open on its thread, 0 = none */
  uint32_t step;    /* the step (ProfilerStep#N) it fell in, 0 = none */
  uint16_t src;     /* producer: one producer's addresses never meet another's */
  uint8_t flags;    /* LOOM__MEM_* */
} loom__mem_ev;

/* An op's share of a series: bytes it allocated in the window (count:
 * allocations), or bytes of its allocations live at the peak. */
typedef struct loom__mem_top {
  uint32_t op;
  uint64_t bytes, count;
} loom__mem_top;

/* One allocation (a leak), or a free of an unknown address (bytes: what the
 * free said, 0 when it did not).  op/range/step: where it was made. */
typedef struct loom__mem_block {
  uint64_t addr, bytes;
  int64_t ts;
  uint32_t op, call, range, step;
  uint8_t at_start; /* live at the window's start (op unknown) */
} loom__mem_block;

typedef struct loom__mem_series {
  int64_t device, pid;
  uint32_t kind;
  uint64_t nalloc, alloc_bytes;  /* allocations of the window */
  uint64_t nfree, free_bytes;    /* frees of known allocations */
  uint64_t nstart, start_bytes;  /* live at the start */
  uint64_t nreplaced;            /* allocations at a live address (the earlier taken as freed) */
  uint64_t in_use, reserved;     /* now (after finish: at the end) */
  uint64_t peak;                 /* bytes in use at the peak (first reached at peak_ts) */
  int64_t peak_ts;
  uint32_t peak_op, peak_call, peak_range, peak_step; /* the event that reached it */
  uint64_t peak_reserved;
  int64_t peak_reserved_ts;
  int has_reserved;
  uint64_t nunknown, unknown_bytes; /* frees of addresses never seen allocated */
  loom__mem_block unknown[LOOM__MEM_EXAMPLES]; /* the first of them */
  /* After loom__mem_finish, largest first: */
  loom__mem_top *by_alloc;       /* ops by bytes allocated */
  size_t nby_alloc;
  loom__mem_top *at_peak;        /* ops by bytes of theirs live at the peak */
  size_t nat_peak;
  loom__mem_block *leaks;        /* live at the end (the window's end) */
  size_t nleaks;
  uint64_t leak_bytes;
  /* Timeline: the most bytes in use (and reserved) in each of nbuckets
   * equal slices of [t0, t1) (a bucket with no event holds the level
   * carried in). */
  uint64_t *bmax, *bres;
  size_t last_bucket;            /* state: last bucket written + 1 */
} loom__mem_series;

typedef struct loom__mem loom__mem;

/* Accounting over [t0, t1) with nbuckets timeline buckets (0: none; events
 * outside the span go to the first or last).  NULL when out of memory. */
loom__mem *loom__mem_new(int64_t t0, int64_t t1, size_t nbuckets);
/* What one event did to its series. */
typedef struct loom__mem_after {
  uint64_t in_use, reserved; /* the series' bytes after it */
  /* its device's (device and pid) over all its series after it: bytes in
   * use, and reserved (a pool's reserved bytes, else what is in use):
   * Kineto's "Total Allocated" and "Total Reserved" */
  uint64_t dev_in_use, dev_reserved;
  uint64_t bytes;     /* what it moved: an allocation's size, the size of what a free
                         freed (an unknown address: what the free said) */
  uint32_t alloc_op;  /* a free: the op that allocated what it frees (0: none known) */
  uint8_t unknown;    /* a free of an address never seen allocated (nothing moved) */
  uint8_t has_reserved; /* the series' pool has said what it reserved, by then */
} loom__mem_after;
/* One event, in time order; *after (may be NULL) says what it did.
 * Returns the series' index (a new series takes the next; they keep their
 * index until loom__mem_finish), or -1 when out of memory. */
long loom__mem_add(loom__mem *m, const loom__mem_ev *e, loom__mem_after *after);
/* Ends input: the leaks, top ops and timeline of every series, series
 * sorted by device then kind.  0, or -1 when out of memory. */
int loom__mem_finish(loom__mem *m);
size_t loom__mem_count(const loom__mem *m);
const loom__mem_series *loom__mem_series_at(const loom__mem *m, size_t i);
/* The timeline's span and bucket count. */
void loom__mem_span(const loom__mem *m, int64_t *t0, int64_t *t1, size_t *nbuckets);
void loom__mem_free(loom__mem *m);

/* The memory kind's name: the string, else the default ("device" for
 * device memory, "host"). */
const char *loom__mem_kind_name(const loom_trace *t, int64_t device, uint32_t kind);
/* The device's name for people of series s of m: "host" ("host (pid P)"
 * when m has host memory of several processes), else its process's name,
 * else "device <pid>"; into buf. */
const char *loom__mem_device_name(const loom_trace *t, const loom__mem *m,
                                  const loom__mem_series *s, char *buf, size_t n);

/* The argument keys of memory events in a trace's strings, looked up again
 * by loom__mem_keys_find when the table grew (a streaming read). */
typedef struct loom__mem_keys {
  uint32_t addr, bytes, device, kind, reserved, at_start;
  uint32_t dflt_device, dflt_host; /* "device", "host" */
  size_t nstrs;
} loom__mem_keys;
void loom__mem_keys_find(loom__mem_keys *k, const loom_trace *t);
/* A memory event's fields from its arguments (op, range, step: 0).  0, or
 * -1 when e is no allocation or free. */
int loom__mem_read(const loom__mem_keys *k, const loom__ev *e, const loom__targ *args,
                   loom__mem_ev *out);

/* A trace in memory: every memory event in time order (ties: their order
 * in t), given its op and range from the ranges open on its thread and its
 * step (the last ProfilerStep#N begun, if not ended), through an accounting
 * over the trace's span with nbuckets timeline buckets, and to fn (may be
 * NULL) with its index in t, its series and what loom__mem_add said.  *out
 * (may be NULL: freed) gets the finished accounting.  0, -1 when out of
 * memory, or fn's non-zero return (*out then NULL). */
typedef int (*loom__mem_fn)(void *ud, size_t ev, const loom__mem_ev *e, long series,
                            const loom__mem_after *after);
int loom__mem_walk(const loom_trace *t, size_t nbuckets, loom__mem_fn fn, void *ud,
                   loom__mem **out);
/* `loom record`'s summary of t's memory (tools.h memory_lines): per device
 * and kind, one line "loom:   memory DEVICE (KIND): peak B at T ms in OP
 * (STEP); held at the peak by OP B, ...; N leaks (B); N frees of unknown
 * addresses\n", the largest peak first, at most 8 lines; "" without memory
 * events.  Cut short (never mid-line) when n is too small.  0, or -1 when
 * out of memory. */
int loom__mem_lines(const loom_trace *t, char *out, size_t n);
/* A byte count for people: "550 B", "1.50 MiB". */
const char *loom__mem_bytes_text(uint64_t b, char *buf, size_t n);
/* The number of memory events of t. */
size_t loom__mem_events(const loom_trace *t);
/* 1 when name is a step's ("ProfilerStep#N"). */
int loom__mem_is_step(const char *name);

#endif
