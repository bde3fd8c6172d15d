/*
 * memory.h - memory events (LOOM_KIND_MEMORY) in the file formats
 * (docs/formats.md, "Memory"): what an event's arguments say, the running
 * totals the writers add (Kineto's "Total Allocated" and "Total Reserved",
 * the counter tracks of bytes in use per device and memory kind), and
 * Kineto's [memory] instant read back into the model.  The totals are
 * derived from the events alone, in time order, by the trace layer's
 * accounting (trace/memory.h, host memory told apart per process), so that
 * every writer of the same trace writes the same figures as `loom report`
 * and a reader can leave them out.
 */
#ifndef LOOM_EXPORT_MEMORY_H
#define LOOM_EXPORT_MEMORY_H

#include <stdint.h>

#include "trace/memory.h"
#include "trace/trace.h"
#include "util/util.h"

/* The category of the derived counter events in Chrome JSON, and the
 * description of the derived counter tracks in .pftrace: readers skip both
 * (they are figures of the events, not data). */
#define LOOM__MEM_COUNTER_CAT "loom_memory"
#define LOOM__MEM_COUNTER_DESC "loom: memory counter (derived from the [memory] events)"

/* String ids in one trace of the argument keys memory events use (0: the
 * trace has no such string, so no event has the key). */
typedef struct loom__memkeys {
  uint32_t addr, bytes, device, kind, reserved;         /* the model's */
  uint32_t total_alloc, total_res, dev_type, dev_id;    /* Kineto's, kept as read */
  uint32_t v_device, v_host;  /* the default kinds' names, as memory_kind values */
} loom__memkeys;
void loom__memkeys_find(loom__memkeys *k, const loom_trace *t);
/* Whether key is one the Kineto form writes from the event's fields, so
 * that it is not written again among the other arguments. */
int loom__memkeys_mapped(const loom__memkeys *k, uint32_t key, int foreign);

/* What one memory event says. */
typedef struct loom__memev {
  int is_free;
  int has_bytes, has_device, has_reserved;
  uint64_t addr, bytes, reserved;
  int64_t device;       /* the device's pid (has_device) */
  uint32_t kind;        /* its memory_kind's string id, 0 when it has none */
  /* Kineto's values a reader kept as read (a PyTorch trace's allocator
   * totals, a device type other than 0 and 1): written back as they are */
  const loom__targ *total_alloc, *total_res, *dev_type, *dev_id;
} loom__memev;
void loom__memev_of(const loom__memkeys *k, const loom__ev *e, const loom__targ *args,
                    loom__memev *m);
/* The memory kind's name (the default when the event has none). */
const char *loom__memev_kind(const loom_trace *t, const loom__memev *m);

/* A series as the writers name it: the memory of one kind on one device
 * (or in one host process); the accounting's series of the same index. */
typedef struct loom__memseries {
  int64_t pid;          /* the process it is written under: the device's, or the host's */
  char name[96];        /* its counter's ("Memory (device 0, pool)", "Memory (host)") */
} loom__memseries;

/* Where one event leaves its series and device. */
typedef struct loom__memstate {
  uint64_t total_alloc, total_res; /* its device's, after it */
  uint64_t bytes;      /* its size (a free that has none: its allocation's) */
  uint64_t in_use, reserved;       /* its series', after it */
  uint32_t series;
  uint8_t unknown;     /* a free of an address with no live allocation: nothing changes */
  uint8_t counted;     /* the series changed: a counter value is written */
  uint8_t has_reserved; /* the series' pool has said what it reserved, by then */
} loom__memstate;

/* Running totals over events given in time order: the accounting's
 * (never finished), with the writers' name of each of its series. */
typedef struct loom__memacc {
  loom__mem *m;         /* NULL until the first event */
  loom__mem_keys keys;
  loom__memseries *series;
  size_t nseries, cap_series;
} loom__memacc;
/* Adds e (a memory event, its arguments args) and fills *out.  0, or -1
 * when out of memory. */
int loom__memacc_add(loom__memacc *a, const loom_trace *t, const loom__ev *e,
                     const loom__targ *args, loom__memstate *out);
void loom__memacc_free(loom__memacc *a);

/* A whole trace's memory events in time order (ties: pid, tid, index),
 * each one's state: for writers that go in another order. */
typedef struct loom__memplan {
  loom__memkeys keys;
  uint32_t *ev;           /* memory event indices, ascending */
  loom__memstate *st;     /* st[i]: the state after event ev[i] */
  size_t n;
  size_t at;              /* where loom__memplan_get looks first (writers go in order) */
  loom__memacc acc;       /* its series (after every event) */
} loom__memplan;
int loom__memplan_build(loom__memplan *p, const loom_trace *t);
/* The state of event index ev, NULL when it is no memory event. */
const loom__memstate *loom__memplan_get(loom__memplan *p, uint32_t ev);
void loom__memplan_free(loom__memplan *p);

/* Readers: a Kineto [memory] instant (named "[memory]", arguments as
 * read) made the model's memory event: *e's kind, phase, marks, name and
 * category set, its arguments rewritten (*args grows as LOOM__PUSH grows
 * it, *nargs and *cap follow).  Loom's own (with "loom_memory_kind") drop
 * the derived figures; others (PyTorch's) keep "Total Allocated" and, for
 * host memory, "Total Reserved" as read.  An instant without "Addr" and
 * "Bytes" stays an instant.  Returns 0, -1 when out of memory. */
typedef struct loom__memread {
  uint32_t name, counter_cat; /* "[memory]", LOOM__MEM_COUNTER_CAT */
  uint32_t k_addr, k_bytes, k_talloc, k_tres, k_dtype, k_did;         /* Kineto's */
  uint32_t k_call, k_kind, k_unknown, k_cat, k_reserved;              /* loom's */
  uint32_t m_addr, m_bytes, m_device, m_kind, v_host, v_pool;         /* the model's */
} loom__memread;
int loom__memread_init(loom__memread *r, loom_trace *t);
int loom__memread_event(const loom__memread *r, loom__ev *e, loom__targ **args, size_t *nargs,
                        size_t *cap);

#endif
