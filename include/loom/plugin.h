/*
 * plugin.h - the backend ABI of loom: how a backend is written, registered
 * and versioned.  This header is its manual; docs/writing-a-backend.md walks
 * through an example.
 *
 * A backend connects one device runtime (OpenCL, Level Zero, CUPTI, a
 * simulator, a vendor's own) to loom.  It is a const table of operations
 * (loom_backend_ops) registered with the core, built in or shipped as a shared
 * library.  The core hands it a size-stamped table of services (loom_host):
 * clocks, string interning, devices and resources, the record sink, loss
 * counts, warnings, configuration and logging.  A backend only emits raw
 * records; the core converts clocks, links host calls to device work, attaches
 * framework ops, projects ranges and writes every output format.
 *
 * This header is plain C and depends on nothing but loom.h and the C library,
 * so a backend compiles with any C compiler against the installed headers.
 *
 * Contents: versioning rules and LOOM_HOST_HAS; clocks; records; devices;
 * the host services (loom_host) and from which thread each may be called;
 * backend state; the operations (loom_backend_ops), which of them are
 * mandatory and when the core calls them; the plug-in entry point.
 *
 * Versioning rules:
 *  - LOOM_ABI_MAJOR changes only when an existing field or slot changes
 *    meaning; the core refuses a backend with another major version, and a
 *    backend's entry should refuse a host table of another major
 *    (host->abi_major != LOOM_ABI_MAJOR: return LOOM_EABI).
 *  - LOOM_ABI_MINOR grows when fields or slots are appended.  Every struct
 *    crossing the boundary starts with its size (a uint32_t struct_size);
 *    each side reads only the fields that fit in the size the other side
 *    declared.  The core accepts ops tables of every minor of its major; a
 *    backend calls a host slot appended after ABI 1.0 only when
 *    LOOM_HOST_HAS(host, slot) says the core's table holds it.
 *  - Fields are only appended, never moved or retyped; enum values are never
 *    renumbered and retired ones keep their number.
 */
#ifndef LOOM_PLUGIN_H
#define LOOM_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_ABI_MAJOR 1
/* What each minor appended: 1.1 loom_host.clock_set_rate, clock_auto_sync,
 * meta_set, loom_backend_ops.enable and the LOOM_RECORD_F_* marks; 1.2
 * LOOM_KIND_SAMPLE; 1.3 loom_backend_ops.options; 1.4 loom_host.recorder_now
 * and the name loom_record.tid for what host records carry in `resource`;
 * 1.5 LOOM_KIND_MEMORY with the marks LOOM_RECORD_F_ALLOC and _FREE; 1.6
 * loom_host.memory and loom_memory_event; 1.7 loom_host.call. */
#define LOOM_ABI_MINOR 7

/* True when the host table `host` (a const loom_host *) is large enough to
 * hold `slot` and the slot is set: the check to make before calling any slot
 * appended after ABI 1.0 (those under "ABI 1.1" and later in loom_host).  It
 * is the test the core applies to a backend's tables: the slot's offset plus
 * its size within the struct_size the other side declared. */
#define LOOM_HOST_HAS(host, slot)                                                        \
  ((host)->struct_size >= offsetof(loom_host, slot) + sizeof((host)->slot) &&           \
   (host)->slot != NULL)

/* Opaque handle of one registered backend, passed to every operation and
 * given back to every host service. */
typedef struct loom_backend loom_backend;
struct loom_backend_ops;

/* ---- clocks ------------------------------------------------------------- */
typedef enum loom_clock_domain {
  LOOM_CLOCK_MONOTONIC = 0,     /* clock_gettime(CLOCK_MONOTONIC), ns */
  LOOM_CLOCK_MONOTONIC_RAW = 1, /* clock_gettime(CLOCK_MONOTONIC_RAW), ns */
  LOOM_CLOCK_REALTIME = 2,      /* clock_gettime(CLOCK_REALTIME), ns */
  LOOM_CLOCK_TSC = 3,           /* the CPU's time-stamp counter, ticks */
  LOOM_CLOCK_DEVICE = 4         /* a device clock described by sync points */
} loom_clock_domain;

