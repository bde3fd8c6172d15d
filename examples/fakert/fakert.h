/*
 * fakert.h - the C API of "fakert", a tiny fake device runtime (libfakert.so).
 *
 * It stands in for a vendor's runtime in examples/fakert: a program creates
 * queues and enqueues kernels and copies; a background worker thread plays
 * the device and runs them in order, timed by a device clock that ticks in
 * MICROSECONDS from its own epoch and drifts 100 ppm from the host.  Queues
 * batch their work until frt_finish (like a command list), so what the
 * device does is deterministic.  Nothing is computed.
 *
 * Like real runtimes it has a tracing interface (frt_hooks) for tools, and
 * it loads tools itself: frt_init() dlopen()s every library named in
 * FRT_TOOLS (':'-separated), as CUDA loads CUDA_INJECTION64_PATH.
 */
#ifndef FAKERT_H
#define FAKERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct frt_queue frt_queue;
enum frt_dir { FRT_HTOD = 1, FRT_DTOH = 2, FRT_DTOD = 3 };

int frt_init(void); /* 0 on success; loads FRT_TOOLS */
frt_queue *frt_queue_create(const char *name);
/* Each enqueue returns its id (> 0), also the id its work carries; 0 when
 * the queue already holds 64 items (finish it first). */
uint64_t frt_enqueue_kernel(frt_queue *q, const char *name, uint32_t dur_us);
uint64_t frt_enqueue_copy(frt_queue *q, enum frt_dir dir, uint64_t bytes);
/* Submits the queue's batch to the device and waits until it has run. */
void frt_finish(frt_queue *q);
uint64_t frt_device_time(void); /* the device clock now, us */

/* ---- tracing interface -------------------------------------------------- */
typedef struct frt_work {
  uint64_t id;                /* the enqueue call's id */
  uint32_t queue;             /* queue index, in creation order from 0 */
  const char *queue_name;
  int is_copy;
  const char *name;           /* kernel name, or "copy" */
  enum frt_dir dir;           /* copies */
  uint64_t bytes;             /* copies */
  uint64_t begin_us, end_us;  /* device clock */
} frt_work;

typedef struct frt_hooks {
  void *user;
  /* Around every API call, on the calling thread; id is the call's id. */
  void (*api_enter)(void *user, const char *fn, uint64_t id);
  void (*api_exit)(void *user, const char *fn, uint64_t id);
  /* On the device thread: work about to run (begin_us set), work done. */
  void (*work_begin)(void *user, const frt_work *w);
  void (*work_end)(void *user, const frt_work *w);
  /* A device counter changed ("queue depth": work enqueued, not yet done). */
  void (*counter)(void *user, const char *name, int64_t value,
                  uint32_t queue, const char *queue_name, uint64_t device_us);
} frt_hooks;

/* Installs the table (kept by pointer; NULL removes it).  Any time, any
 * thread, before or after frt_init. */
void frt_hooks_install(const frt_hooks *h);

#ifdef __cplusplus
}
#endif
#endif
