/*
 * buffers.c - activity buffers handed to CUPTI.  Each is cupti.buffer_size
 * bytes (8 MiB by default); the bytes handed out at once are bounded by
 * cupti.memory_cap (256 MiB by default).  Past the cap a request gets a
 * zero-sized buffer, which makes CUPTI drop records: each refusal is counted
 * as lost right away, and at completion the records CUPTI itself dropped
 * (cuptiActivityGetNumDroppedRecords) are counted too.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cupti_loom.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t buffer_size = 8u << 20, memory_cap = 256u << 20, outstanding;

void cupti_buffers_configure(size_t bs, size_t cap) {
  pthread_mutex_lock(&mu);
  buffer_size = bs < 4096 ? 4096 : (bs + 7) & ~(size_t)7;
  memory_cap = cap;
  pthread_mutex_unlock(&mu);
}

size_t cupti_buffers_outstanding(void) {
  pthread_mutex_lock(&mu);
  size_t n = outstanding;
  pthread_mutex_unlock(&mu);
  return n;
}

static void refused(size_t cap) {
  char why[160];
  snprintf(why, sizeof why, "CUPTI activity buffers refused at cupti.memory_cap (%zu bytes); "
           "CUPTI dropped their records (counted one per refused buffer)", cap);
  if (cupti_host && cupti_self) cupti_host->count_lost(cupti_self, 1, why);
}

void CUPTIAPI cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = NULL;
  *size = 0;
  *max_records = 0;
  pthread_mutex_lock(&mu);
  size_t bs = buffer_size, cap = memory_cap;
  int ok = outstanding + bs <= cap;
  if (ok) outstanding += bs;
  pthread_mutex_unlock(&mu);
  uint8_t *p = ok ? aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, bs) : NULL;
  if (!p) {
    if (ok) {
      pthread_mutex_lock(&mu);
      outstanding -= bs;
      pthread_mutex_unlock(&mu);
    }
    refused(cap);
    return;
  }
  *buffer = p;
  *size = bs;
}

static void count_dropped(CUcontext ctx, uint32_t stream) {
  size_t dropped = 0;
  if (!atomic_load(&cupti_loaded) ||
      cupti.ActivityGetNumDroppedRecords(ctx, stream, &dropped) != CUPTI_SUCCESS || !dropped)
    return;
  if (cupti_host && cupti_self)
    cupti_host->count_lost(cupti_self, dropped, "CUPTI dropped activity records "
                           "(buffers full; raise cupti.buffer_size or cupti.memory_cap)");
}

void CUPTIAPI cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                     size_t size, size_t valid) {
  if (buffer && valid) {
    if (atomic_load(&cupti_loaded)) cupti_walk_cupti(buffer, valid);
    else cupti_walk_own(buffer, valid);
  }
  count_dropped(ctx, stream);
  free(buffer);
  if (!buffer) return;
  pthread_mutex_lock(&mu);
  outstanding = size > outstanding ? 0 : outstanding - size;
  pthread_mutex_unlock(&mu);
}
