/*
 * backend.c - the loom half of libloom-opencl.so: registration, devices and
 * queues, clock-domain detection, runtime records, and device records read
 * from event profiling when commands complete.
 *
 * Completion: each followed command holds one reference to its event (the
 * layer's own, or the application's, retained) in its queue's ring.  Rings
 * are harvested without blocking on the application's own OpenCL calls, and
 * the driver is asked as little as possible while the program enqueues (its
 * worker threads hold the locks a query takes):
 *  - clFinish harvests its queue: every command enqueued before it ended, so
 *    none is asked its status, only its times (once the device is idle);
 *  - once HARVEST_AT commands are in a ring, the ones that ended are found
 *    (on an in-order queue, where commands end in order, by a binary search
 *    over their statuses: log2(n) queries, not n) and read, emitted and
 *    released; the next look is HARVEST_STEP commands later.
 * No callback, so no wake-up of another thread per command.  At flush the
 * backend waits a bounded time for commands still in flight, then counts the
 * rest as lost.
 *
 * Clock domains are detected per device, not assumed: a profiled marker on a
 * private queue is bracketed by host clock reads, and the domain whose reads
 * bracket the device's timestamp wins (POCL: CLOCK_MONOTONIC_RAW).  A device
 * whose clock matches none becomes a device clock with sync points.
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "ocl.h"

#define EXPORT __attribute__((visibility("default")))

atomic_int ocl_recording;

static const loom_host *host;
static loom_backend *self;
static atomic_uint gen;          /* session generation */
static atomic_uint_fast64_t next_corr;
static loom_clock host_clk;

/* Commands in a queue's ring before an enqueue looks for ended ones, and how
 * many more before it looks again (the ring holds what is in flight). */
enum { HARVEST_AT = 256, HARVEST_STEP = 64 };
/* Tracks an out-of-order queue's commands may need, at most. */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* everything below */

typedef struct dev_entry {
  cl_device_id id;
  unsigned gen;
  uint32_t device;             /* loom device index in that session */
  loom_clock clk;
  int domain;                  /* detected loom_clock_domain, -1 unknown */
  cl_command_queue probe_q;    /* private queue for clock sync points */
} dev_entry;

typedef struct queue_entry {
  cl_command_queue q;
  cl_device_id dev;
  int app_profiling;
  int in_order;                /* commands end in the order they were enqueued */
  int retired;                 /* the application released it */
  unsigned gen;
  uint32_t device, resource;
  uint64_t native;             /* stable number, "queue N" */
  pthread_mutex_t lk;          /* the ring */
  ocl_cmd *ring;               /* commands in flight, oldest at head */
  size_t head, count, cap;
  uint64_t pushed;             /* commands ever put in the ring (their seq) */
  /* An out-of-order queue's lanes in the session lanes_gen: the queue's own
   * track (0), then tracks made when commands ran at once (under lk). */
  unsigned lanes_gen;
  size_t nlanes, cap_lanes;
  struct lane { uint32_t resource; uint64_t start, end; } *lanes; /* end 0: empty */
  size_t look_at;              /* count at which enqueues look for ended ones */
  /* The last kernel's sizes as the trace shows them (under lk): a program
   * launches the same shapes again and again, so most kernels format none. */
  cl_uint fmt_dims;
  size_t fmt_gws[3], fmt_lws[3];
  char fmt_g[64], fmt_l[64];
} queue_entry;

static dev_entry devs[64];
static size_t ndevs;
static queue_entry **queues;     /* entries never move; freed when retired and empty */
static size_t nqueues, cap_queues;
static atomic_uint_fast64_t queue_serial; /* "queue N", and lanes' numbers */
/* Bumped whenever a queue entry is made, retired or freed: a thread's cached
 * lookup (tq below) is good only while it has not moved. */
static atomic_uint queues_epoch;

/* The calling thread's last queue, so that an enqueue takes no global lock
 * (a program enqueues on the same queue from the same thread in a row). */
static _Thread_local struct {
  cl_command_queue q;
  unsigned gen, epoch;
  queue_entry *qe;
  uint32_t device, resource;
  loom_clock clk;
} tq;

/* ---- small helpers -------------------------------------------------------- */
static uint64_t now_in(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Calls are timed with the CPU's time-stamp counter where it ticks at a
 * constant rate (as loom's own host records are, src/record/hostrec.c, and
 * LOOM_NO_TSC turns both off): reading it costs ~12 ns here against ~37 ns
 * for clock_gettime, twice per enqueue.  Decided once, before the first
 * session starts; the calls' clock (host_clk) is declared in that domain. */
static atomic_int use_tsc = -1;

static int tsc_usable(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (getenv("LOOM_NO_TSC")) return 0;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d)) return (d >> 8) & 1;
#endif
  return 0;
}

