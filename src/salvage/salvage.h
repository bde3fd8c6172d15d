/*
 * salvage.h - rebuilding the trace of a process that died without writing
 * it, from its shared-memory arena (salvage.c; docs/survival.md).  Used by
 * `loom record` (tools/loom/follow.c) through the tools table (loom/tools.h).
 */
#ifndef LOOM_SALVAGE_H
#define LOOM_SALVAGE_H
#include <stdint.h>

#include "loom/loom.h"
#include "loom/tools.h"

/* What a rebuild found (fields: loom/tools.h, where `loom record` reads them). */
typedef loom_tools_salvage_result loom__salvage_result;

/* How it died and where its trace goes (fields: loom/tools.h). */
typedef loom_tools_salvage_opts loom__salvage_opts;

/* Rebuilds the trace of the process whose arena is path and writes it
 * (o->out, else where the process would have).  LOOM_OK, or an error
 * (loom_last_error says why). */
loom_status loom__salvage_to(const char *path, const loom__salvage_opts *o,
                             loom__salvage_result *res);

/* What the arena at path says about its process, without rebuilding: its
 * pid, its command (comm), the trace it would have written, and whether
 * there is anything to rebuild (1: it was recording and had not written
 * its trace).  0, or -1 when path is not a loom arena. */
int loom__salvage_peek(const char *path, int *pid, char *comm, size_t ncomm, char *out,
                       size_t nout, int *pending);
#endif
