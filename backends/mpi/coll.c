/*
 * coll.c - collectives, communicator creation, MPI_Init/MPI_Finalize.
 *
 * Collectives carry "seq", the per-communicator count of collective calls:
 * it is kept whether or not a session records, so ranks whose sessions start
 * at different moments still agree on it.
 */
#include <string.h>

#include "mpil.h"

#define CO LOOM_KIND_COLLECTIVE

static uint64_t sum_counts(const int *counts, int n, MPI_Datatype dt) {
  uint64_t s = 0;
  for (int i = 0; counts && i < n; i++) s += mpil_bytes(counts[i], dt);
  return s;
}

/* seq is taken before the call: a failing collective still used a number.
 * MPI forbids concurrent collectives on one communicator (the user must
 * order them), so a load and a store are enough: no locked add (3 ns). */
#define COLL(name, comm, root, bytes_expr, CALL)                               \
  MPIL_REAL(name);                                                            \
  mpil_comm *m = mpil_comm_get(comm);                                         \
  uint64_t seq = m ? __atomic_load_n(&m->coll_seq, __ATOMIC_RELAXED) : 0;     \
  if (m) __atomic_store_n(&m->coll_seq, seq + 1, __ATOMIC_RELAXED);           \
  unsigned gen = mpil_on();                                                   \
  if (!gen) return CALL;                                                      \
  MPIL_CALL(c, gen, mpil_now());                                              \
  int rc = CALL;                                                              \
  uint64_t t1 = mpil_now();                                                   \
  mpil_comm_args(&c, m);                                                      \
  mpil_u(&c, "seq", seq);                                                     \
  mpil_u(&c, "bytes", (bytes_expr));                                          \
  if ((root) != -99) mpil_i(&c, "root", mpil_world_of(m, (root)));            \
  MPIL_EMIT(&c, #name, CO, t1);                                               \
  return rc

#define NOROOT -99
#define SIZE (m ? m->size : 0)
#define MYRANK (m ? m->rank : -1)

int MPI_Barrier(MPI_Comm comm) { COLL(MPI_Barrier, comm, NOROOT, 0, real_(comm)); }

int MPI_Bcast(void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm) {
  COLL(MPI_Bcast, comm, root, MYRANK == root ? mpil_bytes(n, dt) : 0,
       real_(buf, n, dt, root, comm));
}
int MPI_Reduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm) {
  COLL(MPI_Reduce, comm, root, mpil_bytes(n, dt), real_(sb, rb, n, dt, op, root, comm));
}
int MPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  COLL(MPI_Allreduce, comm, NOROOT, mpil_bytes(n, dt), real_(sb, rb, n, dt, op, comm));
}
int MPI_Gather(const void *sb, int sc, MPI_Datatype sd, void *rb, int rc_, MPI_Datatype rd,
               int root, MPI_Comm comm) {
  COLL(MPI_Gather, comm, root, sb == MPI_IN_PLACE ? mpil_bytes(rc_, rd) : mpil_bytes(sc, sd),
       real_(sb, sc, sd, rb, rc_, rd, root, comm));
}
int MPI_Gatherv(const void *sb, int sc, MPI_Datatype sd, void *rb, const int rcs[],
                const int displs[], MPI_Datatype rd, int root, MPI_Comm comm) {
  COLL(MPI_Gatherv, comm, root,
       sb == MPI_IN_PLACE && rcs && MYRANK >= 0 ? mpil_bytes(rcs[MYRANK], rd) : mpil_bytes(sc, sd),
       real_(sb, sc, sd, rb, rcs, displs, rd, root, comm));
}
int MPI_Scatter(const void *sb, int sc, MPI_Datatype sd, void *rb, int rc_, MPI_Datatype rd,
                int root, MPI_Comm comm) {
  COLL(MPI_Scatter, comm, root, MYRANK == root ? mpil_bytes(sc, sd) * (uint64_t)SIZE : 0,
       real_(sb, sc, sd, rb, rc_, rd, root, comm));
}
int MPI_Scatterv(const void *sb, const int scs[], const int displs[], MPI_Datatype sd, void *rb,
                 int rc_, MPI_Datatype rd, int root, MPI_Comm comm) {
  COLL(MPI_Scatterv, comm, root, MYRANK == root ? sum_counts(scs, SIZE, sd) : 0,
       real_(sb, scs, displs, sd, rb, rc_, rd, root, comm));
}
int MPI_Allgather(const void *sb, int sc, MPI_Datatype sd, void *rb, int rc_, MPI_Datatype rd,
                  MPI_Comm comm) {
  COLL(MPI_Allgather, comm, NOROOT,
       sb == MPI_IN_PLACE ? mpil_bytes(rc_, rd) : mpil_bytes(sc, sd),
       real_(sb, sc, sd, rb, rc_, rd, comm));
}
int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype sd, void *rb, const int rcs[],
                   const int displs[], MPI_Datatype rd, MPI_Comm comm) {
  COLL(MPI_Allgatherv, comm, NOROOT,
       sb == MPI_IN_PLACE && rcs && MYRANK >= 0 ? mpil_bytes(rcs[MYRANK], rd) : mpil_bytes(sc, sd),
       real_(sb, sc, sd, rb, rcs, displs, rd, comm));
}
int MPI_Alltoall(const void *sb, int sc, MPI_Datatype sd, void *rb, int rc_, MPI_Datatype rd,
                 MPI_Comm comm) {
  COLL(MPI_Alltoall, comm, NOROOT,
       (sb == MPI_IN_PLACE ? mpil_bytes(rc_, rd) : mpil_bytes(sc, sd)) * (uint64_t)SIZE,
       real_(sb, sc, sd, rb, rc_, rd, comm));
}
int MPI_Alltoallv(const void *sb, const int scs[], const int sdis[], MPI_Datatype sd, void *rb,
                  const int rcs[], const int rdis[], MPI_Datatype rd, MPI_Comm comm) {
  COLL(MPI_Alltoallv, comm, NOROOT,
       sb == MPI_IN_PLACE ? sum_counts(rcs, SIZE, rd) : sum_counts(scs, SIZE, sd),
       real_(sb, scs, sdis, sd, rb, rcs, rdis, rd, comm));
}
int MPI_Reduce_scatter(const void *sb, void *rb, const int rcs[], MPI_Datatype dt, MPI_Op op,
                       MPI_Comm comm) {
  COLL(MPI_Reduce_scatter, comm, NOROOT, sum_counts(rcs, SIZE, dt),
       real_(sb, rb, rcs, dt, op, comm));
}
int MPI_Reduce_scatter_block(const void *sb, void *rb, int rc_, MPI_Datatype dt, MPI_Op op,
                             MPI_Comm comm) {
  COLL(MPI_Reduce_scatter_block, comm, NOROOT, mpil_bytes(rc_, dt) * (uint64_t)SIZE,
       real_(sb, rb, rc_, dt, op, comm));
}
int MPI_Scan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  COLL(MPI_Scan, comm, NOROOT, mpil_bytes(n, dt), real_(sb, rb, n, dt, op, comm));
}
int MPI_Exscan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  COLL(MPI_Exscan, comm, NOROOT, mpil_bytes(n, dt), real_(sb, rb, n, dt, op, comm));
}