uint64_t ocl_now(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (atomic_load_explicit(&use_tsc, memory_order_relaxed) > 0) return __rdtsc();
#endif
  return now_in(CLOCK_MONOTONIC_RAW);
}

uint32_t ocl_intern(const char *s) { return host ? host->intern(self, s, SIZE_MAX) : 0; }

/* kernel handle -> name id */
static struct { cl_kernel k; uint32_t id; } kcache[256];
static pthread_mutex_t kmu = PTHREAD_MUTEX_INITIALIZER;

void ocl_kernel_forget(cl_kernel k) {
  pthread_mutex_lock(&kmu);
  for (size_t i = 0; i < 256; i++)
    if (kcache[i].k == k) kcache[i].k = NULL;
  pthread_mutex_unlock(&kmu);
}

uint32_t ocl_kernel_name(cl_kernel k) {
  size_t slot = ((uintptr_t)k >> 4) % 256;
  pthread_mutex_lock(&kmu);
  uint32_t id = kcache[slot].k == k ? kcache[slot].id : 0;
  pthread_mutex_unlock(&kmu);
  if (id) return id;
  char name[256] = "";
  size_t len = 0;
  if (ocl_next.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, &len) != CL_SUCCESS)
    snprintf(name, sizeof name, "kernel");
  name[sizeof name - 1] = 0;
  id = host->intern(self, name, SIZE_MAX);
  pthread_mutex_lock(&kmu);
  kcache[slot].k = k;
  kcache[slot].id = id;
  pthread_mutex_unlock(&kmu);
  return id;
}

/* ---- queues and devices ------------------------------------------------- */
void ocl_queue_created(cl_command_queue q, cl_device_id dev, int app_wanted, int in_order) {
  queue_entry *e = calloc(1, sizeof *e);
  if (!e) return;
  e->q = q;
  e->dev = dev;
  e->app_profiling = app_wanted;
  e->in_order = in_order;
  e->look_at = HARVEST_AT;
  pthread_mutex_init(&e->lk, NULL);
  pthread_mutex_lock(&mu);
  e->native = atomic_fetch_add(&queue_serial, 1) + 1;
  if (nqueues == cap_queues) {
    size_t nc = cap_queues ? cap_queues * 2 : 16;
    queue_entry **p = realloc(queues, nc * sizeof *p);
    if (p) queues = p, cap_queues = nc;
  }
  if (nqueues < cap_queues) queues[nqueues++] = e;
  else free(e);
  atomic_fetch_add(&queues_epoch, 1);
  pthread_mutex_unlock(&mu);
}

/* mu held.  A retired entry keeps its handle only until its ring drains; a
 * new queue may get the same handle meanwhile. */
static queue_entry *find_queue(cl_command_queue q) {
  for (size_t i = nqueues; i-- > 0;)
    if (queues[i]->q == q && !queues[i]->retired) return queues[i];
  return NULL;
}

int ocl_queue_app_profiling(cl_command_queue q) {
  pthread_mutex_lock(&mu);
  queue_entry *e = find_queue(q);
  int r = e ? e->app_profiling : -1;
  pthread_mutex_unlock(&mu);
  return r;
}

void ocl_queue_released(cl_command_queue q) {
  pthread_mutex_lock(&mu);
  queue_entry *e = find_queue(q);
  if (e) e->retired = 1; /* its commands still complete; flush frees it */
  atomic_fetch_add(&queues_epoch, 1);
  pthread_mutex_unlock(&mu);
}

/* Which host clock the device's profiling timestamps are in. */
static int detect_domain(cl_command_queue pq, uint64_t *dev_ts, uint64_t *raw_mid) {
  static const clockid_t ids[] = {CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC, CLOCK_REALTIME};
  static const int doms[] = {LOOM_CLOCK_MONOTONIC_RAW, LOOM_CLOCK_MONOTONIC, LOOM_CLOCK_REALTIME};
  uint64_t before[3], after[3];
  for (int i = 0; i < 3; i++) before[i] = now_in(ids[i]);
  cl_event e = NULL;
  if (ocl_next.clEnqueueMarkerWithWaitList(pq, 0, NULL, &e) != CL_SUCCESS) return -2;
  ocl_next.clFinish(pq);
  for (int i = 0; i < 3; i++) after[i] = now_in(ids[i]);
  cl_ulong t = 0;
  cl_int rc = ocl_next.clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL);
  ocl_next.clReleaseEvent(e);
  if (rc != CL_SUCCESS) return -2;
  *dev_ts = t;
  *raw_mid = before[0] + (after[0] - before[0]) / 2;
  for (int i = 0; i < 3; i++)
    if (t >= before[i] && t <= after[i]) return doms[i];
  return -1;
}

