/*
 * mpil.h - shared state of libloom-mpi.so, the MPI backend (device type
 * "mpi"): PMPI wrappers that emit one host record per MPI call.
 *
 * The library is preloaded into every process `loom record` starts, most of
 * which never load libmpi.  So it links no MPI library, takes OpenMPI's
 * predefined handles (addresses of ompi_mpi_* globals) through weak
 * references, and resolves each PMPI_* function on its first use.  With no
 * session recording, a wrapper costs one atomic load and the call.
 */
#ifndef LOOM_MPIL_H
#define LOOM_MPIL_H
#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "loom/plugin.h"

/* OpenMPI's predefined handles are data symbols of libmpi: weak, so a
 * process without libmpi still loads this library (they read as NULL). */
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_mpi_comm_self
#pragma weak ompi_mpi_comm_null
#pragma weak ompi_mpi_byte
#pragma weak ompi_mpi_long_long_int
#pragma weak ompi_request_null
#pragma weak ompi_mpi_datatype_null

#define MPIL_HIDDEN __attribute__((visibility("hidden")))

extern MPIL_HIDDEN const loom_host *mpil_host;
extern MPIL_HIDDEN loom_backend *mpil_self;
extern MPIL_HIDDEN loom_clock mpil_clk, mpil_rt;
extern MPIL_HIDDEN atomic_uint mpil_gen; /* odd while a session records */
extern MPIL_HIDDEN int mpil_world_rank, mpil_world_size;

static inline unsigned mpil_on(void) {
  unsigned g = atomic_load_explicit(&mpil_gen, memory_order_acquire);
  return (g & 1) ? g : 0;
}
/* Call times: the TSC where there is one (a clock_gettime costs 25-90 ns
 * on the project's VMs, rdtsc about 10); the core converts either. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define MPIL_CLOCK LOOM_CLOCK_TSC
static inline uint64_t mpil_now(void) { return __rdtsc(); }
#else
#define MPIL_CLOCK LOOM_CLOCK_MONOTONIC
static inline uint64_t mpil_now(void) { return mpil_host->clock_now(LOOM_CLOCK_MONOTONIC); }
#endif
/* Preloaded (or dlopen()ed early): the cheap TLS model. */
#define MPIL_TLS __thread __attribute__((tls_model("initial-exec")))

/* Resolves a PMPI function: the next definition after this library, else
 * libmpi opened privately by the program (dlopen with RTLD_LOCAL). */
