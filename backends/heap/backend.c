/*
 * backend.c - the backend "heap" (device type "heap") of libloom-heap.so:
 * the program's own heap allocations (malloc, calloc, realloc, free,
 * posix_memalign, aligned_alloc, memalign, valloc, pvalloc) as memory
 * records of kind "host", on the thread that made them, named after the
 * call ("realloc" gives a free of the old block and an allocation of the
 * new one).  Off by default: `loom record --memory host` (or --devices
 * ...,heap) preloads the library, which is what lets its functions come
 * before the C library's (interpose.c), and asks for the device type.
 * Anywhere else the backend says why it cannot record (probe).
 *
 * Two ways to record, chosen at configure: through loom's host recorder
 * (loom_memory_alloc/free, found in the process with dlsym: per-thread
 * buffers, no lock; the events are named "[memory]" as the program's own
 * calls to those functions are), the default; or with heap.names=1 (or
 * with a libloom that lacks them) as the backend's records, each named
 * after its call: through host->memory (ABI 1.6: a host record as well,
 * no lock), else host->emit at several times the cost (a lock and the
 * backend's arrays per record).
 *
 * loom's own allocations are not the program's: nothing is recorded on a
 * thread while it is inside a record (the core's allocations as it takes
 * one), nor for a call made directly from loom's libraries (libloom*,
 * loom-preload.so: their executable segments, read at configure).
 *
 * A fork waits for records being taken to finish (pthread_atfork), so the
 * child never inherits the core's backend lock held by another thread.
 */
#include "heap.h" /* first: _GNU_SOURCE */

#define LOOM_PLUGIN_WANT_ATTACH
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/plugin.h"

static const loom_host *heap_host;
static loom_backend *heap_self;
static loom_clock heap_clk;
static int wanted; /* the session asked for memory records */
static loom_string_id names[HC_COUNT_];
typedef void (*memory_fn)(uint64_t addr, uint64_t bytes, loom_memory_kind kind, int32_t device,
                          uint64_t reserved);
static memory_fn rec_alloc, rec_free; /* loom_memory_alloc/free; NULL: through emit */
static __thread int inside __attribute__((tls_model("initial-exec")));
static atomic_int forking, inflight;

/* ---- loom's own code ----------------------------------------------------- */
typedef struct range { uintptr_t lo, hi; } range;
static range own[32];
static atomic_int nown;

static int own_module(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  return !strncmp(b, "libloom", 7) || !strncmp(b, "loom-preload", 12);
}

static int add_module(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  int *n = user;
  if (!info->dlpi_name || !own_module(info->dlpi_name)) return 0;
  for (int i = 0; i < info->dlpi_phnum && *n < (int)(sizeof own / sizeof *own); i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    own[*n].lo = info->dlpi_addr + ph->p_vaddr;
    own[*n].hi = own[*n].lo + ph->p_memsz;
    (*n)++;
  }
  return 0;
}

static int by_loom(const void *ra) {
  uintptr_t a = (uintptr_t)ra;
  int n = atomic_load_explicit(&nown, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (a >= own[i].lo && a < own[i].hi) return 1;
  return 0;
}

/* ---- records ------------------------------------------------------------ */
uint64_t heap_now(void) {
  return heap_host->recorder_now(NULL);
}

void heap_note(int alloc, int call, const void *p, size_t n, uint64_t t, const void *ra) {
  if (inside || by_loom(ra)) return;
  inside = 1;
  memory_fn fast = alloc ? rec_alloc : rec_free;
  if (fast) { /* the host recorder: lock-free, fork-safe */
    fast((uint64_t)(uintptr_t)p, n, LOOM_MEMORY_HOST, -1, 0);
    inside = 0;
    return;
  }
  atomic_fetch_add(&inflight, 1);
  if (!atomic_load(&forking) && LOOM_HOST_HAS(heap_host, memory)) { /* ABI 1.6: no lock */
    loom_memory_event m = {.struct_size = sizeof m,
                           .flags = alloc ? LOOM_RECORD_F_ALLOC : LOOM_RECORD_F_FREE,
                           .kind = LOOM_MEMORY_HOST, .clock = heap_clk,
                           .device = LOOM_DEVICE_HOST, .name = names[call],
                           .ts = t ? t : heap_now(), .addr = (uint64_t)(uintptr_t)p,
                           .bytes = alloc ? n : 0};
    heap_host->memory(heap_self, &m);
  } else if (!atomic_load(&forking)) {
    loom_arg a[2] = {{.key = "addr", .type = LOOM_ARG_UINT, .v.u = (uint64_t)(uintptr_t)p},
                     {.key = "bytes", .type = LOOM_ARG_UINT, .v.u = n}};
    uint64_t ts = t ? t : heap_now();
    loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY,
                     .flags = alloc ? LOOM_RECORD_F_ALLOC : LOOM_RECORD_F_FREE,
                     .clock = heap_clk, .device = LOOM_DEVICE_HOST, .start = ts, .end = ts,
                     .name = names[call], .nargs = alloc ? 2 : 1, .args = a};
    heap_host->emit(heap_self, &r);
  }
  atomic_fetch_sub(&inflight, 1);
  inside = 0;
}

