/*
 * trace.h - the trace model: what a stopped session (or a trace file read
 * back) holds, independent of where the records came from.
 *
 * A trace is a set of processes (the host process and one per device), tracks
 * (host threads and device queues), events on those tracks, flows between
 * events, device descriptions, warnings and metadata.  All strings live in
 * the trace's own string table.  Times are Unix epoch nanoseconds.
 *
 * The model knows nothing about backends or clocks: the session fills it with
 * already converted times and lets loom__trace_process() derive what is
 * common to every backend (external ids, flows, range projections).
 */
#ifndef LOOM_TRACE_H
#define LOOM_TRACE_H

#include <stdint.h>

#include "loom/loom.h"
#include "loom/plugin.h"
#include "util/util.h"

/* Event phases, as in the Chrome trace format. */
enum {
  LOOM__PH_COMPLETE = 'X',
  LOOM__PH_INSTANT = 'i',
  LOOM__PH_COUNTER = 'C',
  LOOM__PH_ASYNC = 'b' /* async range with id in `correlation`; dur known */
};

enum {
  LOOM__EV_UNCLOSED = 1u << 0, /* range still open at stop, closed there */
  LOOM__EV_PROJECTED = 1u << 1, /* range projected onto a device queue */
  LOOM__EV_OPEN = 1u << 2,      /* a reader still waits for its end (streaming) */
  /* What the record is for (LOOM_RECORD_F_* << LOOM__EV_ROLE_SHIFT): the
   * report vocabulary a backend gave, kept in every format ("loom_role"). */
  LOOM__EV_LAUNCH = LOOM_RECORD_F_LAUNCH << 3,
  LOOM__EV_MEMORY = LOOM_RECORD_F_MEMORY << 3,
  LOOM__EV_COMM = LOOM_RECORD_F_COMM << 3
  /* bits 6-13: the message-passing marks (LOOM_RECORD_F_SEND ... << 3);
   * bits 14-15: the memory marks (LOOM_RECORD_F_ALLOC, _FREE << 3) */
};
#define LOOM__EV_ROLE_SHIFT 3
#define LOOM__ROLE_BITS 13 /* LOOM_RECORD_F_LAUNCH .. LOOM_RECORD_F_FREE: bits 3-15 of flags */
#define LOOM__ROLE_ALL ((1u << LOOM__ROLE_BITS) - 1)
#define LOOM__EV_ROLES (LOOM__ROLE_ALL << LOOM__EV_ROLE_SHIFT)
/* The collective patterns among the marks. */
#define LOOM__ROLE_PATTERNS                                                      \
  (LOOM_RECORD_F_BARRIER | LOOM_RECORD_F_NXN | LOOM_RECORD_F_ONE_TO_ALL | LOOM_RECORD_F_ALL_TO_ONE)
/* The role marks of e as LOOM_RECORD_F_* bits. */
#define LOOM__EV_ROLE_OF(e) (((e)->flags & LOOM__EV_ROLES) >> LOOM__EV_ROLE_SHIFT)

/* "loom_role" values: the marks as a comma-separated list in this order
 * ("launch", "memory", "comm", "send", "recv", "post", "wait", "barrier",
 * "nxn", "one_to_all", "all_to_one", "alloc", "free"; "comm,send,wait").  Writes into buf
 * (>= 96 bytes) and returns its length, 0 when there is no mark. */
#define LOOM__ROLE_BUF 96
size_t loom__role_format(unsigned roles, char *buf);
/* Parses a "loom_role" value into LOOM_RECORD_F_* bits; *unknown gets 1 when
 * a word is not one of those (the known words still count). */
unsigned loom__role_parse(const char *s, size_t n, int *unknown);
/* Readers: the warning that some loom_role words of path were not known. */
int loom__role_warning(loom_trace *t, const char *path);

typedef struct loom__ev {
  int64_t ts;            /* epoch ns */
  int64_t dur;           /* ns (0 for instants and counters) */
  uint64_t correlation;  /* runtime call <-> device work (async: range id) */
  uint64_t external_id;  /* framework op, 0 = none */
  uint32_t name, cat;    /* string ids */
  uint32_t track;        /* index into tracks */
  uint32_t args_off;     /* first argument in the trace's args */
  uint16_t nargs;
  uint8_t kind;          /* loom_kind */
  uint8_t ph;            /* LOOM__PH_* */
  uint16_t src;          /* producer: 0 host recorder, i+1 = backend i */
  uint16_t flags;        /* LOOM__EV_* */
} loom__ev;

