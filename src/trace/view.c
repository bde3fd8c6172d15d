/*
 * view.c - read-only views of the parts of a trace that loom_trace_event
 * does not show: an event's typed arguments, the processes, the tracks and
 * the metadata (loom.h, "the rest of a trace's model").  For code that
 * hands loom's processed trace to another profiler, such as the Kineto
 * bridge (bridges/kineto); nothing here changes the trace.
 */
#include <string.h>

#include "base/base.h"
#include "trace.h"
#include "util/util.h"

static const char *str_or_empty(const loom_trace *t, uint32_t id) {
  const char *s = id ? loom__trace_cstr(t, id) : NULL;
  return s ? s : "";
}

size_t loom_trace_event_args(const loom_trace *t, size_t i, loom_arg *out, size_t max) {
  if (!t || i >= t->nev) return 0;
  const loom__ev *e = &t->ev[i];
  size_t n = e->nargs;
  for (size_t k = 0; out && k < n && k < max; k++) {
    const loom__targ *a = &t->args[e->args_off + k];
    out[k].key = str_or_empty(t, a->key);
    out[k].type = (loom_arg_type)a->type;
    if (a->type == LOOM_ARG_STRING) out[k].v.s = str_or_empty(t, a->v.s);
    else if (a->type == LOOM_ARG_INT) out[k].v.i = a->v.i;
    else if (a->type == LOOM_ARG_UINT) out[k].v.u = a->v.u;
    else out[k].v.d = a->v.d;
  }
  return n;
}

size_t loom_trace_process_count(const loom_trace *t) { return t ? t->nprocs : 0; }

loom_status loom_trace_process(const loom_trace *t, size_t i, loom_process_view *out) {
  if (!t || !out || i >= t->nprocs || out->struct_size < sizeof *out)
    return loom__fail(LOOM_EINVAL, "loom_trace_process: bad trace, index or view");
  const loom__proc *p = &t->procs[i];
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->pid = p->pid;
  out->name = str_or_empty(t, p->name);
  out->labels = str_or_empty(t, p->labels);
  out->sort = p->sort;
  return LOOM_OK;
}

size_t loom_trace_track_count(const loom_trace *t) { return t ? t->ntracks : 0; }

loom_status loom_trace_track(const loom_trace *t, size_t i, loom_track_view *out) {
  if (!t || !out || i >= t->ntracks || out->struct_size < sizeof *out)
    return loom__fail(LOOM_EINVAL, "loom_trace_track: bad trace, index or view");
  const loom__track *k = &t->tracks[i];
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->pid = k->pid;
  out->tid = k->tid;
  out->name = str_or_empty(t, k->name);
  out->device = k->device;
  out->sort = k->sort;
  return LOOM_OK;
}

size_t loom_trace_meta_count(const loom_trace *t) { return t ? t->nmeta : 0; }

loom_status loom_trace_meta(const loom_trace *t, size_t i, const char **key, const char **value) {
  if (!t || i >= t->nmeta || !key || !value)
    return loom__fail(LOOM_EINVAL, "loom_trace_meta: bad trace or index");
  *key = str_or_empty(t, t->meta[i].key);
  *value = str_or_empty(t, t->meta[i].value);
  return LOOM_OK;
}
