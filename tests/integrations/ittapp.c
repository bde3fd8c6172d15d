/*
 * ittapp.c - a program instrumented with ITT the way ittnotify's static part
 * works (intel/ittapi src/ittnotify/ittnotify_static.c), written out here
 * because no Debian package ships ittnotify: a global with the list of
 * entry points, domains and string handles created before any collector is
 * loaded (kept in the global's lists, disabled), and the collector loaded
 * lazily on the first non-create call from INTEL_LIBITTNOTIFY64 and handed
 * the global through __itt_api_init.  The program knows nothing of loom.
 *   ittapp [N]  task "load" (domain pre.domain, created before loading)
 *               around N tasks "step" (domain app.compute) each with a
 *               marker "tick" and a counter increment; 2 frames; a worker
 *               thread with 2 tasks "work"; thread names "main" and
 *               "itt worker" (__itt_thread_set_name).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backends/itt/itt_abi.h"

/* entry points, as ittnotify's ITTNOTIFY_NAME(...) pointers */
static __itt_domain *(*p_domain_create)(const char *);
static __itt_string_handle *(*p_string_handle_create)(const char *);
static void (*p_task_begin)(const __itt_domain *, __itt_id, __itt_id, __itt_string_handle *);
static void (*p_task_end)(const __itt_domain *);
static void (*p_frame_begin_v3)(const __itt_domain *, __itt_id *);
static void (*p_frame_end_v3)(const __itt_domain *, __itt_id *);
static void (*p_marker)(const __itt_domain *, __itt_id, __itt_string_handle *, __itt_scope);
static __itt_counter (*p_counter_create)(const char *, const char *);
static void (*p_counter_inc)(__itt_counter);
static void (*p_pause)(void);
static void (*p_thread_set_name)(const char *);

static void null_func(void) {}

#define E(n) {"__itt_" #n, (void **)&p_##n, NULL, (void *)null_func, __itt_group_all}
static __itt_api_info api_list[] = {
    E(domain_create), E(string_handle_create), E(task_begin), E(task_end), E(frame_begin_v3),
    E(frame_end_v3), E(marker), E(counter_create), E(counter_inc), E(pause), E(thread_set_name),
    {NULL, NULL, NULL, NULL, __itt_group_none}};

static __itt_global g = {.magic = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30},
                         .version_major = 3, .version_minor = 0,
                         .mutex = PTHREAD_MUTEX_INITIALIZER, .api_list_ptr = api_list};
static const __itt_id null_id = {0, 0, 0};

/* Before a collector: handles go into the global's lists (disabled). */
static __itt_domain *domain_create(const char *name) {
  if (p_domain_create) return p_domain_create(name);
  __itt_domain *d = calloc(1, sizeof *d);
  d->nameA = strdup(name);
  d->next = g.domain_list;
  g.domain_list = d;
  return d;
}
static __itt_string_handle *string_handle_create(const char *name) {
  if (p_string_handle_create) return p_string_handle_create(name);
  __itt_string_handle *s = calloc(1, sizeof *s);
  s->strA = strdup(name);
  s->next = g.string_list;
  g.string_list = s;
  return s;
}

/* The lazy load, once, on the first non-create call. */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void load_collector(void) {
  const char *path = getenv("INTEL_LIBITTNOTIFY64");
  void *lib = path && *path ? dlopen(path, RTLD_LAZY) : NULL;
  if (!lib) return;
  g.lib = lib;
  void (*init)(__itt_global *, __itt_group_id) =
      (void (*)(__itt_global *, __itt_group_id))dlsym(lib, "__itt_api_init");
  if (init) init(&g, __itt_group_all);
  g.api_initialized = 1;
}
#define ITT(n, ...) (pthread_once(&once, load_collector), p_##n ? p_##n(__VA_ARGS__) : (void)0)
#define TASK_BEGIN(d, s) do { if ((d)->flags) ITT(task_begin, d, null_id, null_id, s); } while (0)
#define TASK_END(d) do { if ((d)->flags) ITT(task_end, d); } while (0)

static __itt_domain *pre, *comp;
static __itt_string_handle *s_work;

static void *worker(void *arg) {
  (void)arg;
  if (p_thread_set_name) p_thread_set_name("itt worker");
  for (int i = 0; i < 2; i++) {
    TASK_BEGIN(comp, s_work);
    TASK_END(comp);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3;
  pre = domain_create("pre.domain");
  __itt_string_handle *s_load = string_handle_create("load");
  /* the first non-create call loads the collector */
  pthread_once(&once, load_collector);
  if (p_thread_set_name) p_thread_set_name("main");
  comp = domain_create("app.compute");
  __itt_string_handle *s_step = string_handle_create("step"), *s_tick = string_handle_create("tick");
  s_work = string_handle_create("work");
  __itt_counter c = p_counter_create ? p_counter_create("steps", "app.compute") : NULL;
  TASK_BEGIN(pre, s_load);
  for (int i = 0; i < n; i++) {
    TASK_BEGIN(comp, s_step);
    if (comp->flags) ITT(marker, comp, null_id, s_tick, 2);
    if (c) ITT(counter_inc, c);
    TASK_END(comp);
  }
  TASK_END(pre);
  char lname[601]; /* a counter whose name is past 512 bytes, incremented once */
  memset(lname, 'c', 600);
  lname[600] = 0;
  __itt_counter lc = p_counter_create ? p_counter_create(lname, "app.compute") : NULL;
  if (lc) ITT(counter_inc, lc);
  for (int i = 0; i < 2; i++) {
    __itt_id fid = {(unsigned long long)i + 1, 0, 0};
    if (comp->flags) ITT(frame_begin_v3, comp, &fid);
    if (comp->flags) ITT(frame_end_v3, comp, &fid);
  }
  pthread_t th;
  pthread_create(&th, NULL, worker, NULL);
  pthread_join(th, NULL);
  printf("ittapp: %d steps, collector %s\n", n, g.lib ? "loaded" : "absent");
  return 0;
}
