/*
 * backend.c - the loom half of libloom-mpi.so: registration, the record
 * helpers, the communicator and request tables, identity metadata.
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libfind.h"
#include "mpil.h"

const loom_host *mpil_host;
loom_backend *mpil_self;
loom_clock mpil_clk, mpil_rt;
atomic_uint mpil_gen;
int mpil_world_rank = -1, mpil_world_size = 0;

void *mpil_sym(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (f) return f;
  static const char *const libs[] = {"libmpi.so.40", "libmpi.so.12", "libmpi.so"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0] && !f; i++) {
    void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
    if (h) f = dlsym(h, name);
  }
  return f;
}

/* ---- spin lock (tables are touched briefly, rarely contended) ---------- */
static atomic_flag tab_lock = ATOMIC_FLAG_INIT;
static void lock(void) {
  while (atomic_flag_test_and_set_explicit(&tab_lock, memory_order_acquire)) {
  }
}
static void unlock(void) { atomic_flag_clear_explicit(&tab_lock, memory_order_release); }

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

/* ---- communicators --------------------------------------------------------- */
#define NCOMM 1024
static mpil_comm comms[NCOMM];
/* How many communicators with the same member list this process saw
 * created: every member takes part in each such creation, so the count
 * (and the id it yields) is equal on all of them. */
#define NGROUP 1024
static struct {
  uint64_t h;
  uint64_t n;
} groups[NGROUP];

static mpil_comm *slot_of(MPI_Comm comm, int insert) {
  uint64_t h = mix((uint64_t)(uintptr_t)comm);
  for (unsigned i = 0; i < NCOMM; i++) {
    mpil_comm *c = &comms[(h + i) & (NCOMM - 1)];
    if (c->comm == comm) return c;
    if (!c->comm) return insert ? c : NULL;
  }
  return NULL;
}

static void describe(mpil_comm *c, MPI_Comm comm, int created) {
  static __typeof__(&PMPI_Comm_size) size_fn;
  static __typeof__(&PMPI_Comm_rank) rank_fn;
  static __typeof__(&PMPI_Comm_group) group_fn;
  static __typeof__(&PMPI_Group_translate_ranks) tr_fn;
  static __typeof__(&PMPI_Group_free) gfree_fn;
  if (!size_fn) {
    size_fn = (__typeof__(size_fn))mpil_sym("PMPI_Comm_size");
    rank_fn = (__typeof__(rank_fn))mpil_sym("PMPI_Comm_rank");
    group_fn = (__typeof__(group_fn))mpil_sym("PMPI_Comm_group");
    tr_fn = (__typeof__(tr_fn))mpil_sym("PMPI_Group_translate_ranks");
    gfree_fn = (__typeof__(gfree_fn))mpil_sym("PMPI_Group_free");
  }
  memset(c, 0, sizeof *c);
  c->comm = comm;
  if (!size_fn || !rank_fn || !group_fn || !tr_fn || !gfree_fn) return;
  size_fn(comm, &c->size);
  rank_fn(comm, &c->rank);
  if (comm == MPI_COMM_WORLD) return; /* id 0, identity */
  if (comm == MPI_COMM_SELF) {
    c->id = 1;
    c->world = malloc(sizeof(int));
    if (c->world) c->world[0] = mpil_world_rank;
    return;
  }
  int *ranks = malloc(2 * sizeof(int) * (size_t)(c->size > 0 ? c->size : 1));
  MPI_Group g, wg;
  if (!ranks || group_fn(comm, &g) != MPI_SUCCESS) {
    free(ranks);
    c->id = mix((uint64_t)(uintptr_t)comm) | (1ull << 63);
    return;
  }
  group_fn(MPI_COMM_WORLD, &wg);
  for (int i = 0; i < c->size; i++) ranks[i] = i;
  tr_fn(g, c->size, ranks, wg, ranks + c->size);
  gfree_fn(&g);
  gfree_fn(&wg);
  memmove(ranks, ranks + c->size, sizeof(int) * (size_t)c->size);
  c->world = ranks;
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < c->size; i++) h = mix(h ^ (uint64_t)(unsigned)ranks[i]);
  uint64_t n = 0;
  for (unsigned i = 0; i < NGROUP; i++) {
    unsigned k = (unsigned)(h + i) & (NGROUP - 1);
    if (groups[k].h == h || !groups[k].h) {
      groups[k].h = h;
      n = created ? groups[k].n++ : groups[k].n;
      break;
    }
  }
  /* Ids 0 and 1 are WORLD and SELF; the top bit keeps others clear of them. */
  c->id = (mix(h + n) >> 1) | (1ull << 62);
}

