/*
 * memory_view.c - loom_trace_memory (loom.h): the memory events of a trace
 * in time order as public views, through the walk of memory_walk.c, so that
 * bindings (Python's p.trace.memory()) read the same figures as `loom
 * report` without reaching the trace's insides.
 */
#include <string.h>

#include "base/base.h"
#include "trace/memory.h"

typedef struct visit {
  const loom_trace *t;
  loom_memory_visit_fn fn;
  void *user;
  int stopped;
} visit;

static const char *str_or_empty(const loom_trace *t, uint32_t id) {
  return id ? loom__trace_cstr(t, id) : "";
}

static int on_event(void *ud, size_t ev, const loom__mem_ev *e, long series,
                    const loom__mem_after *af) {
  (void)series;
  visit *v = ud;
  const loom_trace *t = v->t;
  loom_memory_view m;
  memset(&m, 0, sizeof m);
  m.struct_size = sizeof m;
  m.event = ev;
  m.ts_ns = e->ts;
  m.device = e->device == LOOM__MEM_HOST ? -1 : e->device;
  m.kind = loom__mem_kind_name(t, e->device, e->kind);
  m.call = str_or_empty(t, e->call);
  m.op = str_or_empty(t, e->op);
  m.range = str_or_empty(t, e->range);
  m.step = str_or_empty(t, e->step);
  m.alloc_op = str_or_empty(t, af->alloc_op);
  m.addr = e->addr;
  m.is_free = (e->flags & LOOM__MEM_FREE) != 0;
  m.bytes = m.is_free ? -(int64_t)af->bytes : (int64_t)af->bytes;
  m.allocated = af->in_use;
  m.reserved = af->reserved;
  m.live_at_start = (e->flags & LOOM__MEM_AT_START) != 0;
  m.unknown = af->unknown;
  if (v->fn(&m, v->user)) {
    v->stopped = 1;
    return 1;
  }
  return 0;
}

loom_status loom_trace_memory(const loom_trace *t, loom_memory_visit_fn fn, void *user) {
  if (!t || !fn) return loom__fail(LOOM_EINVAL, "loom_trace_memory: NULL trace or function");
  visit v = {t, fn, user, 0};
  if (!loom__mem_events(t)) return LOOM_OK;
  int rc = loom__mem_walk(t, 0, on_event, &v, NULL);
  if (rc && !v.stopped) return loom__fail(LOOM_ENOMEM, "out of memory walking memory events");
  return LOOM_OK;
}
