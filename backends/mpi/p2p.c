/*
 * p2p.c - point-to-point, probe and wait/test wrappers.
 *
 * Each wrapper: with no session recording, the PMPI call and nothing else.
 * Recording: the call's record with the arguments of schema "MPI records";
 * receives completed by a wait/test call also get an MPI_Recv_complete
 * instant each (nonblocking receives are tracked by request handle).
 */
#include <stdlib.h>
#include <string.h>

#include "mpil.h"

#define RT LOOM_KIND_RUNTIME

static void send_args(mpil_call *c, const mpil_comm *m, int dest, int tag, int count,
                      MPI_Datatype dt) {
  mpil_comm_args(c, m);
  mpil_i(c, "dst", mpil_world_of(m, dest));
  mpil_i(c, "tag", tag);
  mpil_u(c, "bytes", mpil_bytes(count, dt));
}

static void recv_args(mpil_call *c, const mpil_comm *m, const MPI_Status *st) {
  mpil_i(c, "src", mpil_world_of(m, st->MPI_SOURCE));
  mpil_i(c, "recv_tag", st->MPI_TAG);
  mpil_u(c, "recv_bytes", mpil_status_bytes(st));
}

#define BEGIN(c)                                                              \
  MPIL_CALL(c, mpil_on(), 0);                                                 \
  if (c.gen) c.t0 = mpil_now()

/* ---- blocking and nonblocking sends ------------------------------------------ */
#define SEND(fn)                                                                            \
  int fn(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {    \
    MPIL_REAL(fn);                                                                          \
    if (!mpil_on()) return real_(buf, count, dt, dest, tag, comm);                          \
    BEGIN(c);                                                                               \
    int rc = real_(buf, count, dt, dest, tag, comm);                                        \
    uint64_t t1 = mpil_now();                                                               \
    send_args(&c, mpil_comm_get(comm), dest, tag, count, dt);                               \
    MPIL_EMIT(&c, #fn, RT, t1);                                                             \
    return rc;                                                                              \
  }
SEND(MPI_Send)
SEND(MPI_Ssend)
SEND(MPI_Bsend)
SEND(MPI_Rsend)

#define ISEND(fn)                                                                           \
  int fn(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,      \
         MPI_Request *req) {                                                                \
    MPIL_REAL(fn);                                                                          \
    if (!mpil_on()) return real_(buf, count, dt, dest, tag, comm, req);                     \
    BEGIN(c);                                                                               \
    int rc = real_(buf, count, dt, dest, tag, comm, req);                                   \
    uint64_t t1 = mpil_now();                                                               \
    send_args(&c, mpil_comm_get(comm), dest, tag, count, dt);                               \
    MPIL_EMIT(&c, #fn, RT, t1);                                                             \
    return rc;                                                                              \
  }
ISEND(MPI_Isend)
ISEND(MPI_Issend)
ISEND(MPI_Ibsend)
ISEND(MPI_Irsend)

/* ---- receives ------------------------------------------------------------------ */
int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
             MPI_Status *st) {
  MPIL_REAL(MPI_Recv);
  if (!mpil_on()) return real_(buf, count, dt, src, tag, comm, st);
  BEGIN(c);
  MPI_Status own;
  if (st == MPI_STATUS_IGNORE) st = &own;
  int rc = real_(buf, count, dt, src, tag, comm, st);
  uint64_t t1 = mpil_now();
  const mpil_comm *m = mpil_comm_get(comm);
  mpil_comm_args(&c, m);
  if (rc == MPI_SUCCESS) recv_args(&c, m, st);
  MPIL_EMIT(&c, "MPI_Recv", RT, t1);
  return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
              MPI_Request *req) {
  MPIL_REAL(MPI_Irecv);
  if (!mpil_on()) return real_(buf, count, dt, src, tag, comm, req);
  BEGIN(c);
  int rc = real_(buf, count, dt, src, tag, comm, req);
  uint64_t t1 = mpil_now();
  const mpil_comm *m = mpil_comm_get(comm);
  mpil_comm_args(&c, m);
  if (src >= 0) mpil_i(&c, "src", mpil_world_of(m, src));
  mpil_i(&c, "tag", tag);
  if (rc == MPI_SUCCESS && src != MPI_PROC_NULL)
    mpil_u(&c, "request", mpil_req_add(*req, m, c.gen));
  MPIL_EMIT(&c, "MPI_Irecv", RT, t1);
  return rc;
}

int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype st_, int dest, int stag, void *rb, int rc_,
                 MPI_Datatype rt, int src, int rtag, MPI_Comm comm, MPI_Status *st) {
  MPIL_REAL(MPI_Sendrecv);
  if (!mpil_on()) return real_(sb, sc, st_, dest, stag, rb, rc_, rt, src, rtag, comm, st);
  BEGIN(c);
  MPI_Status own;
  if (st == MPI_STATUS_IGNORE) st = &own;
  int rc = real_(sb, sc, st_, dest, stag, rb, rc_, rt, src, rtag, comm, st);
  uint64_t t1 = mpil_now();
  const mpil_comm *m = mpil_comm_get(comm);
  send_args(&c, m, dest, stag, sc, st_);
  if (rc == MPI_SUCCESS) recv_args(&c, m, st);
  MPIL_EMIT(&c, "MPI_Sendrecv", RT, t1);
  return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int src,
                         int rtag, MPI_Comm comm, MPI_Status *st) {
  MPIL_REAL(MPI_Sendrecv_replace);
  if (!mpil_on()) return real_(buf, count, dt, dest, stag, src, rtag, comm, st);
  BEGIN(c);
  MPI_Status own;
  if (st == MPI_STATUS_IGNORE) st = &own;
  int rc = real_(buf, count, dt, dest, stag, src, rtag, comm, st);
  uint64_t t1 = mpil_now();
  const mpil_comm *m = mpil_comm_get(comm);
  send_args(&c, m, dest, stag, count, dt);
  if (rc == MPI_SUCCESS) recv_args(&c, m, st);
  MPIL_EMIT(&c, "MPI_Sendrecv_replace", RT, t1);
  return rc;
}

/* ---- probes -------------------------------------------------------------------- */
int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status *st) {
  MPIL_REAL(MPI_Probe);
  if (!mpil_on()) return real_(src, tag, comm, st);
  BEGIN(c);
  int rc = real_(src, tag, comm, st);
  uint64_t t1 = mpil_now();
  const mpil_comm *m = mpil_comm_get(comm);
  mpil_comm_args(&c, m);
  mpil_i(&c, "src", mpil_world_of(m, src));
  mpil_i(&c, "tag", tag);
  MPIL_EMIT(&c, "MPI_Probe", RT, t1);
  return rc;
}