/* Each thread remembers the slots of the last few communicators it used,
 * valid while comm_epoch is unchanged: every creation and free bumps it (a
 * free moves other slots).  A hit costs two loads instead of the table lock
 * and a probe on every call. */
static atomic_uint comm_epoch = 1;
#define NCACHE 4
static MPIL_TLS struct {
  MPI_Comm comm;
  unsigned epoch;
  mpil_comm *c;
} ccache[NCACHE];

mpil_comm *mpil_comm_get(MPI_Comm comm) {
  if (mpil_world_size <= 0 || comm == MPI_COMM_NULL) return NULL;
  unsigned e = atomic_load_explicit(&comm_epoch, memory_order_acquire);
  unsigned k = (unsigned)((uintptr_t)comm >> 6) & (NCACHE - 1);
  if (ccache[k].comm == comm && ccache[k].epoch == e) return ccache[k].c;
  lock();
  mpil_comm *c = slot_of(comm, 1);
  if (c && !c->comm) describe(c, comm, 0);
  unlock();
  if (c) ccache[k].comm = comm, ccache[k].epoch = e, ccache[k].c = c;
  return c;
}

void mpil_comm_created(MPI_Comm comm) {
  if (mpil_world_size <= 0 || comm == MPI_COMM_NULL) return;
  lock();
  mpil_comm *c = slot_of(comm, 1);
  if (c) {
    free(c->world);
    describe(c, comm, 1);
  }
  atomic_fetch_add_explicit(&comm_epoch, 1, memory_order_release);
  unlock();
}

/* Removal with backward shift keeps linear probing correct. */
void mpil_comm_freed(MPI_Comm comm) {
  lock();
  mpil_comm *c = slot_of(comm, 0);
  if (c) {
    free(c->world);
    unsigned i = (unsigned)(c - comms);
    for (unsigned j = (i + 1) & (NCOMM - 1); comms[j].comm; j = (j + 1) & (NCOMM - 1)) {
      unsigned home = (unsigned)mix((uint64_t)(uintptr_t)comms[j].comm) & (NCOMM - 1);
      if (((j - home) & (NCOMM - 1)) >= ((j - i) & (NCOMM - 1))) {
        comms[i] = comms[j];
        i = j;
      }
    }
    memset(&comms[i], 0, sizeof comms[i]);
    atomic_fetch_add_explicit(&comm_epoch, 1, memory_order_release);
  }
  unlock();
}

/* ---- receive requests -------------------------------------------------------- */
#define NREQ 4096
static mpil_req reqs[NREQ];
static uint64_t next_req = 1; /* under the table lock */
/* How many tracked receives hash to each bucket (other bits of the hash
 * than the table's): a wait/test on a send request, half of what a
 * ping-pong completes, sees a zero and skips the locked probe.  The
 * receive's MPI_Irecv returned before any call can complete it, so the
 * increment is visible to the thread that completes it. */
#define NFILTER 8192
static _Atomic uint16_t filter[NFILTER];
static inline _Atomic uint16_t *filter_of(uint64_t h) { return &filter[(h >> 40) & (NFILTER - 1)]; }
/* Changed under the table lock only: a load and a store, no locked add. */
static inline void filter_add(uint64_t h, int d) {
  _Atomic uint16_t *f = filter_of(h);
  atomic_store_explicit(f, (uint16_t)(atomic_load_explicit(f, memory_order_relaxed) + d),
                        memory_order_relaxed);
}

uint64_t mpil_req_add(MPI_Request req, const mpil_comm *c, unsigned gen) {
  uint64_t h = mix((uint64_t)(uintptr_t)req);
  lock();
  uint64_t id = next_req++;
  for (unsigned i = 0; i < NREQ; i++) {
    mpil_req *r = &reqs[(h + i) & (NREQ - 1)];
    /* A slot of an older session is free to take: its request is gone.
     * Taking it keeps every chain intact (it was occupied). */
    if (!r->req || r->req == req || r->gen != gen) {
      /* A slot taken over (same handle, or an older session's) keeps its
       * filter count: the count is of occupied slots per bucket. */
      if (!r->req) filter_add(h, 1);
      else if (r->req != req) filter_add(mix((uint64_t)(uintptr_t)r->req), -1), filter_add(h, 1);
      *r = (mpil_req){.req = req, .id = id, .comm_id = c ? c->id : 0, .comm = c, .gen = gen};
      unlock();
      return id;
    }
  }
  unlock();
  mpil_host->count_lost(mpil_self, 1, "MPI request table full (receive completion not recorded)");
  return id;
}

