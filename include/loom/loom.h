/*
 * loom.h - the application API of loom, a vendor-neutral activity profiler.
 *
 * A program (or a framework) uses this header to mark what its threads do
 * (ranges, framework ops, instants, counters, iterations) and to control
 * recording sessions: prepare a session for a list of device types, start it,
 * stop it, and save the resulting trace.  Device activity comes from backends
 * (see loom/plugin.h); the application never talks to them directly.
 *
 * Contents, by topic: version; errors; common types (struct sizes, thread
 * ids, string ids, typed arguments, record kinds); the library and its
 * backends; sessions and their options; recording calls; the inline idle
 * check; reports; merging traces; traces.
 *
 * Conventions:
 *  - Control calls return a loom_status; LOOM_OK is 0.  loom_strerror() names
 *    a status and loom_last_error() gives the details of the calling thread's
 *    last failure.
 *  - Recording calls (loom_range_push, loom_instant, ...) return nothing,
 *    never fail visibly and, when no session records, cost a load and a
 *    branch inlined in the caller (see "the inline idle check").
 *  - Structs the caller fills start with a loom_struct_size struct_size; set
 *    it with sizeof(the struct) so that newer libraries can read older
 *    callers.  Fields are only ever added at the end of a struct, and read
 *    only when struct_size covers them.
 *  - Strings loom returns are owned by loom (or by the trace they come from)
 *    and must not be freed.
 *
 * Threads:
 *  - Recording calls may be made from any thread at any time, at once, with
 *    or without a session; they take no lock (loom_string_id_of, the *_str
 *    variants and loom_op_begin_args intern strings under a short lock;
 *    loom_thread_name and loom_meta_set take a lock and are not meant for hot
 *    paths).
 *  - loom_init, loom_backends_list, loom_plugin_load, loom_version*,
 *    loom_strerror, loom_kind_name and loom_last_error are safe from any
 *    thread.
 *  - One session exists at a time.  Call one session's functions
 *    (loom_session_*) from one thread at a time; which thread does not
 *    matter.
 *  - A trace is not changed by the functions that take a const loom_trace *:
 *    several threads may read or save one trace at once; free it when no
 *    other thread uses it.  A report likewise.
 *  - loom_merge and loom_report_open have no shared state: run them on any
 *    thread, several at once.
 */
#ifndef LOOM_LOOM_H
#define LOOM_LOOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOOM_BUILDING_LIBRARY)
#define LOOM_EXTERN __attribute__((visibility("default")))
#else
#define LOOM_EXTERN
#endif

/* ==== version ============================================================ */
#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_PATCH 0
#define LOOM_VERSION_HEX \
  ((LOOM_VERSION_MAJOR << 16) | (LOOM_VERSION_MINOR << 8) | LOOM_VERSION_PATCH)

/* Run-time version of the library, as LOOM_VERSION_HEX and as "0.1.0". */
LOOM_EXTERN unsigned loom_version(void);
LOOM_EXTERN const char *loom_version_string(void);

/* ==== errors ============================================================= */
/* Numbers never change; retired values keep their slot. */
typedef enum loom_status {
  LOOM_OK = 0,
  LOOM_EINVAL = 1,       /* an argument or configuration value is invalid */
  LOOM_ENOMEM = 2,       /* out of memory */
  LOOM_ESTATE = 3,       /* the call is not valid in the current state */
  LOOM_EABI = 4,         /* ABI version mismatch (plug-ins) */
  LOOM_ENOTFOUND = 5,    /* no such backend, file, key or device */
  LOOM_EIO = 6,          /* reading or writing a file failed */
  LOOM_EBACKEND = 7,     /* a backend reported a failure */
  LOOM_EUNSUPPORTED = 8, /* not supported (output format, operation) */
  LOOM_EBUSY = 9,        /* another session is already recording */
  LOOM_EFORMAT = 10      /* malformed input (trace file, plug-in) */
} loom_status;

/* Short English description of a status ("invalid argument"). Never NULL. */
LOOM_EXTERN const char *loom_strerror(loom_status status);

/* Details of the calling thread's most recent failed control call, or "" if
 * none.  The string is owned by loom and valid until the thread's next call. */
LOOM_EXTERN const char *loom_last_error(void);

/* ==== common types ======================================================= */
/* The struct_size that opens every struct of this header the caller fills or
 * reads, except loom_merge_config and loom_merge_result, whose struct_size is
 * a uint32_t (their layout is fixed by the ABI), as in every struct of the
 * plug-in ABI (plugin.h). */
typedef size_t loom_struct_size;

/* An OS thread id of this process (gettid()), as host records carry it.
 * loom_thread_name takes one in a 64-bit parameter. */
typedef uint32_t loom_thread_id;

/* An interned string: names passed as const char * must stay valid until the
 * session that recorded them is stopped (string literals always are).  Use
 * the *_str variants for temporary strings (they intern, which costs a
 * lookup) or intern once with loom_string_id_of and use the *_id variants. */
typedef uint32_t loom_string_id;

/* Interns s and returns its id (never 0 for a valid string; 0 on failure). */
LOOM_EXTERN loom_string_id loom_string_id_of(const char *s);

typedef enum loom_arg_type {
  LOOM_ARG_INT = 0,
  LOOM_ARG_UINT = 1,
  LOOM_ARG_DOUBLE = 2,
  LOOM_ARG_STRING = 3
} loom_arg_type;

/* A typed argument.  key and v.s are copied by loom during the call. */
typedef struct loom_arg {
  const char *key;
  loom_arg_type type;
  union {
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
  } v;
} loom_arg;

