/*
 * tools.h - the private way in for loom's own programs: `loom` (the command)
 * and loom-preload.so reach what libloom does not offer applications through
 * one table of functions, obtained with loom_tools_get.  Nothing else of
 * libloom's insides is exported, and this header is not installed: its
 * contents may change with every release.  Applications, plug-ins and
 * bindings use loom.h and plugin.h only.
 *
 * The table is versioned like the plug-in ABI: a caller built against a
 * different LOOM_TOOLS_ABI_MAJOR is refused; within a major, slots are only
 * appended, struct_size says which exist, and a caller that needs more than
 * the library has is refused.  A refusal is a clear message naming both
 * versions, never a crash: the command and the preload come from the same
 * build as the library, and a mismatch means a partial installation.
 */
#ifndef LOOM_TOOLS_H
#define LOOM_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_TOOLS_ABI_MAJOR 1
#define LOOM_TOOLS_ABI_MINOR 1

/* The first line of every request on a process's control socket, the
 * protocol's version (src/ctl/ctl.h describes the protocol). */
#define LOOM_TOOLS_CTL_MAGIC "loom-ctl 1"

/* What `loom record` learns from rebuilding a dead process's trace. */
typedef struct loom_tools_salvage_result {
  char out[4096];      /* the trace written (where the process would have) */
  uint64_t events, flows, devices, dropped, warnings;
  uint64_t ranges;     /* user ranges kept (steps included) */
  uint64_t ops;        /* framework ops kept */
  uint64_t unclosed;   /* ranges and ops open at death, ended at the last record */
  uint64_t unresolved; /* names that could not be read (placeholders) */
  uint64_t threads;
  uint64_t bk_lost;    /* backend records lost (counted by loom; device work
                          still in a runtime's buffers is not known) */
  uint64_t bk_kept;    /* backend records rebuilt from shared memory */
  char bk_summary[1024]; /* ", backend 'X' N records kept and M lost" each */
} loom_tools_salvage_result;

typedef struct loom_tools_salvage_opts {
  const char *death;  /* how it ended: "was killed by SIGKILL", or a phrase that starts
                         "could not write its trace" (its own save failed) */
  const char *out;    /* where the trace goes; NULL: where the process would have */
  int quiet_unused;   /* a backend that handed nothing and declared no device (the
                         program never used it) is not named, unless its device
                         type is in `asked` */
  const char *asked;  /* device types the user asked for ("cpu,perf"), or NULL */
} loom_tools_salvage_opts;

/* A window request in Kineto's on-demand terms (`loom trigger --config`). */
typedef struct loom_tools_ondemand {
  int64_t duration_ns; /* > 0: a window of this long */
  int64_t steps;       /* > 0: a window of this many steps */
  int64_t start_step;  /* >= 0: first step of the window; -1: the next one */
  int64_t roundup;     /* > 0: a start step resolved at request time is
                          rounded up to a multiple of this */
  int64_t warmup;      /* steps between the request and a resolved start */
  unsigned kinds;      /* ACTIVITY_TYPES as LOOM_KIND_BIT()s; 0: not given */
  char out[4096];      /* "": the session's output pattern */
  int defaulted;       /* duration_ns is Kineto's 500 ms default: nothing was
                          asked (a ring-mode process then dumps all it holds) */
} loom_tools_ondemand;

typedef void (*loom_tools_warn_fn)(const char *msg, void *ud);

/* Every slot is set in the library that serves it; "0, or -1" functions
 * never crash on a bad path or a full disk. */
