/*
 * session_meta.c - labels a process's trace carries from session options.
 *
 * Session options "meta.KEY=VALUE" become trace metadata KEY=VALUE (the
 * values percent-decoded, so that a command line may hold ',' and ';', the
 * option separators: "%2C", "%3B", "%25"); option "process_name" names the
 * recording process in the trace (e.g. "rank 1: python3 ddp.py").
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "trace/trace.h"

int loom__session_meta(const loom__opts *o, loom_trace *t) {
  for (size_t i = 0; i < o->n; i++) {
    int is_meta = !strncmp(o->keys[i], "meta.", 5) && o->keys[i][5];
    int is_name = !strcmp(o->keys[i], "process_name") && t->nprocs;
    if (!is_meta && !is_name) continue;
    char *v = loom__strdup(o->vals[i]);
    if (!v) return -1;
    loom__percent_decode(v);
    int rc = 0;
    if (is_meta) rc = loom__trace_add_meta(t, o->keys[i] + 5, v);
    else t->procs[0].name = loom__trace_str(t, v);
    free(v);
    if (rc) return -1;
  }
  return 0;
}