MPIL_HIDDEN void *mpil_sym(const char *name);
#define MPIL_REAL(fn)                                                        \
  static __typeof__(&P##fn) real_;                                           \
  if (__builtin_expect(!real_, 0)) real_ = (__typeof__(&P##fn))mpil_sym("P" #fn); \
  if (!real_) return MPI_ERR_INTERN

/* ---- communicators ------------------------------------------------------- */
typedef struct mpil_comm {
  MPI_Comm comm;
  uint64_t id;
  int size, rank;
  int *world; /* world rank of each member (NULL for WORLD: identity) */
  uint64_t coll_seq;
} mpil_comm;
/* The cached description of comm (created on first use); NULL when MPI is
 * not initialised or the table is full. */
MPIL_HIDDEN mpil_comm *mpil_comm_get(MPI_Comm comm);
/* A new communicator: its id agreed by every member without messages. */
MPIL_HIDDEN void mpil_comm_created(MPI_Comm comm);
MPIL_HIDDEN void mpil_comm_freed(MPI_Comm comm);
static inline int mpil_world_of(const mpil_comm *c, int r) {
  if (r < 0 || !c || r >= c->size) return r; /* MPI_PROC_NULL, ANY_SOURCE */
  return c->world ? c->world[r] : r;
}

/* ---- requests ------------------------------------------------------------ */
typedef struct mpil_req {
  MPI_Request req;
  uint64_t id;
  uint64_t comm_id;
  const mpil_comm *comm;
  unsigned gen;
} mpil_req;
MPIL_HIDDEN uint64_t mpil_req_add(MPI_Request req, const mpil_comm *c, unsigned gen);
/* Removes and returns the receive tracked for req (0 id when none). */
MPIL_HIDDEN mpil_req mpil_req_take(MPI_Request req, unsigned gen);

/* ---- records ------------------------------------------------------------- */
#define MPIL_MAXARGS 12
/* A call's record while the wrapper builds it: keys, types (2 bits each,
 * loom_arg_type) and values apart, so that checking the call site's layout
 * is one compare for the types and one per key. */
typedef struct mpil_call {
  unsigned gen;
  uint32_t n;
  uint32_t types;
  uint64_t t0;
  const char *k[MPIL_MAXARGS];
  uint64_t v[MPIL_MAXARGS];
} mpil_call;
/* Declares call record c: only its header is written, not the args (a
 * zeroing initializer is a `rep stos` of 200 bytes on every call). */
#define MPIL_CALL(c, g, t)                                                   \
  mpil_call c;                                                               \
  c.gen = (g);                                                               \
  c.t0 = (t);                                                                \
  c.n = 0;                                                                   \
  c.types = 0
static inline void mpil_arg(mpil_call *c, const char *k, loom_arg_type t, uint64_t v) {
  c->types |= (uint32_t)t << (2 * c->n);
  c->k[c->n] = k;
  c->v[c->n++] = v;
}
static inline void mpil_i(mpil_call *c, const char *k, int64_t v) {
  mpil_arg(c, k, LOOM_ARG_INT, (uint64_t)v);
}
static inline void mpil_u(mpil_call *c, const char *k, uint64_t v) {
  mpil_arg(c, k, LOOM_ARG_UINT, v);
}
/* s must be a literal (kept by pointer until flush). */
static inline void mpil_s(mpil_call *c, const char *k, const char *s) {
  mpil_arg(c, k, LOOM_ARG_STRING, (uint64_t)(uintptr_t)s);
}
/* The call's args as the host takes them (a holds MPIL_MAXARGS). */
MPIL_HIDDEN void mpil_call_args(const mpil_call *c, loom_arg *a);
/* comm, comm_size, comm_rank */
MPIL_HIDDEN void mpil_comm_args(mpil_call *c, const mpil_comm *m);
/* The record's shape: name, kind, arg keys and types.  Records store only
 * times, a layout pointer and the values; layouts live until exit. */
typedef struct mpil_layout mpil_layout;
/* A call site's last layout: the next call there nearly always has it. */
typedef struct mpil_site {
  _Atomic(const mpil_layout *) last;
} mpil_site;
/* Appends the call's record to the thread's buffer (buffer.c); name, arg
 * keys and string values must be literals.  flush emits them all. */
MPIL_HIDDEN void mpil_emit(mpil_site *site, const mpil_call *c, const char *name, int kind,
                           uint64_t end);
#define MPIL_EMIT(c, nm, kind, end)                                          \
  do {                                                                       \
    static mpil_site site_;                                                  \
    mpil_emit(&site_, (c), nm, (kind), (end));                               \
  } while (0)
MPIL_HIDDEN void mpil_buffer_flush(void);
/* The marks (LOOM_RECORD_F_*) of the call named name (roles.c). */
MPIL_HIDDEN uint16_t mpil_roles(const char *name);
MPIL_HIDDEN void mpil_buffer_free(void);
/* The arg key whose value is a raw clock reading, converted at flush. */
extern MPIL_HIDDEN const char mpil_key_wait_start[];
MPIL_HIDDEN uint64_t mpil_bytes(int count, MPI_Datatype t);
/* MPI_Type_free: forget the sizes mpil_bytes keeps. */
MPIL_HIDDEN void mpil_type_freed(void);
/* Bytes a completed receive brought (MPI_Get_count in MPI_BYTE). */
MPIL_HIDDEN uint64_t mpil_status_bytes(const MPI_Status *st);
/* For each completed receive: the MPI_Recv_complete instant. */
MPIL_HIDDEN void mpil_recv_complete(const mpil_req *r, const MPI_Status *st, uint64_t t0,
                                    uint64_t t1, unsigned gen);
/* Clock sync with rank 0 ("init" or "finalize"). */
MPIL_HIDDEN void mpil_clock_sync(const char *phase);
MPIL_HIDDEN void mpil_after_init(void);
#endif
