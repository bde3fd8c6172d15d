/*
 * arena.h - the shared-memory arena that lets a process's records outlive
 * it (docs/survival.md).
 *
 * Under `loom record` each recording process maps one file,
 * LOOM_RECORD_DIR/<pid>.arena, MAP_SHARED: its host record chunks, the
 * thread buffers that point into them, a copy of every interned string,
 * snapshots of its file-backed mappings (to read string literals from their
 * ELF files), the records backends handed to the core with their clocks,
 * devices and resources (core/bkarena.c), loom_meta_set metadata and
 * loom_thread_name names live there.  When the process dies without writing a trace
 * (SIGKILL, the OOM killer), `loom record` maps the file and rebuilds the
 * trace from it (src/salvage/salvage.c) through the same conversion code a live
 * session uses (collect.c).
 *
 * Layout: segment 0 starts with the header; every segment then holds
 * objects back to back, each behind a loom__aobj header, up to the first
 * zero header (files grow zero-filled).  Segments are added (the file grows,
 * a new mapping) and never remapped, so no writer's pointer ever moves.
 * Pointers stored in the arena are the writer's addresses; the segment table
 * translates them.
 */
#ifndef LOOM_ARENA_H
#define LOOM_ARENA_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define LOOM__ARENA_MAGIC 0x314e4552414d4f4full /* "OOMAREN1" little-endian */
#define LOOM__ARENA_VERSION 2u /* 2: loom__tbuf.staged */
#define LOOM__ARENA_MAXSEG 64
#define LOOM__ARENA_HDR 65536u /* bytes the header takes in segment 0 */
#define LOOM__ARENA_MAXBK 16

enum {
  LOOM__AO_CHUNK = 0x6b6e6863, /* a loom__chunk */
  LOOM__AO_TBUF = 0x66756274,  /* a loom__tbuf */
  LOOM__AO_STR = 0x20727473,   /* interned string: loom__astr */
  LOOM__AO_MAPS = 0x7370616d,  /* mapping snapshot: loom__amaps */
  /* what backends handed to the core (src/core/bkarena.c) */
  LOOM__AO_BK = 0x20646b62,    /* a backend's part of the session: loom__abk */
  LOOM__AO_BKREC = 0x73726b62, /* its records (loom__drec[]), no header of their own */
  LOOM__AO_BKARG = 0x72616b62, /* their arguments (loom__targ[]) */
  LOOM__AO_CLK = 0x6b6f6c63,   /* a declared clock and its sync points: loom__aclk */
  LOOM__AO_DEV = 0x20766564,   /* a device: loom__adev */
  LOOM__AO_RES = 0x20736572,   /* a resource (queue, stream): loom__ares */
  LOOM__AO_KV = 0x2076766b     /* process metadata or a thread's given name: loom__akv */
};
enum { LOOM__AS_NEW = 0, LOOM__AS_LIVE = 1, LOOM__AS_FREE = 2 };

typedef struct loom__aobj {
  uint32_t kind;
  _Atomic uint32_t state; /* LIVE is published (release) once the body is valid */
  uint64_t size;          /* bytes, header included; multiple of 16 */
} loom__aobj;

typedef struct loom__astr {
  uint32_t id, len;
  char s[]; /* len bytes and a NUL */
} loom__astr;

typedef struct loom__amap {
  uint64_t start, end, off;
  uint32_t path; /* offset of the path in loom__amaps.paths */
  uint32_t pad;
} loom__amap;

typedef struct loom__amaps {
  uint64_t seq; /* later snapshots win */
  uint32_t n, paths_len;
  loom__amap m[]; /* then paths_len bytes of NUL-terminated paths */
} loom__amaps;

/* A snapshot of mappings parsed from f (the text of /proc/PID/maps): the
 * readable file-backed ones, in a heap block (seq 0) the caller frees; NULL
 * when none or out of memory.  loom__maps_size is its size in bytes. */