/* A declared clock of a backend (index, 0 is never valid). */
typedef uint32_t loom_clock;

/* ---- arguments and records ---------------------------------------------- */
/* loom_arg, loom_arg_type, loom_string_id and loom_thread_id are defined in
 * loom.h. */

#define LOOM_DEVICE_HOST UINT32_MAX /* record happened on a host thread */

/* One record as a backend emits it.  The core copies it (and its args) during
 * emit, so the record and its arguments may live on the caller's stack.
 *
 * Where a record goes is said by `device`, and the four bytes after it have
 * one meaning for each of the two cases, under two names:
 *  - a device record (device = an index from device_add) sets `resource`:
 *    the index resource_add gave for its queue or stream on that device;
 *  - a host record (device = LOOM_DEVICE_HOST) sets `tid`: the OS thread it
 *    happened on (host->thread_id() on that thread), or 0 for the thread
 *    calling emit.  A backend that emits later from another thread stores
 *    host->thread_id() when the call happens.
 * The two names share their bytes (an anonymous union: the layout is that
 * of ABI 1.0, where the field was `resource` alone); set the one that
 * matches `device`. */
typedef struct loom_record {
  uint32_t struct_size;   /* sizeof(loom_record) */
  uint16_t kind;          /* loom_kind */
  uint16_t flags;         /* LOOM_RECORD_F_* (ABI 1.1; 0 before) */
  loom_clock clock;       /* the declared clock of start and end */
  uint32_t device;        /* device index from device_add, or LOOM_DEVICE_HOST */
  union {
    uint32_t resource;    /* device records: resource index from resource_add */
    loom_thread_id tid;   /* host records: OS thread id, 0 = the caller of emit */
  };
  uint64_t start, end;    /* in `clock`; end == start for instants */
  loom_string_id name;    /* from host->intern */
  uint32_t nargs;
  uint64_t correlation;   /* links a host runtime call and its device work */
  uint64_t external_id;   /* framework op; 0 lets the core find it */
  const char *category;   /* optional category override, NULL for default */
  const loom_arg *args;   /* nargs typed arguments, or NULL */
} loom_record;

/* Report vocabulary that travels with the data (ABI 1.1): what a record is
 * for, so `loom report` understands any runtime without knowing its names.
 * The trace keeps these marks in every format.  Copies (LOOM_KIND_MEMCPY)
 * and fills also take two reserved arguments the report reads: "bytes"
 * (uint) and "direction" (string: "HtoD", "DtoH", "DtoD", "HtoH", "PtoP"). */
enum {
  LOOM_RECORD_F_LAUNCH = 1u << 0, /* runtime call that enqueues device compute */
  LOOM_RECORD_F_MEMORY = 1u << 1, /* runtime call that enqueues a copy or fill */
  LOOM_RECORD_F_COMM = 1u << 2,   /* device work, collective or call that communicates */
  /* Message passing (appended; a core that predates them ignores them): what
   * a communication call does, so `loom report` finds Scalasca's wait states
   * from its arguments (docs/multirank.md) whatever the runtime calls it. */
  LOOM_RECORD_F_SEND = 1u << 3,       /* sends a message: "dst", "tag", "comm" */
  LOOM_RECORD_F_RECV = 1u << 4,       /* completes a receive: "src", "recv_tag", "comm";
                                         an instant: at the end of the call that did */
  LOOM_RECORD_F_POST = 1u << 5,       /* posts a nonblocking receive: "request" */
  LOOM_RECORD_F_WAIT = 1u << 6,       /* blocks until a partner acts (a synchronous
                                         send, a wait for requests; not a test) */
  LOOM_RECORD_F_BARRIER = 1u << 7,    /* collective, "comm", "seq": all wait for the last */
  LOOM_RECORD_F_NXN = 1u << 8,        /* the same with data (allreduce, alltoall...) */
  LOOM_RECORD_F_ONE_TO_ALL = 1u << 9, /* from "root": the others wait for it (bcast) */
  LOOM_RECORD_F_ALL_TO_ONE = 1u << 10, /* to "root": it waits for the first (reduce) */
  /* Memory (ABI 1.5): a LOOM_KIND_MEMORY record carries one of these. */
  LOOM_RECORD_F_ALLOC = 1u << 11, /* allocates "bytes" at "addr" */
  LOOM_RECORD_F_FREE = 1u << 12   /* frees what was allocated at "addr" */
};