static void add_device_props(cl_device_id d, loom_device_info *info, loom_arg *props, uint32_t *n,
                             char *name, char *vendor, char *version, char *driver) {
  cl_uint cu = 0, mhz = 0;
  cl_ulong mem = 0, local = 0;
  cl_device_type type = 0;
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_NAME, 256, name, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_VENDOR, 256, vendor, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_VERSION, 256, version, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DRIVER_VERSION, 256, driver, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof mhz, &mhz, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  ocl_next.clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  info->name = name;
  info->vendor = vendor;
  info->type = type & CL_DEVICE_TYPE_GPU ? "gpu" : type & CL_DEVICE_TYPE_CPU ? "cpu"
             : type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator" : "other";
  props[(*n)++] = (loom_arg){.key = "compute units", .type = LOOM_ARG_UINT, .v.u = cu};
  props[(*n)++] = (loom_arg){.key = "max clock MHz", .type = LOOM_ARG_UINT, .v.u = mhz};
  props[(*n)++] = (loom_arg){.key = "global memory bytes", .type = LOOM_ARG_UINT, .v.u = mem};
  props[(*n)++] = (loom_arg){.key = "local memory bytes", .type = LOOM_ARG_UINT, .v.u = local};
  props[(*n)++] = (loom_arg){.key = "OpenCL version", .type = LOOM_ARG_STRING, .v.s = version};
  props[(*n)++] = (loom_arg){.key = "driver version", .type = LOOM_ARG_STRING, .v.s = driver};
}

/* The device entry of d for this session, described to loom on first use.
 * Called with mu held. */
static dev_entry *session_device(cl_command_queue q, cl_device_id d, unsigned g) {
  dev_entry *e = NULL;
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].id == d) e = &devs[i];
  if (!e) {
    if (ndevs == sizeof devs / sizeof devs[0]) return NULL;
    e = &devs[ndevs++];
    memset(e, 0, sizeof *e);
    e->id = d;
    e->domain = -3; /* not detected yet */
  }
  if (e->gen == g) return e;
  char name[256] = "", vendor[256] = "", version[256] = "", driver[256] = "";
  loom_arg props[8];
  uint32_t n = 0;
  loom_device_info info = {.struct_size = sizeof info};
  add_device_props(d, &info, props, &n, name, vendor, version, driver);
  info.props = props;
  info.nprops = n;
  if (host->device_add(self, &info, &e->device) != LOOM_OK) return NULL;
  if (!e->probe_q) {
    cl_context ctx = NULL;
    ocl_next.clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL);
    e->probe_q = ocl_next.clCreateCommandQueue(ctx, d, CL_QUEUE_PROFILING_ENABLE, NULL);
  }
  uint64_t dts = 0, raw = 0;
  if (e->domain == -3 && e->probe_q) e->domain = detect_domain(e->probe_q, &dts, &raw);
  if (e->domain >= 0) {
    host->clock_declare(self, (loom_clock_domain)e->domain, name, &e->clk);
  } else {
    host->clock_declare(self, LOOM_CLOCK_DEVICE, name, &e->clk);
    if (e->probe_q && detect_domain(e->probe_q, &dts, &raw) != -2)
      host->clock_sync(self, e->clk, dts, LOOM_CLOCK_MONOTONIC_RAW, raw);
    host->report(self, LOOM_SEV_INFO, "device '%s': profiling clock matches no host clock; "
                 "using sync points", name);
  }
  e->gen = g;
  return e;
}

/* Fills the session ids of q (device, resource); 0 on success.  mu held. */
static int session_queue(cl_command_queue q, unsigned g, uint32_t *device, uint32_t *resource) {
  queue_entry *qe = find_queue(q);
  if (!qe) return -1;
  if (qe->gen != g) {
    dev_entry *de = session_device(q, qe->dev, g);
    if (!de) return -1;
    char name[32];
    snprintf(name, sizeof name, "queue %llu", (unsigned long long)qe->native);
    if (host->resource_add(self, de->device, name, qe->native, &qe->resource) != LOOM_OK) return -1;
    qe->device = de->device;
    qe->gen = g;
  }
  *device = qe->device;
  *resource = qe->resource;
  return 0;
}