typedef struct loom__targ {
  uint32_t key;
  uint8_t type; /* loom_arg_type */
  uint8_t json; /* LOOM_ARG_STRING holding JSON text (a nested value read
                 * from a file): writers emit it as JSON, not as a string */
  union {
    int64_t i;
    uint64_t u;
    double d;
    uint32_t s; /* string id */
  } v;
} loom__targ;

typedef struct loom__flow {
  uint32_t from, to; /* event indices */
  uint64_t id;       /* unique in the trace */
} loom__flow;

typedef struct loom__proc {
  int64_t pid;
  uint32_t name;
  uint32_t labels;
  int32_t sort;
} loom__proc;

typedef struct loom__track {
  int64_t pid, tid;
  uint32_t name;
  uint32_t device;    /* LOOM_DEVICE_HOST or device index */
  int32_t sort;
} loom__track;

typedef struct loom__dev {
  int64_t pid;         /* the device's process id in the trace */
  uint32_t name, vendor, type, device_type, backend;
  uint32_t args_off, nargs;
} loom__dev;

typedef struct loom__kv {
  uint32_t key, value; /* string ids */
} loom__kv;

/* Values a reader could not keep as written (docs/formats.md, "Bad
 * values"): counted by kind, the first of each kind kept as an example,
 * each kind named in one of the trace's warnings. */
enum {
  LOOM__BAD_INT64,      /* integer past 64 bits: kept as its text */
  LOOM__BAD_NONFINITE,  /* infinity or NaN */
  LOOM__BAD_NEG_DUR,    /* negative duration: kept as 0 */
  LOOM__BAD_TIME_RANGE, /* time beyond +-LOOM__TIME_LIMIT ns: clamped there */
  LOOM__BAD_NOT_NUMBER, /* a time that is not a number: kept as 0 */
  LOOM__BAD_MANY_ARGS,  /* arguments past 65535 on one event: left out */
  LOOM__BAD_PHASE,      /* an event of a phase loom does not read (or none): left out */
  LOOM__BAD_END,        /* an end (E, e) that closes nothing: left out */
  LOOM__BAD_ANNOTATION, /* a .pftrace debug annotation value of no type loom reads: null */
  LOOM__BAD_FRAME,      /* a stack frame stackFrames lacks, or a parent chain that loops */
  LOOM__BAD_COUNT_
};
/* The largest time (ts, dur, base) a reader keeps, in ns (year 2065 as an
 * epoch time): the sum of three stays inside int64. */
#define LOOM__TIME_LIMIT 3000000000000000000ll
/* The base of times a writer or a streaming reader counts from: the start
 * floored to a multiple of this (~2.8 h; a whole number of us, so a time's
 * fraction of a us is the same relative as absolute). */
#define LOOM__BASE_UNIT 10000000000000ll
static inline int64_t loom__base_of(int64_t ns) {
  return ns - ((ns % LOOM__BASE_UNIT) + LOOM__BASE_UNIT) % LOOM__BASE_UNIT;
}
typedef struct loom__bad {
  uint64_t count[LOOM__BAD_COUNT_];
  uint32_t example[LOOM__BAD_COUNT_]; /* string ids */
} loom__bad;

struct loom_trace {
  loom__strtab strs;
  loom__ev *ev;
  size_t nev, cap_ev;
  loom__targ *args;
  size_t nargs, cap_args;
  loom__flow *flows;
  size_t nflows, cap_flows;
  loom__proc *procs;
  size_t nprocs, cap_procs;
  loom__track *tracks;
  size_t ntracks, cap_tracks;
  loom__dev *devs;
  size_t ndevs, cap_devs;
  loom__kv *meta;
  size_t nmeta, cap_meta;
  uint32_t *warnings; /* string ids */
  size_t nwarnings, cap_warnings;
  /* Top-level keys of a JSON file that are not loom's own (Kineto's
   * "distributedInfo", "cupti_version", "INFO", ...): key -> the value's
   * JSON text, written back as they were. */
  loom__kv *top;
  size_t ntop, cap_top;
  uint64_t dropped;
  int64_t start_ns, end_ns;
  uint32_t trace_name;
  uint32_t last_track; /* loom__trace_track's cache */
  int window_end;      /* write Kineto's "Record Window End" marker */
  int64_t base_ns;     /* streamed traces: add to every streamed event's ts */
  loom__bad bad;       /* values read that could not be kept as written */
};