mpil_req mpil_req_take(MPI_Request req, unsigned gen) {
  mpil_req out = {0};
  if (!req || req == MPI_REQUEST_NULL) return out;
  uint64_t h = mix((uint64_t)(uintptr_t)req);
  if (!atomic_load_explicit(filter_of(h), memory_order_relaxed)) return out;
  lock();
  for (unsigned i = 0; i < NREQ; i++) {
    unsigned k = (unsigned)(h + i) & (NREQ - 1);
    if (!reqs[k].req) break;
    if (reqs[k].req != req) continue;
    if (reqs[k].gen == gen) out = reqs[k];
    filter_add(h, -1);
    /* backward-shift removal */
    unsigned at = k;
    for (unsigned j = (at + 1) & (NREQ - 1); reqs[j].req; j = (j + 1) & (NREQ - 1)) {
      unsigned home = (unsigned)mix((uint64_t)(uintptr_t)reqs[j].req) & (NREQ - 1);
      if (((j - home) & (NREQ - 1)) >= ((j - at) & (NREQ - 1))) {
        reqs[at] = reqs[j];
        at = j;
      }
    }
    memset(&reqs[at], 0, sizeof reqs[at]);
    break;
  }
  unlock();
  return out;
}

/* ---- records -------------------------------------------------------------------- */
void mpil_comm_args(mpil_call *c, const mpil_comm *m) {
  if (!m) return;
  mpil_u(c, "comm", m->id);
  mpil_i(c, "comm_size", m->size);
  mpil_i(c, "comm_rank", m->rank);
}

/* Predefined datatypes are static objects (OpenMPI: &ompi_mpi_*, in the
 * program's data segment when it refers to them, else in libmpi's), never
 * freed, their size fixed: each thread keeps the last few sizes and skips
 * MPI_Type_size (5 ns a call).  A program's own types live on the heap,
 * outside the segment of ompi_mpi_byte, and are asked every time (one
 * could be freed and another made at its address); MPI_Type_free also
 * empties the caches, in case a program's heap were in that segment. */
static _Atomic uintptr_t predef_lo, predef_hi;
static pthread_once_t predef_once = PTHREAD_ONCE_INIT;
static int predef_seg(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  uintptr_t a = (uintptr_t)data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + p->p_vaddr, hi = lo + p->p_memsz;
    if (p->p_type == PT_LOAD && a >= lo && a < hi) {
      atomic_store(&predef_lo, lo);
      atomic_store(&predef_hi, hi);
      return 1;
    }
  }
  return 0;
}
static void predef_find(void) {
  if (&ompi_mpi_byte) dl_iterate_phdr(predef_seg, (void *)&ompi_mpi_byte);
}

#define NTCACHE 4
static MPIL_TLS struct {
  MPI_Datatype t;
  unsigned epoch;
  int size;
} tcache[NTCACHE];
static atomic_uint type_epoch = 1;
void mpil_type_freed(void) { atomic_fetch_add_explicit(&type_epoch, 1, memory_order_release); }

uint64_t mpil_bytes(int count, MPI_Datatype t) {
  static __typeof__(&PMPI_Type_size) fn;
  if (!fn) fn = (__typeof__(fn))mpil_sym("PMPI_Type_size");
  if (count <= 0 || !fn || t == MPI_DATATYPE_NULL) return 0;
  uintptr_t a = (uintptr_t)t, hi = atomic_load_explicit(&predef_hi, memory_order_relaxed);
  if (!hi) pthread_once(&predef_once, predef_find), hi = atomic_load(&predef_hi);
  int pre = a < hi && a >= atomic_load_explicit(&predef_lo, memory_order_relaxed);
  unsigned k = (unsigned)(a >> 9) & (NTCACHE - 1); /* OpenMPI pads them to 512 bytes */
  unsigned e = atomic_load_explicit(&type_epoch, memory_order_acquire);
  int sz = 0;
  if (pre && tcache[k].t == t && tcache[k].epoch == e) sz = tcache[k].size;
  else if (fn(t, &sz) != MPI_SUCCESS) return 0;
  else if (pre) tcache[k].t = t, tcache[k].epoch = e, tcache[k].size = sz;
  return (uint64_t)count * (uint64_t)sz;
}

/* OpenMPI's status carries the byte count (what MPI_Get_count divides by
 * the type's size, 1 for MPI_BYTE): read, it costs nothing, where the call
 * costs 8 ns, and stays right past INT_MAX bytes (MPI_UNDEFINED there). */
uint64_t mpil_status_bytes(const MPI_Status *st) {
#ifdef OPEN_MPI
  return (uint64_t)st->_ucount;
#else
  static __typeof__(&PMPI_Get_count) cnt;
  if (!cnt) cnt = (__typeof__(cnt))mpil_sym("PMPI_Get_count");
  int n = 0;
  if (cnt) cnt(st, MPI_BYTE, &n);
  return n > 0 ? (uint64_t)n : 0;
#endif
}