typedef struct loom_tools {
  uint32_t struct_size; /* sizeof this table in the library: slots past it are absent */
  uint16_t abi_major, abi_minor;
  /* The smallest backend table (loom_backend_ops) the library's registry
   * accepts, for `loom check-backend`. */
  uint32_t backend_ops_min_size;

  /* ---- loom-preload.so: the shared-memory arena (docs/survival.md) ---- */
  /* Moves this process's host buffers into the file path (the trace it
   * would write is out); 0, or -1 (recording goes on in malloc'ed memory). */
  int (*arena_begin)(const char *path, const char *out);
  /* Records the process's loaded objects in the arena (no-op without one). */
  void (*arena_maps)(void);
  /* The process is about to exec: nothing more goes into the arena. */
  void (*arena_off)(void);
  /* The trace was written: nothing to rebuild until the next session. */
  void (*arena_end)(void);
  /* fn is called (any thread) when a device runtime's backend first hands
   * the core a record or a device in a session; NULL: no call. */
  void (*device_hook_set)(void (*fn)(void));
  /* In the child of a fork without exec: drops the parent's session and
   * records (not freed), so that the child may record on its own. */
  void (*fork_child)(void);

  /* ---- loom-preload.so: the control socket of `loom trigger` ---- */
  /* 1 when the session started in this process takes loom trigger's
   * requests (window or ring mode). */
  int (*trigger_wanted)(void);
  /* Opens this process's socket and its serving thread; failing is a
   * warning.  A second call while serving is a no-op. */
  void (*ctl_start)(void);
  /* The session ended: the socket goes; a waiting client hears why. */
  void (*ctl_stop)(const char *why);
  /* In a child forked without exec: the parent's socket is not its own. */
  void (*ctl_forked)(void);
  /* A window was written to out (ok 1), or not (ok 0, why): a client
   * waiting for it hears so. */
  void (*ctl_window_done)(const char *out, int ok, const char *why);

  /* ---- loom (the command): rebuilding a killed process's trace ---- */
  /* Rebuilds the trace of the process whose arena is path and writes it
   * (o->out, else where the process would have).  LOOM_OK, or an error with
   * loom_last_error saying why; res is always filled (zeros on failure). */
  loom_status (*salvage_to)(const char *path, const loom_tools_salvage_opts *o,
                            loom_tools_salvage_result *res);
  /* What the arena at path says about its process without rebuilding: pid,
   * command, the trace it would have written, and pending 1 when it was
   * recording and had not written it.  0, or -1 when path is no arena. */
  int (*salvage_peek)(const char *path, int *pid, char *comm, size_t ncomm, char *out,
                      size_t nout, int *pending);

  /* ---- loom (the command): `loom trigger`, the client of the socket ---- */
  /* The runtime folder of user uid (from xdg, may be NULL, else
   * /tmp/loom-<uid>, else the home's .loom-run; said once on stderr). */
  void (*ctl_dir_name)(char *out, size_t n, const char *xdg, uid_t uid);
  /* dir is a real folder owned by owner, no group or other access (create:
   * made with mode 0700 when missing).  0, or -1 with why in err. */
  int (*ctl_dir_check)(const char *dir, uid_t owner, int create, char *err, size_t nerr);
  /* <dir>/<pid>.sock; -1 when it does not fit a socket address. */
  int (*ctl_sock_path)(char *out, size_t n, const char *dir, long pid);
  /* An empty on-demand request (start_step -1, the rest 0). */
  void (*ondemand_init)(loom_tools_ondemand *r);
  /* Kineto's on-demand keys from the file arg names, or arg itself when it
   * holds a '=', into *r; warn (may be NULL) hears keys loom does not use.
   * 0, or -1 with "KEY=VALUE: what is wrong" in err. */
  int (*kineto_load)(const char *arg, loom_tools_ondemand *r, loom_tools_warn_fn warn,
                     void *ud, char *err, size_t nerr);

  /* ---- 1.1: the summary's memory lines (docs/memory.md) ---- */
  /* Per device and memory kind of t's memory events, largest peak first:
   * "loom:   memory DEVICE (KIND): peak BYTES at T ms in OP (STEP); held at
   * the peak by OP BYTES, ...; N still allocated at the end (BYTES); N frees
   * of unknown addresses\n" (at most 8 lines, whole lines only) into out;
   * "" when t has no memory event.  0, or -1 when out of memory. */
  int (*memory_lines)(const loom_trace *t, char *out, size_t n);
} loom_tools;

/* The table of this library, for a caller built against tools ABI
 * abi_major.abi_minor whose table is size bytes (pass LOOM_TOOLS_GET()).
 * NULL when the majors differ or the library's table is smaller than size,
 * with loom_last_error naming both versions and what to do.  Any thread;
 * the table is static and never freed. */
LOOM_EXTERN const loom_tools *loom_tools_get(uint16_t abi_major, uint16_t abi_minor,
                                             size_t size);
#define LOOM_TOOLS_GET() \
  loom_tools_get(LOOM_TOOLS_ABI_MAJOR, LOOM_TOOLS_ABI_MINOR, sizeof(loom_tools))

#ifdef __cplusplus
}
#endif
#endif