/* A memory record (LOOM_KIND_MEMORY, ABI 1.5): an instant (start == end) on
 * the host thread whose call allocated or freed (device LOOM_DEVICE_HOST,
 * tid as other host records), named after that call ("clCreateBuffer",
 * "zeMemFree"), marked LOOM_RECORD_F_ALLOC or LOOM_RECORD_F_FREE; external_id
 * 0 lets the core give it the framework op open on the thread, as runtime
 * calls get.  Reserved arguments the core reads:
 *   "addr"        uint, mandatory: the address or handle; a free names what
 *                 it frees by it (one runtime's handles never meet another's:
 *                 the core keys them by backend)
 *   "bytes"       uint: the size; mandatory on an allocation; on a free
 *                 optional (the core takes it from the allocation; a free of
 *                 an address it never saw allocated is counted, not dropped)
 *   "device"      uint: the device index (device_add) the memory lives on;
 *                 absent for host memory
 *   "memory_kind" string: "device", "host_pinned", "shared", "pool" or
 *                 "host" (loom_memory_kind's names); absent: "device" with
 *                 "device" set, else "host"
 *   "reserved"    uint, optional: a pool's bytes reserved from its runtime
 *                 after this call (PyTorch's reserved beside allocated)
 * A buffer that is a view of another (an OpenCL sub-buffer) is not an
 * allocation: emit nothing for it, so no byte is counted twice. */

/* A memory record in fixed fields (ABI 1.6): what host->memory takes, the
 * same record as a LOOM_KIND_MEMORY loom_record with its reserved arguments
 * (above), without building them. */
typedef struct loom_memory_event {
  uint32_t struct_size;  /* sizeof(loom_memory_event) */
  uint16_t flags;        /* LOOM_RECORD_F_ALLOC or LOOM_RECORD_F_FREE */
  uint16_t kind;         /* loom_memory_kind (loom.h): "memory_kind" */
  loom_clock clock;      /* the declared clock of ts */
  uint32_t device;       /* "device": an index from device_add, or
                            LOOM_DEVICE_HOST for host memory (no "device") */
  loom_string_id name;   /* the call, from host->intern */
  uint32_t heap;         /* "heap" + 1: the runtime's memory heap it is in
                            (Vulkan's heap index); 0: none */
  uint64_t ts;           /* when, in `clock` */
  uint64_t addr;         /* "addr" */
  uint64_t bytes;        /* "bytes"; on a free 0 when not known */
  uint64_t reserved;     /* "reserved"; 0: none (not a pool's) */
} loom_memory_event;

/* Description of a device.  Strings and props are copied by the core. */
typedef struct loom_device_info {
  uint32_t struct_size; /* sizeof(loom_device_info) */
  uint32_t nprops;
  const char *name;     /* "NVIDIA H200", "pthread-..." */
  const char *vendor;
  const char *type;     /* "gpu", "cpu", "accelerator", ... */
  const loom_arg *props;/* extra properties (memory, compute units, ...) */
} loom_device_info;

typedef enum loom_severity {
  LOOM_SEV_DEBUG = 0, /* log only, when LOOM_LOG=debug */
  LOOM_SEV_INFO = 1,  /* log only */
  LOOM_SEV_WARNING = 2, /* stderr and trace metadata */
  LOOM_SEV_ERROR = 3    /* stderr and trace metadata */
} loom_severity;

