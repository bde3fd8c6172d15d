/*
 * fuzz_json_stream.c - the streaming read (loom__trace_stream_flows, what
 * loom report and loom merge use) on any bytes.  Every event handed to the
 * sink has valid strings, track and arguments; every flow end a valid
 * track; a read that fails says why; the streaming read and the whole read
 * (loom_trace_load) agree on whether the file is a trace.
 */
#include <string.h>

#include <loom/loom.h>

#include "fuzz.h"
#include "export/export.h"
#include "trace/trace.h"

typedef struct counts {
  unsigned long events, flows;
} counts;

static void check_str(const loom_trace *t, uint32_t id, const char *what) {
  const char *s = loom__trace_cstr(t, id);
  FUZZ_CHECK(s || !id, "%s: string id %u has no string", what, (unsigned)id);
  if (s) (void)strlen(s);
}

static int on_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  counts *c = ctx;
  c->events++;
  check_str(t, e->name, "event name");
  check_str(t, e->cat, "event category");
  FUZZ_CHECK(e->track < t->ntracks, "event track %u of %zu", (unsigned)e->track, t->ntracks);
  FUZZ_CHECK(e->nargs == 0 || args, "%u arguments but no argument array", (unsigned)e->nargs);
  for (unsigned i = 0; i < e->nargs; i++) {
    check_str(t, args[i].key, "argument key");
    if (args[i].type == LOOM_ARG_STRING) check_str(t, args[i].v.s, "argument value");
  }
  return 0;
}

static int on_flow(void *ctx, const loom_trace *t, uint64_t id, int64_t ts, uint32_t track,
                   char ph, int bind_enclosing, uint32_t name, uint32_t cat) {
  counts *c = ctx;
  c->flows++;
  FUZZ_CHECK(track < t->ntracks, "flow track %u of %zu", (unsigned)track, t->ntracks);
  FUZZ_CHECK(ph == 's' || ph == 't' || ph == 'f', "flow phase %d", ph);
  check_str(t, name, "flow name");
  check_str(t, cat, "flow category");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = loom_fuzz_file("in.json", data, size);
  if (!p) return 0;
  counts c = {0, 0};
  loom__sink sink = {.event = on_event, .ctx = &c};
  loom__flow_sink flows = {on_flow, &c};
  loom_trace *meta = NULL;
  loom_status st = loom__trace_stream_flows(p, &sink, &flows, &meta);
  if (st != LOOM_OK) {
    FUZZ_CHECK(!meta && *loom_last_error(), "failed stream (%d) without a message", (int)st);
  } else {
    FUZZ_CHECK(meta && meta->nev == 0, "the streamed trace keeps %zu events",
               meta ? meta->nev : 0);
    loom_trace_free(meta);
  }
  loom_trace *t = NULL;
  loom_status whole = loom_trace_load(p, &t);
  FUZZ_CHECK((whole == LOOM_OK) == (st == LOOM_OK),
             "the whole read says %d, the streaming read %d", (int)whole, (int)st);
  loom_trace_free(t);
  return 0;
}
