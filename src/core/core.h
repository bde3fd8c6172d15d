/*
 * core.h - the core's internals, for the core and the layers above it that
 * drive a session (src/window, src/salvage, src/session): the backend
 * registry and plug-in loading, the session and each backend's part of it,
 * collection into a trace, and the hooks through which the session tells
 * the layers above about its life.  Layers that only need errors, logging,
 * options or clocks include base/base.h and base/clock.h instead.
 */
#ifndef LOOM_CORE_H
#define LOOM_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include "base/base.h"
#include "base/clock.h"
#include "core/meta.h"
#include "loom/loom.h"
#include "loom/plugin.h"
#include "record/record.h"
#include "trace/trace.h"
#include "util/util.h"

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
  /* host->memory's fast way (host.c): while b is in a session that records
   * the host, its producer number there (bs->src, when it fits a host
   * record), else 0; and the first clock it declared in the recorder's
   * domain in that session, else 0.  Written under mu, read without it.
   * call_kinds: with mem_src, the host call kinds the session keeps (bits of
   * LOOM_KIND_RUNTIME, _DRIVER, _SYNC) for host->call's fast way. */
  _Atomic uint32_t mem_src, rec_clock, call_kinds;
};

/* Calls loom_init once; every public entry point does. */
void loom__ensure_init(void);
/* Snapshot of the registry: array (caller frees) of backends. */
loom_backend **loom__registry_snapshot(size_t *n);
loom_status loom__backend_register(const loom_backend_ops *ops,
                                   const char *origin);
/* registry.c: whether "NAME.KEY" is an option backend NAME declares (1 when
 * none is registered or it declares none); known: the ones it does. */
int loom__backend_option_known(const char *key, char *known, size_t cap);
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

/* session_meta.c: session options "meta.K=V" as trace metadata,
 * "process_name" as the recording process's name (0, or -1 out of memory). */
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
  /* The session's devices that are this backend's (device_add), a bit per
   * session device index: a memory record's "device" is checked here under
   * b->mu alone, with no session lock per record. */
  uint64_t *devbits;
  size_t ndevbits;
  /* Ring mode: the allocations among the records dropped to stay within
   * the ring and not freed by one (memring.c): a dump starts from them. */
  struct loom__bmem *gone_mem;
  size_t ngone, cap_gone;
  loom__map gone_by_key; /* (device, addr) -> index + 1 in gone_mem */
} loom__bsess;

/* ---- memory records a ring dropped (memring.c) -------------------------- */
/* An allocation record kept with its reserved arguments (strings interned). */
typedef struct loom__bmem {
  loom__drec d;
  loom__targ args[5];
} loom__bmem;
/* Ring mode, before bs's oldest k records are dropped (b->mu held): their
 * allocations are kept aside, their frees end the allocations kept so. */
void loom__bmem_fold(loom__bsess *bs, size_t k);
/* A dump's copy of what bs keeps aside (0, or -1 out of memory). */
int loom__bmem_copy(loom__bsess *dst, const loom__bsess *src);
void loom__bmem_free(loom__bsess *bs);
/* Frees a backend's part of a session (NULL ignored): its arena copies,
 * clocks, records, arguments and loss reasons (session.c). */
void loom__bsess_free(loom__bsess *bs);

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
int loom__bkarena_reserve(loom_backend *b, loom__bsess *bs, size_t nargs);
/* The record appended last is whole: published for a salvage. */
void loom__bkarena_publish(loom_backend *b, loom__bsess *bs);
/* Ring mode drops the k oldest records and their a arguments: 1 when done
 * (arena), 0 when the caller moves them; then loom__bkarena_ring_state. */
int loom__bkarena_drop_oldest(loom__bsess *bs, size_t k, size_t a);
void loom__bkarena_ring_state(loom__bsess *bs);
/* bs->lost and lost_by changed. */
void loom__bkarena_lost(loom_backend *b, loom__bsess *bs);
/* Clock idx was declared or changed. */
void loom__bkarena_clock(loom_backend *b, loom__bsess *bs, size_t idx);
/* The backend's arena serial (0: none); device and resource copies. */
uint64_t loom__bkarena_serial(loom_backend *b, loom__bsess *bs);
void *loom__bkarena_device(uint64_t serial, uint32_t index, const loom__sdev *d);
void *loom__bkarena_resource(uint64_t serial, uint32_t index, const loom__sres *r);
/* Frees an arena object of this process's arena (NULL and others ignored). */
void loom__bkarena_forget(void *p);
/* fn is called when a device runtime's backend is first used in this
 * process (loom-preload starts its watcher then). */
void loom__bkarena_set_device_hook(void (*fn)(void));
/* The backend leaves: its arena objects and arena arrays are freed. */
void loom__bkarena_close(loom__bsess *bs);
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
  const struct loom__session_hooks *hooks; /* the layers above (never NULL) */
};

/* ---- what the layers above hear of a session's life --------------------
 * The window controller and ring mode (src/window) sit above the core; the
 * session calls them only through the table its creator handed to
 * loom__session_create (src/session/entry.c).  Every slot is set. */
typedef struct loom__session_hooks {
  /* At create, after the core's own options: ring mode's and the window
   * options (LOOM_EINVAL with a message naming the option). */
  loom_status (*configure)(struct loom_session *s);
  /* Host recording begins (at start, or a window's beginning: before the
   * recorder starts) / ends (the beginning of a stop: waits for a dump). */
  void (*recording)(struct loom_session *s, int on);
  /* Window mode (s->windows): the session started (its first window is
   * armed) / stops or is destroyed while recording (a window in progress
   * is ended and written; -1 when a window's beginning or end still ran
   * after 10 s: the session's state is then that thread's, and must not be
   * freed) / is destroyed. */
  void (*windows_start)(struct loom_session *s);
  int (*windows_stop)(struct loom_session *s);
  void (*windows_gone)(struct loom_session *s);
  /* on_demand=on: serve loom trigger from start (on) to stop (off). */
  void (*serve)(struct loom_session *s, int on);
} loom__session_hooks;

/* loom_session_create, with the hooks of the layers above (kept, not
 * copied). */
loom_status loom__session_create(const loom_session_config *cfg, const loom__session_hooks *hooks,
                                 loom_session **out);
/* In a child forked without exec: the parent's session, copied, is the
 * parent's to finish; the child may create its own. */
void loom__session_forked(void);
/* For a salvage (src/salvage): a session that stands for a process that
 * died, to collect its records with (loom__collect_image): every kind, host
 * records, the dead process's timeline (tl: a loom__timeline's bytes as its
 * arena kept them) with stop readings taken now on the same host, its sizes
 * and name (copied).  Its options, backends and devices are the caller's to
 * fill; it is never started, stopped or destroyed with loom_session_*, and
 * has no hooks.  NULL when out of memory. */
loom_session *loom__session_stopped(const char *name, const void *tl, uint64_t chunk_bytes,
                                    uint64_t cap_bytes);
/* Frees such a session (its warnings, options and name; the caller's
 * backends are the caller's). */
void loom__session_free_stopped(loom_session *s);
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

#endif
