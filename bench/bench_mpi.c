/*
 * bench_mpi.c - what libloom-mpi.so adds to an MPI call.
 *
 * Two ranks (or one: then the loops talk to MPI_COMM_SELF, free of the
 * other process's scheduling noise); two loops: a nonblocking ping-pong
 * (Irecv, Isend, Waitall: 3 calls an iteration, and loom records 4: the
 * completed receive is an instant of its own) and an 8-byte allreduce
 * (1 call).  Each loop runs in four modes, interleaved (the order rotates
 * from round to round) for many short rounds:
 *   base:   the loop through PMPI_* (no wrapper at all);
 *   floor:  base plus what any tracer must pay per call: two clock reads
 *           around it and one 64-byte record stored into a buffer that is
 *           already in memory (loom's chunks are pooled too);
 *   idle:   MPI_* through the wrappers, no session recording;
 *   loom:   MPI_* with a loom session recording "mpi" (records kept).
 * Each timed loop follows an untimed tenth of it in the same mode.
 * Prints per mode min and median ns per iteration; per call the added ns
 * against base from the mins, from the medians, and the median of the
 * per-round differences (each round's modes ran milliseconds apart, so
 * this one is the least sensitive to a busy machine); the ratio to base; and
 * loom's added cost against the floor's.  Before those rounds, the process's
 * first session (fresh memory, as a single `loom record` run has it): slices
 * of base, loom, base, with the page faults taken and the events recorded
 * against the number expected.  Run (from the build folder):
 *   mpirun -np 1 -x LOOM_PLUGINS=$PWD/plugins/libloom-mpi.so \
 *          -x LD_PRELOAD=$PWD/plugins/libloom-mpi.so bench/bench_mpi [iters] [rounds]
 * (-np 2 --oversubscribe for two ranks; as root also OMPI_ALLOW_RUN_AS_ROOT=1
 * OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "loom/loom.h"

enum { BASE, FLOOR, IDLE, LOOM, NMODE };
static const char *const mode_name[NMODE] = {"base (PMPI)", "floor (2 clocks+store)",
                                             "idle (no session)", "loom"};
enum { PINGPONG, ALLREDUCE, NLOOP };
static const char *const loop_name[NLOOP] = {"ping-pong Irecv+Isend+Waitall (3 calls)",
                                             "allreduce 8 bytes (1 call)"};
static const int calls[NLOOP] = {3, 1};

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The floor's clock: the one libloom-mpi.so reads (mpil.h). */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t tick(void) { return __rdtsc(); }
#else
static inline uint64_t tick(void) { return (uint64_t)now_ns(); }
#endif

typedef struct frec {
  uint64_t t0, t1;
  const char *name;
  uint64_t v[5];
} frec; /* 64 bytes: one cache line */
static frec *fbuf;
static size_t fat;

/* What the floor pays around one call: its two clock reads and one store.
 * The compiler must keep the store (fbuf escapes through fat's reader). */
#define FLOORED(name, a, b, CALL)                                            \
  do {                                                                       \
    uint64_t t0_ = tick();                                                   \
    CALL;                                                                    \
    uint64_t t1_ = tick();                                                   \
    fbuf[fat++] = (frec){t0_, t1_, name, {(uint64_t)(a), (uint64_t)(b), 0, 0, 0}}; \
  } while (0)

static MPI_Comm comm; /* WORLD with 2 ranks; SELF with 1 (no other process's noise) */

