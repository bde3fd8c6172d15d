/*
 * itt.c - libloom-itt.so: an ITT collector (INTEL_LIBITTNOTIFY64, set by
 * `loom record`) and a loom plug-in in one.
 *
 * ittnotify's static part (embedded in oneDNN, TBB, VTune-instrumented code)
 * dlopen()s the collector on its first non-create call and calls
 * __itt_api_init(global, groups): we walk global->api_list_ptr and set the
 * entry points we implement, null_func for the rest.  Domains and string
 * handles the program created before that are in global->domain_list /
 * string_list: they are enabled (flags) and accepted like ours.
 *
 * Tasks (begin/end) become nested user ranges on the calling thread, with the
 * domain's name as category; overlapped tasks and frames become loom ranges
 * with an id; markers become instants; counters become loom counters;
 * __itt_thread_set_name names the calling thread's track (loom_thread_name).
 */
#define _GNU_SOURCE
#define ANNOT_NAME "itt"
#define ANNOT_ENV "INTEL_LIBITTNOTIFY64"
#include "annot.h"
#include "itt_abi.h"

#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t itt_mu = PTHREAD_MUTEX_INITIALIZER;
static __itt_global *itt_g; /* the first global that initialised us */

/* The collector's fields of a handle (extra1/extra2, "reserved to the
 * runtime", zero until then) cache what a task needs: a domain's name as a
 * permanent string, a string handle's loom string id.  Races only store the
 * same value twice. */
static const char *dname(const __itt_domain *d) {
  if (!d || !d->nameA) return "itt";
  __itt_domain *w = (__itt_domain *)d;
  const char *p = __atomic_load_n((const char **)&w->extra2, __ATOMIC_ACQUIRE);
  if (!p && (p = annot_perm(d->nameA, SIZE_MAX)))
    __atomic_store_n(&w->extra2, (void *)p, __ATOMIC_RELEASE);
  return p;
}
static const char *sname(const __itt_string_handle *s) { return s && s->strA ? s->strA : ""; }
/* Only while recording (annot_host is set). */
static loom_string_id sid(__itt_string_handle *s) {
  int id = __atomic_load_n(&s->extra1, __ATOMIC_RELAXED);
  if (!id) {
    id = (int)annot_host->intern(annot_self, s->strA, SIZE_MAX);
    __atomic_store_n(&s->extra1, id, __ATOMIC_RELAXED);
  }
  return (loom_string_id)id;
}

/* ---- handles ----------------------------------------------------------------- */
static __itt_domain *my_domains;
static __itt_string_handle *my_strings;

static __itt_domain *domain_create(const char *name) {
  if (!name) return NULL;
  pthread_mutex_lock(&itt_mu);
  __itt_domain *d = NULL;
  for (__itt_domain *p = itt_g ? itt_g->domain_list : NULL; p && !d; p = p->next)
    if (p->nameA && !strcmp(p->nameA, name)) d = p;
  for (__itt_domain *p = my_domains; p && !d; p = p->next)
    if (!strcmp(p->nameA, name)) d = p;
  if (!d && (d = calloc(1, sizeof *d))) {
    d->nameA = annot_perm(name, SIZE_MAX);
    d->next = my_domains;
    my_domains = d;
  }
  if (d) d->flags = 1;
  pthread_mutex_unlock(&itt_mu);
  return d;
}

static __itt_string_handle *string_handle_create(const char *name) {
  if (!name) return NULL;
  pthread_mutex_lock(&itt_mu);
  __itt_string_handle *s = NULL;
  for (__itt_string_handle *p = itt_g ? itt_g->string_list : NULL; p && !s; p = p->next)
    if (p->strA && !strcmp(p->strA, name)) s = p;
  for (__itt_string_handle *p = my_strings; p && !s; p = p->next)
    if (!strcmp(p->strA, name)) s = p;
  if (!s && (s = calloc(1, sizeof *s))) {
    s->strA = annot_perm(name, SIZE_MAX);
    s->next = my_strings;
    my_strings = s;
  }
  pthread_mutex_unlock(&itt_mu);
  return s;
}

/* ---- tasks, frames, markers --------------------------------------------------- */
static void task_begin(const __itt_domain *d, __itt_id id, __itt_id parent,
                       __itt_string_handle *n) {
  (void)id, (void)parent;
  if (n && n->strA && annot_on()) annot_push_id(dname(d), sid(n));
  else annot_push(dname(d), sname(n), SIZE_MAX);
}
static void task_begin_fn(const __itt_domain *d, __itt_id id, __itt_id parent, void *fn) {
  (void)id, (void)parent;
  char buf[32];
  snprintf(buf, sizeof buf, "%p", fn);
  Dl_info di;
  const char *n = dladdr(fn, &di) && di.dli_sname ? di.dli_sname : buf;
  annot_push(dname(d), n, SIZE_MAX);
}
static void task_end(const __itt_domain *d) { (void)d, (void)annot_pop(); }

static uint64_t key_of(const void *d, const __itt_id *id) {
  uint64_t k = (uint64_t)(uintptr_t)d * 0x9E3779B97F4A7C15ull;
  if (id) k ^= id->d1 * 0xC2B2AE3D27D4EB4Full ^ id->d2;
  return k | 1ull << 63;
}
static void task_begin_overlapped(const __itt_domain *d, __itt_id id, __itt_id parent,
                                  __itt_string_handle *n) {
  (void)parent;
  annot_range_begin(key_of(d, &id), sname(n));
}
static void task_end_overlapped(const __itt_domain *d, __itt_id id) {
  annot_range_end(key_of(d, &id));
}

