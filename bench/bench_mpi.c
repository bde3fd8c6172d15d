/*
 * bench_mpi.c - what libloom-mpi.so adds to an MPI call.
 *
 * Two ranks (or one: then the loops talk to MPI_COMM_SELF, free of the
 * other process's scheduling noise); two loops: a nonblocking ping-pong (rank 0: Irecv, Isend,
 * Waitall; rank 1 the same: 3 calls an iteration) and an 8-byte allreduce
 * (1 call).  Each loop runs in three modes, interleaved, for several rounds:
 *   floor:  the same loop through PMPI_* (no wrapper at all);
 *   idle:   MPI_* through the wrappers, no session recording;
 *   loom:   MPI_* with a loom session recording "mpi" (records kept).
 * Prints min and median ns per iteration and per call, the added ns per call
 * against the floor and the ratio.  Run (from the build folder):
 *   mpirun -np 2 --oversubscribe -x LOOM_PLUGINS=$PWD/plugins/libloom-mpi.so \
 *          -x LD_PRELOAD=$PWD/plugins/libloom-mpi.so bench/bench_mpi [iters] [rounds]
 * (as root also OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "loom/loom.h"

enum { FLOOR, IDLE, LOOM, NMODE };
static const char *const mode_name[NMODE] = {"floor (PMPI)", "idle (no session)", "loom"};

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static MPI_Comm comm; /* WORLD with 2 ranks; SELF with 1 (no other process's noise) */

static void pingpong(int mode, int rank, long iters) {
  double out = rank, in = 0;
  int peer = comm == MPI_COMM_SELF ? 0 : 1 - rank;
  for (long i = 0; i < iters; i++) {
    MPI_Request r[2];
    if (mode == FLOOR) {
      PMPI_Irecv(&in, 1, MPI_DOUBLE, peer, 7, comm, &r[0]);
      PMPI_Isend(&out, 1, MPI_DOUBLE, peer, 7, comm, &r[1]);
      PMPI_Waitall(2, r, MPI_STATUSES_IGNORE);
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
    if (mode == FLOOR) PMPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, comm);
    else MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, comm);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  comm = size == 1 ? MPI_COMM_SELF : MPI_COMM_WORLD;
  long iters = argc > 1 ? atol(argv[1]) : 20000;
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  double *t[2][NMODE];
  for (int l = 0; l < 2; l++)
    for (int m = 0; m < NMODE; m++) t[l][m] = calloc((size_t)rounds, sizeof(double));
  size_t events = 0;
  pingpong(FLOOR, rank, iters / 10); /* warm up */
  allreduce(FLOOR, iters / 10);
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
      for (int l = 0; l < 2; l++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_ns();
        if (l == 0) pingpong(m, rank, iters);
        else allreduce(m, iters);
        t[l][m][r] = (now_ns() - t0) / (double)iters;
      }
      if (s) {
        loom_trace *tr = NULL;
        if (loom_session_stop(s, &tr) == LOOM_OK) events = loom_trace_event_count(tr);
        loom_trace_free(tr);
        loom_session_destroy(s);
      }
    }
  if (rank == 0) {
    static const char *const loop[2] = {"ping-pong Irecv+Isend+Waitall (3 calls)",
                                        "allreduce 8 bytes (1 call)"};
    static const int calls[2] = {3, 1};
    printf("bench_mpi: %ld iterations x %d rounds, %d rank(s); last loom round: %zu events\n",
           iters, rounds, size, events);
    for (int l = 0; l < 2; l++) {
      double mins[NMODE], meds[NMODE];
      for (int m = 0; m < NMODE; m++) {
        qsort(t[l][m], (size_t)rounds, sizeof(double), cmp);
        mins[m] = t[l][m][0];
        meds[m] = t[l][m][rounds / 2];
      }
      printf("%s\n", loop[l]);
      for (int m = 0; m < NMODE; m++)
        printf("  %-18s min %8.1f ns/iter  median %8.1f ns/iter  added/call: min %+7.1f ns"
               "  median %+7.1f ns  ratio %.3f\n",
               mode_name[m], mins[m], meds[m], (mins[m] - mins[FLOOR]) / calls[l],
               (meds[m] - meds[FLOOR]) / calls[l], meds[m] / meds[FLOOR]);
    }
  }
  MPI_Finalize();
  return 0;
}