loom_trace *loom__trace_new(void);

static inline uint32_t loom__trace_str(loom_trace *t, const char *s) {
  return s ? loom__strtab_intern(&t->strs, s, __builtin_strlen(s)) : 0;
}
static inline const char *loom__trace_cstr(const loom_trace *t, uint32_t id) {
  return loom__strtab_get(&t->strs, id);
}

/* Each adder returns 0 or -1 when out of memory. */
int loom__trace_add_proc(loom_trace *t, int64_t pid, const char *name,
                         const char *labels, int32_t sort);
/* Index of the track (pid, tid) or -1. */
long loom__trace_find_track(loom_trace *t, int64_t pid, int64_t tid);
/* The device a device pid stands for: the pid itself, except for a pid
 * that reads as LOOM_DEVICE_HOST in 32 bits (-1: Kineto's overhead
 * events). */
static inline uint32_t loom__device_of_pid(int64_t pid) {
  return (uint32_t)pid == LOOM_DEVICE_HOST ? LOOM_DEVICE_HOST - 1 : (uint32_t)pid;
}
/* Sets start_ns/end_ns to the earliest start and latest end of the events
 * (readers, which have no session window). */
void loom__trace_span(loom_trace *t);
/* The process pid, added (unnamed) if missing; NULL when out of memory. */
loom__proc *loom__trace_proc(loom_trace *t, int64_t pid);
/* Adds (or finds) the track (pid, tid); its index goes to *out. */
int loom__trace_track(loom_trace *t, int64_t pid, int64_t tid,
                      const char *name, uint32_t device, uint32_t *out);
/* Appends an event; *out (may be NULL) gets a pointer valid until the next
 * add.  Arguments follow with loom__trace_add_arg (they attach to the last
 * event). */
int loom__trace_add_ev(loom_trace *t, const loom__ev *ev);
/* An event keeps at most 65535 arguments: one past them is left out and
 * counted as a bad value (LOOM__BAD_MANY_ARGS), not an error. */
int loom__trace_add_arg(loom_trace *t, const loom__targ *a);
/* Counts argument key (a string id) of the event named name (0: not known
 * yet) as one past the limit. */
void loom__trace_arg_past_limit(loom_trace *t, uint32_t key, uint32_t name);
int loom__trace_add_arg_int(loom_trace *t, const char *key, int64_t v);
/* Adds an argument to event ev, not the last: its arguments move to the end
 * of the trace's (a later insertion for the sort's last tie-break). */
int loom__trace_add_arg_to(loom_trace *t, size_t ev, const loom__targ *a);
int loom__trace_add_arg_str(loom_trace *t, const char *key, const char *v);
int loom__trace_add_meta(loom_trace *t, const char *key, const char *value);
int loom__trace_add_warning(loom_trace *t, const char *msg);
/* Readers: counts one bad value of kind LOOM__BAD_*; the first of each kind
 * is kept as the example (what, the text read, the event's name). */
void loom__trace_bad(loom_trace *t, int kind, const char *what, const char *text, size_t n,
                     const char *event);
/* What a kind is and how the value was kept ("integers past 64 bits",
 * "kept as their decimal text"). */
const char *loom__bad_name(int kind);
const char *loom__bad_kept(int kind);
/* Readers, at the end: one warning per kind seen ("PATH: 3 integers past
 * 64 bits (first: args \"x\" = 1234...): kept as their decimal text").
 * Returns 0 or -1 when out of memory. */
int loom__trace_bad_warnings(loom_trace *t, const char *path);
/* Sets the top-level key to the JSON text value (replacing an earlier one). */
int loom__trace_add_top(loom_trace *t, uint32_t key, uint32_t json);
/* The JSON text of top-level key, or NULL. */
const char *loom__trace_top(const loom_trace *t, const char *key);

/* The record kind a category string stands for (Kineto's names and loom's
 * "<type>_runtime" style), or LOOM_KIND_MARKER when unknown. */
loom_kind loom__kind_of_category(const char *cat);
/* What a category says of its events' kinds (loom__kind_derive): its kind
 * in the low bits, LOOM__CAT_MARKER set when the category is "marker"
 * itself (whose instants stay markers). */