/* ---- services the core provides ----------------------------------------- */
/*
 * Which service may be called from which thread.  Every service is safe to
 * call from several threads at once (each takes the backend's lock or none);
 * what differs is when it is valid.  "In a session" means from the moment a
 * session takes the backend (just before probe) until the backend's flush
 * returns; outside that, a service that needs a session returns LOOM_ESTATE.
 *
 *   service                             thread      valid
 *   backend_register                    any         always, also before
 *                                                   loom_init and from a
 *                                                   constructor inside dlopen
 *   clock_now, recorder_now, intern,    any         always (clock_now is also
 *   external_id_current, thread_id,                 safe in a signal
 *   state                                           handler)
 *   emit, count_lost                    any         emit in a session (after
 *                                                   flush: counted lost);
 *                                                   count_lost always (outside
 *                                                   a session: a warning)
 *   report, vreport                     any         always (outside a session
 *                                                   the message waits for the
 *                                                   next session's trace)
 *   clock_declare, clock_sync,          any         in a session; clocks,
 *   clock_set_rate, clock_auto_sync,                devices and resources
 *   clock_to_epoch_ns, device_add,                  belong to that session
 *   resource_add, meta_set                          (declare them in configure
 *                                                   or start)
 *   config_get                          any         always; session options
 *                                                   from probe on, else the
 *                                                   environment; the string
 *                                                   lives until the session
 *                                                   is destroyed
 *
 * The core calls the backend's operations (probe ... destroy) one at a time,
 * on the thread that calls the session API (a late join: the registering
 * thread), never two at once and never with a core lock held except during
 * a late join.  push_external and pop_external run on application threads,
 * concurrently.  A clock_auto_sync read() runs with no core lock held.
 */
