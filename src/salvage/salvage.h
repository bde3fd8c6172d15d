/*
 * salvage.h - rebuilding the trace of a process that died without writing
 * it, from its shared-memory arena (salvage.c; docs/survival.md).  Used by
 * `loom record` (tools/loom/follow.c), exported from libloom for it only.
 */
#ifndef LOOM_SALVAGE_H
#define LOOM_SALVAGE_H
#include <stdint.h>

#include "loom/loom.h"

typedef struct loom__salvage_result {
  char out[4096];    /* the trace written (where the process would have) */
  uint64_t events, flows, devices, dropped, warnings;
  uint64_t ranges;   /* user ranges kept (steps included) */
  uint64_t ops;      /* framework ops kept */
  uint64_t unclosed; /* ranges and ops open at death, ended at the last record */
  uint64_t unresolved; /* names that could not be read (placeholders) */
  uint64_t threads;
  uint64_t bk_lost;  /* backend records lost (counted by loom; device work
                        still in a runtime's buffers is not known) */
  uint64_t bk_kept;  /* backend records rebuilt from shared memory */
  char bk_summary[1024]; /* ", backend 'X' N records kept and M lost" each */
} loom__salvage_result;

/* Rebuilds the trace of the process whose arena is path (death: how it
 * died, as a phrase for the trace's warning: "was killed by SIGKILL") and
 * writes it where the process would have.  LOOM_OK, or an error
 * (loom_last_error says why). */
LOOM_EXTERN loom_status loom__salvage(const char *path, const char *death,
                                      loom__salvage_result *res);

typedef struct loom__salvage_opts {
  const char *death;  /* how it ended: "was killed by SIGKILL", or a phrase that starts
                         "could not write its trace" (its own save failed) */
  const char *out;    /* where the trace goes; NULL: where the process would have */
  int quiet_unused;   /* a backend that handed nothing and declared no device (the
                         program never used it) is not named, unless its device
                         type is in `asked` */
  const char *asked;  /* device types the user asked for ("cpu,perf"), or NULL */
} loom__salvage_opts;

/* loom__salvage with options. */
LOOM_EXTERN loom_status loom__salvage_to(const char *path, const loom__salvage_opts *o,
                                         loom__salvage_result *res);

/* What the arena at path says about its process, without rebuilding: its
 * pid, its command (comm), the trace it would have written, and whether
 * there is anything to rebuild (1: it was recording and had not written
 * its trace).  0, or -1 when path is not a loom arena. */
LOOM_EXTERN int loom__salvage_peek(const char *path, int *pid, char *comm, size_t ncomm,
                                   char *out, size_t nout, int *pending);
#endif