/* The vendor-neutral record kinds every backend emits.  Values are stable. */
typedef enum loom_kind {
  LOOM_KIND_KERNEL = 0,     /* device compute work */
  LOOM_KIND_MEMCPY = 1,     /* device copy (host<->device, device<->device) */
  LOOM_KIND_MEMSET = 2,     /* device fill */
  LOOM_KIND_RUNTIME = 3,    /* host call into a device runtime */
  LOOM_KIND_DRIVER = 4,     /* host call into a device driver API */
  LOOM_KIND_SYNC = 5,       /* synchronisation (waits on streams, events) */
  LOOM_KIND_USER_RANGE = 6, /* user annotation range */
  LOOM_KIND_CPU_OP = 7,     /* framework operator */
  LOOM_KIND_INSTANT = 8,    /* point event */
  LOOM_KIND_COUNTER = 9,    /* sampled value */
  LOOM_KIND_COLLECTIVE = 10,/* communication collective */
  LOOM_KIND_OVERHEAD = 11,  /* profiler overhead */
  LOOM_KIND_MARKER = 12,    /* session markers (iterations, drops, warnings) */
  /* A CPU sample of a host thread (an instant on that thread) whose call
   * stack is its string argument "stack": one line per frame, leaf first,
   * each "function\tmodule\t0xOFFSET" (function empty when it could not be
   * named; OFFSET is the address relative to the module's load base).
   * docs/sampling.md.  Plug-in ABI 1.2 and later. */
  LOOM_KIND_SAMPLE = 13,
  /* An allocation or a free of memory (an instant on the thread that made
   * it), from a device runtime, a framework's allocator or the host heap:
   * docs/memory.md.  Plug-in ABI 1.5 and later. */
  LOOM_KIND_MEMORY = 14,
  LOOM_KIND_COUNT_ = 15
} loom_kind;

#define LOOM_KIND_BIT(k) (1u << (k))
#define LOOM_KINDS_ALL ((1u << LOOM_KIND_COUNT_) - 1u)

/* Name of a kind ("kernel", "memcpy", ...) or NULL when out of range. */
LOOM_EXTERN const char *loom_kind_name(loom_kind kind);

/* ==== the library and its backends ======================================= */
/* Initialises loom: registers built-in backends and loads the plug-ins named
 * by LOOM_PLUGINS (paths separated by ':') and LOOM_PLUGIN_PATH (folders
 * scanned for libloom-*.so).  Idempotent and thread-safe; every other call
 * initialises on demand, so calling it is optional.  A plug-in that fails to
 * load is a warning, not a failure. */
LOOM_EXTERN loom_status loom_init(void);

/* Backend states reported by loom_backends_list(). */
typedef enum loom_backend_state {
  LOOM_BACKEND_REGISTERED = 0, /* registered, never probed (lazy) */
  LOOM_BACKEND_AVAILABLE = 1,  /* probe succeeded */
  LOOM_BACKEND_UNAVAILABLE = 2 /* probe or start failed; see reason */
} loom_backend_state;

typedef struct loom_backend_info {
  loom_struct_size struct_size; /* set by the caller: sizeof(loom_backend_info) */
  const char *name;           /* backend name, e.g. "sim" */
  const char *device_type;    /* "cpu", "opencl", "cuda", "xpu", vendor string */
  const char *origin;         /* "built-in" or the path of the plug-in */
  uint32_t kinds;             /* LOOM_KIND_BIT mask it can produce */
  loom_backend_state state;
  const char *reason;         /* why it is unavailable, or "" */
  /* ---- read only when struct_size covers them ---- */
  uint32_t flags;             /* LOOM_BACKEND_F_* of its table (plugin.h) */
  /* How `loom record` enables it in a program (plugin.h), or NULL: the
   * table's own pointer, valid until the process exits. */
  const struct loom_backend_enable *enable;
  /* The options it reads (plugin.h), ended by {NULL}; NULL: not declared. */
  const struct loom_option_desc *options;
} loom_backend_info;

/* Calls fn once per registered backend, in registration order, with a
 * snapshot that is valid during the call only.  Returns the number of
 * backends.  Does not probe anything. */
typedef void (*loom_backend_visit_fn)(const loom_backend_info *info, void *user);
LOOM_EXTERN size_t loom_backends_list(loom_backend_visit_fn fn, void *user);

/* Loads one plug-in file now, as LOOM_PLUGINS does (initialising loom
 * first).  LOOM_OK when its entry point ran and succeeded; otherwise the
 * status, loom_last_error() says why and a warning is kept for the next
 * session's trace. */
LOOM_EXTERN loom_status loom_plugin_load(const char *path);

/* ==== sessions and their options ========================================= */
typedef struct loom_session loom_session;
typedef struct loom_trace loom_trace;

/*
 * Session options: loom_session_config.options, "key=value" pairs separated
 * by ',' or ';' (the last value of a key wins).  A key other than meta.KEY
 * and process_name that is not given there is looked up in the environment
 * as LOOM_<KEY> (upper case, '.' and '-' become '_').  An unknown key fails
 * loom_session_create with LOOM_EINVAL.  Sizes are bytes with an optional
 * suffix k, m or g; times are seconds.
 *
 *   key                 value           default      meaning
 *   buffer_size         size >= 1k      256k         bytes of each chunk of a
 *                                                    thread's host records
 *                                                    (ring mode: ring_size/16,
 *                                                    kept within 1k..256k)
 *   memory_cap          size            1g           all threads' host records
 *                                                    together; 0: no bound
 *   backend_memory_cap  size > 0        1g           each backend's records
 *                                                    (ring mode: ring_size)
 *   process_name        text            -            names the recording
 *                                                    process in the trace
 *                                                    (percent-decoded, as
 *                                                    meta.KEY)
 *   meta.KEY            text            -            trace metadata KEY (the
 *                                                    value percent-decoded:
 *                                                    %2C ',' %3B ';' %25 '%')
 *   NAME.KEY            text            -            read by backend NAME;
 *                                                    refused when NAME
 *                                                    declares its options and
 *                                                    KEY is none of them
 *   test_clock_shift    NS[:PPM]        0            for tests: shifts (and
 *                                                    skews) the session clock
 *
 * Windows (docs/triggers.md): with any of these the session records only
 * inside its windows, and each window is written to its own file.
 *   start_step          step >= 0       -            first step of the window
 *                                                    (needs steps or duration)
 *   steps               K > 0           -            steps in the window
 *   delay               seconds         0            window begins after it
 *   duration            seconds > 0     -            window length
 *   wait, warmup,       steps           0            a repeating schedule of
 *   active, repeat,                                  steps (active > 0; repeat
 *   skip_first                                       0: until the end), not
 *                                                    combined with the four
 *                                                    above
 *   output              pattern         loom-{program}.json  each window's
 *                                                    file; {pid} {rank} {seq}
 *                                                    {program} are replaced
 *   windows             on | off        off          record nothing until a
 *                                                    window is asked for
 *   on_demand           on | off        off          serve `loom trigger` from
 *                                                    this session (implies
 *                                                    windows=on outside ring
 *                                                    mode)
 *
 * Flight recorder (docs/ring.md): the keys below other than mode need
 * mode=ring, which cannot be combined with windows.
 *   mode                normal | ring   normal       ring: keep only the most
 *                                                    recent records
 *   ring_size           size >= 2k      memory_cap if given, else 64m: the
 *                                                    host records' budget
 *   slow_step           factor > 1      off          a step that many times
 *                                                    slower than the running
 *                                                    median dumps the ring
 *   slow_step_warmup    steps >= 1      10           steps measured before
 *                                                    slow_step arms
 *   slow_range          NAME:MS         off          a range NAME longer than
 *                                                    MS ms dumps the ring
 *   dump_cooldown       seconds >= 0    60           at most one such dump
 *                                                    per this many seconds
 */