typedef struct loom_host {
  uint32_t struct_size;   /* sizeof(loom_host) as the core built it */
  uint16_t abi_major, abi_minor;

  /* Registers a backend.  Valid at any time and from any thread.  A backend
   * registered while a session records joins that session at once when it
   * asked for the backend's device type (or "all"): the core probes,
   * configures and starts it in the registering thread.  The table must stay
   * valid until the process exits.  Registering the same table twice is a
   * no-op returning LOOM_OK.  LOOM_EABI on a major mismatch or a table
   * smaller than ABI 1.0's (tables of every minor are accepted). */
  loom_status (*backend_register)(const struct loom_backend_ops *ops,
                                  const char *origin);

  /* Clocks.  clock_declare declares a clock in a standard domain, or a
   * device clock (LOOM_CLOCK_DEVICE) whose relation to a host domain is given
   * by clock_sync points: one point is an offset, two or more give a linear
   * fit, so drift is interpolated (with one point the rate comes from
   * clock_set_rate, else the clock is taken to tick in ns and the trace
   * warns).  A device clock with no point is a warning too.  Clocks belong
   * to the current session. */
  loom_status (*clock_declare)(loom_backend *b, loom_clock_domain domain,
                               const char *name, loom_clock *out);
  loom_status (*clock_sync)(loom_backend *b, loom_clock clk, uint64_t device_ts,
                            loom_clock_domain host_domain, uint64_t host_ts);
  /* The current time in a standard domain. */
  uint64_t (*clock_now)(loom_clock_domain domain);
  /* Converts a timestamp of a declared clock to Unix epoch ns on the session
   * timeline (what the trace will show). */
  int64_t (*clock_to_epoch_ns)(loom_backend *b, loom_clock clk, uint64_t ts);

  /* Interns a string (len bytes, or up to NUL when len is SIZE_MAX). */
  loom_string_id (*intern)(loom_backend *b, const char *s, size_t len);

  /* Devices and resources (queues, streams) of the current session. */
  loom_status (*device_add)(loom_backend *b, const loom_device_info *info,
                            uint32_t *out_device);
  loom_status (*resource_add)(loom_backend *b, uint32_t device,
                              const char *name, uint64_t native_id,
                              uint32_t *out_resource);

  /* The record sink: copies *r.  Accepted from any thread from the moment a
   * session takes the backend (just before probe) until its flush returns;
   * LOOM_ESTATE outside that (after flush the record is also counted lost).
   * Records and args count against the session's backend_memory_cap: past
   * it, LOOM_ENOMEM and the record is counted lost ("backend memory cap"). */
  loom_status (*emit)(loom_backend *b, const loom_record *r);

  /* Records the backend (or its runtime) lost; reported in the trace. */
  void (*count_lost)(loom_backend *b, uint64_t n, const char *reason);

  /* Warnings and errors reach stderr and the trace metadata; debug and info
   * go to the log only. */
  void (*report)(loom_backend *b, loom_severity sev, const char *fmt, ...);
  void (*vreport)(loom_backend *b, loom_severity sev, const char *fmt,
                  va_list ap);

  /* Session option (see loom_session_config.options), else the environment
   * variable LOOM_<KEY> ('.' and '-' become '_'), else NULL.  Valid from
   * probe on. */
  const char *(*config_get)(loom_backend *b, const char *key);

  /* The external id of the framework op open on the calling thread, or 0. */
  uint64_t (*external_id_current)(void);
  /* The calling thread's OS id (what host records carry in `tid`). */
  loom_thread_id (*thread_id)(void);
  /* The private state the core allocated for the backend (state_size). */
  void *(*state)(loom_backend *b);

  /* ---- ABI 1.1 (check LOOM_HOST_HAS before calling) ---- */
  /* Declares the tick rate of a device clock: ns_per_tick (1000 for a clock
   * in us).  With a rate, one sync point is enough; with two or more the
   * fit is used and the rate only checks it (a warning past 1%).
   * LOOM_EINVAL for <= 0 or a clock that is not LOOM_CLOCK_DEVICE. */
  loom_status (*clock_set_rate)(loom_backend *b, loom_clock clk,
                                double ns_per_tick);
  /* Asks the core to take sync points itself: it calls read(b, ctx) for
   * the device time and reads host_domain at once, at start, at stop and
   * before flush (and when the backend joins a running session); called
   * while recording, it also takes one point at once.  Each point reads the
   * host domain on both sides of read() a few times (7) and keeps the
   * narrowest bracket's midpoint, so read must be cheap and repeatable.
   * read runs with no core lock held. */
  loom_status (*clock_auto_sync)(loom_backend *b, loom_clock clk,
                                 uint64_t (*read)(loom_backend *b, void *ctx),
                                 void *ctx, loom_clock_domain host_domain);
  /* Sets a metadata entry of the current session's trace (copied; the last
   * value of a key wins).  "rank", "world_size" and "distributed_backend"
   * become the trace's distributedInfo.  Valid from configure to flush. */
  loom_status (*meta_set)(loom_backend *b, const char *key, const char *value);

  /* ---- ABI 1.4 (check LOOM_HOST_HAS before calling) ---- */
  /* The current time in the clock domain of loom's own host records (the
   * recorder of loom_range_push, loom_op_begin, ...), and that domain in
   * *domain when domain is not NULL: LOOM_CLOCK_TSC where the CPU's
   * time-stamp counter ticks at a constant rate and LOOM_NO_TSC is unset,
   * else LOOM_CLOCK_MONOTONIC.  The domain is fixed for the process, so a
   * backend declares its host clock in it once and stamps host calls with
   * this service: its records then share the recorder's clock and cost.
   * Without this slot (an older core) use clock_now in a domain of your
   * choice. */
  uint64_t (*recorder_now)(loom_clock_domain *domain);

  /* ---- ABI 1.6 (check LOOM_HOST_HAS before calling) ---- */
  /* Records an allocation or a free (*m) made on the calling thread: the
   * record emit would take as a LOOM_KIND_MEMORY record with its arguments
   * (device LOOM_DEVICE_HOST, tid 0, external_id 0), at the cost of one of
   * loom's own host records.  When m->clock is a clock the backend declared
   * in the recorder's domain (recorder_now) and the session records the
   * host, the record goes straight into the calling thread's buffer of host
   * records (no lock; in shared memory under `loom record`, so it outlives
   * a killed process); otherwise it takes emit's way.  Same contract as
   * emit: valid in a session; LOOM_EINVAL for a record emit refuses (its
   * marks, its kind); a "device" that is not one of the backend's is left
   * out and counted when the trace is made.  Call it on the thread that
   * made the call (a record made later on another thread goes through
   * emit, with its tid). */
  loom_status (*memory)(loom_backend *b, const loom_memory_event *m);

  /* ---- ABI 1.7 (check LOOM_HOST_HAS before calling) ---- */
  /* Records a host-side call of the runtime that the calling thread just
   * made: the record emit would take, at the cost of one of loom's own host
   * records.  When r is a call loom can hold in one host record (kind
   * LOOM_KIND_RUNTIME, _DRIVER or _SYNC; device LOOM_DEVICE_HOST; tid 0; no
   * arguments, category or external_id; marks among LOOM_RECORD_F_LAUNCH
   * to _NXN; end >= start; clock a clock the backend declared in the
   * recorder's domain, see recorder_now) and the session records the host,
   * the record goes straight into the calling thread's buffer of host
   * records: no lock, in shared memory under `loom record` (it outlives a
   * killed process, and in ring mode it lives in the thread's ring).  Any
   * other record takes emit's way, with emit's result.  The trace holds the
   * same event either way (its correlation links it to device work emitted
   * later; its external id is the enclosing op's).  Call it on the thread
   * that made the call. */
  loom_status (*call)(loom_backend *b, const loom_record *r);
} loom_host;