void mpil_recv_complete(const mpil_req *q, const MPI_Status *st, uint64_t t0, uint64_t t1,
                        unsigned gen) {
  MPIL_CALL(c, gen, t1);
  mpil_i(&c, "src", mpil_world_of(q->comm, st->MPI_SOURCE));
  mpil_i(&c, "recv_tag", st->MPI_TAG);
  mpil_u(&c, "recv_bytes", mpil_status_bytes(st));
  mpil_u(&c, "comm", q->comm_id);
  mpil_u(&c, "request", q->id);
  mpil_i(&c, mpil_key_wait_start, (int64_t)t0); /* converted at flush */
  MPIL_EMIT(&c, "MPI_Recv_complete", LOOM_KIND_INSTANT, t1);
}

/* ---- identity ------------------------------------------------------------------- */
static void meta(const char *k, const char *v) {
  if (LOOM_HOST_HAS(mpil_host, meta_set)) mpil_host->meta_set(mpil_self, k, v);
}

void mpil_after_init(void) {
  __typeof__(&PMPI_Comm_rank) rank_fn = (__typeof__(rank_fn))mpil_sym("PMPI_Comm_rank");
  __typeof__(&PMPI_Comm_size) size_fn = (__typeof__(size_fn))mpil_sym("PMPI_Comm_size");
  if (!rank_fn || !size_fn) return;
  rank_fn(MPI_COMM_WORLD, &mpil_world_rank);
  size_fn(MPI_COMM_WORLD, &mpil_world_size);
  if (!mpil_on()) return;
  char buf[256];
  snprintf(buf, sizeof buf, "%d", mpil_world_rank);
  meta("rank", buf);
  snprintf(buf, sizeof buf, "%d", mpil_world_size);
  meta("world_size", buf);
  meta("distributed_backend", "mpi");
  if (gethostname(buf, sizeof buf) == 0) {
    buf[sizeof buf - 1] = 0;
    meta("hostname", buf);
  }
}

/* ---- the backend -------------------------------------------------------------------- */
static loom_status b_probe(loom_backend *b, char *why, size_t n) {
  (void)why, (void)n;
  mpil_self = b;
  return LOOM_OK;
}
static loom_status b_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  mpil_self = b;
  loom_status st = mpil_host->clock_declare(b, MPIL_CLOCK, "mpi", &mpil_clk);
  if (st == LOOM_OK) st = mpil_host->clock_declare(b, LOOM_CLOCK_REALTIME, "mpi sync", &mpil_rt);
  return st;
}
static loom_status b_start(loom_backend *b) {
  mpil_self = b;
  unsigned g = atomic_load(&mpil_gen);
  atomic_store(&mpil_gen, (g | 1) + ((g & 1) ? 2 : 0));
  if (mpil_world_size > 0) mpil_after_init(); /* joined after MPI_Init */
  return LOOM_OK;
}
static loom_status b_stop(loom_backend *b) {
  (void)b;
  unsigned g = atomic_load(&mpil_gen);
  atomic_store(&mpil_gen, (g & 1) ? g + 1 : g);
  return LOOM_OK;
}
static loom_status b_flush(loom_backend *b) {
  (void)b;
  mpil_buffer_flush();
  return LOOM_OK;
}
static void b_destroy(loom_backend *b) {
  (void)b;
  mpil_buffer_free();
}

/* loom record's default: record "mpi" where an MPI library is installed. */
static int have_mpi(void) { return loom_lib_installed("libmpi.so.40"); }
static const loom_backend_enable enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT | LOOM_ENABLE_F_PRELOAD_SELF,
    .default_check = have_mpi,
};

static const loom_backend_ops ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "mpi",
    .device_type = "mpi",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_RUNTIME) | LOOM_KIND_BIT(LOOM_KIND_COLLECTIVE) |
             LOOM_KIND_BIT(LOOM_KIND_INSTANT) | LOOM_KIND_BIT(LOOM_KIND_MARKER),
    .runtime_category = "mpi",
    .probe = b_probe,
    .configure = b_configure,
    .start = b_start,
    .stop = b_stop,
    .flush = b_flush,
    .destroy = b_destroy,
    .enable = &enable,
};

static loom_status entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  mpil_host = h;
  return h->backend_register(&ops, NULL);
}

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *h) {
  return entry(h);
}
/* Preloaded with loom already in the process: register there too
 * (harmless when LOOM_PLUGINS did it first). */
__attribute__((constructor)) static void attach(void) { loom_plugin_attach(entry); }
