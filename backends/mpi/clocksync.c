/*
 * clocksync.c - clock sync points with rank 0 at MPI_Init and MPI_Finalize.
 *
 * Every rank r != 0 exchanges a few ping-pongs with rank 0 on a private
 * duplicate of MPI_COMM_WORLD (so no message of the program can match
 * ours) and keeps the one with the smallest round trip:
 *   offset = t_ref - (t_send + t_recv) / 2,  error <= rtt / 2.
 * Times are CLOCK_REALTIME converted to the session timeline (epoch ns as
 * the trace shows them, test_clock_shift included).  The exchange runs on
 * every rank that has this library whether or not it records, so ranks
 * never disagree on who takes part.
 */
#include <time.h>

#include "mpil.h"

#define ROUNDS 8
static MPI_Comm sync_comm = MPI_COMM_NULL;

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t epoch(uint64_t t) {
  return mpil_on() ? mpil_host->clock_to_epoch_ns(mpil_self, mpil_rt, t) : (int64_t)t;
}

static void emit(const char *phase, uint64_t at, int64_t offset, uint64_t rtt) {
  unsigned gen = mpil_on();
  if (!gen) return;
  MPIL_CALL(c, gen, at);
  mpil_i(&c, "reference_rank", 0);
  mpil_i(&c, "offset_ns", offset);
  mpil_u(&c, "rtt_ns", rtt);
  mpil_s(&c, "phase", phase);
  loom_arg a[MPIL_MAXARGS];
  mpil_call_args(&c, a);
  static loom_string_id id;
  static unsigned idgen;
  if (idgen != gen) id = 0, idgen = gen;
  if (!id) id = mpil_host->intern(mpil_self, "clock_sync", SIZE_MAX);
  loom_record r = {.struct_size = sizeof r,
                   .kind = LOOM_KIND_MARKER,
                   .clock = mpil_rt,
                   .device = LOOM_DEVICE_HOST,
                   .start = at,
                   .end = at,
                   .name = id,
                   .nargs = c.n,
                   .category = "loom",
                   .args = a};
  mpil_host->emit(mpil_self, &r);
}

void mpil_clock_sync(const char *phase) {
  __typeof__(&PMPI_Send) send = (__typeof__(send))mpil_sym("PMPI_Send");
  __typeof__(&PMPI_Recv) recv = (__typeof__(recv))mpil_sym("PMPI_Recv");
  __typeof__(&PMPI_Comm_dup) dup = (__typeof__(dup))mpil_sym("PMPI_Comm_dup");
  __typeof__(&PMPI_Comm_free) cfree = (__typeof__(cfree))mpil_sym("PMPI_Comm_free");
  if (!send || !recv || !dup || !cfree || mpil_world_size <= 0 || !mpil_host) return;
  int init = phase[0] == 'i';
  if (init && dup(MPI_COMM_WORLD, &sync_comm) != MPI_SUCCESS) sync_comm = MPI_COMM_NULL;
  if (sync_comm == MPI_COMM_NULL) return;
  if (mpil_world_rank == 0) {
    for (int r = 1; r < mpil_world_size; r++)
      for (int k = 0; k < ROUNDS; k++) {
        int64_t t;
        recv(&t, 1, MPI_LONG_LONG_INT, r, 0, sync_comm, MPI_STATUS_IGNORE);
        t = epoch(real_ns());
        send(&t, 1, MPI_LONG_LONG_INT, r, 0, sync_comm);
      }
    uint64_t now = real_ns();
    emit(phase, now, 0, 0);
  } else {
    uint64_t best_rtt = UINT64_MAX, best_s = 0, best_r = 0;
    int64_t best_ref = 0;
    for (int k = 0; k < ROUNDS; k++) {
      int64_t t = 0;
      uint64_t ts = real_ns();
      send(&t, 1, MPI_LONG_LONG_INT, 0, 0, sync_comm);
      recv(&t, 1, MPI_LONG_LONG_INT, 0, 0, sync_comm, MPI_STATUS_IGNORE);
      uint64_t tr = real_ns();
      if (tr - ts < best_rtt) best_rtt = tr - ts, best_s = ts, best_r = tr, best_ref = t;
    }
    /* Converted after the exchange: the conversion stays off the round trip. */
    int64_t es = epoch(best_s), er = epoch(best_r);
    int64_t offset = best_ref - (es + (er - es) / 2);
    emit(phase, best_s + (best_r - best_s) / 2, offset, (uint64_t)(er - es));
  }
  if (!init) {
    cfree(&sync_comm);
    sync_comm = MPI_COMM_NULL;
  }
}