/* ---- backend state -------------------------------------------------------
 * Each operation receives the backend's handle (loom_backend *b) and
 * host->state(b) gives the block of state_size bytes the core allocated for
 * it at registration: zeroed, never moved, never freed.  A backend whose
 * every entry point receives b keeps its state there.
 *
 * A runtime's callbacks (a layer's wrapped calls, an injection library's
 * hooks, PMPI wrappers) receive no loom context.  A backend with such
 * callbacks follows one pattern, as every backend in loom does:
 *  - two file-scope pointers, `<prefix>_host` (the loom_host table, set in
 *    the plug-in's entry before backend_register) and `<prefix>_self` (the
 *    handle, set by the first operation the core calls: probe, and
 *    configure and start as well, since the handle is the same in every
 *    session they only ever store the same value);
 *  - both written before the backend's own "recording" flag is set in start
 *    and never cleared, so a callback that sees the flag set may use them;
 *  - the rest of its state file-scope too, guarded by its own locks or
 *    atomics, or in the state block reached as <prefix>_host->state(<prefix>_self).
 */


/* ---- the backend's operations ------------------------------------------- */
enum {
  /* The table is a cheap stub: its runtime is loaded in probe/configure
   * only when a session asks for its device type.  Informational: the core
   * never probes at registration anyway; `loom backends` shows it. */
  LOOM_BACKEND_F_LAZY = 1u << 0
};

/* How `loom record` enables a backend in the program it runs (ABI 1.1).
 * loom record loads every plug-in it finds, reads this from each table and
 * applies it; it names no runtime itself. */
enum {
  LOOM_ENV_SET_IF_UNSET = 0, /* set unless the user already set it */
  LOOM_ENV_OVERRIDE = 1,     /* always set */
  LOOM_ENV_PREPEND_PATH = 2  /* prepend to a ':'-separated list */
};
typedef struct loom_env_setting {
  const char *name;
  /* "$SELF" in value is replaced by the plug-in file's path and "$DIR" by
   * its folder. */
  const char *value;
  uint32_t how;              /* LOOM_ENV_* */
} loom_env_setting;

