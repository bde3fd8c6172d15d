/*
 * cupti_loom.h - shared state of the CUPTI backend (libloom-cupti.so):
 * the loader (loader.c) finds the CUDA driver and libcupti with dlopen at
 * probe time, the buffers (buffers.c) feed CUPTI's activity API within a
 * memory cap, the decoder (decode.c) turns activity records into loom
 * records, and backend.c holds the ops table and the session logic.
 *
 * The plug-in is built against CUPTI's headers only: libcupti and libcuda are
 * never linked (no DT_NEEDED), so loading the plug-in costs nothing until a
 * session asks for device type "cuda".
 */
#ifndef LOOM_CUPTI_LOOM_H
#define LOOM_CUPTI_LOOM_H

#include <cupti.h>
#include <loom/plugin.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CUPTI_EXPORT __attribute__((visibility("default")))

/* ---- loader.c -------------------------------------------------------------- */
/* The CUPTI entry points the backend uses, resolved with dlsym. */
typedef struct cupti_api {
  CUptiResult (*GetVersion)(uint32_t *);
  CUptiResult (*GetResultString)(CUptiResult, const char **);
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
  CUptiResult (*ActivityFlushAll)(uint32_t);
  CUptiResult (*ActivityPushExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t);
  CUptiResult (*ActivityPopExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t *);
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char **);
  CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType);
} cupti_api;

/* Resolved entry points; all NULL until cupti_load succeeded. */
extern cupti_api cupti;
/* 1 once libcupti is loaded and every entry point above was found. */
extern atomic_int cupti_loaded;

/* Checks the CUDA driver (dlopen libcuda.so.1, cuInit) and loads libcupti.
 * 0 on success, else -1 with the reason in why. */
int cupti_load(char *why, size_t why_len);
/* "CUPTI_ERROR_..." for a result code (never NULL). */
const char *cupti_error(CUptiResult r);

/* ---- decode.c -------------------------------------------------------------- */
/* Where decoded records go: the session's backend and its REALTIME clock. */
extern const loom_host *cupti_host;
extern loom_backend *cupti_self;
extern loom_clock cupti_clock;

/* Per-session decoder state (devices, streams, correlation maps). */
void cupti_decode_reset(void);
/* Emits the memory records still waiting for their API call's record (at
 * flush: on the process's main thread). */
void cupti_decode_finish(void);
/* Decodes one activity record; 1 when it was a supported kind, else 0. */
int cupti_decode_record(const CUpti_Activity *rec);
/* Size of a record of this kind in a buffer (0 for an unsupported kind). */
size_t cupti_record_size(CUpti_ActivityKind kind);
/* Walks a buffer of records laid out back to back (each its struct's size)
 * without libcupti.  Returns the records decoded, -1 on an unknown kind or
 * a truncated record (the records before it are decoded). */
int cupti_walk_own(const uint8_t *buf, size_t valid);
/* Walks a buffer CUPTI completed, with cuptiActivityGetNextRecord. */
int cupti_walk_cupti(uint8_t *buf, size_t valid);

/* ---- buffers.c ------------------------------------------------------------- */
/* Sizes for this session (cupti.buffer_size, cupti.memory_cap). */
void cupti_buffers_configure(size_t buffer_size, size_t memory_cap);
/* CUPTI's buffer callbacks. */
void CUPTIAPI cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                     size_t size, size_t valid);
/* Bytes currently handed out to CUPTI. */
size_t cupti_buffers_outstanding(void);

#endif