typedef struct loom_session_config {
  loom_struct_size struct_size; /* sizeof(loom_session_config) */
  /* Comma-separated device types, e.g. "cpu,opencl".  NULL or "" means "cpu".
   * "cpu" is the host recording (annotations); every other type selects the
   * backends registered for it.  "all" selects every registered backend. */
  const char *devices;
  /* LOOM_KIND_BIT mask of the record kinds wanted; 0 means all. */
  uint32_t kinds;
  /* Session options (the table above), or NULL. */
  const char *options;
  /* Optional trace name written in the trace (traceName). */
  const char *name;
} loom_session_config;

/* Prepares a session.  Fails with LOOM_EINVAL (and a message in
 * loom_last_error) on a malformed option string or an unknown option.
 * Requested device types with no working backend are not an error: they
 * become warnings on stderr and in the trace.  Backends are probed and
 * configured here.  LOOM_EBUSY when another session exists. */
LOOM_EXTERN loom_status loom_session_create(const loom_session_config *cfg,
                                            loom_session **out);

/* Starts recording.  Only one session records at a time: LOOM_EBUSY if
 * another one does.  A backend whose start fails is a warning and is left out;
 * the rest records.  With window options nothing records yet: each window
 * starts and stops the recording (and every backend) itself. */
LOOM_EXTERN loom_status loom_session_start(loom_session *s);

/* Stops recording, collects every backend's records, processes them (clock
 * conversion, window filtering, flows, external ids, projections) and returns
 * the trace in *out (owned by the caller, release with loom_trace_free).  The
 * session can be destroyed afterwards.  With window options every window
 * was written to its file (a window in progress is ended and written now)
 * and *out is set to NULL. */
LOOM_EXTERN loom_status loom_session_stop(loom_session *s, loom_trace **out);

/* Destroys a session; stops it first (discarding the trace) if it records
 * (with window options a window in progress is still written). */
LOOM_EXTERN void loom_session_destroy(loom_session *s);

/* Flight recorder (session option mode=ring): the trace of the window the
 * session's rings hold now, while recording goes on; reason is written into
 * its metadata (ring_dump_reason).  Ranges whose begin was overwritten are
 * left out whole, device work goes with the host call that launched it, and
 * the trace says how many records were overwritten and where the kept window
 * starts (metadata ring_overwritten_records, ring_window_start_ns, and a
 * warning).  *out is the caller's (loom_trace_free).  LOOM_ESTATE when s does
 * not record or not in ring mode; LOOM_ENOMEM.  See docs/ring.md. */
LOOM_EXTERN loom_status loom_session_dump(loom_session *s, const char *reason,
                                          loom_trace **out);

/* A finished window: t is its trace, owned by loom and valid only during the
 * call (save it with loom_trace_save, read it, do not free it); out is the
 * file it would be written to (the session's output pattern expanded, never
 * NULL); seq counts the session's windows from 1.  Called on the thread that
 * ended the window: the one calling loom_step (a step window), loom's timer
 * thread (a time window), loom's dump thread (ring mode's dumps) or the one
 * stopping or destroying the session (the window in progress). */
typedef void (*loom_window_fn)(loom_trace *t, const char *out, unsigned seq, void *ud);

/* Hands every window this process's sessions finish (window options, ring
 * dumps: docs/triggers.md) to fn with ud, instead of writing it to its file;
 * fn NULL writes them again.  One callback per process: a later call
 * replaces it, and a window ending meanwhile goes to one or the other.  Any
 * thread, any time; nothing to fail. */
LOOM_EXTERN void loom_window_callback_set(loom_window_fn fn, void *ud);

/* Number of warnings so far in the session and the i-th one (NULL past end). */
LOOM_EXTERN size_t loom_session_warning_count(const loom_session *s);
LOOM_EXTERN const char *loom_session_warning(const loom_session *s, size_t i);

/* ==== recording calls ==================================================== */
/* Any thread, any time; no effect unless a session records the host ("cpu"
 * in its devices).  Names: see loom_string_id above. */

/* Nested ranges on the calling thread (user annotations). */
LOOM_EXTERN void loom_range_push(const char *name);
LOOM_EXTERN void loom_range_push_id(loom_string_id name);
LOOM_EXTERN void loom_range_push_str(const char *name);
LOOM_EXTERN void loom_range_pop(void);

/* Ranges with an explicit id; begin and end may happen on different threads
 * and need not nest (written as asynchronous slices). */