int MPI_Iprobe(int src, int tag, MPI_Comm comm, int *flag, MPI_Status *st) {
  MPIL_REAL(MPI_Iprobe);
  if (!mpil_on()) return real_(src, tag, comm, flag, st);
  BEGIN(c);
  int rc = real_(src, tag, comm, flag, st);
  uint64_t t1 = mpil_now();
  const mpil_comm *m = mpil_comm_get(comm);
  mpil_comm_args(&c, m);
  mpil_i(&c, "src", mpil_world_of(m, src));
  mpil_i(&c, "tag", tag);
  mpil_i(&c, "flag", *flag);
  MPIL_EMIT(&c, "MPI_Iprobe", RT, t1);
  return rc;
}

/* ---- wait / test ------------------------------------------------------------------ */
/* Per-thread room for the handles (they become MPI_REQUEST_NULL on
 * completion) and for statuses the program ignores; grown, never per call. */
static MPIL_TLS MPI_Request *saved;
static MPIL_TLS MPI_Status *stbuf;
static MPIL_TLS int room;

static int ensure(int n) {
  if (n <= room) return 1;
  MPI_Request *a = realloc(saved, sizeof *a * (size_t)n);
  if (a) saved = a;
  MPI_Status *b = a ? realloc(stbuf, sizeof *b * (size_t)n) : NULL;
  if (b) stbuf = b;
  if (!a || !b) return 0;
  room = n;
  return 1;
}

static void completed(MPI_Request req, const MPI_Status *st, const mpil_call *c, uint64_t t1) {
  mpil_req q = mpil_req_take(req, c->gen);
  if (q.id) mpil_recv_complete(&q, st, c->t0, t1, c->gen);
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
  MPIL_REAL(MPI_Wait);
  if (!mpil_on()) return real_(req, st);
  BEGIN(c);
  MPI_Status own;
  if (st == MPI_STATUS_IGNORE) st = &own;
  MPI_Request h = *req;
  int rc = real_(req, st);
  uint64_t t1 = mpil_now();
  MPIL_EMIT(&c, "MPI_Wait", RT, t1);
  if (rc == MPI_SUCCESS) completed(h, st, &c, t1);
  return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
  MPIL_REAL(MPI_Test);
  if (!mpil_on()) return real_(req, flag, st);
  BEGIN(c);
  MPI_Status own;
  if (st == MPI_STATUS_IGNORE) st = &own;
  MPI_Request h = *req;
  int rc = real_(req, flag, st);
  uint64_t t1 = mpil_now();
  mpil_i(&c, "flag", *flag);
  MPIL_EMIT(&c, "MPI_Test", RT, t1);
  if (rc == MPI_SUCCESS && *flag) completed(h, st, &c, t1);
  return rc;
}