static loom_clock device_clock(uint32_t device) {
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].gen == atomic_load(&gen) && devs[i].device == device) return devs[i].clk;
  return 0;
}

/* ---- calls and commands ------------------------------------------------- */
void ocl_call_begin(ocl_call *c, cl_command_queue q, cl_event *app_event) {
  c->q = q;
  c->mine = NULL;
  c->evp = app_event ? app_event : &c->mine;
  c->corr = atomic_fetch_add(&next_corr, 1) + 1;
  c->t0 = ocl_now();
}

/* roles: LOOM_RECORD_F_* (what the call enqueues, for loom report). */
static void emit_call(uint32_t api, uint64_t t0, uint64_t t1, uint64_t corr, int kind, uint16_t roles) {
  loom_record r = {.struct_size = sizeof r, .kind = (uint16_t)kind, .flags = roles, .clock = host_clk,
                   .device = LOOM_DEVICE_HOST, .start = t0, .end = t1,
                   .name = api, .correlation = corr};
  host->emit(self, &r);
}

/* c's sizes as "[x, y, z]" strings, formatted only when they differ from the
 * last kernel's on qe (qe->lk held). */
static void kernel_sizes(queue_entry *qe, const ocl_cmd *c) {
  if (qe->fmt_dims == c->dims && !memcmp(qe->fmt_gws, c->gws, sizeof c->gws) &&
      !memcmp(qe->fmt_lws, c->lws, sizeof c->lws))
    return;
  snprintf(qe->fmt_g, sizeof qe->fmt_g, "[%zu, %zu, %zu]", c->gws[0], c->dims > 1 ? c->gws[1] : 1,
           c->dims > 2 ? c->gws[2] : 1);
  snprintf(qe->fmt_l, sizeof qe->fmt_l, "[%zu, %zu, %zu]", c->lws[0], c->dims > 1 ? c->lws[1] : 1,
           c->dims > 2 ? c->lws[2] : 1);
  qe->fmt_dims = c->dims;
  memcpy(qe->fmt_gws, c->gws, sizeof c->gws);
  memcpy(qe->fmt_lws, c->lws, sizeof c->lws);
}

static cl_int event_status(cl_event e) {
  cl_int status = CL_QUEUED;
  if (ocl_next.clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                              NULL) != CL_SUCCESS)
    status = -1;
  return status;
}

/* Whether a command from st to en lies wholly before or after all of a
 * lane's commands: the driver may start a queue's commands in any order
 * (POCL runs a burst of ready ones newest first), and they are taken in the
 * order they were enqueued. */
static int lane_fits(const struct lane *l, uint64_t st, uint64_t en) {
  return !l->end || st >= l->end || en <= l->start;
}

/* Makes qe's next lane (qe->lk held); 0 when no memory or track is to be had. */
static int add_lane(queue_entry *qe, const ocl_cmd *c) {
  size_t k = qe->nlanes;
  if (k == qe->cap_lanes) {
    struct lane *l = realloc(qe->lanes, 2 * k * sizeof *l);
    if (!l) return 0;
    qe->lanes = l;
    qe->cap_lanes = 2 * k;
  }
  char name[64];
  uint64_t native = atomic_fetch_add(&queue_serial, 1) + 1;
  snprintf(name, sizeof name, "queue %llu lane %zu", (unsigned long long)qe->native, k + 1);
  if (host->resource_add(self, c->device, name, native, &qe->lanes[k].resource) != LOOM_OK) return 0;
  qe->lanes[k].start = qe->lanes[k].end = 0;
  qe->nlanes++;
  return 1;
}

/* The track of an out-of-order queue's command that ran from st to en (qe->lk
 * held).  Such a queue runs commands at once, and slices that overlap on one
 * track are dropped by trace_processor from JSON: a command goes on the
 * first of the queue's lanes ("queue N", then "queue N lane 2", ...) where
 * it runs before or after all the others, in a new lane when none has it.  There are as many
 * lanes as the driver's times ever show commands running at once (a driver
 * may report dozens on two cores); only when no memory or track is to be
 * had does a command share the lane that ended first, and then it may
 * overlap there. */
