/*
 * annot.h - the loom half shared by the annotation plug-ins (libloom-nvtx.so,
 * libloom-itt.so): a "cpu" backend that turns a foreign annotation API into
 * loom host records with the API's domain as category.
 *
 * Nested ranges: a per-thread stack; the record (LOOM_KIND_USER_RANGE) is
 * emitted when the range is popped, on the calling thread (resource 0).
 * Instants likewise; both may carry one string argument.  Ranges with an id
 * (begin/end on any thread), counters and thread names go through loom.h
 * (loom_range_begin/_end, loom_counter, loom_thread_name) found with
 * dlsym, so nothing links libloom: without loom in the process (or with no
 * session recording "cpu") every call is a cheap no-op.
 *
 * Header-only with static state: include it from exactly one file of a
 * plug-in and define ANNOT_NAME ("nvtx") and ANNOT_ENV (the variable that
 * names the collector to the API) before.
 */
#ifndef LOOM_ANNOT_H
#define LOOM_ANNOT_H
#define LOOM_PLUGIN_WANT_ATTACH
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "loom/plugin.h"

static const loom_host *annot_host;
static loom_backend *annot_self;
static loom_clock annot_clk;
static atomic_uint annot_gen; /* odd: recording */

/* ---- permanent strings (names passed to loom.h must outlive the session) --- */
typedef struct annot_str {
  struct annot_str *next;
  size_t len;
  char s[];
} annot_str;
static annot_str *annot_tab[1024];
static pthread_mutex_t annot_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *annot_perm(const char *s, size_t len) {
  if (!s) return NULL;
  if (len == SIZE_MAX) len = strlen(s);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  pthread_mutex_lock(&annot_mu);
  annot_str **b = &annot_tab[h & 1023], *e;
  for (e = *b; e; e = e->next)
    if (e->len == len && !memcmp(e->s, s, len)) break;
  if (!e && (e = malloc(sizeof *e + len + 1))) {
    e->len = len;
    memcpy(e->s, s, len);
    e->s[len] = 0;
    e->next = *b;
    *b = e;
  }
  pthread_mutex_unlock(&annot_mu);
  return e ? e->s : NULL;
}

/* ---- per-thread stack of nested ranges ----------------------------------- */
typedef struct annot_frame {
  uint64_t start;
  loom_string_id name;
  unsigned gen;
  const char *cat;
  const char *akey, *aval; /* one optional string argument (permanent) */
} annot_frame;
#define ANNOT_DEPTH 256
static __thread annot_frame annot_stack[ANNOT_DEPTH];
static __thread int annot_depth;

static inline int annot_on(void) {
  return atomic_load_explicit(&annot_gen, memory_order_acquire) & 1;
}

/* A range past ANNOT_DEPTH levels is not recorded: counted as lost when it
 * would have been (the pops still balance). */
static void annot_too_deep(int named) {
  if (named && annot_on())
    annot_host->count_lost(annot_self, 1,
                           "user ranges nested deeper than 256 levels (not recorded)");
}

/* Returns the new depth (NVTX's push result is the zero-based level).
 * akey/aval: an optional string argument of the range (permanent strings). */
static int annot_push_arg(const char *cat, const char *akey, const char *aval, const char *name,
                          size_t len) {
  int d = annot_depth++;
  if (d >= ANNOT_DEPTH) {
    annot_too_deep(name != NULL);
    return d;
  }
  annot_frame *f = &annot_stack[d];
  unsigned g = atomic_load_explicit(&annot_gen, memory_order_acquire);
  f->gen = 0;
  if (!(g & 1) || !name) return d;
  f->gen = g;
  f->cat = cat;
  f->akey = akey;
  f->aval = aval;
  f->name = annot_host->intern(annot_self, name, len);
  f->start = annot_host->clock_now(LOOM_CLOCK_MONOTONIC);
  return d;
}

__attribute__((unused)) static int annot_push(const char *cat, const char *name, size_t len) {
  return annot_push_arg(cat, NULL, NULL, name, len);
}

/* A push with a name interned before (a handle that caches its id). */
__attribute__((unused)) static int annot_push_id(const char *cat, loom_string_id name) {
  int d = annot_depth++;
  if (d >= ANNOT_DEPTH) {
    annot_too_deep(1);
    return d;
  }
  annot_frame *f = &annot_stack[d];
  unsigned g = atomic_load_explicit(&annot_gen, memory_order_acquire);
  f->gen = 0;
  if (!(g & 1)) return d;
  *f = (annot_frame){.start = annot_host->clock_now(LOOM_CLOCK_MONOTONIC), .name = name,
                     .gen = g, .cat = cat};
  return d;
}

static void annot_emit(uint16_t kind, const char *cat, loom_string_id name, uint64_t start,
                       uint64_t end, const char *akey, const char *aval) {
  loom_arg a = {.key = akey, .type = LOOM_ARG_STRING, .v.s = aval};
  loom_record r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  r.kind = kind;
  r.clock = annot_clk;
  r.device = LOOM_DEVICE_HOST;
  r.tid = 0; /* the calling thread */
  r.start = start;
  r.end = end;
  r.name = name;
  r.category = cat;
  if (akey && aval) r.args = &a, r.nargs = 1;
  annot_host->emit(annot_self, &r);
}