static void fork_prepare(void) {
  atomic_store(&forking, 1);
  while (atomic_load(&inflight)) sched_yield();
}
static void fork_done(void) { atomic_store(&forking, 0); }

/* ---- operations ---------------------------------------------------------- */
static loom_status heap_probe(loom_backend *b, char *why, size_t n) {
  heap_self = b;
  if (heap_interposed()) return LOOM_OK;
  const char *pre = getenv("LD_PRELOAD");
  if (pre && strstr(pre, "libloom-heap"))
    snprintf(why, n, "the program's malloc comes before libloom-heap.so's although it is "
             "preloaded (the program defines malloc itself): its heap cannot be recorded");
  else
    snprintf(why, n, "libloom-heap.so is not preloaded, so the program's malloc is not its own: "
             "record with 'loom record --memory host' (or put it first in LD_PRELOAD)");
  return LOOM_ENOTFOUND;
}

static loom_status heap_configure(loom_backend *b, uint32_t kinds) {
  static const char *const call_names[HC_COUNT_] = {
      "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
      "valloc", "pvalloc"};
  heap_self = b;
  wanted = !kinds || (kinds & LOOM_KIND_BIT(LOOM_KIND_MEMORY));
  loom_clock_domain d;
  heap_host->recorder_now(&d);
  loom_status st = heap_host->clock_declare(b, d, "host", &heap_clk);
  if (st != LOOM_OK) return st;
  for (int i = 0; i < HC_COUNT_; i++) names[i] = heap_host->intern(b, call_names[i], SIZE_MAX);
  const char *v = heap_host->config_get(b, "heap.names");
  int named = v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
  rec_alloc = named ? NULL : (memory_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "loom_memory_alloc");
  rec_free = named ? NULL : (memory_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "loom_memory_free");
  if (!rec_alloc || !rec_free) rec_alloc = rec_free = NULL;
  int n = 0;
  atomic_store(&nown, 0);
  dl_iterate_phdr(add_module, &n);
  atomic_store_explicit(&nown, n, memory_order_release);
  return LOOM_OK;
}

static loom_status heap_start(loom_backend *b) {
  heap_self = b;
  if (wanted) heap_set_recording(1);
  return LOOM_OK;
}

static loom_status heap_stop(loom_backend *b) {
  (void)b;
  heap_set_recording(0);
  return LOOM_OK;
}

static const loom_backend_enable heap_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_PRELOAD_WHEN_ASKED,
};

static const loom_option_desc heap_options[] = {
    {"heap.names", "1: each record named after its call (malloc, calloc, realloc, free...), "
                   "through the backend at several times the cost (default 0: \"[memory]\")"},
    {NULL, NULL}};

static const loom_backend_ops heap_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = heap_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "heap",
    .device_type = "heap",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_MEMORY),
    .probe = heap_probe,
    .configure = heap_configure,
    .start = heap_start,
    .stop = heap_stop,
    .enable = &heap_enable,
};

static loom_status heap_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  if (!LOOM_HOST_HAS(h, recorder_now)) return LOOM_EABI; /* ABI 1.4's clock */
  static atomic_int once;
  if (!atomic_exchange(&once, 1)) pthread_atfork(fork_prepare, fork_done, fork_done);
  heap_host = h;
  return h->backend_register(&heap_ops, NULL);
}

HEAP_EXPORT loom_status loom_plugin_entry(const loom_host *h) { return heap_entry(h); }

/* Preloaded, or loaded by a program that runs loom: register. */
__attribute__((constructor)) static void heap_attach(void) { loom_plugin_attach(heap_entry); }