static uint32_t lane_of(queue_entry *qe, const ocl_cmd *c, uint64_t st, uint64_t en) {
  if (qe->lanes_gen != c->gen || !qe->nlanes) {
    if (!qe->cap_lanes) {
      struct lane *l = malloc(8 * sizeof *l);
      if (!l) return c->resource;
      qe->lanes = l;
      qe->cap_lanes = 8;
    }
    qe->lanes_gen = c->gen;
    qe->lanes[0] = (struct lane){.resource = c->resource};
    qe->nlanes = 1;
  }
  size_t k = 0;
  while (k < qe->nlanes && !lane_fits(&qe->lanes[k], st, en)) k++;
  if (k == qe->nlanes && !add_lane(qe, c)) {
    k = 0;
    for (size_t i = 1; i < qe->nlanes; i++)
      if (qe->lanes[i].end < qe->lanes[k].end) k = i;
  }
  struct lane *l = &qe->lanes[k];
  if (!l->end || st < l->start) l->start = st;
  if (en > l->end) l->end = en;
  return l->resource;
}

/* Reads an ended command's times and emits it (qe->lk held); -1 when it has
 * no times because it is still running. */
static int emit_cmd(queue_entry *qe, const ocl_cmd *c, loom_clock clk) {
  cl_ulong q = 0, st = 0, en = 0;
  cl_event e = c->event;
  if (ocl_next.clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof st, &st, NULL) != CL_SUCCESS ||
      ocl_next.clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof en, &en, NULL) != CL_SUCCESS) {
    cl_int status = event_status(e);
    if (status > CL_COMPLETE) return -1;
    host->count_lost(self, 1, status < 0 ? "a command failed on the device (no times to record)"
                                         : "the driver gave no profiling times for a command");
    return 0;
  }
  loom_arg args[4];
  uint32_t n = 0;
  if (c->kind == LOOM_KIND_KERNEL) {
    ocl_next.clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_QUEUED, sizeof q, &q, NULL);
    kernel_sizes(qe, c);
    args[n++] = (loom_arg){.key = "global size", .type = LOOM_ARG_STRING, .v.s = qe->fmt_g};
    args[n++] = (loom_arg){.key = "local size", .type = LOOM_ARG_STRING,
                           .v.s = c->lws[0] ? qe->fmt_l : "driver's choice"};
    args[n++] = (loom_arg){.key = "queued", .type = LOOM_ARG_UINT, .v.u = st > q ? st - q : 0};
  } else {
    args[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = c->bytes};
    if (c->direction)
      args[n++] = (loom_arg){.key = "direction", .type = LOOM_ARG_STRING, .v.s = c->direction};
  }
  loom_record r = {.struct_size = sizeof r, .kind = c->kind, .clock = clk, .device = c->device,
                   .resource = qe->in_order ? c->resource : lane_of(qe, c, st, en),
                   .start = st, .end = en, .name = c->name,
                   .correlation = c->corr, .nargs = n, .args = args};
  host->emit(self, &r);
  return 0;
}

static ocl_cmd *ring_at(queue_entry *qe, size_t i) { return &qe->ring[(qe->head + i) % qe->cap]; }

/* Whether a command reached its end (completed or failed). */
static int ended(const ocl_cmd *c) { return event_status(c->event) <= CL_COMPLETE; }

/* How many of qe's oldest commands are known to have ended, with as few
 * queries as can tell (qe->lk held): on an in-order queue a binary search
 * (if one ended, all before it did); else the run at the head. */
static size_t ended_prefix(queue_entry *qe) {
  size_t lo = 0, hi = qe->count; /* [0, lo) ended, [hi, count) did not */
  if (!qe->in_order) {
    while (lo < hi && ended(ring_at(qe, lo))) lo++;
    return lo;
  }
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ended(ring_at(qe, mid))) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Emits and releases qe's oldest commands that ended: the first known ones
 * without asking, then the next ones while they ended.  qe->lk held.  With
 * wait_until (ns, MONOTONIC_RAW) it waits for running ones until then. */
static void harvest(queue_entry *qe, size_t known, uint64_t wait_until) {
  unsigned g = atomic_load(&gen);
  while (qe->count) {
    ocl_cmd *c = ring_at(qe, 0);
    cl_int status = known ? CL_COMPLETE : event_status(c->event);
    if (status == CL_COMPLETE && c->gen == g && emit_cmd(qe, c, c->clk) != 0)
      status = CL_RUNNING; /* times not there yet after all */
    if (status > CL_COMPLETE) {
      known = 0;
      if (!wait_until || now_in(CLOCK_MONOTONIC_RAW) > wait_until) break;
      struct timespec ms = {0, 200000};
      nanosleep(&ms, NULL);
      continue;
    }
    if (status < 0 && c->gen == g)
      host->count_lost(self, 1, "a command failed on the device (no times to record)");
    ocl_next.clReleaseEvent(c->event);
    qe->head = (qe->head + 1) % qe->cap;
    qe->count--;
    known -= known > 0;
  }
}