LOOM_EXTERN void loom_range_begin(uint64_t id, const char *name);
LOOM_EXTERN void loom_range_end(uint64_t id);

/* Framework operators: the op's id becomes the "External id" of every
 * runtime call made inside it and of the device work those calls launch. */
LOOM_EXTERN void loom_op_begin(const char *name, uint64_t external_id);
LOOM_EXTERN void loom_op_begin_id(loom_string_id name, uint64_t external_id);
LOOM_EXTERN void loom_op_end(void);

/* A framework op with arguments (sequence number, input shapes, ...): the
 * arguments are written as extra fixed-size records after the op's, so the
 * call costs one record per argument more; keys and string values are
 * interned (copied) during the call. */
LOOM_EXTERN void loom_op_begin_args(const char *name, uint64_t external_id,
                                    const loom_arg *args, uint32_t nargs);

/* Turns the raw bytes given to loom_op_begin_raw into arguments, when the
 * trace is collected rather than on every op.  raw/nraw: a copy of the bytes
 * the op was given.  Writes at most max_out arguments to out and returns how
 * many it wrote; string keys and values may point into buf (cap bytes,
 * cap >= LOOM_RAW_FORMAT_BUF) or at storage that lives until the call
 * returns: loom copies them before it calls again.  Called once per distinct
 * (format, raw bytes) per collected trace, on the thread that collects, with
 * no lock of the caller's held; it must not call loom. */
#define LOOM_RAW_FORMAT_BUF 65536
#define LOOM_RAW_MAX 1024 /* longest raw accepted by loom_op_begin_raw */
typedef uint32_t (*loom_raw_format_fn)(const void *raw, uint32_t nraw, char *buf, size_t cap,
                                       loom_arg *out, uint32_t max_out);

/* loom_op_begin_args with arguments described by raw bytes, formatted later:
 * the call copies nraw bytes (a compact encoding of, say, input shapes) and
 * the format pointer into the thread's records, with no formatting and no
 * string lookup, and the trace gets args followed by what format(raw)
 * returns (at most 16 arguments).  Identical raw bytes are formatted once per
 * trace.  format must stay callable, from any thread, until the session that
 * recorded the op is stopped and its trace collected: code that may be
 * unloaded before that must use loom_op_begin_args.  A raw longer than
 * LOOM_RAW_MAX is not kept (the op and args are).  Under the memory cap
 * the op is dropped whole (its args and raw never land without it). */
LOOM_EXTERN void loom_op_begin_raw(const char *name, uint64_t external_id, const loom_arg *args,
                                   uint32_t nargs, const void *raw, uint32_t nraw,
                                   loom_raw_format_fn format);

/* The external id of the innermost framework op open on the calling thread,
 * or 0 when none is open or no session records. */
LOOM_EXTERN uint64_t loom_op_current(void);

LOOM_EXTERN void loom_instant(const char *name);
LOOM_EXTERN void loom_counter(const char *name, double value);

/* Memory: an allocation (or a free) the program or a framework's allocator
 * made, recorded on the calling thread with the op and range open there
 * (docs/memory.md).  kind says what memory it is; device is -1 for host
 * memory, else the device's number as the framework numbers them (PyTorch's
 * device index; Kineto's "Device Id").  bytes: the size allocated; for a
 * free its size, or 0 when the caller does not know it (loom takes it from
 * the allocation at addr; a free of an address loom never saw allocated is
 * counted and shown, never dropped).  reserved: for a pool (a framework's
 * caching allocator), the bytes the pool holds from the runtime after this
 * call; 0 for memory that is not a pool's.  Costs one branch when no session
 * records the host. */
typedef enum loom_memory_kind {
  LOOM_MEMORY_HOST = 0,        /* host heap (malloc, a framework's CPU allocator) */
  LOOM_MEMORY_DEVICE = 1,      /* device-local memory */
  LOOM_MEMORY_HOST_PINNED = 2, /* page-locked host memory the device reads directly */
  LOOM_MEMORY_SHARED = 3,      /* shared, unified or SVM: migrates between host and device */
  LOOM_MEMORY_POOL = 4,        /* handed out by a framework's pool from memory it reserved */
  LOOM_MEMORY_KIND_COUNT_ = 5
} loom_memory_kind;
LOOM_EXTERN void loom_memory_alloc(uint64_t addr, uint64_t bytes, loom_memory_kind kind,
                                   int32_t device, uint64_t reserved);
LOOM_EXTERN void loom_memory_free(uint64_t addr, uint64_t bytes, loom_memory_kind kind,
                                  int32_t device, uint64_t reserved);

/* Marks the end of an iteration and the start of the next one (written as
 * "ProfilerStep#N" ranges on the calling thread). */
LOOM_EXTERN void loom_step(void);

/* Tells loom that the program's own step number `step` begins (a framework
 * that numbers its steps: PyTorch's ProfilerStep#N through loom's adapter).
 * Records nothing; recording windows by step (session options start_step,
 * steps, and the wait/warmup/active/repeat schedule) count with it.  Costs
 * one load when no window waits for steps. */
LOOM_EXTERN void loom_step_mark(uint64_t step);

/* Names a thread's track in the traces this process records: written as
 * "thread TID (NAME)", Kineto's thread label, in place of the OS thread name.
 * tid is a loom_thread_id of this process (gettid()), or 0 for the calling
 * thread.  name is copied; NULL or "" removes the name.  Not a recording
 * call (it takes a lock): name a thread once, at any time (before, during or
 * without a session); the name applies to every trace collected afterwards,
 * to all the thread's records, and outlives the thread (an id the OS gives
 * to a later thread keeps it until renamed). */
LOOM_EXTERN void loom_thread_name(uint64_t tid, const char *name);

/* Sets a metadata entry (a string) of every trace this process collects
 * from now on; the last value of a key wins, NULL removes it.  "rank",
 * "world_size" and "distributed_backend" become the trace's distributedInfo
 * (the PyTorch adapter sets them from torch.distributed's process group).
 * Takes a lock: not a recording call. */