#define LOOM__CAT_KIND 0x0fu
#define LOOM__CAT_MARKER 0x10u
unsigned loom__cat_class(const char *cat);
/* The kind every reader gives an event whose file names none ("loom_kind"),
 * and that writers compare an event's kind with: the category's (cls, from
 * loom__cat_class), made by the phase (LOOM__PH_*: a counter is a counter;
 * an instant of a category naming no kind, "marker" aside, is an instant)
 * and by the marks (alloc or free: a memory event; others: see
 * loom__kind_of_marks). */
loom_kind loom__kind_derive(unsigned cls, int ph, unsigned roles);
/* The category class by the category's string id in t, through a small cache
 * the reader keeps (events carry the same few categories; zeroed to start). */
typedef struct loom__kind_cache {
  uint32_t id1[16]; /* string id + 1 */
  uint8_t cls[16];
} loom__kind_cache;
static inline unsigned loom__cat_class_of_id(loom__kind_cache *c, const loom_trace *t,
                                             uint32_t cat) {
  unsigned slot = (cat * 2654435761u) >> 28;
  if (c->id1[slot] != cat + 1) {
    c->cls[slot] = (uint8_t)loom__cat_class(loom__trace_cstr(t, cat));
    c->id1[slot] = cat + 1;
  }
  return c->cls[slot];
}
/* Writers: the category class by string id, in a byte table (0: not known
 * yet, else the class | 0x80) that grows to the ids met; zeroed to start,
 * freed with free(b).  Out of memory, the class is worked out each time. */
typedef struct loom__cat_bytes {
  uint8_t *b;
  size_t n;
} loom__cat_bytes;
unsigned loom__cat_class_slow(loom__cat_bytes *c, const loom_trace *t, uint32_t cat);
static inline unsigned loom__cat_class_at(loom__cat_bytes *c, const loom_trace *t,
                                          uint32_t cat) {
  return cat < c->n && c->b[cat] ? c->b[cat] & 0x7fu : loom__cat_class_slow(c, t, cat);
}
/* Writers: e's kind when a reader would derive another from its category,
 * phase and marks (it is then written as the reserved argument "loom_kind",
 * docs/formats.md), else -1. */
static inline int loom__kind_to_write(loom__cat_bytes *c, const loom_trace *t,
                                      const loom__ev *e) {
  unsigned cls = loom__cat_class_at(c, t, e->cat);
  loom_kind d = loom__kind_derive(cls, e->ph, LOOM__EV_ROLE_OF(e));
  return d == (loom_kind)e->kind ? -1 : (int)e->kind;
}
/* "loom_kind" values: the kind named s[0..n) (loom_kind_name), or -1. */
int loom__kind_parse(const char *s, size_t n);
/* Readers: the warning that some loom_kind values of path were not known. */
int loom__kind_warning(loom_trace *t, const char *path);
/* A kind from what a category with no kind of its own and the marks say:
 * a category that names no kind (LOOM_KIND_MARKER: a runtime's own) with
 * marks is a call of that runtime: a collective when a collective pattern
 * is marked, else a runtime call (an instant stays an instant). */
loom_kind loom__kind_of_marks(loom_kind kind, unsigned roles, int instant);
/* Kinds that run on a device track. */
static inline int loom__kind_on_device(int kind) {
  return kind == LOOM_KIND_KERNEL || kind == LOOM_KIND_MEMCPY || kind == LOOM_KIND_MEMSET;
}

/* Streaming reads.  Instead of keeping every event, a reader hands events to
 * a sink in batches and keeps only processes, tracks, devices, metadata,
 * warnings and strings: memory follows the size of those, not the number of
 * events.  Events come in file order, not sorted; ts lacks the file's base
 * (trace->base_ns, known only at the end).  Flows are not read (see
 * loom__trace_stream_flows).  args points
 * at e->nargs arguments, valid during the call.  A non-zero return stops the
 * read (as out of memory). */