/* ---- communicator creation ---------------------------------------------------- */
#define CREATE(name, comm, out, CALL)                                          \
  MPIL_REAL(name);                                                            \
  unsigned gen = mpil_on();                                                   \
  MPIL_CALL(c, gen, gen ? mpil_now() : 0);                                    \
  int rc = CALL;                                                              \
  uint64_t t1 = gen ? mpil_now() : 0;                                         \
  if (rc == MPI_SUCCESS) mpil_comm_created(*(out));                           \
  if (!gen) return rc;                                                        \
  mpil_comm_args(&c, mpil_comm_get(comm));                                    \
  const mpil_comm *nc = rc == MPI_SUCCESS ? mpil_comm_get(*(out)) : NULL;     \
  if (nc) mpil_u(&c, "new_comm", nc->id), mpil_i(&c, "new_comm_size", nc->size); \
  MPIL_EMIT(&c, #name, LOOM_KIND_RUNTIME, t1);                                \
  return rc

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out) {
  CREATE(MPI_Comm_dup, comm, out, real_(comm, out));
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out) {
  CREATE(MPI_Comm_split, comm, out, real_(comm, color, key, out));
}
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out) {
  CREATE(MPI_Comm_split_type, comm, out, real_(comm, type, key, info, out));
}
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *out) {
  CREATE(MPI_Comm_create, comm, out, real_(comm, group, out));
}

int MPI_Comm_free(MPI_Comm *comm) {
  MPIL_REAL(MPI_Comm_free);
  unsigned gen = mpil_on();
  MPIL_CALL(c, gen, gen ? mpil_now() : 0);
  if (gen) mpil_comm_args(&c, mpil_comm_get(*comm));
  mpil_comm_freed(*comm);
  int rc = real_(comm);
  if (gen) MPIL_EMIT(&c, "MPI_Comm_free", LOOM_KIND_RUNTIME, mpil_now());
  return rc;
}

/* Not recorded: only keeps mpil_bytes' datatype sizes right (forgotten
 * before the free: after it, another thread may make a type there). */
int MPI_Type_free(MPI_Datatype *t) {
  MPIL_REAL(MPI_Type_free);
  mpil_type_freed();
  return real_(t);
}

/* ---- init and finalize ------------------------------------------------------------- */
int MPI_Init(int *argc, char ***argv) {
  MPIL_REAL(MPI_Init);
  uint64_t t0 = mpil_on() ? mpil_now() : 0;
  int rc = real_(argc, argv);
  uint64_t t1 = mpil_on() ? mpil_now() : 0;
  if (rc != MPI_SUCCESS) return rc;
  mpil_after_init();
  MPIL_CALL(c, mpil_on(), t0);
  if (c.gen && t0) {
    mpil_comm_args(&c, mpil_comm_get(MPI_COMM_WORLD));
    MPIL_EMIT(&c, "MPI_Init", LOOM_KIND_RUNTIME, t1);
  }
  mpil_clock_sync("init");
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  MPIL_REAL(MPI_Init_thread);
  uint64_t t0 = mpil_on() ? mpil_now() : 0;
  int rc = real_(argc, argv, required, provided);
  uint64_t t1 = mpil_on() ? mpil_now() : 0;
  if (rc != MPI_SUCCESS) return rc;
  mpil_after_init();
  MPIL_CALL(c, mpil_on(), t0);
  if (c.gen && t0) {
    mpil_comm_args(&c, mpil_comm_get(MPI_COMM_WORLD));
    mpil_i(&c, "required", required);
    mpil_i(&c, "provided", *provided);
    MPIL_EMIT(&c, "MPI_Init_thread", LOOM_KIND_RUNTIME, t1);
  }
  mpil_clock_sync("init");
  return rc;
}

int MPI_Finalize(void) {
  MPIL_REAL(MPI_Finalize);
  mpil_clock_sync("finalize");
  unsigned gen = mpil_on();
  MPIL_CALL(c, gen, gen ? mpil_now() : 0);
  int rc = real_();
  if (gen) MPIL_EMIT(&c, "MPI_Finalize", LOOM_KIND_RUNTIME, mpil_now());
  mpil_world_size = 0; /* handles are no longer valid */
  return rc;
}