LOOM_EXTERN loom_status loom_meta_set(const char *key, const char *value);

/* ==== the inline idle check ==============================================
 * Each recording call above is, in a program compiled with this header, an
 * inline function that loads loom_active_v1 and calls into libloom only
 * when a bit it needs is set: with no session recording a call costs a
 * load, a test and a branch not taken in the caller (NVTX's path with no
 * tool attached), not a call into a shared library.  The exported
 * functions stay, with their own check: a program compiled with an older
 * header, or one that takes their addresses or finds them with dlsym,
 * calls them and works as before.  docs/triggers.md: "The inline idle
 * check", and its cost in "Cost while waiting" (bench/bench_trigger_idle).
 *
 * loom_active_v1 is exported by libloom and written only by it.  Its bits
 * (version 1 of the flag, LOOM_ACTIVE_VERSION):
 *   LOOM_ACTIVE_HOST    the host records (a session with "cpu" records, in
 *                       ring mode, or inside a window in window mode): any
 *                       recording call may record
 *   LOOM_ACTIVE_STEPS   something counts steps (a session in window mode,
 *                       waiting for its window or in it): loom_step and
 *                       loom_step_mark
 *   LOOM_ACTIVE_MEMORY  the ledger of live allocations is kept (a session
 *                       in window or ring mode): loom_memory_alloc/_free
 * The contract: while the bits a call tests (HOST, and STEPS or MEMORY for
 * the calls named) are clear, the exported function does nothing
 * observable, so skipping it changes nothing.  Libraries may set bits this
 * header does not name; a header tests only its own.  A library that ever
 * needs a meaning these bits cannot carry exports loom_active_v2 beside
 * this flag and keeps loom_active_v1 all ones, so that programs compiled
 * with this header call every time and the library decides.
 *
 * The load is relaxed (no ordering), as libloom's own check is: a call made
 * while another thread starts or stops a session may be recorded or not,
 * whichever check it makes.
 *
 * Define LOOM_NO_INLINE_CHECK before including this header to call the
 * exported functions directly, with no reference to loom_active_v1: for a
 * program that must also run with a libloom older than the flag, or that
 * finds libloom only at run time (dlopen).  The macros below are
 * function-like: &loom_range_push and (loom_range_push)(x) still name the
 * exported function. */
#define LOOM_ACTIVE_VERSION 1
#define LOOM_ACTIVE_HOST 0x1u
#define LOOM_ACTIVE_STEPS 0x2u
#define LOOM_ACTIVE_MEMORY 0x4u
LOOM_EXTERN extern uint32_t loom_active_v1;

#if !defined(LOOM_NO_INLINE_CHECK) && !defined(LOOM_BUILDING_LIBRARY)
#if defined(__GNUC__) || defined(__clang__)
#define LOOM__ACTIVE(bits) \
  __builtin_expect((__atomic_load_n(&loom_active_v1, __ATOMIC_RELAXED) & (bits)) != 0, 0)
#else
#define LOOM__ACTIVE(bits) ((*(const volatile uint32_t *)&loom_active_v1 & (bits)) != 0)
#endif
#define LOOM__ON LOOM__ACTIVE(LOOM_ACTIVE_HOST)

static inline void loom__i_range_push(const char *name) {
  if (LOOM__ON) (loom_range_push)(name);
}
static inline void loom__i_range_push_id(loom_string_id name) {
  if (LOOM__ON) (loom_range_push_id)(name);
}
static inline void loom__i_range_push_str(const char *name) {
  if (LOOM__ON) (loom_range_push_str)(name);
}
static inline void loom__i_range_pop(void) {
  if (LOOM__ON) (loom_range_pop)();
}
static inline void loom__i_range_begin(uint64_t id, const char *name) {
  if (LOOM__ON) (loom_range_begin)(id, name);
}
static inline void loom__i_range_end(uint64_t id) {
  if (LOOM__ON) (loom_range_end)(id);
}
static inline void loom__i_op_begin(const char *name, uint64_t external_id) {
  if (LOOM__ON) (loom_op_begin)(name, external_id);
}
static inline void loom__i_op_begin_id(loom_string_id name, uint64_t external_id) {
  if (LOOM__ON) (loom_op_begin_id)(name, external_id);
}
static inline void loom__i_op_begin_args(const char *name, uint64_t external_id,
                                         const loom_arg *args, uint32_t nargs) {
  if (LOOM__ON) (loom_op_begin_args)(name, external_id, args, nargs);
}
static inline void loom__i_op_begin_raw(const char *name, uint64_t external_id,
                                        const loom_arg *args, uint32_t nargs, const void *raw,
                                        uint32_t nraw, loom_raw_format_fn format) {
  if (LOOM__ON) (loom_op_begin_raw)(name, external_id, args, nargs, raw, nraw, format);
}
static inline void loom__i_op_end(void) {
  if (LOOM__ON) (loom_op_end)();
}
static inline uint64_t loom__i_op_current(void) {
  return LOOM__ON ? (loom_op_current)() : 0;
}
static inline void loom__i_instant(const char *name) {
  if (LOOM__ON) (loom_instant)(name);
}
static inline void loom__i_counter(const char *name, double value) {
  if (LOOM__ON) (loom_counter)(name, value);
}
static inline void loom__i_memory_alloc(uint64_t addr, uint64_t bytes, loom_memory_kind kind,
                                        int32_t device, uint64_t reserved) {
  if (LOOM__ACTIVE(LOOM_ACTIVE_HOST | LOOM_ACTIVE_MEMORY))
    (loom_memory_alloc)(addr, bytes, kind, device, reserved);
}
static inline void loom__i_memory_free(uint64_t addr, uint64_t bytes, loom_memory_kind kind,
                                       int32_t device, uint64_t reserved) {
  if (LOOM__ACTIVE(LOOM_ACTIVE_HOST | LOOM_ACTIVE_MEMORY))
    (loom_memory_free)(addr, bytes, kind, device, reserved);
}
static inline void loom__i_step(void) {
  if (LOOM__ACTIVE(LOOM_ACTIVE_HOST | LOOM_ACTIVE_STEPS)) (loom_step)();
}
static inline void loom__i_step_mark(uint64_t step) {
  if (LOOM__ACTIVE(LOOM_ACTIVE_HOST | LOOM_ACTIVE_STEPS)) (loom_step_mark)(step);
}

