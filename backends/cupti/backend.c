/*
 * backend.c - the loom backend "cupti" (device type "cuda"): registration,
 * probe, session control through CUPTI's activity API, framework-op
 * external correlation, the CUDA injection entry point and the test seams.
 *
 * Lifecycle: probe loads the driver and libcupti (loader.c); configure reads
 * the options and declares the REALTIME clock (cuptiGetTimestamp's clock);
 * start registers the buffer callbacks and enables the activity kinds the
 * session asks for; stop disables them; flush forces CUPTI to complete every
 * buffer (cuptiActivityFlushAll), which decodes them (decode.c), then
 * emits the memory records whose API call never came.
 *
 * Test seams (docs/cupti.md): the option cupti.replay=1 makes probe,
 * configure and start succeed without touching the driver or libcupti, and
 * loom_cupti_replay / loom_cupti_*_buffer_for_test feed fabricated records
 * and buffer requests into the running session.
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_loom.h"
#include "libfind.h"

static atomic_int replay_mode;  /* this session replays (cupti.replay=1) */
static atomic_int recording;    /* CUPTI activities are enabled */
static uint32_t session_kinds;

/* ---- options ------------------------------------------------------------ */
static size_t size_option(loom_backend *b, const char *key, size_t def) {
  const char *v = cupti_host->config_get(b, key);
  if (!v || !*v) return def;
  char *end = NULL;
  unsigned long long n = strtoull(v, &end, 0);
  if (end == v) {
    cupti_host->report(b, LOOM_SEV_WARNING, "option %s=%s is not a number; using %zu", key, v,
                       def);
    return def;
  }
  return (size_t)n;
}

static int replay_option(loom_backend *b) {
  const char *v = cupti_host->config_get(b, "cupti.replay");
  return v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
}

/* ---- activity kinds ----------------------------------------------------- */
typedef struct kind_map { uint32_t loom_kinds; CUpti_ActivityKind kind; } kind_map;

