/*
 * core.h - internal interfaces of the core: errors and logging, clocks,
 * options, the backend registry, plug-in loading and sessions.
 */
#ifndef LOOM_CORE_H
#define LOOM_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include "loom/loom.h"
#include "loom/plugin.h"
#include "record/record.h"
#include "util/util.h"

/* ---- errors and log ------------------------------------------------------ */
/* Sets the thread's last error message and returns status. */
loom_status loom__fail(loom_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void loom__clear_error(void);

/* Log levels follow loom_severity; LOOM_LOG=debug|info|warning|error|quiet
 * sets the threshold for stderr (default: warning). */
void loom__log(loom_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void loom__vlog(loom_severity sev, const char *fmt, va_list ap);

/* A list of warnings with its own lock. */
typedef struct loom__msgs {
  pthread_mutex_t mu;
  char **v;
  size_t n, cap;
} loom__msgs;
/* Formats a warning or error, prints it at that severity and appends it
 * (unless the list holds max). */
void loom__msgs_vadd(loom__msgs *m, size_t max, loom_severity sev,
                     const char *fmt, va_list ap);
void loom__msgs_free(loom__msgs *m);

/* A warning that is not tied to a session (plug-in loading, registration):
 * printed now and kept for the next session's trace, so none is lost. */
void loom__warn_pending(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Moves pending warnings to the caller (array of heap strings). */
char **loom__take_pending(size_t *n);

/* ---- clocks ------------------------------------------------------------- */
uint64_t loom__clock_now(loom_clock_domain d);

/* A pair of readings (domain, realtime) taken as close together as possible. */
typedef struct loom__clock_pair {
  uint64_t dom;
  int64_t real;
} loom__clock_pair;

/* Map from every standard domain to epoch ns, from pairs taken at session
 * start and stop; before stop the slope of the domain's nominal rate is
 * used. */
typedef struct loom__timeline {
  loom__clock_pair start[4], stop[4];
  int have_stop;
  double tsc_ns_per_tick; /* nominal rate measured at init */
  /* Test-only option test_clock_shift=OFFSET_NS:PPM: the whole timeline
   * reads real + shift_ns + shift_ppm * 1e-6 * (real - start), as if the
   * process ran on another host (kept across loom__timeline_begin). */
  int64_t shift_ns;
  double shift_ppm;
} loom__timeline;

void loom__timeline_begin(loom__timeline *tl);
void loom__timeline_end(loom__timeline *tl);
/* Parses test_clock_shift's value into tl; -1 when malformed. */
int loom__timeline_set_shift(loom__timeline *tl, const char *spec);
int64_t loom__timeline_convert(const loom__timeline *tl, loom_clock_domain d,
                               uint64_t ts);

/* A backend's declared clock. */
typedef struct loom__sync {
  uint64_t dev;
  int64_t epoch; /* converted when the point is added */
  loom_clock_domain host_domain;
  uint64_t host_ts;
} loom__sync;

typedef struct loom__clock {
  loom_clock_domain domain;
  char *name;
  loom__sync *sync;
  size_t nsync, cap_sync;
  double ns_per_tick;            /* clock_set_rate; 0 = not declared */
  uint64_t (*auto_read)(loom_backend *b, void *ctx); /* clock_auto_sync */
  void *auto_ctx;
  loom_clock_domain auto_domain;
  void *arena;                   /* its copy in the arena (bkarena.c), or NULL */
} loom__clock;

/* Converts ts of a declared clock to epoch ns; for device clocks the sync
 * points (re-converted with the final timeline) are interpolated. */
int64_t loom__clock_convert(const loom__timeline *tl, loom__clock *c,
                            uint64_t ts);
/* Sorts a device clock's sync points and converts them (after stop). */
void loom__clock_finalize(const loom__timeline *tl, loom__clock *c);
/* What is wrong with a device clock's description, as a sentence for a
 * warning (buf), or NULL when it converts exactly: no sync point, one point
 * and no rate, a declared rate that disagrees with the fit by over 1%. */
const char *loom__clock_problem(const loom__clock *c, char *buf, size_t n);

/* ---- options ------------------------------------------------------------ */
typedef struct loom__opts {
  char **keys, **vals;
  size_t n, cap;
} loom__opts;

/* Parses "k=v,k=v" (',' or ';').  LOOM_EINVAL with a message naming the
 * offending item on bad syntax. */
loom_status loom__opts_parse(loom__opts *o, const char *s);
void loom__opts_free(loom__opts *o);
/* LOOM_EINVAL naming an option key loom does not know (a key without a
 * dot that is not one of the core's). */
loom_status loom__opts_check(const loom__opts *o);
/* registry.c: whether "NAME.KEY" is an option backend NAME declares (1 when
 * none is registered or it declares none); known: the ones it does. */
int loom__backend_option_known(const char *key, char *known, size_t cap);
/* Value of key: session option first, then environment LOOM_<KEY>. */
const char *loom__opts_get(const loom__opts *o, const char *key);
/* Parses a size with optional k/m/g suffix; -1 when malformed. */
int loom__parse_size(const char *s, uint64_t *out);

/* ---- backends ----------------------------------------------------------- */
struct loom_session;
struct loom__bsess;

struct loom_backend {
  loom_backend_ops ops;      /* copy, zero-extended to our size */
  const loom_backend_ops *registered; /* the caller's table (identity) */
  char *origin;
  size_t index;              /* registration order */
  void *state;
  loom_backend_state st;
  char reason[256];
  pthread_mutex_t mu;        /* guards bs against emit racing teardown */
  struct loom__bsess *bs;    /* per-session data while in a session */
  /* push/pop_external as the recorder calls them; set at registration. */
  loom__ext_hook hook;
};

/* Calls loom_init once; every public entry point does. */
void loom__ensure_init(void);
/* Snapshot of the registry: array (caller frees) of backends. */
loom_backend **loom__registry_snapshot(size_t *n);
loom_status loom__backend_register(const loom_backend_ops *ops,
                                   const char *origin);
/* Loads one plug-in file (path) and runs its entry point. */
loom_status loom__plugin_load(const char *path);
/* Offers a newly registered backend to the recording session, which takes
 * it at once (probe, configure, start) when it asked for its device type. */
void loom__session_offer(loom_backend *b);
/* Takes one sync point of every auto-synced clock of b (clock_auto_sync). */
void loom__clock_auto_sync_all(loom_backend *b);
/* Loads LOOM_PLUGINS and LOOM_PLUGIN_PATH. */
void loom__plugins_from_env(void);
const loom_host *loom__host(void);


/* fork.c: session options "meta.K=V" as trace metadata, "process_name" as
 * the recording process's name (0, or -1 out of memory). */
struct loom_trace;
int loom__session_meta(const loom__opts *o, struct loom_trace *t);

/* ---- per-session data ---------------------------------------------------- */
/* Metadata strings, last value of a key wins (meta.c). */
typedef struct loom__kvs {
  char **keys, **vals;
  size_t n, cap;
} loom__kvs;
/* Sets key (value copied; NULL removes it).  -1 when out of memory. */
int loom__kvs_set(loom__kvs *m, const char *key, const char *value);
int loom__kvs_to_trace(const loom__kvs *m, struct loom_trace *t);
void loom__kvs_free(loom__kvs *m);
#include "trace/trace.h"

/* A backend record as stored until processing; strings are interner ids. */
typedef struct loom__drec {
  uint64_t start, end, corr, ext;
  uint32_t name, cat;
  uint32_t clock, device, resource;
  uint32_t args_off;
  uint16_t nargs, kind;
  uint16_t roles;   /* LOOM_RECORD_F_* the backend marked (ABI 1.1) */
} loom__drec;

/* A backend's part of a session; guarded by its loom_backend.mu. */
typedef struct loom__bsess {
  struct loom_session *s;
  uint16_t src;     /* producer number in the trace */
  int started;
  int closed;       /* after flush: emit is refused and counted lost */
  uint32_t kinds;
  loom__drec *recs;
  size_t nrecs, cap_recs;
  loom__targ *args;
  size_t nargs, cap_args;
  loom__clock *clocks; /* index = loom_clock - 1 */
  size_t nclocks, cap_clocks;
  uint64_t lost;
  uint64_t bytes;   /* records and arguments held, against backend_memory_cap
                       (and in ring mode its ring, ring_bk_bytes) */
  uint64_t overwritten; /* ring mode: records dropped to stay within it */
  int arena_slot;   /* its count of records held in the heap (arena.c), when
                       it has no arena descriptor */
  void *abk;        /* its loom__abk under loom record (bkarena.c), or NULL */
  int abk_tried;    /* abk was asked for (once) */
  int in_arena;     /* recs and args are arena blocks (else heap) */
  /* Loss counts by reason (the first few distinct reasons; others join the
   * last slot's count). */
  struct { char *reason; uint64_t n; } lost_by[4];
} loom__bsess;

typedef struct loom__sdev {
  loom_backend *b;          /* NULL once its backend left the session */
  char *name, *vendor, *type;
  loom__targ *props; /* strings as interner ids */
  size_t nprops;
  void *arena;              /* its loom__adev (bkarena.c), or NULL */
} loom__sdev;

typedef struct loom__sres {
  uint32_t device;
  char *name;
  uint64_t native_id;
  void *arena;              /* its loom__ares, or NULL */
} loom__sres;

/* ---- backend records in the shared-memory arena (bkarena.c) -------------
 * All under the backend's lock.  Without an arena they keep the heap. */
/* Room for one more record and nargs more arguments (0, or -1). */
int loom__bka_reserve(loom_backend *b, loom__bsess *bs, size_t nargs);
/* The record appended last is whole: published for a salvage. */
void loom__bka_publish(loom_backend *b, loom__bsess *bs);
/* Ring mode drops the k oldest records and their a arguments: 1 when done
 * (arena), 0 when the caller moves them; then loom__bka_ring_state. */
int loom__bka_drop_oldest(loom__bsess *bs, size_t k, size_t a);
void loom__bka_ring_state(loom__bsess *bs);
/* bs->lost and lost_by changed. */
void loom__bka_lost(loom_backend *b, loom__bsess *bs);
/* Clock idx was declared or changed. */
void loom__bka_clock(loom_backend *b, loom__bsess *bs, size_t idx);
/* The backend's arena serial (0: none); device and resource copies. */
uint64_t loom__bka_serial(loom_backend *b, loom__bsess *bs);
void *loom__bka_device(uint64_t serial, uint32_t index, const loom__sdev *d);
void *loom__bka_resource(uint64_t serial, uint32_t index, const loom__sres *r);
/* Frees an arena object of this process's arena (NULL and others ignored). */
void loom__bka_forget(void *p);
/* The backend leaves: its arena objects and arena arrays are freed. */
void loom__bka_close(loom__bsess *bs);
/* Process metadata (meta.c) and thread names (hostrec.c) copied to the
 * arena of this process the first time a session starts in it. */
void loom__meta_arena_mirror(void);

enum { LOOM__S_CREATED, LOOM__S_RECORDING, LOOM__S_STOPPED };

/* Default bounds (docs/survival.md): host records of all threads of a
 * process (memory_cap) and each backend's records (backend_memory_cap). */
#define LOOM__DEFAULT_MEMORY_CAP (1ull << 30)
#define LOOM__DEFAULT_BACKEND_MEMORY_CAP (1ull << 30)

struct loom_session {
  int state;
  loom__opts opts;
  uint32_t kinds;
  char *name;
  int host;                 /* host annotations recorded */
  int said_fd_lost;         /* the arena's descriptor loss is in the warnings */
  uint64_t chunk_bytes, cap_bytes;
  loom_backend **bk;        /* backends taking part */
  size_t nbk, cap_bk;
  pthread_mutex_t mu;       /* devices, resources */
  loom__msgs warn;
  loom__sdev *devs;
  size_t ndevs, cap_devs;
  loom__sres *res;
  size_t nres, cap_res;
  loom__timeline tl;
  /* Requested device types other than cpu; all = every type asked for.
   * want_found: a backend of that type took part (at create or later). */
  char **want;
  int *want_found;
  size_t nwant, cap_want, cap_found;
  int want_all;
  loom__kvs meta;           /* meta_set entries and join notes; under mu */
  /* backend_memory_cap: bytes of records and arguments each backend may
   * hold (loom__bsess.bytes) */
  uint64_t bk_cap;
  /* Ring mode (mode=ring, ring.c): host records kept within ring_bytes for
   * all threads, each backend's within ring_bk_bytes, oldest overwritten. */
  int ring;
  uint64_t ring_bytes, ring_bk_bytes;
  /* Window mode (trigger.c): the session records only within windows.
   * warn_keep: warnings of create, kept in every window's trace. */
  int windows;
  size_t warn_keep;
  int abandoned; /* a window's work outlived the stop: destroy frees nothing */
};

/* ---- windows (trigger.c drives them; session.c does the work) ----------- */
/* Reads the window options of s (start_step, steps, delay, duration, wait,
 * warmup, active, repeat, skip_first, output, windows); sets s->windows.
 * LOOM_EINVAL with a message naming the option. */
loom_status loom__trigger_configure(struct loom_session *s);
/* The session started (arms its first window) / stops (a window in progress
 * is ended and written; nothing is armed afterwards; -1 when a window's
 * beginning or end still ran after 10 s: the session's state is then that
 * thread's, and must not be freed) / is destroyed. */
void loom__trigger_session_start(struct loom_session *s);
int loom__trigger_session_stop(struct loom_session *s);
void loom__trigger_session_gone(struct loom_session *s);
/* In a forked child: the parent's controller is the parent's. */
void loom__trigger_forked(void);
/* on_demand=on: serve loom trigger from session start (on) to stop (trigger.c). */
void loom__trigger_serve(struct loom_session *s, int on);
/* Is a session recording in ring mode (a dump has something to read)? ring.c */
int loom__ring_active(void);
/* Starts recording a window: host records and every backend. */
loom_status loom__session_window_begin(struct loom_session *s);
/* Ends it: backends stopped and flushed; keep: the window's trace in *out
 * (else discarded); the backends are configured again for the next one. */
loom_status loom__session_window_end(struct loom_session *s, int keep, loom_trace **out);

/* Sets a trace metadata entry of s (last value wins); -1 out of memory. */
int loom__session_meta_set(struct loom_session *s, const char *key, const char *value);

/* Adds a warning to the session (and prints it). */
void loom__session_warn(struct loom_session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Same at a chosen severity (warning or error). */
void loom__session_vreport(struct loom_session *s, loom_severity sev,
                           const char *fmt, va_list ap);
/* Writes loom_meta_set()'s process metadata into t (meta.c). */
int loom__meta_apply(loom_trace *t);
int loom__process_meta_get(const char *key, char *buf, size_t n);
/* Builds the trace of a stopped session (collect.c). */
loom_status loom__session_collect(struct loom_session *s, loom_trace **out);

/* The host records collect turns into a trace: this process's own (live),
 * or a dead process's rebuilt from its arena (salvage.c, dead = 1). */
typedef struct loom__rec_image {
  int64_t pid;
  const char *comm;       /* process name (NULL: this process's) */
  loom_clock_domain dom;  /* the records' clock */
  int dead;               /* names below; no live thread names; raw
                             formats (functions of the dead) not called */
  loom__tbuf **threads;   /* dead: its buffers (live: the recorder's) */
  size_t nthreads;
  /* dead: a record's name (pointer or interned id) as a string */
  const char *(*name)(void *ud, uint64_t name, uint16_t flags);
  void *ud;
  int64_t end_ns;         /* the trace's end (0: the session's stop) */
  uint64_t raw_unformatted; /* out: raw op arguments not formatted */
  const char *dump;       /* ring mode: a dump while recording (its reason) */
  /* dead: the name loom_thread_name gave a thread (NULL: none) */
  const char *(*thread_name)(void *tn_ud, int64_t tid);
  void *tn_ud;
} loom__rec_image;
/* collect.c: the trace of session s (its timeline, options, backends) with
 * img's host records. */
loom_status loom__collect_image(struct loom_session *s, loom__rec_image *img, loom_trace **out);
/* The trace of the window a ring-mode session's rings hold now; recording
 * goes on (collect.c; ring.c serializes it with stop). */
loom_status loom__session_collect_dump(struct loom_session *s, const char *reason,
                                       loom_trace **out);

/* ---- ring mode (ring.c) -------------------------------------------------- */
/* Reads mode, ring_size and the slow-step options into s (at create). */
loom_status loom__ring_configure(struct loom_session *s);
/* At start (before the host recorder starts) and at the beginning of stop:
 * a dump is possible between the two. */
void loom__ring_begin(struct loom_session *s);
void loom__ring_end(struct loom_session *s);
/* In the child of a fork: the parent's dump threads are not there. */
void loom__ring_forked(void);
/* Snapshot of the rings of the recording session as a trace (NULL: no
 * ring-mode session records, or out of memory; loom_last_error says which).
 * Recording goes on. */
__attribute__((visibility("default"))) loom_trace *loom__ring_dump(const char *reason);

#endif