#define loom_range_push(name) loom__i_range_push(name)
#define loom_range_push_id(name) loom__i_range_push_id(name)
#define loom_range_push_str(name) loom__i_range_push_str(name)
#define loom_range_pop() loom__i_range_pop()
#define loom_range_begin(id, name) loom__i_range_begin(id, name)
#define loom_range_end(id) loom__i_range_end(id)
#define loom_op_begin(name, ext) loom__i_op_begin(name, ext)
#define loom_op_begin_id(name, ext) loom__i_op_begin_id(name, ext)
#define loom_op_begin_args(name, ext, args, n) loom__i_op_begin_args(name, ext, args, n)
#define loom_op_begin_raw(name, ext, args, n, raw, nraw, fmt) \
  loom__i_op_begin_raw(name, ext, args, n, raw, nraw, fmt)
#define loom_op_end() loom__i_op_end()
#define loom_op_current() loom__i_op_current()
#define loom_instant(name) loom__i_instant(name)
#define loom_counter(name, value) loom__i_counter(name, value)
#define loom_memory_alloc(addr, bytes, kind, dev, res) \
  loom__i_memory_alloc(addr, bytes, kind, dev, res)
#define loom_memory_free(addr, bytes, kind, dev, res) \
  loom__i_memory_free(addr, bytes, kind, dev, res)
#define loom_step() loom__i_step()
#define loom_step_mark(step) loom__i_step_mark(step)
#endif /* !LOOM_NO_INLINE_CHECK */

/* ==== reports (`loom report`) ============================================
 * Analyses a trace file (any format loom_trace_load reads) in one streaming
 * pass: per-device and per-queue utilisation and idle time, kernel, transfer
 * and launch-latency statistics, overlap of compute / communication /
 * memory work, host ops and user ranges (self time, device time they
 * caused), steps, and Holistic Trace Analysis's figures by its definitions.
 * Memory is bounded by the results and a sort buffer, not by the trace.
 * Definitions and the JSON schema: docs/report.md. */
typedef struct loom_report loom_report;

typedef enum loom_report_format {
  LOOM_REPORT_TEXT = 0,  /* tables for people */
  LOOM_REPORT_JSON = 1,  /* schema "loom-report/1" */
  LOOM_REPORT_HTML = 2   /* one self-contained page with charts */
} loom_report_format;

typedef struct loom_report_options {
  loom_struct_size struct_size; /* sizeof(loom_report_options) */
  size_t top;                /* rows per table; 0 = all */
  size_t sort_memory;        /* bytes of records sorted in memory before they
                                spill to a temporary file; 0 = 256 MiB */
  int hta_include_last_step; /* HTA leaves the last ProfilerStep out; 1 keeps it */
  /* Further traces, one rank each, analysed across ranks with the first
   * (docs/report.md, "Ranks").  The per-trace sections describe the first
   * trace. */
  const char *const *more_traces;
  size_t nmore_traces;
  /* Waits shorter than this are noise, not wait states (docs/report.md,
   * "Ranks"); 0 = the default (1 ms), < 0 = every wait counts. */
  int64_t wait_threshold_ns;
  /* The critical path of every step and its bound (docs/report.md, "Critical path"):
   * 1 leaves it out.  critical_path_trace: also write the trace there (Chrome JSON) with
   * the paths marked, for Perfetto; it is loaded whole for that. */
  int no_critical_path;
  const char *critical_path_trace;
} loom_report_options;

/* opts may be NULL (defaults).  LOOM_EFORMAT / LOOM_EIO as loom_trace_load,
 * with the reason in loom_last_error. */
LOOM_EXTERN loom_status loom_report_open(const char *trace_path, const loom_report_options *opts,
                                         loom_report **out);
/* Writes the report to path (atomically), or to stdout for NULL or "-". */
LOOM_EXTERN loom_status loom_report_write(const loom_report *r, loom_report_format format,
                                          const char *path);
LOOM_EXTERN void loom_report_free(loom_report *r);

/* ==== comparing two runs (`loom diff`) ====================================
 * Two runs (each one trace, or one trace per rank: files or folders of
 * .json, .json.gz, .pftrace files) read through the report's streaming
 * pass, then compared per kernel, copy direction, fill, framework op, user
 * range, runtime call and wait: count, total, mean and p50 of both and
 * their differences, names that appear or disappear, steps and ranks side
 * by side.  A name is called slower or faster only when Mann-Whitney's U
 * test of its per-step times (its occurrences' when either run has fewer
 * than 5 steps) says so after Holm's correction over the names tested, and
 * the change is at least min_change of its base time and min_share of the
 * base run's time.  Memory: one report's at a time, plus the names and up
 * to 2^20 (name, step) cells per run.  Output formats as the report's
 * (JSON schema "loom-diff/1"); definitions in docs/report.md, "loom diff". */
typedef struct loom_diff loom_diff;

typedef struct loom_diff_options {
  loom_struct_size struct_size; /* sizeof(loom_diff_options) */
  size_t top;                /* rows per table; 0 = all */
  size_t sort_memory;        /* the report's sort budget per trace; 0 = 256 MiB */
  /* 1: compare only the step numbered base_step (ProfilerStep#N) of the
   * base run with new_step of the new one (HTA's TraceDiff iterations). */
  int steps_set;
  int64_t base_step, new_step;
  double alpha;              /* family-wise error rate of the tests; 0 = 0.01 */
  double min_change;         /* fraction of a name's base time; 0 = 0.10, < 0 = no minimum */
  double min_share;          /* fraction of the base run's time; 0 = 0.01, < 0 = no minimum */
} loom_diff_options;

