/*
 * collect.h - what collect.c (backends' records, devices, the trace) and
 * collect_host.c (host thread buffers) share.
 */
#ifndef LOOM_COLLECT_H
#define LOOM_COLLECT_H

#include <sys/types.h>

#include "core.h"
#include "record/record.h"

/* What a ring-mode trace reports about the overwritten part. */
typedef struct loom__ring_info {
  uint64_t host_over, host_cut, bk_over, bk_cut;
  int64_t start; /* latest first-kept time of a ring that overwrote; 0 none */
} loom__ring_info;

/* Backends' host calls that came as host records (host->call): the
 * correlation ids of those inside the window, each with the bits of the
 * producers that made one (1 << src), and how many each producer made:
 * the device work they launched is kept as that of emitted calls is. */
typedef struct loom__host_calls {
  loom__map corr;
  uint64_t n[LOOM__BMEM_SRC_MAX + 1];
} loom__host_calls;

/* A backend's category for its records of kind `kind` (host: on a host
 * thread) without one of their own. */
const char *loom__bk_category(const loom_backend *b, uint16_t kind, int host, char *buf,
                              size_t n);

/* A warning of the trace being built: the session's, or a dump's own. */
void loom__collect_warn(loom_session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Kineto's label of a thread; a name given with loom_thread_name wins over
 * the OS's. */
void loom__thread_label(char *buf, size_t n, pid_t tid, const char *name,
                        const loom__rec_image *img);
/* Reads the current name of a live thread of this process. */
void loom__live_thread_name(pid_t tid, char *buf, size_t n);
/* The host threads' records of img into t (ranges matched, tracks named). */
int loom__collect_host(loom_session *s, loom_trace *t, loom__rec_image *img, loom__ring_info *ri,
                       loom__host_calls *hc);

#endif
