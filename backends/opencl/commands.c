/*
 * commands.c - the OpenCL backend's records: each wrapped call's runtime
 * record, and the commands it enqueued, held in their queue's ring until
 * they end, then read (their profiling times) and emitted as device records
 * on the queue's track (backend.c has how rings are
 * harvested).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

static atomic_uint_fast64_t next_corr;

/* The calling thread's last queue, so that an enqueue takes no global lock
 * (a program enqueues on the same queue from the same thread in a row). */
static _Thread_local struct {
  cl_command_queue q;
  unsigned gen, epoch;
  queue_entry *qe;
  uint32_t device, resource;
  loom_clock clk;
} tq;

/* ---- calls and commands ------------------------------------------------- */
void ocl_call_begin(ocl_call *c, cl_command_queue q, cl_event *app_event) {
  c->q = q;
  c->mine = NULL;
  c->evp = app_event ? app_event : &c->mine;
  c->corr = atomic_fetch_add(&next_corr, 1) + 1;
  c->t0 = ocl_now();
}

/* roles: LOOM_RECORD_F_* (what the call enqueues, for loom report). */
static void emit_call(uint32_t api, uint64_t t0, uint64_t t1, uint64_t corr, int kind,
                      uint16_t roles) {
  loom_record r = {.struct_size = sizeof r,
                   .kind = (uint16_t)kind,
                   .flags = roles,
                   .clock = ocl_host_clk,
                   .device = LOOM_DEVICE_HOST,
                   .start = t0,
                   .end = t1,
                   .name = api,
                   .correlation = corr};
  /* host->call (ABI 1.7): one host record on this thread, no lock */
  if (LOOM_HOST_HAS(ocl_host, call)) ocl_host->call(ocl_self, &r);
  else ocl_host->emit(ocl_self, &r);
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

/* Reads an ended command's times and emits it (qe->lk held); -1 when it has
 * no times because it is still running. */
static int emit_cmd(queue_entry *qe, const ocl_cmd *c, loom_clock clk) {
  cl_ulong q = 0, st = 0, en = 0;
  cl_event e = c->event;
  if (ocl_next.clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof st, &st, NULL) !=
          CL_SUCCESS ||
      ocl_next.clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof en, &en, NULL) !=
          CL_SUCCESS) {
    cl_int status = event_status(e);
    if (status > CL_COMPLETE) return -1;
    ocl_host->count_lost(ocl_self, 1,
                         status < 0 ? "a command failed on the device (no times to record)"
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
                   .resource = c->resource,
                   .start = st, .end = en, .name = c->name,
                   .correlation = c->corr, .nargs = n, .args = args};
  ocl_host->emit(ocl_self, &r);
  return 0;
}

/* Whether a command reached its end (completed or failed). */
static int ended(const ocl_cmd *c) { return event_status(c->event) <= CL_COMPLETE; }

/* How many of qe's oldest commands are known to have ended, with as few
 * queries as can tell (qe->lk held): on an in-order queue a binary search
 * (if one ended, all before it did); else the run at the head. */
static size_t ended_prefix(queue_entry *qe) {
  size_t lo = 0, hi = qe->count; /* [0, lo) ended, [hi, count) did not */
  if (!qe->in_order) {
    while (lo < hi && ended(ocl_ring_at(qe, lo))) lo++;
    return lo;
  }
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ended(ocl_ring_at(qe, mid))) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Emits and releases qe's oldest commands that ended: the first known ones
 * without asking, then the next ones while they ended.  qe->lk held.  With
 * wait_until (ns, MONOTONIC_RAW) it waits for running ones until then. */
void ocl_harvest(queue_entry *qe, size_t known, uint64_t wait_until) {
  unsigned g = atomic_load(&ocl_gen);
  while (qe->count) {
    ocl_cmd *c = ocl_ring_at(qe, 0);
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
      ocl_host->count_lost(ocl_self, 1, "a command failed on the device (no times to record)");
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
  pthread_mutex_lock(&ocl_mu);
  queue_entry *qe = ocl_find_queue(q);
  pthread_mutex_unlock(&ocl_mu);
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
  if (ok && qe->count && fence > ocl_ring_at(qe, 0)->seq) { /* the ring is in seq order */
    uint64_t k = fence - ocl_ring_at(qe, 0)->seq;
    known = k < qe->count ? (size_t)k : qe->count;
  }
  ocl_harvest(qe, known, 0);
  qe->look_at = qe->count + HARVEST_AT;
  pthread_mutex_unlock(&qe->lk);
}

/* q's entry with cmd's device, resource and clock filled, or NULL; from the
 * thread's cache when q and the queues have not changed since. */
static queue_entry *lookup_queue(cl_command_queue q, unsigned g, ocl_cmd *cmd) {
  unsigned ep = atomic_load_explicit(&ocl_queues_epoch, memory_order_acquire);
  if (tq.qe && tq.q == q && tq.gen == g && tq.epoch == ep) {
    cmd->device = tq.device;
    cmd->resource = tq.resource;
    cmd->clk = tq.clk;
    return tq.qe;
  }
  pthread_mutex_lock(&ocl_mu);
  ep = atomic_load_explicit(&ocl_queues_epoch, memory_order_relaxed); /* stable under ocl_mu */
  queue_entry *qe = ocl_find_queue(q);
  if (qe && ocl_session_queue(q, g, &cmd->device, &cmd->resource) == 0) {
    cmd->clk = ocl_device_clock(cmd->device);
    tq.q = q, tq.gen = g, tq.epoch = ep, tq.qe = qe;
    tq.device = cmd->device, tq.resource = cmd->resource, tq.clk = cmd->clk;
  } else {
    qe = NULL;
  }
  pthread_mutex_unlock(&ocl_mu);
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
  ocl_cmd *slot = ocl_ring_at(qe, qe->count);
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
  unsigned g = atomic_load(&ocl_gen);
  queue_entry *qe = lookup_queue(c->q, g, &cmd);
  int ok = qe != NULL;
  cl_event e = *c->evp;
  if (!ok) {
    if (c->mine) ocl_next.clReleaseEvent(c->mine);
    ocl_host->count_lost(ocl_self, 1, "a command on a queue the layer does not know");
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
    ocl_harvest(qe, ended_prefix(qe), 0);
    qe->look_at = qe->count + (qe->count ? HARVEST_STEP : HARVEST_AT);
  }
  if (ring_push(qe, &cmd) != 0) {
    ocl_next.clReleaseEvent(e);
    ocl_host->count_lost(ocl_self, 1, "out of memory");
  }
  pthread_mutex_unlock(&qe->lk);
  return rc;
}