loom__amaps *loom__maps_parse(FILE *f);
size_t loom__maps_size(const loom__amaps *a);

/* Objects of the kinds below carry their own "valid" word, stored with
 * release once the object is whole (the allocator publishes them LIVE at
 * once); a reader takes one only when both say so.  Backend objects name
 * their backend by its serial (loom__abk.serial), never by address: a freed
 * block may be reused by another backend. */
typedef struct loom__abk_view {
  uint64_t recs, args;           /* writer addresses of the arrays */
  _Atomic uint64_t nrecs, nargs; /* published: nargs, then nrecs (release) */
} loom__abk_view;

typedef struct loom__abk {
  _Atomic uint32_t valid;
  uint32_t src;                  /* producer number in the trace */
  uint64_t serial;
  _Atomic uint32_t view;         /* the current one of v[] */
  uint32_t pad;
  loom__abk_view v[2];           /* a grown array is published in the other */
  _Atomic uint64_t held;         /* records only in the process's memory */
  _Atomic uint64_t moving;       /* records unreadable while a ring moves them */
  _Atomic uint64_t overwritten;  /* ring mode */
  _Atomic uint64_t lost;         /* counted lost by the backend or the core */
  struct { char reason[120]; _Atomic uint64_t n; } lost_by[4];
  char name[64], device_type[64], runtime_cat[64], driver_cat[64];
} loom__abk;

typedef struct loom__async {
  uint64_t dev, host_ts;
  int64_t epoch;
  uint32_t host_domain, pad;
} loom__async;

typedef struct loom__aclk {
  _Atomic uint32_t valid;
  uint32_t index;                /* loom_clock - 1 */
  uint64_t bk;                   /* its backend's serial */
  uint64_t seq;                  /* a grown copy has a later one */
  uint32_t domain, cap;
  _Atomic uint64_t rate_bits;    /* ns_per_tick (a double's bits); 0: none */
  _Atomic uint32_t nsync;        /* published after the point */
  uint32_t pad;
  char name[64];
  loom__async sync[];            /* cap of them */
} loom__aclk;

typedef struct loom__adev {
  _Atomic uint32_t valid;
  uint32_t index;                /* in the session's devices */
  uint64_t bk;
  uint32_t nprops, pad;
  char name[128], vendor[128], type[64];
  unsigned char props[];         /* nprops loom__targ, strings as interned ids */
} loom__adev;

typedef struct loom__ares {
  _Atomic uint32_t valid;
  uint32_t index, device, pad;
  uint64_t native_id;
  char name[128];
} loom__ares;

enum { LOOM__AKV_META = 1, LOOM__AKV_THREAD = 2 };
typedef struct loom__akv {
  _Atomic uint32_t valid;
  uint32_t what;                 /* LOOM__AKV_* */
  uint64_t seq;                  /* the latest of a key (or thread) wins */
  uint64_t tid;                  /* thread names */
  uint32_t klen, vlen;           /* vlen UINT32_MAX: the key was removed */
  char s[];                      /* key NUL value NUL */
} loom__akv;

typedef struct loom__aseg {
  uint64_t addr, off, size; /* writer's address, file offset, bytes */
} loom__aseg;

typedef struct loom__ahdr {
  uint64_t magic;
  uint32_t version, hdr_size;
  int32_t pid;
  _Atomic uint32_t nseg; /* published after the segment's entry */
  loom__aseg seg[LOOM__ARENA_MAXSEG];
  /* the recording session (session.c) */
  _Atomic int32_t recording;  /* 1 from start until its trace was written */
  _Atomic uint32_t epoch;     /* hostrec's epoch of that session */
  int32_t domain;             /* host records' clock domain */
  uint32_t tl_size;
  unsigned char tl[512];      /* the session's loom__timeline at start */
  uint64_t chunk_bytes, cap_bytes;
  char comm[64];              /* process name at start */
  char name[256];             /* session name */
  char out[4096];             /* where the trace would have gone */
  uint32_t opts_len;
  char opts[16384];           /* session options: key NUL value NUL ... */
  /* Records a backend without an arena descriptor (loom__abk) had handed
   * to the core (held in the process's memory): counted lost by the
   * salvager.  Backends with one keep their records in the arena. */
  _Atomic uint32_t nbk;
  struct { char name[48]; _Atomic uint64_t held; } bk[LOOM__ARENA_MAXBK];
  _Atomic uint64_t failed; /* allocations the arena could not serve (malloc'ed instead) */
} loom__ahdr;

