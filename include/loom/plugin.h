/*
 * plugin.h - the backend ABI of loom.
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
 * Versioning rules (see docs/writing-a-backend.md):
 *  - LOOM_ABI_MAJOR changes only when an existing field or slot changes
 *    meaning; the core refuses a backend with another major version.
 *  - LOOM_ABI_MINOR grows when fields or slots are appended.  Every struct
 *    crossing the boundary starts with its size; each side reads only the
 *    fields that fit in the size the other side declared.
 *  - Enum values are never renumbered.
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
#define LOOM_ABI_MINOR 3 /* 1.2: LOOM_KIND_SAMPLE; 1.3: loom_backend_ops.options */

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
/* loom_arg and loom_arg_type are defined in loom.h. */

#define LOOM_DEVICE_HOST UINT32_MAX /* record happened on a host thread */

/* One record as a backend emits it.  The core copies it (and its args). */
typedef struct loom_record {
  uint32_t struct_size;   /* sizeof(loom_record) */
  uint16_t kind;          /* loom_kind */
  uint16_t flags;         /* LOOM_RECORD_F_* (ABI 1.1; 0 before) */
  loom_clock clock;       /* the declared clock of start and end */
  uint32_t device;        /* device index from device_add, or LOOM_DEVICE_HOST */
  /* For device records: resource index from resource_add (the queue/stream).
   * For host records: the OS thread id (host->thread_id()), 0 = caller. */
  uint32_t resource;
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
  LOOM_RECORD_F_ALL_TO_ONE = 1u << 10 /* to "root": it waits for the first (reduce) */
};

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
typedef struct loom_host {
  uint32_t struct_size;   /* sizeof(loom_host) as the core built it */
  uint16_t abi_major, abi_minor;

  /* Thread safety of the services: backend_register, clock_now, intern,
   * external_id_current, thread_id and state may be called from any thread
   * at any time; every other service from any thread while the backend is
   * in a session (each takes the backend's lock).  See docs/writing-a-backend.md.
   *
   * Registers a backend.  Valid at any time and from any thread.  A backend
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
  /* The calling thread's OS id (what host records carry in `resource`). */
  uint32_t (*thread_id)(void);
  /* The private state the core allocated for the backend (state_size). */
  void *(*state)(loom_backend *b);

  /* ---- ABI 1.1 (check struct_size before calling) ---- */
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
} loom_host;

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
  LOOM_ENABLE_F_NO_PLUGIN_LOAD = 1u << 2
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

/* Every operation returns LOOM_OK or another loom_status; on failure it
 * should call host->report with the reason first. */
typedef struct loom_backend_ops {
  uint32_t struct_size;     /* sizeof(loom_backend_ops) */
  uint16_t abi_major;       /* LOOM_ABI_MAJOR */
  uint16_t abi_minor;       /* LOOM_ABI_MINOR */
  const char *name;         /* unique backend name */
  const char *device_type;  /* the device type it serves */
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
  loom_status (*start)(loom_backend *b);
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
