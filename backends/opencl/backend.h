/*
 * backend.h - what the two halves of the OpenCL backend share: backend.c
 * (registration, devices and queues, clocks, flush) and commands.c (the
 * runtime calls' records, each queue's ring of commands in flight, their
 * harvest and device records).  Everything here is under ocl_mu unless a
 * field says otherwise.
 */
#ifndef LOOM_OCL_BACKEND_H
#define LOOM_OCL_BACKEND_H

#include <pthread.h>
#include <time.h>

#include "ocl.h"

extern const loom_host *ocl_host;
extern loom_backend *ocl_self;
extern atomic_uint ocl_gen;           /* session generation */
extern loom_clock ocl_host_clk;       /* the calls' clock */
extern pthread_mutex_t ocl_mu;        /* devices and queues */
extern atomic_uint_fast64_t ocl_queue_serial; /* "queue N" */
/* Bumped whenever a queue entry is made, retired or freed: a thread's cached
 * lookup (commands.c) is good only while it has not moved. */
extern atomic_uint ocl_queues_epoch;

/* Commands in a queue's ring before an enqueue looks for ended ones, and how
 * many more before it looks again (the ring holds what is in flight). */
enum { HARVEST_AT = 256, HARVEST_STEP = 64 };

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
  size_t look_at;              /* count at which enqueues look for ended ones */
  /* The last kernel's sizes as the trace shows them (under lk): a program
   * launches the same shapes again and again, so most kernels format none. */
  cl_uint fmt_dims;
  size_t fmt_gws[3], fmt_lws[3];
  char fmt_g[64], fmt_l[64];
} queue_entry;

static inline uint64_t now_in(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline ocl_cmd *ocl_ring_at(queue_entry *qe, size_t i) {
  return &qe->ring[(qe->head + i) % qe->cap];
}

/* backend.c, ocl_mu held: q's entry (NULL when unknown), and the session
 * ids of q (device, resource; 0 on success). */
queue_entry *ocl_find_queue(cl_command_queue q);
int ocl_session_queue(cl_command_queue q, unsigned g, uint32_t *device, uint32_t *resource);
loom_clock ocl_device_clock(uint32_t device);
/* Takes ocl_mu: the session index of d (described to the session on first
 * use, with a probe queue made in ctx); 0 on success. */
int ocl_session_device(cl_context ctx, cl_device_id d, unsigned g, uint32_t *device);

/* commands.c: emits and releases qe's oldest commands that ended: the first
 * `known` without asking, then the next ones while they ended (qe->lk held).
 * With wait_until (ns, MONOTONIC_RAW) it waits for running ones until then. */
void ocl_harvest(queue_entry *qe, size_t known, uint64_t wait_until);

#endif