/* Returns the depth left, or -1 when nothing was open. */
static int annot_pop(void) {
  if (annot_depth <= 0) return -1;
  int d = --annot_depth;
  if (d >= ANNOT_DEPTH) return d;
  annot_frame *f = &annot_stack[d];
  if (f->gen && f->gen == atomic_load_explicit(&annot_gen, memory_order_acquire))
    annot_emit(LOOM_KIND_USER_RANGE, f->cat, f->name, f->start,
               annot_host->clock_now(LOOM_CLOCK_MONOTONIC), f->akey, f->aval);
  return d;
}

static void annot_mark_arg(const char *cat, const char *akey, const char *aval, const char *name,
                           size_t len) {
  if (!annot_on() || !name) return;
  uint64_t t = annot_host->clock_now(LOOM_CLOCK_MONOTONIC);
  annot_emit(LOOM_KIND_INSTANT, cat, annot_host->intern(annot_self, name, len), t, t, akey, aval);
}
__attribute__((unused)) static void annot_mark(const char *cat, const char *name, size_t len) {
  annot_mark_arg(cat, NULL, NULL, name, len);
}

/* ---- loom.h, found at run time ------------------------------------------- */
static void (*annot_range_begin_fn)(uint64_t, const char *);
static void (*annot_range_end_fn)(uint64_t);
static void (*annot_counter_fn)(const char *, double);
static void (*annot_thread_name_fn)(uint64_t, const char *);

static void annot_range_begin(uint64_t id, const char *name) {
  if (annot_range_begin_fn && annot_on()) annot_range_begin_fn(id, annot_perm(name, SIZE_MAX));
}
static void annot_range_end(uint64_t id) {
  if (annot_range_end_fn && annot_on()) annot_range_end_fn(id);
}
/* Thread names are kept by loom whether or not a session records. */
static void annot_thread_name(uint64_t tid, const char *name) {
  if (annot_thread_name_fn) annot_thread_name_fn(tid, name);
}
__attribute__((unused)) static void annot_counter(const char *name, double v) {
  if (annot_counter_fn && annot_on()) annot_counter_fn(annot_perm(name, SIZE_MAX), v);
}

/* ---- the backend ----------------------------------------------------------- */
static loom_status annot_probe(loom_backend *b, char *why, size_t n) {
  (void)why, (void)n;
  annot_self = b;
  return LOOM_OK;
}
static loom_status annot_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  annot_self = b;
  return annot_host->clock_declare(b, LOOM_CLOCK_MONOTONIC, ANNOT_NAME, &annot_clk);
}
static loom_status annot_start(loom_backend *b) {
  annot_self = b;
  unsigned g = atomic_load(&annot_gen);
  atomic_store(&annot_gen, (g | 1) + ((g & 1) ? 2 : 0));
  return LOOM_OK;
}
static loom_status annot_stop(loom_backend *b) {
  (void)b;
  unsigned g = atomic_load(&annot_gen);
  atomic_store(&annot_gen, (g & 1) ? g + 1 : g);
  return LOOM_OK;
}
static loom_status annot_flush(loom_backend *b) {
  (void)b;
  return LOOM_OK;
}

/* loom record: the annotation API loads this file as its collector through
 * ANNOT_ENV (INTEL_LIBITTNOTIFY64, NVTX_INJECTION64_PATH), unless the user
 * chose another; it is also a plug-in, so the backend is registered before
 * the session starts.  Its device type, cpu, is always recorded. */
static const loom_env_setting annot_env[] = {
    {ANNOT_ENV, "$SELF", LOOM_ENV_SET_IF_UNSET},
};
static const loom_backend_enable annot_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT,
    .env = annot_env,
    .nenv = sizeof annot_env / sizeof annot_env[0],
};

static const loom_backend_ops annot_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = ANNOT_NAME,
    .device_type = "cpu",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_USER_RANGE) | LOOM_KIND_BIT(LOOM_KIND_INSTANT),
    .probe = annot_probe,
    .configure = annot_configure,
    .start = annot_start,
    .stop = annot_stop,
    .flush = annot_flush,
    .enable = &annot_enable,
};

static loom_status annot_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  annot_host = h;
  annot_range_begin_fn =
      (void (*)(uint64_t, const char *))(uintptr_t)dlsym(RTLD_DEFAULT, "loom_range_begin");
  annot_range_end_fn = (void (*)(uint64_t))(uintptr_t)dlsym(RTLD_DEFAULT, "loom_range_end");
  annot_counter_fn = (void (*)(const char *, double))(uintptr_t)dlsym(RTLD_DEFAULT, "loom_counter");
  annot_thread_name_fn =
      (void (*)(uint64_t, const char *))(uintptr_t)dlsym(RTLD_DEFAULT, "loom_thread_name");
  return h->backend_register(&annot_ops, NULL);
}

__attribute__((visibility("default"))) loom_status loom_plugin_entry(const loom_host *h) {
  return annot_entry(h);
}
/* Loaded by the annotated program's own loader with loom already in the
 * process: register there too (harmless when LOOM_PLUGINS did it first). */
__attribute__((constructor)) static void annot_attach(void) { loom_plugin_attach(annot_entry); }

#endif