#define K(k) LOOM_KIND_BIT(LOOM_KIND_##k)
static const kind_map kinds_wanted[] = {
    {K(KERNEL), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {K(MEMCPY), CUPTI_ACTIVITY_KIND_MEMCPY},
    {K(MEMSET), CUPTI_ACTIVITY_KIND_MEMSET},
    {K(RUNTIME) | K(MEMORY), CUPTI_ACTIVITY_KIND_RUNTIME}, /* memory: the calls' threads */
    {K(DRIVER), CUPTI_ACTIVITY_KIND_DRIVER},
    {K(SYNC), CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {K(RUNTIME) | K(DRIVER) | K(KERNEL) | K(MEMCPY) | K(MEMSET) | K(MEMORY),
     CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION},
    {K(MEMORY), CUPTI_ACTIVITY_KIND_MEMORY2},
    {K(OVERHEAD), CUPTI_ACTIVITY_KIND_OVERHEAD},
    {LOOM_KINDS_ALL, CUPTI_ACTIVITY_KIND_DEVICE},
};
#define NKINDS (sizeof kinds_wanted / sizeof *kinds_wanted)
#undef K

static int enabled[NKINDS];

static void disable_all(void) {
  for (size_t i = 0; i < NKINDS; i++)
    if (enabled[i]) cupti.ActivityDisable(kinds_wanted[i].kind);
  memset(enabled, 0, sizeof enabled);
}

static loom_status enable_kinds(loom_backend *b) {
  for (size_t i = 0; i < NKINDS; i++) {
    if (!(kinds_wanted[i].loom_kinds & session_kinds)) continue;
    CUptiResult r = cupti.ActivityEnable(kinds_wanted[i].kind);
    if (r != CUPTI_SUCCESS) {
      cupti_host->report(b, LOOM_SEV_ERROR, "cuptiActivityEnable(%d) failed: %s (%d)",
                         (int)kinds_wanted[i].kind, cupti_error(r), (int)r);
      disable_all();
      return LOOM_EBACKEND;
    }
    enabled[i] = 1;
  }
  return LOOM_OK;
}

/* ---- operations --------------------------------------------------------- */
static loom_status cupti_probe(loom_backend *b, char *why, size_t n) {
  cupti_self = b;
  if (replay_option(b)) return LOOM_OK;
  return cupti_load(why, n) == 0 ? LOOM_OK : LOOM_ENOTFOUND;
}

static loom_status cupti_configure(loom_backend *b, uint32_t kinds) {
  cupti_self = b;
  atomic_store(&replay_mode, replay_option(b));
  session_kinds = kinds ? kinds : LOOM_KINDS_ALL;
  cupti_buffers_configure(size_option(b, "cupti.buffer_size", 8u << 20),
                          size_option(b, "cupti.memory_cap", 256u << 20));
  cupti_decode_reset();
  loom_status st = cupti_host->clock_declare(b, LOOM_CLOCK_REALTIME, "CUPTI", &cupti_clock);
  if (st != LOOM_OK) cupti_host->report(b, LOOM_SEV_ERROR, "cannot declare the CUPTI clock");
  return st;
}

static loom_status cupti_start(loom_backend *b) {
  cupti_self = b;
  if (atomic_load(&replay_mode)) return LOOM_OK;
  char why[256] = "";
  if (cupti_load(why, sizeof why) != 0) {
    cupti_host->report(b, LOOM_SEV_ERROR, "CUPTI is unavailable: %s", why);
    return LOOM_EBACKEND;
  }
  static int registered; /* once per process: the callbacks never change */
  CUptiResult r = registered ? CUPTI_SUCCESS
                             : cupti.ActivityRegisterCallbacks(cupti_buffer_requested,
                                                               cupti_buffer_completed);
  registered = r == CUPTI_SUCCESS;
  if (r != CUPTI_SUCCESS) {
    cupti_host->report(b, LOOM_SEV_ERROR, "cuptiActivityRegisterCallbacks failed: %s (%d)",
                       cupti_error(r), (int)r);
    return LOOM_EBACKEND;
  }
  /* Host thread ids as the OS gives them (gettid), like loom's own. */
  r = cupti.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  if (r != CUPTI_SUCCESS)
    cupti_host->report(b, LOOM_SEV_WARNING, "cuptiSetThreadIdType failed: %s (%d); API calls "
                       "may land on threads of their own", cupti_error(r), (int)r);
  loom_status st = enable_kinds(b);
  if (st == LOOM_OK) atomic_store(&recording, 1);
  return st;
}

static loom_status cupti_stop(loom_backend *b) {
  (void)b;
  if (atomic_exchange(&recording, 0)) disable_all();
  return LOOM_OK;
}

static loom_status cupti_flush(loom_backend *b) {
  if (atomic_load(&replay_mode) || !atomic_load(&cupti_loaded)) {
    cupti_decode_finish();
    return LOOM_OK;
  }
  CUptiResult r = cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cupti_decode_finish();
  if (r != CUPTI_SUCCESS) {
    cupti_host->report(b, LOOM_SEV_WARNING, "cuptiActivityFlushAll failed: %s (%d)",
                       cupti_error(r), (int)r);
    return LOOM_EBACKEND;
  }
  return LOOM_OK;
}

static void cupti_destroy(loom_backend *b) {
  (void)b;
  cupti_decode_reset();
  atomic_store(&replay_mode, 0);
}

static void cupti_push(loom_backend *b, uint64_t id) {
  (void)b;
  if (atomic_load_explicit(&recording, memory_order_relaxed))
    cupti.ActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

static void cupti_pop(loom_backend *b) {
  (void)b;
  uint64_t last = 0;
  if (atomic_load_explicit(&recording, memory_order_relaxed))
    cupti.ActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

/* loom record: the driver loads this file as its injection library in cuInit
 * (CUDA_INJECTION64_PATH, unless the user named another); it is also a
 * plug-in.  Recorded by default where a CUDA driver is installed (asking for
 * cuda elsewhere would only warn that there is none). */
static int cupti_default_check(void) { return loom_lib_installed("libcuda.so.1"); }
static const loom_env_setting cupti_env[] = {
    {"CUDA_INJECTION64_PATH", "$SELF", LOOM_ENV_SET_IF_UNSET},
};
static const loom_backend_enable cupti_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT,
    .env = cupti_env,
    .nenv = sizeof cupti_env / sizeof cupti_env[0],
    .default_check = cupti_default_check,
};

static const loom_option_desc cupti_options[] = {
    {"cupti.buffer_size", "bytes per activity buffer, at least 4096 (default 8388608)"},
    {"cupti.memory_cap", "most bytes of buffers handed to CUPTI at once (default 268435456)"},
    {"cupti.replay", "1: a test seam that decodes fabricated buffers, no driver (default off)"},
    {NULL, NULL}};
static const loom_backend_ops cupti_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = cupti_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "cupti",
    .device_type = "cuda",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_MEMSET) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
             LOOM_KIND_BIT(LOOM_KIND_DRIVER) | LOOM_KIND_BIT(LOOM_KIND_SYNC) |
             LOOM_KIND_BIT(LOOM_KIND_OVERHEAD) | LOOM_KIND_BIT(LOOM_KIND_MEMORY),
    .flags = LOOM_BACKEND_F_LAZY,
    .runtime_category = "cuda_runtime",
    .driver_category = "cuda_driver",
    .probe = cupti_probe,
    .configure = cupti_configure,
    .start = cupti_start,
    .stop = cupti_stop,
    .flush = cupti_flush,
    .destroy = cupti_destroy,
    .push_external = cupti_push,
    .pop_external = cupti_pop,
    .enable = &cupti_enable,
};

/* ---- entry points ------------------------------------------------------- */
static loom_status cupti_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  cupti_host = h;
  return h->backend_register(&cupti_ops, NULL);
}