static void pingpong(int mode, int rank, long iters) {
  double out = rank, in = 0;
  int peer = comm == MPI_COMM_SELF ? 0 : 1 - rank;
  for (long i = 0; i < iters; i++) {
    MPI_Request r[2];
    if (mode == BASE) {
      PMPI_Irecv(&in, 1, MPI_DOUBLE, peer, 7, comm, &r[0]);
      PMPI_Isend(&out, 1, MPI_DOUBLE, peer, 7, comm, &r[1]);
      PMPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    } else if (mode == FLOOR) {
      FLOORED("MPI_Irecv", peer, 7, PMPI_Irecv(&in, 1, MPI_DOUBLE, peer, 7, comm, &r[0]));
      FLOORED("MPI_Isend", peer, 7, PMPI_Isend(&out, 1, MPI_DOUBLE, peer, 7, comm, &r[1]));
      FLOORED("MPI_Waitall", 2, 0, PMPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    } else {
      MPI_Irecv(&in, 1, MPI_DOUBLE, peer, 7, comm, &r[0]);
      MPI_Isend(&out, 1, MPI_DOUBLE, peer, 7, comm, &r[1]);
      MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
  }
}

static void allreduce(int mode, long iters) {
  double v = 1, s = 0;
  for (long i = 0; i < iters; i++) {
    if (mode == BASE) PMPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, comm);
    else if (mode == FLOOR)
      FLOORED("MPI_Allreduce", 8, i, PMPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, comm));
    else MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, comm);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double *s = malloc(sizeof *s * (size_t)n);
  memcpy(s, v, sizeof *s * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp);
  double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  free(s);
  return m;
}