typedef struct loom__sink {
  int (*event)(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args);
  void *ctx;
  /* Non-zero: the sink may run on a thread of its own while the file is
   * read (export/pipe.h), given a mirror of the trace (strings, processes,
   * tracks, metadata) instead of the reader's; it then keeps no pointer
   * into t past the read, and its flow sink runs on that thread too. */
  int threaded;
  /* Non-zero: events carry every argument a whole read keeps (string and
   * nested values, true/false/null as JSON text), as `loom merge` writes
   * them out.  Else a streaming JSON read keeps numbers and the few string
   * arguments the report reads (roles, directions, stacks), so that memory
   * stays flat however many unique strings the events carry. */
  int all_args;
} loom__sink;
/* Flow ends of a streaming read (loom__trace_stream_flows), each as read,
 * before the events it binds to reach the event sink (readers flush in
 * batches); ts lacks the base like the events'.  ph 's' (start, binds to
 * the slice enclosing ts), 't' (step) or 'f' (end; bind_enclosing 0: binds
 * to the next slice starting at or after ts).  name and cat are string ids
 * of t (0 when the format has none).  Non-zero stops the read. */
typedef struct loom__flow_sink {
  int (*flow)(void *ctx, const loom_trace *t, uint64_t id, int64_t ts, uint32_t track, char ph,
              int bind_enclosing, uint32_t name, uint32_t cat);
  void *ctx;
} loom__flow_sink;

/* For readers: hands every event except those flagged LOOM__EV_OPEN to the
 * sink and moves the open ones (with their arguments) to the front in
 * order.  keep[] points at the reader's indices of the open events, which
 * are rewritten to their new places.  Returns 0 or -1 (sink failure). */
/* Readers, at the end: the events still flagged LOOM__EV_OPEN were never
 * closed in the file: flagged LOOM__EV_UNCLOSED instead (their duration is
 * what the reader had, 0 for a begin). */
void loom__trace_close_open(loom_trace *t);
/* A range a trace read never closed (a "B" without its "E", flagged
 * unclosed with no duration): the writers write it as it was read, begun
 * and never ended.  A range loom recorded and closed at stop has a duration
 * and carries unclosed=1. */
int loom__ev_open_in_file(const loom_trace *t, const loom__ev *e, const loom__targ *args);
int loom__trace_stream_flush(loom_trace *t, const loom__sink *sink, size_t **keep, size_t nkeep);
#define LOOM__STREAM_BATCH 4096


/* Common processing after collection, for every producer alike:
 *  1. sorts events by track, start, longer first (parents before children);
 *  2. gives host runtime/driver calls without an external id the id of the
 *     innermost framework op (cpu_op) enclosing them on their thread;
 *  3. links each device event to the host runtime/driver call of the same
 *     producer with the same correlation id (a flow), and copies the call's
 *     external id onto the device event when it has none;
 *  4. moves device work that overlaps other work on its track to a lane
 *     of that track (lanes.c);
 *  5. projects every user range onto each device queue (or lane) that ran work launched
 *     inside it, as "gpu_user_annotation" ranges spanning that work (a
 *     projection that crosses another on its track goes on a lane).
 * Returns 0 or -1 when out of memory. */
int loom__trace_process(loom_trace *t);

/* lanes.c: device work that overlaps other work on its track moves to a
 * lane of it ("<track> lane k", same device), and so does a projected range
 * that crosses another.  made: per track, the number of its last lane (1:
 * none yet); loom__lanes_work takes t->ev sorted by track and start (as
 * step 1 leaves it), loom__lanes_ranges the events from first on in any
 * order.  0, or -1 when out of memory. */
typedef struct loom__lanes {
  uint32_t *k;
  size_t n;
  size_t moved; /* events put on a lane */
} loom__lanes;
int loom__lanes_work(loom_trace *t, loom__lanes *made);
int loom__lanes_ranges(loom_trace *t, size_t first, loom__lanes *made);
void loom__lanes_free(loom__lanes *made);

/* Sorts events by start time (stable for equal starts: longer first) and
 * renumbers flows accordingly. */
int loom__trace_sort_by_time(loom_trace *t);
/* Reorders the events: new event i is old event order[i]; flows follow.
 * 0, or -1 when out of memory (nothing changed). */
int loom__trace_permute(loom_trace *t, const uint32_t *order);
/* Step 1's order (process.c): track, start, longer first, ranges before
 * ops before calls, then insertion order. */
int loom__ev_cmp_track_time(const loom__ev *a, const loom__ev *b);
/* Sorts n indices of t's events in that order (ties: the lower index). */
void loom__ev_sort_indices(const loom_trace *t, uint32_t *idx, size_t n);
/* Puts t's events in that order, flows renumbered (evsort.c): 0, or -1 out
 * of memory (nothing changed). */
int loom__trace_sort(loom_trace *t);


#endif