/* The array forms: handles saved first, statuses substituted when ignored. */
#define ARRAY_BEGIN(n, sts)                                                     \
  if (!mpil_on() || !ensure(n)) return CALL;                                    \
  BEGIN(c);                                                                     \
  memcpy(saved, reqs, sizeof *saved * (size_t)(n));                             \
  if (sts == MPI_STATUSES_IGNORE) sts = stbuf;                                  \
  mpil_i(&c, "count", n)

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
  MPIL_REAL(MPI_Waitall);
#define CALL real_(n, reqs, sts)
  ARRAY_BEGIN(n, sts);
  int rc = CALL;
  uint64_t t1 = mpil_now();
  MPIL_EMIT(&c, "MPI_Waitall", RT, t1);
  if (rc == MPI_SUCCESS)
    for (int i = 0; i < n; i++) completed(saved[i], &sts[i], &c, t1);
  return rc;
#undef CALL
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
  MPIL_REAL(MPI_Testall);
#define CALL real_(n, reqs, flag, sts)
  ARRAY_BEGIN(n, sts);
  int rc = CALL;
  uint64_t t1 = mpil_now();
  mpil_i(&c, "flag", *flag);
  MPIL_EMIT(&c, "MPI_Testall", RT, t1);
  if (rc == MPI_SUCCESS && *flag)
    for (int i = 0; i < n; i++) completed(saved[i], &sts[i], &c, t1);
  return rc;
#undef CALL
}

int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st) {
  MPIL_REAL(MPI_Waitany);
#define CALL real_(n, reqs, idx, st)
  MPI_Status own;
  if (st == MPI_STATUS_IGNORE) st = &own;
  MPI_Status *sts = st; /* unused by ARRAY_BEGIN's substitution */
  ARRAY_BEGIN(n, sts);
  int rc = CALL;
  uint64_t t1 = mpil_now();
  MPIL_EMIT(&c, "MPI_Waitany", RT, t1);
  if (rc == MPI_SUCCESS && *idx != MPI_UNDEFINED) completed(saved[*idx], st, &c, t1);
  return rc;
#undef CALL
}

int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st) {
  MPIL_REAL(MPI_Testany);
#define CALL real_(n, reqs, idx, flag, st)
  MPI_Status own;
  if (st == MPI_STATUS_IGNORE) st = &own;
  MPI_Status *sts = st;
  ARRAY_BEGIN(n, sts);
  int rc = CALL;
  uint64_t t1 = mpil_now();
  mpil_i(&c, "flag", *flag);
  MPIL_EMIT(&c, "MPI_Testany", RT, t1);
  if (rc == MPI_SUCCESS && *flag && *idx != MPI_UNDEFINED) completed(saved[*idx], st, &c, t1);
  return rc;
#undef CALL
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outc, int idx[], MPI_Status sts[]) {
  MPIL_REAL(MPI_Waitsome);
#define CALL real_(n, reqs, outc, idx, sts)
  ARRAY_BEGIN(n, sts);
  int rc = CALL;
  uint64_t t1 = mpil_now();
  MPIL_EMIT(&c, "MPI_Waitsome", RT, t1);
  if (rc == MPI_SUCCESS && *outc != MPI_UNDEFINED)
    for (int i = 0; i < *outc; i++) completed(saved[idx[i]], &sts[i], &c, t1);
  return rc;
#undef CALL
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outc, int idx[], MPI_Status sts[]) {
  MPIL_REAL(MPI_Testsome);
#define CALL real_(n, reqs, outc, idx, sts)
  ARRAY_BEGIN(n, sts);
  int rc = CALL;
  uint64_t t1 = mpil_now();
  MPIL_EMIT(&c, "MPI_Testsome", RT, t1);
  if (rc == MPI_SUCCESS && *outc != MPI_UNDEFINED)
    for (int i = 0; i < *outc; i++) completed(saved[idx[i]], &sts[i], &c, t1);
  return rc;
#undef CALL
}