static double minimum(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

/* Median over rounds of (mode - base) in the same round, per call. */
static double paired(double *const t[NMODE], int m, int rounds, int ncalls) {
  double *d = malloc(sizeof *d * (size_t)rounds);
  for (int r = 0; r < rounds; r++) d[r] = (t[m][r] - t[BASE][r]) / ncalls;
  double x = median(d, rounds);
  free(d);
  return x;
}

static void report(int size, long iters, long warm, int rounds, size_t events,
                   double *t[NLOOP][NMODE]) {
  /* 4 records per ping-pong iteration (Irecv, Isend, Waitall, the receive's
   * completion), 1 per allreduce. */
  printf("bench_mpi: %ld iterations (+%ld warm-up) x %d rounds, %d rank(s), modes interleaved; "
         "last loom round: %zu events (expected %ld)\n",
         iters, warm, rounds, size, events, 5 * (iters + warm));
  for (int l = 0; l < NLOOP; l++) {
    double mn[NMODE], md[NMODE];
    for (int m = 0; m < NMODE; m++) mn[m] = minimum(t[l][m], rounds), md[m] = median(t[l][m], rounds);
    printf("%s\n", loop_name[l]);
    for (int m = 0; m < NMODE; m++)
      printf("  %-22s min %7.1f median %7.1f ns/iter | added/call: min %+6.1f median %+6.1f "
             "paired %+6.1f ns | ratio %.2f\n",
             mode_name[m], mn[m], md[m], (mn[m] - mn[BASE]) / calls[l],
             (md[m] - md[BASE]) / calls[l], paired(t[l], m, rounds, calls[l]), md[m] / md[BASE]);
    double lo = paired(t[l], LOOM, rounds, calls[l]), fl = paired(t[l], FLOOR, rounds, calls[l]);
    printf("  => loom adds %.1f ns per call (median, paired), the floor %.1f: %.2fx the floor\n",
           lo, fl, fl > 0 ? lo / fl : 0);
  }
}

/* A process's first session writes its records to fresh memory (the
 * pool only serves later sessions), so it runs first, before any other
 * session: per loop, NSLICE slices of base, then of loom (one session),
 * then of base again.  The mean includes every page fault (and any
 * preemption); the median of slices shows the steady cost. */
#define NSLICE 20
static void first_session(int rank, long iters) {
  double sl[NLOOP][2][2 * NSLICE], sum[NLOOP][2] = {{0}};
  long faults[NLOOP] = {0};
  size_t events[NLOOP] = {0};
  for (int l = 0; l < NLOOP; l++)
    for (int k = 0; k < 3; k++) {
      int lm = k == 1; /* 0: base, 1: loom */
      loom_session *s = NULL;
      if (lm) {
        loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "mpi"};
        if (loom_session_create(&cfg, &s) != LOOM_OK || loom_session_start(s) != LOOM_OK)
          MPI_Abort(MPI_COMM_WORLD, 1);
      }
      PMPI_Barrier(MPI_COMM_WORLD);
      struct rusage u0, u1;
      getrusage(RUSAGE_SELF, &u0);
      for (int i = 0; i < NSLICE; i++) {
        double t0 = now_ns();
        if (l == PINGPONG) pingpong(lm ? LOOM : BASE, rank, iters);
        else allreduce(lm ? LOOM : BASE, iters);
        double d = (now_ns() - t0) / (double)iters;
        sl[l][lm][(k == 2 ? NSLICE : 0) + i] = d;
        sum[l][lm] += d;
      }
      getrusage(RUSAGE_SELF, &u1);
      if (lm) faults[l] = u1.ru_minflt - u0.ru_minflt;
      if (s) {
        loom_trace *tr = NULL;
        if (loom_session_stop(s, &tr) == LOOM_OK) events[l] = loom_trace_event_count(tr);
        loom_trace_free(tr);
        loom_session_destroy(s);
      }
    }
  if (rank) return;
  printf("first session (fresh memory), %d slices of %ld iterations:\n", NSLICE, iters);
  for (int l = 0; l < NLOOP; l++) {
    double bm = sum[l][0] / (2 * NSLICE), lmn = sum[l][1] / NSLICE;
    double bmed = median(sl[l][0], 2 * NSLICE), lmed = median(sl[l][1], NSLICE);
    printf("  %-40s loom mean %7.1f median %7.1f ns/iter, base %7.1f / %7.1f: added/call "
           "mean %+6.1f median %+6.1f ns; %ld page faults, %zu events (expected %ld)\n",
           loop_name[l], lmn, lmed, bm, bmed, (lmn - bm) / calls[l], (lmed - bmed) / calls[l],
           faults[l], events[l], (l == PINGPONG ? 4 : 1) * NSLICE * iters);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  comm = size == 1 ? MPI_COMM_SELF : MPI_COMM_WORLD;
  long iters = argc > 1 ? atol(argv[1]) : 2000;
  int rounds = argc > 2 ? atoi(argv[2]) : 41;
  if (iters < 1 || rounds < 1) {
    fprintf(stderr, "bench_mpi: iterations and rounds must be positive\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  /* The floor's buffer: touched once, like loom's pooled chunks. */
  fbuf = calloc((size_t)iters * 3, sizeof *fbuf);
  double *t[NLOOP][NMODE];
  for (int l = 0; l < NLOOP; l++)
    for (int m = 0; m < NMODE; m++) t[l][m] = calloc((size_t)rounds, sizeof(double));
  for (int l = 0; l < NLOOP; l++)
    for (int m = 0; m < NMODE; m++)
      if (!t[l][m]) MPI_Abort(MPI_COMM_WORLD, 2);
  if (!fbuf) MPI_Abort(MPI_COMM_WORLD, 2);
  memset(fbuf, 1, (size_t)iters * 3 * sizeof *fbuf);
  size_t events = 0;
  long warm = iters / 10 + 1;
  pingpong(BASE, rank, iters); /* warm up */
  allreduce(BASE, iters);
  first_session(rank, iters);
  uint64_t check = 0;
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < NMODE; k++) {
      int m = (k + r) % NMODE; /* rotate the order from round to round */
      loom_session *s = NULL;
      if (m == LOOM) {
        loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "mpi"};
        if (loom_session_create(&cfg, &s) != LOOM_OK || loom_session_start(s) != LOOM_OK) {
          fprintf(stderr, "bench_mpi: no loom session: %s\n", loom_last_error());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
      for (int l = 0; l < NLOOP; l++) {
        /* Untimed warm-up in the same mode: caches and the branch predictor
         * are where a long run keeps them, whatever ran just before. */
        fat = 0;
        if (l == PINGPONG) pingpong(m, rank, warm);
        else allreduce(m, warm);
        PMPI_Barrier(MPI_COMM_WORLD);
        fat = 0;
        double t0 = now_ns();
        if (l == PINGPONG) pingpong(m, rank, iters);
        else allreduce(m, iters);
        t[l][m][r] = (now_ns() - t0) / (double)iters;
        if (fat) check += fbuf[fat - 1].t1 - fbuf[0].t0;
      }
      if (s) {
        loom_trace *tr = NULL;
        if (loom_session_stop(s, &tr) == LOOM_OK) events = loom_trace_event_count(tr);
        loom_trace_free(tr);
        loom_session_destroy(s);
      }
    }
  if (rank == 0) report(size, iters, warm, rounds, events, t);
  if (check == 1) printf("(floor checksum %llu)\n", (unsigned long long)check);
  MPI_Finalize();
  return 0;
}