CUPTI_EXPORT loom_status loom_plugin_entry(const loom_host *h) { return cupti_entry(h); }

/* Loaded by a program that runs loom (or by the CUDA driver): register. */
__attribute__((constructor)) static void cupti_attach(void) { loom_plugin_attach(cupti_entry); }

/* CUDA_INJECTION64_PATH=libloom-cupti.so: the driver calls this in cuInit.
 * Registers with loom when loom is in the process; inert otherwise.  Never
 * fails CUDA's initialisation. */
CUPTI_EXPORT int InitializeInjection(void) {
  loom_plugin_attach(cupti_entry);
  return 1;
}

/* ---- test seams (documented in docs/cupti.md) --------------------------- */
/* Decodes a buffer of fabricated activity records, laid out back to back
 * with this build's struct sizes, into the current session.  Returns the
 * records decoded, or -1 when no session is configured or the buffer holds
 * an unknown kind or a truncated record. */
CUPTI_EXPORT int loom_cupti_replay(const void *buffer, size_t bytes) {
  if (!cupti_host || !cupti_self || !cupti_clock || !buffer) return -1;
  return cupti_walk_own(buffer, bytes);
}

/* Asks for an activity buffer exactly as CUPTI would.  Returns it (and its
 * size in *size), or NULL with *size 0 when the memory cap refused it (the
 * refusal is counted as lost in the session). */
CUPTI_EXPORT void *loom_cupti_request_buffer_for_test(size_t *size) {
  uint8_t *buf = NULL;
  size_t max = 0;
  cupti_buffer_requested(&buf, size, &max);
  return buf;
}

/* Hands a buffer back as CUPTI would when it completes: decodes its first
 * valid bytes and frees it. */
CUPTI_EXPORT void loom_cupti_complete_buffer_for_test(void *buffer, size_t size, size_t valid) {
  cupti_buffer_completed(NULL, 0, buffer, size, valid);
}