void ocl_host_call(uint32_t api, uint64_t t0, int kind) {
  emit_call(api, t0, ocl_now(), 0, kind, 0);
}

static queue_entry *queue_of(cl_command_queue q) {
  pthread_mutex_lock(&mu);
  queue_entry *qe = find_queue(q);
  pthread_mutex_unlock(&mu);
  return qe;
}

uint64_t ocl_queue_fence(cl_command_queue q) {
  queue_entry *qe = queue_of(q);
  if (!qe) return 0;
  pthread_mutex_lock(&qe->lk);
  uint64_t f = qe->pushed;
  pthread_mutex_unlock(&qe->lk);
  return f;
}

void ocl_queue_finished(cl_command_queue q, uint64_t fence, int ok) {
  queue_entry *qe = queue_of(q);
  if (!qe) return;
  pthread_mutex_lock(&qe->lk);
  size_t known = 0;
  if (ok && qe->count && fence > ring_at(qe, 0)->seq) { /* the ring is in seq order */
    uint64_t k = fence - ring_at(qe, 0)->seq;
    known = k < qe->count ? (size_t)k : qe->count;
  }
  harvest(qe, known, 0);
  qe->look_at = qe->count + HARVEST_AT;
  pthread_mutex_unlock(&qe->lk);
}

/* q's entry with cmd's device, resource and clock filled, or NULL; from the
 * thread's cache when q and the queues have not changed since. */
static queue_entry *lookup_queue(cl_command_queue q, unsigned g, ocl_cmd *cmd) {
  unsigned ep = atomic_load_explicit(&queues_epoch, memory_order_acquire);
  if (tq.qe && tq.q == q && tq.gen == g && tq.epoch == ep) {
    cmd->device = tq.device;
    cmd->resource = tq.resource;
    cmd->clk = tq.clk;
    return tq.qe;
  }
  pthread_mutex_lock(&mu);
  ep = atomic_load_explicit(&queues_epoch, memory_order_relaxed); /* stable under mu */
  queue_entry *qe = find_queue(q);
  if (qe && session_queue(q, g, &cmd->device, &cmd->resource) == 0) {
    cmd->clk = device_clock(cmd->device);
    tq.q = q, tq.gen = g, tq.epoch = ep, tq.qe = qe;
    tq.device = cmd->device, tq.resource = cmd->resource, tq.clk = cmd->clk;
  } else {
    qe = NULL;
  }
  pthread_mutex_unlock(&mu);
  return qe;
}

static int ring_push(queue_entry *qe, const ocl_cmd *c) {
  if (qe->count == qe->cap) {
    size_t nc = qe->cap ? qe->cap * 2 : 64;
    ocl_cmd *r = malloc(nc * sizeof *r);
    if (!r) return -1;
    for (size_t i = 0; i < qe->count; i++) r[i] = qe->ring[(qe->head + i) % qe->cap];
    free(qe->ring);
    qe->ring = r;
    qe->head = 0;
    qe->cap = nc;
  }
  ocl_cmd *slot = ring_at(qe, qe->count);
  *slot = *c;
  slot->seq = qe->pushed++;
  qe->count++;
  return 0;
}