/* base and newer: nbase and nnew paths (traces or folders of them, one
 * rank per trace).  opts may be NULL (defaults).  Errors as
 * loom_report_open; LOOM_EINVAL when a run has no traces or lacks the step
 * asked for, with the reason in loom_last_error. */
LOOM_EXTERN loom_status loom_diff_open(const char *const *base, size_t nbase,
                                       const char *const *newer, size_t nnew,
                                       const loom_diff_options *opts, loom_diff **out);
/* Writes the comparison to path (atomically), or to stdout for NULL or "-". */
LOOM_EXTERN loom_status loom_diff_write(const loom_diff *d, loom_report_format format,
                                        const char *path);
LOOM_EXTERN void loom_diff_free(loom_diff *d);

/* ==== merging traces of several processes and ranks ======================
 * One timeline from several traces (any format loom reads, also per-rank
 * Kineto traces): one process group per rank in rank order, every rank's
 * metadata and distributedInfo kept, clocks aligned from the sync points the
 * traces carry, ids made unique per input, point-to-point messages matched
 * into flows.  Streams through an external sort: memory is bounded by
 * sort_memory, not by the inputs.  Inputs that cannot be related in time are
 * merged unaligned with a warning that names them (also in the output). */
enum {
  LOOM_MERGE_F_NO_ALIGN = 1u << 0 /* keep every input's times as they are */
};
typedef struct loom_merge_config {
  uint32_t struct_size;        /* sizeof(loom_merge_config) */
  uint32_t ninputs;
  const char *const *inputs;   /* trace paths */
  const char *output;          /* .json, .json.gz, .pftrace or .pftrace.gz; atomic */
  uint64_t sort_memory;        /* bytes for the sort (at least 1 MiB);
                                  0 = 256 MiB */
  uint32_t flags;              /* LOOM_MERGE_F_* */
} loom_merge_config;
typedef struct loom_merge_result {
  uint32_t struct_size;        /* sizeof(loom_merge_result) */
  uint32_t processes;          /* process groups written */
  uint64_t events, flows;      /* written; flows: messages matched plus the
                                  inputs' flow starts carried over */
  uint64_t warnings;           /* warnings the output carries */
  /* read only when struct_size covers them: */
  uint64_t sort_runs;          /* sorted runs merged (inputs + spills) */
  uint64_t sort_spilled;       /* runs written to the temporary file */
  uint64_t sort_memory;        /* the sort budget used, bytes */
} loom_merge_result;
/* result may be NULL.  LOOM_EFORMAT / LOOM_EINVAL with a message naming the
 * input on bad input (not a trace, the same rank twice); nothing is written
 * then. */
LOOM_EXTERN loom_status loom_merge(const loom_merge_config *cfg, loom_merge_result *result);

/* ==== traces ============================================================= */
/* Writes the trace to path; the format is chosen by the extension (".json":
 * Chrome trace JSON in Kineto's conventions, ".json.gz" the same gzipped,
 * ".pftrace" Perfetto protobuf, ".pftrace.gz" the same gzipped, which
 * trace_processor and Perfetto UI open as it is).  The file is written to a
 * temporary name in the same folder and renamed, so no partial file is left
 * on failure (LOOM_EIO with the reason in loom_last_error). */
LOOM_EXTERN loom_status loom_trace_save(const loom_trace *t, const char *path);

/* Reads a trace file into a trace object: Chrome trace JSON as loom or
 * Kineto (PyTorch) write it, plain or gzip-compressed, or loom's Perfetto
 * protobuf (.pftrace, plain or gzip); the format is detected from the
 * content.  Memory is bounded by the trace model, not the file (streaming
 * parser).  LOOM_EFORMAT with the file name and byte offset in
 * loom_last_error for corrupt or truncated input; LOOM_EIO when it cannot be
 * read.  *out is the caller's (loom_trace_free). */
LOOM_EXTERN loom_status loom_trace_load(const char *path, loom_trace **out);

typedef struct loom_trace_summary {
  loom_struct_size struct_size; /* sizeof(loom_trace_summary) */
  uint64_t events;        /* slices, instants and counter samples */
  uint64_t flows;         /* host call -> device work links */
  uint64_t devices;       /* devices described by backends */
  uint64_t dropped;       /* records lost (buffer caps, backends) */
  uint64_t warnings;      /* warnings and errors reported */
  int64_t start_ns, end_ns; /* session window, Unix epoch ns */
} loom_trace_summary;

/* Fills *sum with counts over the trace.  sum->struct_size must be set. */
LOOM_EXTERN loom_status loom_trace_summarize(const loom_trace *t,
                                             loom_trace_summary *sum);
LOOM_EXTERN void loom_trace_free(loom_trace *t);

/* A read-only view of one event of a trace; strings are owned by the trace. */
typedef struct loom_event_view {
  loom_struct_size struct_size; /* sizeof(loom_event_view), set by the caller */
  const char *name;
  const char *category;     /* Kineto category: "kernel", "cpu_op", ... */
  loom_kind kind;
  char phase;               /* 'X' range, 'i' instant, 'C' counter, 'b' async */
  int64_t start_ns;         /* Unix epoch ns */
  int64_t dur_ns;
  int64_t pid, tid;         /* the event's track (loom_track_view): process or
                               device, and thread or queue, in the trace */
  uint64_t correlation;     /* (async ranges: their id) */
  uint64_t external_id;
  uint32_t device;          /* device index, or UINT32_MAX for host events */
  unsigned unclosed : 1;    /* range was still open at stop */
  unsigned projected : 1;   /* user range projected onto a device queue */
  unsigned roles : 13;      /* LOOM_RECORD_F_* marks of its record (plugin.h; the
                               memory marks _ALLOC and _FREE from 1.5) */
} loom_event_view;

/* Number of events, and event i (LOOM_EINVAL past the end).  Events are
 * ordered by track, then start time. */
