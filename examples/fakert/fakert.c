/*
 * fakert.c - libfakert.so, the fake runtime of examples/fakert (fakert.h).
 *
 * The device clock is a pure function of the host's CLOCK_REALTIME: tick T
 * (us) starts at realtime ns (T - EPOCH) * 1000 / (1 + DRIFT).  Because it
 * is fake, it can say what its times really were: with FRT_TRUTH=FILE the
 * device thread writes, for each work item, "id begin_us realtime_ns" where
 * realtime_ns is the exact CLOCK_REALTIME at which tick begin_us started
 * (what a profiler's conversion should give).
 */
#define _GNU_SOURCE
#include "fakert.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define EPOCH_US 4200000000000ull /* the device's own origin */
#define DRIFT 100e-6              /* device us run 100 ppm fast */
#define MAXQ 8
#define MAXW 64

typedef struct item {
  frt_work w;
  uint64_t dur_us;
} item;

struct frt_queue {
  uint32_t index;
  char name[32];
  item batch[MAXW];
  int n;
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t worker;
  int started;
  frt_queue queues[MAXQ];
  uint32_t nqueues;
  frt_queue *submitted; /* the batch the device runs now */
  int64_t depth;        /* enqueued, not yet done */
  FILE *truth;
} rt = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static _Atomic(const frt_hooks *) hooks;
static atomic_uint_fast64_t next_id;

static uint64_t ns_of(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t us_of_real(uint64_t real) {
  return EPOCH_US + (uint64_t)((long double)real * (1 + DRIFT) / 1000);
}
static int64_t real_of_us(uint64_t us) {
  return (int64_t)ceill((long double)(us - EPOCH_US) * 1000 / (1 + DRIFT));
}

EXPORT uint64_t frt_device_time(void) { return us_of_real(ns_of(CLOCK_REALTIME)); }
EXPORT void frt_hooks_install(const frt_hooks *h) { atomic_store(&hooks, h); }

#define HOOK(slot, ...)                           \
  do {                                            \
    const frt_hooks *h_ = atomic_load(&hooks);    \
    if (h_ && h_->slot) h_->slot(h_->user, __VA_ARGS__); \
  } while (0)

static void run(item *it) {
  frt_work *w = &it->w;
  w->begin_us = frt_device_time();
  HOOK(work_begin, w);
  struct timespec nap = {0, (long)(it->dur_us * 1000)};
  nanosleep(&nap, NULL);
  w->end_us = frt_device_time();
  if (rt.truth) fprintf(rt.truth, "%llu %llu %lld\n", (unsigned long long)w->id,
                        (unsigned long long)w->begin_us, (long long)real_of_us(w->begin_us));
  HOOK(work_end, w);
}

static void *device(void *arg) {
  (void)arg;
  pthread_mutex_lock(&rt.mu);
  for (;;) {
    while (!rt.submitted) pthread_cond_wait(&rt.cv, &rt.mu);
    frt_queue *q = rt.submitted;
    pthread_mutex_unlock(&rt.mu);
    for (int i = 0; i < q->n; i++) {
      run(&q->batch[i]);
      pthread_mutex_lock(&rt.mu);
      int64_t d = --rt.depth;
      pthread_mutex_unlock(&rt.mu);
      HOOK(counter, "queue depth", d, q->index, q->name, q->batch[i].w.end_us);
    }
    if (rt.truth) fflush(rt.truth);
    pthread_mutex_lock(&rt.mu);
    q->n = 0;
    rt.submitted = NULL;
    pthread_cond_broadcast(&rt.cv);
  }
  return NULL;
}

/* Loads the tools named in FRT_TOOLS: they install their hooks. */
static void load_tools(void) {
  const char *env = getenv("FRT_TOOLS");
  char *list = env ? strdup(env) : NULL, *save = NULL;
  for (char *p = list ? strtok_r(list, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
    if (*p && !dlopen(p, RTLD_NOW | RTLD_LOCAL))
      fprintf(stderr, "fakert: cannot load tool %s: %s\n", p, dlerror());
  free(list);
}

EXPORT int frt_init(void) {
  uint64_t id = atomic_fetch_add(&next_id, 1) + 1;
  load_tools();
  HOOK(api_enter, "frtInit", id);
  pthread_mutex_lock(&rt.mu);
  int rc = 0;
  if (!rt.started) {
    const char *t = getenv("FRT_TRUTH");
    if (t && *t) rt.truth = fopen(t, "w");
    rc = pthread_create(&rt.worker, NULL, device, NULL);
    rt.started = rc == 0;
  }
  pthread_mutex_unlock(&rt.mu);
  HOOK(api_exit, "frtInit", id);
  return rc;
}

EXPORT frt_queue *frt_queue_create(const char *name) {
  uint64_t id = atomic_fetch_add(&next_id, 1) + 1;
  HOOK(api_enter, "frtQueueCreate", id);
  pthread_mutex_lock(&rt.mu);
  frt_queue *q = rt.nqueues < MAXQ ? &rt.queues[rt.nqueues] : NULL;
  if (q) {
    q->index = rt.nqueues++;
    snprintf(q->name, sizeof q->name, "%s", name ? name : "queue");
  }
  pthread_mutex_unlock(&rt.mu);
  HOOK(api_exit, "frtQueueCreate", id);
  return q;
}

static uint64_t enqueue(frt_queue *q, const char *fn, frt_work w, uint64_t dur_us) {
  uint64_t id = atomic_fetch_add(&next_id, 1) + 1;
  HOOK(api_enter, fn, id);
  int64_t depth = -1;
  uint64_t now = frt_device_time();
  pthread_mutex_lock(&rt.mu);
  if (q && q->n < MAXW) {
    w.id = id;
    w.queue = q->index;
    w.queue_name = q->name;
    q->batch[q->n++] = (item){w, dur_us};
    depth = ++rt.depth;
  }
  pthread_mutex_unlock(&rt.mu);
  if (depth >= 0) HOOK(counter, "queue depth", depth, q->index, q->name, now);
  HOOK(api_exit, fn, id);
  return depth >= 0 ? id : 0;
}

EXPORT uint64_t frt_enqueue_kernel(frt_queue *q, const char *name, uint32_t dur_us) {
  frt_work w = {.name = name};
  return enqueue(q, "frtEnqueueKernel", w, dur_us);
}

EXPORT uint64_t frt_enqueue_copy(frt_queue *q, enum frt_dir dir, uint64_t bytes) {
  /* One name for every direction, as some runtimes do: the direction is in
   * the record's arguments only. */
  frt_work w = {.is_copy = 1, .dir = dir, .bytes = bytes, .name = "copy"};
  return enqueue(q, "frtEnqueueCopy", w, 2 + bytes / 4096); /* 4 GB/s */
}

EXPORT void frt_finish(frt_queue *q) {
  uint64_t id = atomic_fetch_add(&next_id, 1) + 1;
  HOOK(api_enter, "frtFinish", id);
  pthread_mutex_lock(&rt.mu);
  if (q && q->n && rt.started) {
    while (rt.submitted) pthread_cond_wait(&rt.cv, &rt.mu);
    rt.submitted = q;
    pthread_cond_broadcast(&rt.cv);
    while (rt.submitted == q) pthread_cond_wait(&rt.cv, &rt.mu);
  }
  pthread_mutex_unlock(&rt.mu);
  HOOK(api_exit, "frtFinish", id);
}