cl_int ocl_call_end(ocl_call *c, uint32_t api, cl_int rc, int kind, uint32_t name,
                    uint64_t bytes, const char *direction, cl_uint dims, const size_t *gws,
                    const size_t *lws, cl_event *app_event) {
  uint64_t t1 = ocl_now();
  int follow = rc == CL_SUCCESS && kind >= 0 && *c->evp;
  uint16_t roles = kind == LOOM_KIND_KERNEL ? LOOM_RECORD_F_LAUNCH
                 : kind == LOOM_KIND_MEMCPY || kind == LOOM_KIND_MEMSET ? LOOM_RECORD_F_MEMORY : 0;
  emit_call(api, c->t0, t1, follow ? c->corr : 0, LOOM_KIND_RUNTIME, roles);
  if (!follow) {
    if (c->mine) ocl_next.clReleaseEvent(c->mine);
    return rc;
  }
  ocl_cmd cmd;
  memset(&cmd, 0, sizeof cmd);
  unsigned g = atomic_load(&gen);
  queue_entry *qe = lookup_queue(c->q, g, &cmd);
  int ok = qe != NULL;
  cl_event e = *c->evp;
  if (!ok) {
    if (c->mine) ocl_next.clReleaseEvent(c->mine);
    host->count_lost(self, 1, "a command on a queue the layer does not know");
    return rc;
  }
  cmd.corr = c->corr;
  cmd.kind = (uint16_t)kind;
  cmd.name = name;
  cmd.bytes = bytes;
  cmd.direction = direction;
  cmd.dims = dims;
  for (cl_uint i = 0; i < dims && i < 3; i++) {
    cmd.gws[i] = gws ? gws[i] : 0;
    cmd.lws[i] = lws ? lws[i] : 0;
  }
  cmd.gen = g;
  cmd.event = e;
  if (app_event) ocl_next.clRetainEvent(e); /* the application keeps its own */
  pthread_mutex_lock(&qe->lk);
  /* Asking the driver about an event that is still running contends with
   * its worker threads: do it in batches, not on every enqueue. */
  if (qe->count >= qe->look_at) {
    harvest(qe, ended_prefix(qe), 0);
    qe->look_at = qe->count + (qe->count ? HARVEST_STEP : HARVEST_AT);
  }
  if (ring_push(qe, &cmd) != 0) {
    ocl_next.clReleaseEvent(e);
    host->count_lost(self, 1, "out of memory");
  }
  pthread_mutex_unlock(&qe->lk);
  return rc;
}

/* ---- the backend ---------------------------------------------------------- */
static int layer_path_active(void) {
  if (ocl_next.clGetPlatformIDs) return 1; /* clInitLayer already ran */
  Dl_info me;
  const char *layers = getenv("OPENCL_LAYERS");
  if (!layers || !dladdr((void *)layer_path_active, &me) || !me.dli_fname) return 0;
  const char *base = strrchr(me.dli_fname, '/');
  base = base ? base + 1 : me.dli_fname;
  return strstr(layers, base) != NULL;
}

/* Was OPENCL_LAYERS naming the layer in the environment the program started
 * with (loom record's case)? */
static int layer_in_initial_env(const char *base) {
  FILE *f = fopen("/proc/self/environ", "re");
  if (!f) return 1; /* cannot tell: assumed, nothing forced below */
  char *buf = NULL;
  size_t cap = 0;
  int found = 0;
  while (!found && getdelim(&buf, &cap, 0, f) > 0)
    found = !strncmp(buf, "OPENCL_LAYERS=", 14) && strstr(buf + 14, base);
  free(buf);
  fclose(f);
  return found;
}

/* The layer is named in OPENCL_LAYERS but the loader has not initialised it:
 * either the program made no OpenCL call yet, or the loader initialised
 * before the variable was set (a Python program that used OpenCL before
 * `import loom`) and never calls the layer.  Told apart, only when the
 * variable was set after the program started and the loader is loaded, by
 * making it initialise now (one clGetPlatformIDs; the program's own first
 * call would have).  1: the layer was missed. */
static int layer_missed(void) {
  Dl_info me;
  if (!dladdr((void *)layer_missed, &me) || !me.dli_fname) return 0;
  const char *base = strrchr(me.dli_fname, '/');
  if (layer_in_initial_env(base ? base + 1 : me.dli_fname)) return 0;
  void *h = dlopen("libOpenCL.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0; /* not loaded: it reads the variable when it is */
  cl_int(CL_API_CALL * platforms)(cl_uint, cl_platform_id *, cl_uint *) =
      (cl_int(CL_API_CALL *)(cl_uint, cl_platform_id *, cl_uint *))dlsym(h, "clGetPlatformIDs");
  cl_uint np = 0;
  if (platforms) platforms(0, NULL, &np);
  dlclose(h);
  return !ocl_next.clGetPlatformIDs;
}

static loom_status ocl_probe(loom_backend *b, char *why, size_t n) {
  self = b;
  if (layer_path_active() && !ocl_next.clGetPlatformIDs && layer_missed()) {
    snprintf(why, n, "OpenCL was initialised in this process before loom's layer was set "
             "(OPENCL_LAYERS): its OpenCL calls and device work are not seen; import loom "
             "before the program's first OpenCL call, or run it under 'loom record'");
    return LOOM_ENOTFOUND;
  }
  if (!layer_path_active()) {
    Dl_info me;
    dladdr((void *)ocl_probe, &me);
    snprintf(why, n, "the OpenCL layer is not active in this process: start the program "
             "with 'loom record', or set OPENCL_LAYERS=%s before it starts",
             me.dli_fname ? me.dli_fname : "libloom-opencl.so");
    return LOOM_ENOTFOUND;
  }
  return LOOM_OK;
}

static loom_status ocl_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  self = b;
  if (atomic_load(&use_tsc) < 0) atomic_store(&use_tsc, tsc_usable());
  return host->clock_declare(b, atomic_load(&use_tsc) > 0 ? LOOM_CLOCK_TSC : LOOM_CLOCK_MONOTONIC_RAW,
                             "host", &host_clk);
}