LOOM_EXTERN size_t loom_trace_event_count(const loom_trace *t);
LOOM_EXTERN loom_status loom_trace_event(const loom_trace *t, size_t i,
                                         loom_event_view *out);
/* Flows (host call -> device work) as pairs of event indices. */
LOOM_EXTERN size_t loom_trace_flow_count(const loom_trace *t);
LOOM_EXTERN loom_status loom_trace_flow(const loom_trace *t, size_t i,
                                        size_t *from, size_t *to);
/* Warnings recorded in the trace (NULL past the end). */
LOOM_EXTERN size_t loom_trace_warning_count(const loom_trace *t);
LOOM_EXTERN const char *loom_trace_warning(const loom_trace *t, size_t i);

/* The devices a trace describes (its backends' device descriptions, or a
 * loaded trace's device processes); strings are owned by the trace, "" when
 * not known. */
typedef struct loom_device_view {
  loom_struct_size struct_size; /* sizeof(loom_device_view), set by the caller */
  const char *name;         /* "pthread-Intel(R) Core...", "NVIDIA H100" */
  const char *vendor;
  const char *type;         /* "GPU", "CPU", ... as the backend says */
  const char *device_type;  /* the session's device type: "opencl", "cuda" */
  const char *backend;      /* the backend that described it */
  int64_t pid;              /* the device's process id in the trace */
} loom_device_view;

/* Number of devices, and device i (LOOM_EINVAL past the end). */
LOOM_EXTERN size_t loom_trace_device_count(const loom_trace *t);
LOOM_EXTERN loom_status loom_trace_device(const loom_trace *t, size_t i,
                                          loom_device_view *out);

/* The rest of a trace's model, for code that hands a trace to another
 * profiler (the Kineto bridge, bridges/kineto): each event's typed
 * arguments, the processes and tracks with their names, and the metadata.
 * Strings are owned by the trace. */

/* The typed arguments of event i: copies at most max of them to out (key
 * and v.s point into the trace) and returns how many the event has (0 past
 * the end), so out may be NULL with max 0 to count them.  A nested value
 * read from a file comes as a LOOM_ARG_STRING holding its JSON text. */
LOOM_EXTERN size_t loom_trace_event_args(const loom_trace *t, size_t i, loom_arg *out,
                                         size_t max);

/* A process of the trace: the host process or one device. */
typedef struct loom_process_view {
  loom_struct_size struct_size; /* sizeof(loom_process_view), set by the caller */
  int64_t pid;              /* a device's index, or the host's OS pid */
  const char *name;         /* "opencl 0", the program's name; "" if none */
  const char *labels;       /* the device's name, "CPU"; "" if none */
  int32_t sort;             /* position among processes (smaller first) */
} loom_process_view;
LOOM_EXTERN size_t loom_trace_process_count(const loom_trace *t);
LOOM_EXTERN loom_status loom_trace_process(const loom_trace *t, size_t i,
                                           loom_process_view *out);

/* A track: a host thread or a device queue (or a lane of one), the (pid,
 * tid) that events carry. */
typedef struct loom_track_view {
  loom_struct_size struct_size; /* sizeof(loom_track_view), set by the caller */
  int64_t pid, tid;
  const char *name;         /* "thread 12 (main)", "queue 1", "queue 1 lane 2"; "" */
  uint32_t device;          /* device index, or UINT32_MAX for a host thread */
  int32_t sort;             /* position among its process's tracks */
} loom_track_view;
LOOM_EXTERN size_t loom_trace_track_count(const loom_trace *t);
LOOM_EXTERN loom_status loom_trace_track(const loom_trace *t, size_t i,
                                         loom_track_view *out);

/* Metadata entry i of the trace (loom_meta_set's, backends', the
 * session's), LOOM_EINVAL past the end. */
LOOM_EXTERN size_t loom_trace_meta_count(const loom_trace *t);
LOOM_EXTERN loom_status loom_trace_meta(const loom_trace *t, size_t i, const char **key,
                                        const char **value);

/* A memory event of a trace (LOOM_KIND_MEMORY, docs/memory.md) with what
 * loom works out for it, the same figures as `loom report`'s memory
 * section: the op and user range open on its thread, the step it fell in,
 * and the bytes in use (and reserved) of its device and memory kind after
 * it.  Strings are owned by the trace; "" when none. */
typedef struct loom_memory_view {
  loom_struct_size struct_size; /* sizeof(loom_memory_view) in the library */
  size_t event;             /* its index (loom_trace_event) */
  int64_t ts_ns;            /* Unix epoch ns */
  int64_t device;           /* the device's pid in the trace; -1 for host memory */
  const char *kind;         /* "host", "device", "host_pinned", "shared", "pool", ... */
  const char *call;         /* the call that allocated or freed */
  const char *op;           /* innermost framework op open on its thread */
  const char *range;        /* innermost user range (not a step) open on its thread */
  const char *step;         /* the step (ProfilerStep#N) it fell in */
  const char *alloc_op;     /* a free: the op that allocated what it frees */
  uint64_t addr;
  int64_t bytes;            /* > 0 allocated; < 0 freed (a free that did not say its
                               size: its allocation's) */
  uint64_t allocated;       /* bytes in use of its device and kind after it */
  uint64_t reserved;        /* a pool's reserved bytes after it (0: not a pool's) */
  unsigned is_free : 1;
  unsigned live_at_start : 1; /* live at the window's start, not allocated in it */
  unsigned unknown : 1;     /* a free of an address never seen allocated: counted,
                               nothing in use changes */
} loom_memory_view;
/* Returns non-zero to stop. */
typedef int (*loom_memory_visit_fn)(const loom_memory_view *v, void *user);
/* Calls fn for every memory event of t in time order (ties: trace order).
 * LOOM_OK (also when fn stopped it), LOOM_EINVAL, LOOM_ENOMEM. */
LOOM_EXTERN loom_status loom_trace_memory(const loom_trace *t, loom_memory_visit_fn fn,
                                          void *user);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_LOOM_H */