enum {
  /* Record this backend's device type when the user names no --devices
   * (subject to default_check below). */
  LOOM_ENABLE_F_DEFAULT = 1u << 0,
  /* Put the plug-in file itself into LD_PRELOAD of the program (runtimes
   * intercepted by symbol interposition). */
  LOOM_ENABLE_F_PRELOAD_SELF = 1u << 1,
  /* Do not load the plug-in in the program through LOOM_PLUGINS (which
   * loom record does by default for every plug-in it finds): for a file
   * that only its runtime may load. */
  LOOM_ENABLE_F_NO_PLUGIN_LOAD = 1u << 2,
  /* Put the plug-in file itself into LD_PRELOAD only when the program is
   * recorded with the backend's device type (--devices names it, or "all"):
   * an interposer that must cost nothing unless asked for (the host heap's).
   * ABI 1.5; a loom record that predates it never preloads the file. */
  LOOM_ENABLE_F_PRELOAD_WHEN_ASKED = 1u << 3
};
typedef struct loom_backend_enable {
  uint32_t struct_size;      /* sizeof(loom_backend_enable) */
  uint32_t flags;            /* LOOM_ENABLE_F_* */
  const loom_env_setting *env; /* settings for the profiled program */
  uint32_t nenv;
  /* Files to LD_PRELOAD into the program, relative to the plug-in's folder
   * unless absolute; NULL-terminated; may be NULL. */
  const char *const *preload;
  /* Optional cheap check in the loom record process: is the runtime
   * installed here?  Decides LOOM_ENABLE_F_DEFAULT; NULL = yes. */
  int (*default_check)(void);
} loom_backend_enable;

/* One option a backend reads through host->config_get (ABI 1.3). */
typedef struct loom_option_desc {
  const char *key;  /* the whole key, its backend's name first: "mydev.queue_depth" */
  const char *help; /* one line: what it does, its values and default */
} loom_option_desc;

/* A backend's table.  Mandatory: struct_size, abi_major, name and
 * device_type (non-empty strings), start and stop; the registry refuses a
 * table without any of them (LOOM_EINVAL, a warning naming the first one
 * missing) or one smaller than an ABI 1.0 table (up to pop_external).  Every
 * other field and slot is optional: NULL or 0 means "not supported" or
 * "nothing to do", and the core checks before each call.  The table must
 * stay valid until the process exits (make it static const).
 *
 * Every operation returns LOOM_OK or another loom_status; on failure it
 * should call host->report with the reason first.  When the core calls
 * them, and what a failure does, is in docs/writing-a-backend.md, section 3:
 * probe and configure at loom_session_create, start at loom_session_start,
 * stop then flush at loom_session_stop, destroy at loom_session_destroy; a
 * failing backend is left out with a warning and the session goes on. */