/* Is the arena on in this process (chunks come from it)? */
int loom__arena_on(void);
/* 1 when the program closed or reused the arena's descriptor and the arena
 * needed it (a new block): it turned itself off then (arena.c), and the
 * session says so in its trace. */
int loom__arena_fd_lost(void);
/* Memory from the arena, zeroed, of one kind (NULL: none can be had; the
 * caller falls back to malloc for the calls that allow it). */
void *loom__arena_alloc(uint32_t kind, size_t bytes);
/* The same, its pages left as they are and its contents undefined (a
 * reused block is not zeroed): for a block the caller fills whole with
 * loom__copy_to_cold before anyone reads it (a staged thread's chunks,
 * hostrec.c). */
void *loom__arena_alloc_cold(uint32_t kind, size_t bytes);
/* Memory for an array that grows: as loom__arena_alloc, with room bytes of
 * address space (and of the file, a hole) behind it so that
 * loom__arena_grow can grow it in place; a block of loom__arena_alloc
 * when no segment can be had for it. */
void *loom__arena_alloc_room(uint32_t kind, size_t bytes, size_t room);
/* Grows p in place to bytes (the new part zeroed): 0, or -1 when it cannot
 * (not from loom__arena_alloc_room, past its room, the filesystem full). */
int loom__arena_grow(void *p, size_t bytes);
/* Frees p (from loom__arena_alloc or loom__arena_alloc_room). */
void loom__arena_free(void *p);
/* Does p come from the arena? */
int loom__arena_owns(const void *p);
/* Mirrors interned string id (intern.c, under its lock). */
void loom__arena_str(uint32_t id, const char *s, size_t len);
/* Snapshots /proc/self/maps' file-backed mappings (at start, after dlopen). */
void loom__arena_maps(void);
/* loom-preload's, through the tools table (loom/tools.h): the arena opens
 * (0, or -1), the process is about to exec, the trace was written. */
int loom__arena_begin(const char *path, const char *out);
void loom__arena_off(void);
void loom__arena_end(void);
/* The recording session: its epoch (hostrec_start), its start
 * (session.c: timeline, options, name), its end (trace written). */
void loom__arena_epoch(uint32_t epoch);
void loom__arena_session(const void *tl, size_t tl_size, int domain, const char *name,
                         const char *const *keys, const char *const *vals, size_t nopts,
                         uint64_t chunk_bytes, uint64_t cap_bytes);
/* Counts n records backend name now holds in the process's memory, for a
 * backend that has no arena descriptor (bkarena.c could not allocate it;
 * *slot: 0 the first time, then kept by the caller). */
void loom__arena_bk_held(int *slot, const char *name, uint64_t n);

/* A new loom__akv (what, tid, key, value: NULL removes the key); NULL when
 * the arena is off or full.  Free the one it replaces after it. */
void *loom__arena_kv(uint32_t what, uint64_t tid, const char *key, const char *value);
/* An increasing number for objects whose latest wins. */
uint64_t loom__arena_seq(void);
/* The arena's owner (its pid; 0 when off): objects kept by pointer belong
 * to the arena of that process only. */
int32_t loom__arena_pid(void);

/* In a child forked without exec: the parent's arena becomes private here. */
void loom__arena_forked(void);

#endif
