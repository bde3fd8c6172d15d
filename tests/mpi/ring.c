/*
 * ring.c - the 4-rank MPI program of the MPI backend's tests: 5 steps, each
 * loom_step() (so step s is ProfilerStep#s; a last one after the loop ends
 * step 4 before MPI_Finalize), a ring exchange with nonblocking calls (Irecv
 * from the left, Isend to the right, Waitall), an 8-byte allreduce and a
 * barrier.  Rank 2 sleeps 50 ms before step 3's exchange (a late sender the
 * analysis can find), inside a user range "late" so that a test can compare
 * the waiting with how long the sleep really took.
 * Step s sends 4*(s+1) ints with tag 100+s.  An optional argument: ms to
 * pause before MPI_Finalize (lets a clock skew grow between the sync points).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "loom/loom.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int out[20], in[20];
  double sum = 0;
  for (int s = 0; s < 5; s++) {
    loom_step();
    if (rank == 2 && s == 3) {
      loom_range_push("late");
      nanosleep(&(struct timespec){0, 50000000}, NULL);
      loom_range_pop();
    }
    for (int i = 0; i < 20; i++) out[i] = rank * 100 + s;
    MPI_Request req[2];
    MPI_Irecv(in, 4 * (s + 1), MPI_INT, (rank + size - 1) % size, 100 + s, MPI_COMM_WORLD,
              &req[0]);
    MPI_Isend(out, 4 * (s + 1), MPI_INT, (rank + 1) % size, 100 + s, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    if (in[0] != ((rank + size - 1) % size) * 100 + s) {
      fprintf(stderr, "rank %d: step %d received %d\n", rank, s, in[0]);
      return 1;
    }
    double v = rank + s, r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    sum += r;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  loom_step();
  if (rank == 0) printf("sum %g\n", sum);
  long pause = argc > 1 ? atol(argv[1]) : 0;
  if (pause > 0) nanosleep(&(struct timespec){pause / 1000, pause % 1000 * 1000000}, NULL);
  MPI_Finalize();
  return 0;
}