static void frame_begin_v3(const __itt_domain *d, __itt_id *id) {
  annot_range_begin(key_of(d, id), d && d->nameA ? d->nameA : "frame");
}
static void frame_end_v3(const __itt_domain *d, __itt_id *id) { annot_range_end(key_of(d, id)); }

static void marker(const __itt_domain *d, __itt_id id, __itt_string_handle *n, __itt_scope scope) {
  (void)id, (void)scope;
  annot_mark(dname(d), sname(n), SIZE_MAX);
}

static void thread_set_name(const char *name) { annot_thread_name(0, name); }

/* ---- counters: a handle holds its name and type; loom gets the value ---------- */
typedef struct counter_rec {
  const char *name; /* permanent, "domain/name" or "name" */
  __itt_metadata_type type;
  pthread_mutex_t mu;
  double value;
} counter_rec;

static __itt_counter counter_create_typed(const char *name, const char *domain,
                                          __itt_metadata_type t) {
  if (!name) return NULL;
  counter_rec *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  size_t n =
      strlen(name) + (domain ? strlen(domain) + 1 : 0) + 1; /* the whole name, however long */
  char *buf = malloc(n);
  if (!buf) {
    free(c);
    return NULL;
  }
  snprintf(buf, n, "%s%s%s", domain ? domain : "", domain ? "/" : "", name);
  c->name = annot_perm(buf, SIZE_MAX);
  free(buf);
  c->type = t;
  pthread_mutex_init(&c->mu, NULL);
  return (__itt_counter)c;
}
static __itt_counter counter_create(const char *name, const char *domain) {
  return counter_create_typed(name, domain, __itt_metadata_u64);
}
static void counter_add(__itt_counter h, double delta) {
  counter_rec *c = (counter_rec *)h;
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  double v = c->value += delta;
  pthread_mutex_unlock(&c->mu);
  annot_counter(c->name, v);
}
static void counter_inc(__itt_counter h) { counter_add(h, 1); }
static void counter_dec(__itt_counter h) { counter_add(h, -1); }
static void counter_inc_delta(__itt_counter h, unsigned long long v) { counter_add(h, (double)v); }
static void counter_dec_delta(__itt_counter h, unsigned long long v) { counter_add(h, -(double)v); }
static void counter_set_value(__itt_counter h, void *p) {
  counter_rec *c = (counter_rec *)h;
  if (!c || !p) return;
  double v;
  switch (c->type) {
  case __itt_metadata_s64: v = (double)*(int64_t *)p; break;
  case __itt_metadata_u32: v = *(uint32_t *)p; break;
  case __itt_metadata_s32: v = *(int32_t *)p; break;
  case __itt_metadata_u16: v = *(uint16_t *)p; break;
  case __itt_metadata_s16: v = *(int16_t *)p; break;
  case __itt_metadata_float: v = *(float *)p; break;
  case __itt_metadata_double: v = *(double *)p; break;
  default: v = (double)*(uint64_t *)p; break;
  }
  pthread_mutex_lock(&c->mu);
  c->value = v;
  pthread_mutex_unlock(&c->mu);
  annot_counter(c->name, v);
}
static void counter_destroy(__itt_counter h) { (void)h; /* kept: the name may be in records */ }

/* ---- the collector's entry ---------------------------------------------------- */
static const struct {
  const char *name;
  void *fn;
} impl[] = {
    {"__itt_domain_create", (void *)domain_create},
    {"__itt_string_handle_create", (void *)string_handle_create},
    {"__itt_task_begin", (void *)task_begin},
    {"__itt_task_begin_fn", (void *)task_begin_fn},
    {"__itt_task_end", (void *)task_end},
    {"__itt_task_begin_overlapped", (void *)task_begin_overlapped},
    {"__itt_task_end_overlapped", (void *)task_end_overlapped},
    {"__itt_frame_begin_v3", (void *)frame_begin_v3},
    {"__itt_frame_end_v3", (void *)frame_end_v3},
    {"__itt_marker", (void *)marker},
    {"__itt_thread_set_name", (void *)thread_set_name},
    {"__itt_counter_create", (void *)counter_create},
    {"__itt_counter_create_typed", (void *)counter_create_typed},
    {"__itt_counter_inc", (void *)counter_inc},
    {"__itt_counter_dec", (void *)counter_dec},
    {"__itt_counter_inc_delta", (void *)counter_inc_delta},
    {"__itt_counter_dec_delta", (void *)counter_dec_delta},
    {"__itt_counter_set_value", (void *)counter_set_value},
    {"__itt_counter_destroy", (void *)counter_destroy},
};

EXPORT void __itt_api_init(__itt_global *g, __itt_group_id groups) {
  (void)groups;
  if (!g) return;
  pthread_mutex_lock(&itt_mu);
  if (!itt_g) itt_g = g;
  for (__itt_domain *d = g->domain_list; d; d = d->next) d->flags = 1;
  pthread_mutex_unlock(&itt_mu);
  for (__itt_api_info *a = g->api_list_ptr; a && a->name; a++) {
    if (!a->func_ptr) continue;
    void *fn = a->null_func;
    for (size_t i = 0; i < sizeof impl / sizeof impl[0]; i++)
      if (!strcmp(a->name, impl[i].name)) fn = impl[i].fn;
    *a->func_ptr = fn;
  }
}