typedef struct loom_backend_ops {
  uint32_t struct_size;     /* sizeof(loom_backend_ops) */
  uint16_t abi_major;       /* LOOM_ABI_MAJOR */
  uint16_t abi_minor;       /* LOOM_ABI_MINOR */
  const char *name;         /* mandatory: unique backend name */
  const char *device_type;  /* mandatory: the device type it serves */
  uint32_t kinds;           /* LOOM_KIND_BIT mask of what it can emit */
  uint32_t flags;           /* LOOM_BACKEND_F_* */
  /* Bytes of private state (host->state): allocated zeroed at registration,
   * kept across sessions until the process exits. */
  size_t state_size;
  /* Category of LOOM_KIND_RUNTIME / DRIVER records ("opencl_runtime"); NULL
   * gives "<device_type>_runtime" and "<device_type>_driver". */
  const char *runtime_category;
  const char *driver_category;

  /* Is the runtime usable here?  Called by the first session that asks for
   * the device type (and by later ones until it succeeds), never at
   * registration: a lazy stub loads its runtime here.  Must not start
   * recording.  On failure write the reason into why (why_len bytes). */
  loom_status (*probe)(loom_backend *b, char *why, size_t why_len);
  /* Session settings: the requested kinds.  Options via host->config_get.
   * Declare clocks and add devices here or in start. */
  loom_status (*configure)(loom_backend *b, uint32_t kinds);
  /* Mandatory: begin recording (take a first sync point here). */
  loom_status (*start)(loom_backend *b);
  /* Mandatory: end recording; records still buffered are emitted by flush. */
  loom_status (*stop)(loom_backend *b);
  /* Emit every record still held (called after stop, before processing). */
  loom_status (*flush)(loom_backend *b);
  /* Session over: release per-session resources.  May be NULL. */
  void (*destroy)(loom_backend *b);

  /* Optional (NULL = not supported): the core calls these when a framework
   * op begins/ends on the calling thread, for runtimes that keep their own
   * external correlation stack.  Called on the app's hot path: keep them
   * cheap.  A pop may come without its push (an op begun before start). */
  void (*push_external)(loom_backend *b, uint64_t external_id);
  void (*pop_external)(loom_backend *b);

  /* ---- ABI 1.1 ---- */
  /* How loom record enables it; NULL = nothing beyond loading the plug-in. */
  const loom_backend_enable *enable;

  /* ---- ABI 1.3 ---- */
  /* The options it reads, ended by {NULL, NULL}; NULL = not declared.  When
   * declared, a session option "<name>.KEY" that is none of them fails the
   * session (loom_session_create: LOOM_EINVAL naming the known ones) and
   * `loom record` before the program starts; `loom backends` lists them. */
  const loom_option_desc *options;
} loom_backend_ops;

/* ---- plug-in entry point ------------------------------------------------ */
/* A plug-in shared library exports this symbol; the core calls it with its
 * host table, and the plug-in registers its backends with
 * host->backend_register.  Return LOOM_OK or a failure status. */
#define LOOM_PLUGIN_ENTRY_SYMBOL "loom_plugin_entry"
typedef loom_status (*loom_plugin_entry_fn)(const loom_host *host);

/* Exported by libloom: the host table, for libraries that find loom already
 * loaded in the process (loom_plugin_attach below). */
#define LOOM_HOST_GET_SYMBOL "loom_host_get"
typedef const loom_host *(*loom_host_get_fn)(uint16_t abi_major);
/* Returns the host table when abi_major matches this loom, else NULL (and a
 * warning).  Plug-ins that link libloom may call it directly. */
LOOM_EXTERN const loom_host *loom_host_get(uint16_t abi_major);

#ifdef LOOM_PLUGIN_WANT_ATTACH
#include <dlfcn.h>
/* For a plug-in loaded by other means (a device extension dlopen()ed by the
 * program after loom started): finds libloom in the process without linking
 * against it and runs entry.  Returns LOOM_ENOTFOUND when loom is not loaded
 * (then the plug-in is inert), else entry's status.  Call it from a
 * constructor with a static function (not loom_plugin_entry itself: that
 * name may resolve to another plug-in's); registering twice is harmless. */
static inline loom_status loom_plugin_attach(loom_plugin_entry_fn entry) {
  loom_host_get_fn get =
      (loom_host_get_fn)(uintptr_t)dlsym(RTLD_DEFAULT, LOOM_HOST_GET_SYMBOL);
  if (!get) {
    void *h = dlopen("libloom.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (h) get = (loom_host_get_fn)(uintptr_t)dlsym(h, LOOM_HOST_GET_SYMBOL);
  }
  if (!get) return LOOM_ENOTFOUND;
  const loom_host *host = get(LOOM_ABI_MAJOR);
  if (!host) return LOOM_EABI;
  return entry(host);
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* LOOM_PLUGIN_H */