static loom_status ocl_start(loom_backend *b) {
  self = b;
  atomic_fetch_add(&gen, 1);
  atomic_store(&ocl_recording, 1);
  return LOOM_OK;
}

static loom_status ocl_stop(loom_backend *b) {
  (void)b;
  atomic_store(&ocl_recording, 0);
  return LOOM_OK;
}

static loom_status ocl_flush(loom_backend *b) {
  const char *v = host->config_get(b, "opencl.flush_timeout_ms");
  uint64_t deadline = now_in(CLOCK_MONOTONIC_RAW) + (uint64_t)(v ? atol(v) : 2000) * 1000000ull;
  pthread_mutex_lock(&mu);
  size_t n = nqueues;
  queue_entry **snap = malloc((n + 1) * sizeof *snap);
  if (snap && n) memcpy(snap, queues, n * sizeof *snap);
  pthread_mutex_unlock(&mu);
  size_t lost = 0;
  unsigned g = atomic_load(&gen);
  for (size_t i = 0; snap && i < n; i++) {
    queue_entry *qe = snap[i];
    pthread_mutex_lock(&qe->lk);
    harvest(qe, 0, deadline);
    for (size_t k = 0; k < qe->count; k++) { /* still executing: counted, dropped */
      ocl_cmd *c = &qe->ring[(qe->head + k) % qe->cap];
      if (c->gen == g) lost++;
      c->gen = 0; /* belongs to no session any more */
    }
    pthread_mutex_unlock(&qe->lk);
  }
  free(snap);
  /* Sync points at stop, for device clocks; then retire drained queues. */
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < ndevs; i++) {
    uint64_t dts, raw;
    if (devs[i].domain < 0 && devs[i].probe_q && devs[i].gen == g &&
        detect_domain(devs[i].probe_q, &dts, &raw) != -2)
      host->clock_sync(b, devs[i].clk, dts, LOOM_CLOCK_MONOTONIC_RAW, raw);
  }
  for (size_t i = 0; i < nqueues;) {
    queue_entry *qe = queues[i];
    if (qe->retired && !qe->count) {
      atomic_fetch_add(&queues_epoch, 1);
      free(qe->ring);
      free(qe->lanes);
      pthread_mutex_destroy(&qe->lk);
      free(qe);
      queues[i] = queues[--nqueues];
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&mu);
  if (lost) host->count_lost(b, lost, "commands still executing at stop (opencl.flush_timeout_ms)");
  return LOOM_OK;
}

/* loom record: the ICD loader loads this file as a layer (OPENCL_LAYERS, read
 * once at the program's first OpenCL call); it is also a plug-in, so the
 * backend is registered before the session starts.  Recorded by default: the
 * layer costs nothing in a program that never calls OpenCL. */
static const loom_env_setting ocl_env[] = {
    {"OPENCL_LAYERS", "$SELF", LOOM_ENV_PREPEND_PATH},
};
static const loom_backend_enable ocl_enable = {
    .struct_size = sizeof(loom_backend_enable),
    .flags = LOOM_ENABLE_F_DEFAULT,
    .env = ocl_env,
    .nenv = sizeof ocl_env / sizeof ocl_env[0],
};

static const loom_backend_ops ocl_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "opencl",
    .device_type = "opencl",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_KERNEL) | LOOM_KIND_BIT(LOOM_KIND_MEMCPY) |
             LOOM_KIND_BIT(LOOM_KIND_MEMSET) | LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
             LOOM_KIND_BIT(LOOM_KIND_SYNC),
    .runtime_category = "opencl_runtime",
    .probe = ocl_probe,
    .configure = ocl_configure,
    .start = ocl_start,
    .stop = ocl_stop,
    .flush = ocl_flush,
    .enable = &ocl_enable,
};

static loom_status ocl_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  host = h;
  return h->backend_register(&ocl_ops, NULL);
}

EXPORT loom_status loom_plugin_entry(const loom_host *h) { return ocl_entry(h); }

/* Loaded by the ICD loader as a layer into a process that already runs loom
 * (a framework that linked it): register there too. */
__attribute__((constructor)) static void ocl_attach(void) { loom_plugin_attach(ocl_entry); }
