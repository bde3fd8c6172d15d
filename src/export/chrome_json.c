/*
 * chrome_json.c - the Chrome trace JSON writer, in Kineto's conventions
 * (docs/kineto-format.md in the shared facts): a top-level object with
 * schemaVersion, deviceProperties, metadata, baseTimeNanoseconds and
 * traceEvents; complete events with microsecond times carrying three decimals
 * (exact ns); flows as "s"/"f" pairs with "bp":"e"; processes and threads
 * named by "M" events; memory events as Kineto's [memory] instants, each
 * followed by its series' counter (memory.h).  Output is compact and
 * written atomically.
 */
#include <math.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "export/export.h"
#include "export/memory.h"
#include "export/outfile.h"
#include "trace/trace.h"
#include "util/util.h"

/* Kineto floors the base time to a coarse boundary; LOOM__BASE_UNIT keeps
 * "ts" values small and exact in a double (ns fraction preserved), and, a
 * whole number of us, keeps each ts's fraction of a us what it is in
 * absolute time (HTA rounds fractional ts to us: the same figures from a
 * .json as from a .pftrace of the same trace, which streams from the same
 * base). */

typedef struct jw {
  loom__out *o;
  const loom_trace *t;
  int64_t base;
  /* Every string of the trace escaped once: id -> [off, off + len) of esc. */
  loom__out esc;
  uint32_t *esc_off, *esc_len;
  /* Per track: ,"pid":P,"tid":T (7 + 20 + 7 + 20 bytes at most) */
  char (*pt)[56];
  uint8_t *pt_len;
  size_t nstr;      /* strings escaped (those interned later: jcstr) */
  int streaming;    /* warnings go after the events (known at the end) */
  const loom__jsamples *smp; /* streaming: the CPU samples gathered */
  /* Memory events: the whole trace's states (plan), or, streaming, the
   * running totals so far (plan.acc, in the order events come). */
  loom__memplan plan;
  uint32_t s_memory, s_instant; /* "[memory]", "cpu_instant_event" (0: absent) */
  loom__cat_bytes cats;         /* category id -> class: which events need "loom_kind" */
} jw;

static int jw_prepare(jw *w) {
  const loom_trace *t = w->t;
  size_t n = t->strs.n ? t->strs.n : 1;
  w->nstr = n;
  w->esc_off = malloc(n * sizeof *w->esc_off);
  w->esc_len = malloc(n * sizeof *w->esc_len);
  w->pt = malloc((t->ntracks + 1) * sizeof *w->pt);
  w->pt_len = malloc(t->ntracks + 1);
  if (!w->esc_off || !w->esc_len || !w->pt || !w->pt_len || loom__out_mem_init(&w->esc))
    return -1;
  w->s_memory = loom__strtab_find(&t->strs, "[memory]", 8);
  w->s_instant = loom__strtab_find(&t->strs, "cpu_instant_event", 17);
  for (size_t id = 0; id < n; id++) {
    size_t start = w->esc.len;
    loom__json_str(&w->esc, loom__trace_cstr(t, (uint32_t)id),
                   loom__strtab_len(&t->strs, (uint32_t)id));
    if (w->esc.failed || w->esc.len > UINT32_MAX) return -1;
    w->esc_off[id] = (uint32_t)start;
    w->esc_len[id] = (uint32_t)(w->esc.len - start);
  }
  for (size_t i = 0; i < t->ntracks; i++) {
    char *d = w->pt[i];
    size_t k = 0;
    memcpy(d, ",\"pid\":", 7);
    k = 7 + loom__fmt_i64(d + 7, t->tracks[i].pid);
    memcpy(d + k, ",\"tid\":", 7);
    k += 7;
    k += loom__fmt_i64(d + k, t->tracks[i].tid);
    w->pt_len[i] = (uint8_t)k;
  }
  return 0;
}

static void jw_release(jw *w) {
  loom__memplan_free(&w->plan);
  free(w->esc.buf);
  free(w->esc_off);
  free(w->esc_len);
  free(w->pt);
  free(w->pt_len);
  free(w->cats.b);
}

static void jstr(jw *w, uint32_t id) {
  loom__out_mem(w->o, w->esc.buf + w->esc_off[id], w->esc_len[id]);
}

/* String id as raw JSON text (loom__targ.json, top-level values). */
static void jraw(jw *w, uint32_t id) {
  const loom_trace *t = w->t;
  loom__out_mem(w->o, loom__trace_cstr(t, id), loom__strtab_len(&t->strs, id));
}

static void jcstr(jw *w, const char *s) { loom__json_str(w->o, s, strlen(s)); }

static void jint(jw *w, int64_t v) {
  char *d = loom__out_reserve(w->o, 24);
  w->o->len += loom__fmt_i64(d, v);
}

static void jdouble(jw *w, double v) {
  char *d = loom__out_reserve(w->o, 40);
  if (!isfinite(v)) {
    memcpy(d, "null", 4); /* JSON has no NaN or infinity */
    w->o->len += 4;
    return;
  }
  int n = snprintf(d, 40, "%.17g", v);
  w->o->len += (size_t)n;
}

static void jarg_value(jw *w, const loom__targ *a) {
  switch (a->type) {
  case LOOM_ARG_INT: jint(w, a->v.i); break;
  case LOOM_ARG_UINT: {
    char *d = loom__out_reserve(w->o, 24);
    w->o->len += loom__fmt_u64(d, a->v.u);
    break;
  }
  case LOOM_ARG_DOUBLE: jdouble(w, a->v.d); break;
  default:
    if (a->json) jraw(w, a->v.s); /* a nested value, boolean or null as read */
    else jstr(w, a->v.s);
    break;
  }
}

static void jargs(jw *w, const loom__targ *a, size_t n, int first) {
  for (size_t i = 0; i < n; i++) {
    if (!first) loom__out_lit(w->o, ",");
    first = 0;
    jstr(w, a[i].key);
    loom__out_lit(w->o, ":");
    jarg_value(w, &a[i]);
  }
}

static void pid_tid(jw *w, uint32_t track) {
  loom__out_mem(w->o, w->pt[track], w->pt_len[track]);
}

static void ts_field(jw *w, const char *key, size_t klen, int64_t ns) {
  loom__out_mem(w->o, key, klen);
  char *d = loom__out_reserve(w->o, 32);
  w->o->len += loom__fmt_us(d, ns);
}

/* The model's fields kept as arguments: External id, correlation, the
 * marks ("loom_role") and a kind the category does not imply ("loom_kind",
 * docs/formats.md).  Returns 1 when none was written. */
static int reserved_args(jw *w, const loom__ev *e, int async, unsigned roles, int kind) {
  int first = 1;
  if (e->external_id) {
    loom__out_lit(w->o, "\"External id\":");
    jint(w, (int64_t)e->external_id);
    first = 0;
  }
  if (e->correlation && !async) {
    if (!first) loom__out_lit(w->o, ",");
    loom__out_lit(w->o, "\"correlation\":");
    jint(w, (int64_t)e->correlation);
    first = 0;
  }
  if (roles) { /* the report vocabulary (docs/formats.md) */
    char v[LOOM__ROLE_BUF];
    if (!first) loom__out_lit(w->o, ",");
    loom__out_lit(w->o, "\"loom_role\":");
    jcstr(w, (loom__role_format(roles, v), v));
    first = 0;
  }
  if (kind >= 0) {
    if (!first) loom__out_lit(w->o, ",");
    loom__out_lit(w->o, "\"loom_kind\":");
    jcstr(w, loom_kind_name((loom_kind)kind));
    first = 0;
  }
  return first;
}

static void event(jw *w, const loom__ev *e, const loom__targ *args) {
  int async = e->ph == LOOM__PH_ASYNC, open = loom__ev_open_in_file(w->t, e, args);
  for (int pass = 0; pass < (async ? 2 : 1); pass++) {
    char ph = async ? (pass ? 'e' : 'b') : open ? 'B' : (char)e->ph;
    char head[] = "{\"ph\":\"X\",\"cat\":";
    head[7] = ph;
    loom__out_mem(w->o, head, sizeof head - 1);
    jstr(w, e->cat);
    loom__out_lit(w->o, ",\"name\":");
    jstr(w, e->name);
    pid_tid(w, e->track);
    ts_field(w, ",\"ts\":", 6, e->ts - w->base + (pass ? e->dur : 0));
    if (e->ph == LOOM__PH_COMPLETE && !open) ts_field(w, ",\"dur\":", 7, e->dur);
    if (e->ph == LOOM__PH_INSTANT) loom__out_lit(w->o, ",\"s\":\"t\"");
    if (async) {
      loom__out_lit(w->o, ",\"id\":");
      jint(w, (int64_t)e->correlation);
    }
    unsigned roles = LOOM__EV_ROLE_OF(e);
    int kind = pass ? -1 : loom__kind_to_write(&w->cats, w->t, e);
    if (pass == 1 ||
        (!e->external_id && (!e->correlation || async) && !e->nargs && !roles && kind < 0)) {
      loom__out_lit(w->o, "},\n");
      continue;
    }
    loom__out_lit(w->o, ",\"args\":{");
    jargs(w, args, e->nargs, reserved_args(w, e, async, roles, kind));
    loom__out_lit(w->o, "}},\n");
  }
}

/* ---- memory events as Kineto's [memory] instants (docs/formats.md) ----- */
static void ju64(jw *w, uint64_t v) {
  char *d = loom__out_reserve(w->o, 24);
  w->o->len += loom__fmt_u64(d, v);
}

/* A series' counter after an event: bytes in use, and reserved once its
 * pool has said, under the device's (or the host's) process. */
static void mem_counter(jw *w, const loom__memstate *st, int64_t ts) {
  const loom__memseries *s = &w->plan.acc.series[st->series];
  loom__out_lit(w->o, "{\"ph\":\"C\",\"cat\":\"" LOOM__MEM_COUNTER_CAT "\",\"name\":");
  jcstr(w, s->name);
  loom__out_lit(w->o, ",\"pid\":");
  jint(w, s->pid);
  ts_field(w, ",\"ts\":", 6, ts - w->base);
  loom__out_lit(w->o, ",\"args\":{\"in use\":");
  ju64(w, st->in_use);
  if (st->has_reserved) {
    loom__out_lit(w->o, ",\"reserved\":");
    ju64(w, st->reserved);
  }
  loom__out_lit(w->o, "}},\n");
}

/* Kineto's arguments, as PyTorch orders them; values a reader kept as
 * read (a PyTorch trace's) are written back as they were. */
static void mem_kineto(jw *w, const loom__memev *m, const loom__memstate *st, int foreign) {
  loom__out_lit(w->o, ",\"args\":{\"Device Type\":");
  if (m->dev_type) jarg_value(w, m->dev_type);
  else jint(w, m->has_device);
  loom__out_lit(w->o, ",\"Device Id\":");
  if (m->dev_id) jarg_value(w, m->dev_id);
  else jint(w, m->has_device ? m->device : -1);
  loom__out_lit(w->o, ",\"Addr\":");
  ju64(w, m->addr);
  loom__out_lit(w->o, ",\"Bytes\":");
  if (m->is_free && st->bytes) loom__out_lit(w->o, "-");
  ju64(w, st->bytes);
  loom__out_lit(w->o, ",\"Total Allocated\":");
  if (foreign) jarg_value(w, m->total_alloc);
  else ju64(w, st->total_alloc);
  loom__out_lit(w->o, ",\"Total Reserved\":");
  if (m->total_res) jarg_value(w, m->total_res);
  else ju64(w, foreign && m->has_reserved ? m->reserved : st->total_res);
}

/* loom's own arguments: what Kineto's do not say. */
static void mem_loom(jw *w, const loom__ev *e, const loom__memev *m, const loom__memstate *st,
                     int foreign) {
  if (e->name != w->s_memory) {
    loom__out_lit(w->o, ",\"loom_call\":");
    jstr(w, e->name);
  }
  if (!foreign) {
    loom__out_lit(w->o, ",\"loom_memory_kind\":");
    if (m->kind) jstr(w, m->kind);
    else jcstr(w, loom__memev_kind(w->t, m));
  }
  if (!foreign && st->unknown) loom__out_lit(w->o, ",\"loom_unknown_free\":1");
  if (e->cat && e->cat != w->s_instant) {
    loom__out_lit(w->o, ",\"loom_cat\":");
    jstr(w, e->cat);
  }
  unsigned roles = LOOM__EV_ROLE_OF(e);
  unsigned implied = m->is_free && st->bytes ? LOOM_RECORD_F_FREE : LOOM_RECORD_F_ALLOC;
  if (roles != implied) { /* the sign of Bytes cannot say it */
    char v[LOOM__ROLE_BUF];
    loom__out_lit(w->o, ",\"loom_role\":");
    jcstr(w, (loom__role_format(roles, v), v));
  }
  if (e->external_id) {
    loom__out_lit(w->o, ",\"External id\":");
    jint(w, (int64_t)e->external_id);
  }
  if (e->correlation) {
    loom__out_lit(w->o, ",\"correlation\":");
    jint(w, (int64_t)e->correlation);
  }
}

/* A memory event: the instant, then its series' counter. */
static void mem_event(jw *w, const loom__ev *e, const loom__targ *args,
                      const loom__memev *m, const loom__memstate *st) {
  int foreign = m->total_alloc != NULL;
  loom__out_lit(w->o, "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\"");
  pid_tid(w, e->track);
  ts_field(w, ",\"ts\":", 6, e->ts - w->base);
  loom__out_lit(w->o, ",\"s\":\"t\"");
  mem_kineto(w, m, st, foreign);
  mem_loom(w, e, m, st, foreign);
  for (uint16_t i = 0; i < e->nargs; i++) {
    if (loom__memkeys_mapped(&w->plan.keys, args[i].key, foreign)) continue;
    loom__out_lit(w->o, ",");
    jstr(w, args[i].key);
    loom__out_lit(w->o, ":");
    jarg_value(w, &args[i]);
  }
  loom__out_lit(w->o, "}},\n");
  if (st->counted) mem_counter(w, st, e->ts);
}

/* A memory event of the whole trace (its state planned), or of a stream. */
static void memory(jw *w, const loom__ev *e, const loom__targ *args, uint32_t index) {
  loom__memev m;
  loom__memev_of(&w->plan.keys, e, args, &m);
  const loom__memstate *st = w->streaming ? NULL : loom__memplan_get(&w->plan, index);
  loom__memstate now;
  if (!st) {
    if (loom__memacc_add(&w->plan.acc, w->t, e, args, &now)) {
      if (!w->o->failed) w->o->failed = ENOMEM;
      return;
    }
    st = &now;
  }
  mem_event(w, e, args, &m, st);
}

/* The category of a message flow: the sending call's category with
 * "_message" ("mpi" -> "mpi_message"), so a backend's messages keep its
 * vocabulary and the core names none. */
static const char *message_cat(jw *w, uint32_t cat_id, char buf[80]) {
  const char *c = cat_id ? loom__trace_cstr(w->t, cat_id) : "";
  size_t n = strlen(c);
  if (n > 80 - 9) n = 80 - 9;
  memcpy(buf, c, n);
  memcpy(buf + n, n ? "_message" : "message", n ? 9 : 8);
  return buf;
}

/* A flow end at ts; its category and name are cat_id/name_id, or cat. */
static void flow_end(jw *w, char ph, uint64_t id, uint32_t track, int64_t ts, int bp_e,
                     const char *cat, uint32_t name_id, uint32_t cat_id) {
  loom__out_lit(w->o, "{\"ph\":\"");
  loom__out_mem(w->o, &ph, 1);
  loom__out_lit(w->o, "\",\"cat\":");
  if (cat_id) jstr(w, cat_id);
  else jcstr(w, cat);
  loom__out_lit(w->o, ",\"name\":");
  if (name_id) jstr(w, name_id);
  else jcstr(w, cat);
  loom__out_lit(w->o, ",\"id\":");
  jint(w, (int64_t)id);
  pid_tid(w, track);
  ts_field(w, ",\"ts\":", 6, ts - w->base);
  if (ph == 'f' && bp_e) loom__out_lit(w->o, ",\"bp\":\"e\"");
  loom__out_lit(w->o, "},\n");
}

/* A flow from a (on from_track at from_ts) to b, which binds to the slice
 * enclosing its time (trace_processor wants it after the start): a b that
 * began before a (a wait) takes the flow at its last nanosecond. */
static void flow_pair(jw *w, const char *cat, uint64_t id, uint32_t from_track, int64_t from_ts,
                      uint32_t to_track, int64_t to_ts, int64_t to_dur) {
  int64_t end = to_ts >= from_ts ? to_ts : to_ts + (to_dur > 0 ? to_dur - 1 : 0);
  flow_end(w, 's', id, from_track, from_ts, 0, cat, 0, 0);
  flow_end(w, 'f', id, to_track, end, 1, cat, 0, 0);
}

/* Both ends of flow f.  Messages between ranks (the sending call is marked
 * "send", or, in traces written before the marks, the flow joins host calls
 * of two processes) are "<the sending call's category>_message" flows; the
 * rest Kineto's "ac2g" (host call -> device work). */
static void flow(jw *w, const loom__flow *f) {
  const loom__ev *a = &w->t->ev[f->from], *b = &w->t->ev[f->to];
  const loom__track *x = &w->t->tracks[a->track], *y = &w->t->tracks[b->track];
  char buf[80];
  const char *cat = "ac2g";
  if ((LOOM__EV_ROLE_OF(a) & LOOM_RECORD_F_SEND) ||
      (x->device == LOOM_DEVICE_HOST && y->device == LOOM_DEVICE_HOST && x->pid != y->pid))
    cat = message_cat(w, a->cat, buf);
  flow_pair(w, cat, f->id, a->track, a->ts, b->track, b->ts, b->dur);
}

static void meta_event(jw *w, const char *what, int64_t pid, int64_t tid,
                       int has_tid, const char *key, uint32_t sval, int64_t ival,
                       int is_str) {
  loom__out_lit(w->o, "{\"ph\":\"M\",\"name\":");
  jcstr(w, what);
  loom__out_lit(w->o, ",\"pid\":");
  jint(w, pid);
  loom__out_lit(w->o, ",\"tid\":");
  jint(w, has_tid ? tid : 0);
  loom__out_lit(w->o, ",\"ts\":0,\"args\":{");
  jcstr(w, key);
  loom__out_lit(w->o, ":");
  if (is_str) jstr(w, sval);
  else jint(w, ival);
  loom__out_lit(w->o, "}},\n");
}

static void device_props(jw *w) {
  const loom_trace *t = w->t;
  loom__out_lit(w->o, "\"deviceProperties\":[");
  for (size_t i = 0; i < t->ndevs; i++) {
    const loom__dev *d = &t->devs[i];
    if (i) loom__out_lit(w->o, ",");
    loom__out_lit(w->o, "{\"id\":");
    jint(w, d->pid);
    loom__out_lit(w->o, ",\"name\":");
    jstr(w, d->name);
    loom__out_lit(w->o, ",\"vendor\":");
    jstr(w, d->vendor);
    loom__out_lit(w->o, ",\"type\":");
    jstr(w, d->type);
    loom__out_lit(w->o, ",\"deviceType\":");
    jstr(w, d->device_type);
    loom__out_lit(w->o, ",\"backend\":");
    jstr(w, d->backend);
    jargs(w, d->nargs ? t->args + d->args_off : NULL, d->nargs, 0);
    loom__out_lit(w->o, "}");
  }
  loom__out_lit(w->o, "],\n");
}

static const char *meta_value(const loom_trace *t, const char *key) {
  for (size_t i = 0; i < t->nmeta; i++)
    if (!strcmp(loom__trace_cstr(t, t->meta[i].key), key))
      return loom__trace_cstr(t, t->meta[i].value);
  return NULL;
}

/* Kineto's top-level distributedInfo, written when the rank is known (the
 * "rank"/"world_size"/"distributed_backend" metadata stay as they are). */
static void dist_info(jw *w) {
  const char *rank = meta_value(w->t, "rank");
  if (!rank || loom__trace_top(w->t, "distributedInfo")) return; /* kept as read */
  const char *size = meta_value(w->t, "world_size"), *be = meta_value(w->t, "distributed_backend");
  loom__out_lit(w->o, "\"distributedInfo\":{\"rank\":");
  jint(w, strtoll(rank, NULL, 10));
  if (size) {
    loom__out_lit(w->o, ",\"world_size\":");
    jint(w, strtoll(size, NULL, 10));
  }
  if (be) {
    loom__out_lit(w->o, ",\"backend\":");
    jcstr(w, be);
  }
  loom__out_lit(w->o, "},\n");
}

static void warnings(jw *w) {
  const loom_trace *t = w->t;
  loom__out_lit(w->o, "\"loom_warnings\":[");
  for (size_t i = 0; i < t->nwarnings; i++) {
    if (i) loom__out_lit(w->o, ",\n");
    if (t->warnings[i] < w->nstr) jstr(w, t->warnings[i]);
    else jcstr(w, loom__trace_cstr(t, t->warnings[i]));
  }
  loom__out_lit(w->o, "]");
}

/* The top-level keys before the events (after schemaVersion). */
static void header_keys(jw *w) {
  const loom_trace *t = w->t;
  device_props(w);
  for (size_t i = 0; i < t->nmeta; i++) {
    if (!strcmp(loom__trace_cstr(t, t->meta[i].key), "displayTimeUnit")) continue; /* below */
    jstr(w, t->meta[i].key);
    loom__out_lit(w->o, ":");
    jstr(w, t->meta[i].value);
    loom__out_lit(w->o, ",\n");
  }
  for (size_t i = 0; i < t->ntop; i++) { /* others' top-level values, as read */
    jstr(w, t->top[i].key);
    loom__out_lit(w->o, ":");
    jraw(w, t->top[i].value);
    loom__out_lit(w->o, ",\n");
  }
  dist_info(w);
  loom__out_lit(w->o, "\"loom_dropped\":");
  jint(w, (int64_t)t->dropped);
  loom__out_lit(w->o, ",\n");
  if (!w->streaming) {
    warnings(w);
    loom__out_lit(w->o, ",\n");
  }
  const char *unit = meta_value(t, "displayTimeUnit");
  loom__out_lit(w->o, "\"displayTimeUnit\":");
  jcstr(w, unit ? unit : "ms");
  loom__out_lit(w->o, ",\n");
}

static void trace_name(jw *w) {
  const loom_trace *t = w->t;
  loom__out_lit(w->o, "\"traceName\":");
  if (t->trace_name < w->nstr) jstr(w, t->trace_name);
  else jcstr(w, loom__trace_cstr(t, t->trace_name));
}

static void header(jw *w) {
  loom__out_lit(w->o, "{\"schemaVersion\":1,\n");
  header_keys(w);
  loom__out_lit(w->o, "\"baseTimeNanoseconds\":");
  jint(w, w->base);
  loom__out_lit(w->o, ",\n\"traceEvents\":[\n");
}

static void metadata_events(jw *w) {
  const loom_trace *t = w->t;
  for (size_t i = 0; i < t->nprocs; i++) {
    const loom__proc *p = &t->procs[i];
    /* a process the file never named (loom made it up for a string pid
     * or a device): no name event, as an empty name is a parse failure in
     * trace_processor */
    if (p->name && loom__strtab_len(&t->strs, p->name))
      meta_event(w, "process_name", p->pid, 0, 0, "name", p->name, 0, 1);
    if (p->labels) meta_event(w, "process_labels", p->pid, 0, 0, "labels", p->labels, 0, 1);
    meta_event(w, "process_sort_index", p->pid, 0, 0, "sort_index", 0, p->sort, 0);
  }
  for (size_t i = 0; i < t->ntracks; i++) {
    const loom__track *k = &t->tracks[i];
    if (k->name) meta_event(w, "thread_name", k->pid, k->tid, 1, "name", k->name, 0, 1);
    meta_event(w, "thread_sort_index", k->pid, k->tid, 1, "sort_index", 0, k->sort, 0);
  }
}

/* Kineto closes the event list with a global instant marking the end of
 * the recording window (kept when a trace read from a file had it); then
 * the trailer. */
static void trailer(jw *w) {
  const loom_trace *t = w->t;
  loom__out *o = w->o;
  if (t->window_end) {
    loom__out_lit(
        o, "{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"marker\",\"name\":\"Record Window End\",\"pid\":");
    jint(w, t->nprocs ? t->procs[0].pid : 0);
    loom__out_lit(o, ",\"tid\":0,\"ts\":");
    char *d = loom__out_reserve(o, 32);
    o->len += loom__fmt_us(d, t->end_ns - w->base);
    loom__out_lit(o, "},\n");
  }
  /* JSON allows no trailing comma: rewind the last ",\n" (the buffer holds
   * at least the last event: it is flushed only when it fills). */
  if (o->len >= 2 && o->buf[o->len - 2] == ',') o->len -= 2;
  loom__out_lit(o, "\n],\n");
  if (!w->streaming) loom__json_samples_write(t, o, w->base); /* json_samples.c */
  else loom__jsamples_write(w->smp, o, w->base);
  if (w->streaming) {
    warnings(w);
    loom__out_lit(o, ",\n");
  }
  trace_name(w);
  loom__out_lit(o, "}\n");
}

static loom_status jw_open(jw *w, loom__out *o, const loom_trace *t, const char *path, int gzip) {
  w->o = o;
  w->t = t;
  w->base = loom__base_of(t->start_ns);
  if (jw_prepare(w) != 0) {
    jw_release(w);
    return loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
  }
  loom_status st = loom__out_open(o, path, gzip);
  if (st != LOOM_OK) {
    jw_release(w);
    return st;
  }
  header(w);
  metadata_events(w);
  return LOOM_OK;
}

/* ---- the events, formatted on two threads ------------------------------ */
/* Events are formatted in chunks: the even ones by the writing thread,
 * straight into the file's buffer, the odd ones ahead of it by a helper
 * into two memory buffers in turn, which the writing thread copies out in
 * order.  The text is the same as one thread's; memory: two chunks' text. */
enum { CHUNK = 8192 };

int loom__json_one_thread;

typedef struct jpar {
  jw w;               /* the helper's: the writer's tables, its own output and cache */
  loom__out buf[2];   /* odd chunk c in buf[c / 2 % 2] */
  int full[2];
  size_t nchunks;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} jpar;

static void write_events(jw *w, size_t lo, size_t hi) {
  const loom_trace *t = w->t;
  for (size_t i = lo; i < hi; i++) { /* no arguments: no offset into a NULL array */
    const loom__targ *args = t->ev[i].nargs ? t->args + t->ev[i].args_off : NULL;
    if (t->ev[i].kind == LOOM_KIND_MEMORY) memory(w, &t->ev[i], args, (uint32_t)i);
    else if (t->ev[i].kind != LOOM_KIND_SAMPLE) event(w, &t->ev[i], args); /* samples: trailer */
  }
}

static size_t chunk_end(const jw *w, size_t c) {
  size_t end = (c + 1) * CHUNK;
  return end < w->t->nev ? end : w->t->nev;
}

static void *helper_main(void *arg) {
  jpar *p = arg;
  for (size_t c = 1; c < p->nchunks; c += 2) {
    int slot = (int)(c / 2 % 2);
    pthread_mutex_lock(&p->mu);
    while (p->full[slot]) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    p->buf[slot].len = 0;
    p->w.o = &p->buf[slot];
    write_events(&p->w, c * CHUNK, chunk_end(&p->w, c));
    pthread_mutex_lock(&p->mu);
    p->full[slot] = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  return NULL;
}

/* Odd chunk c: the helper's text copied out (its last bytes through the
 * buffer, so that the trailer can take back the last ",\n"); formatted here
 * when the helper ran out of memory. */
static void put_chunk(jw *w, jpar *p, size_t c) {
  int slot = (int)(c / 2 % 2);
  pthread_mutex_lock(&p->mu);
  while (!p->full[slot]) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  loom__out *b = &p->buf[slot];
  if (b->failed) {
    write_events(w, c * CHUNK, chunk_end(w, c));
  } else {
    size_t tail = b->len < 1024 ? b->len : 1024;
    loom__out_mem(w->o, b->buf, b->len - tail);
    memcpy(loom__out_reserve(w->o, tail), b->buf + b->len - tail, tail);
    w->o->len += tail;
  }
  pthread_mutex_lock(&p->mu);
  p->full[slot] = 0;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The events in file order: on two threads past two chunks, else (or
 * without a thread) on this one. */
static void all_events(jw *w) {
  jpar p = {.w = *w, .nchunks = (w->t->nev + CHUNK - 1) / CHUNK};
  p.w.cats = (loom__cat_bytes){0};
  pthread_t th;
  int two = p.nchunks > 2 && !loom__json_one_thread && !loom__out_mem_init(&p.buf[0]) &&
            !loom__out_mem_init(&p.buf[1]);
  if (two) {
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    two = loom__thread_start(&th, helper_main, &p) == 0;
    if (!two) {
      pthread_cond_destroy(&p.cv);
      pthread_mutex_destroy(&p.mu);
    }
  }
  if (!two) {
    write_events(w, 0, w->t->nev);
  } else {
    for (size_t c = 0; c < p.nchunks; c++) {
      if (c % 2) put_chunk(w, &p, c);
      else write_events(w, c * CHUNK, chunk_end(w, c));
    }
    pthread_join(th, NULL);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
  }
  free(p.buf[0].buf);
  free(p.buf[1].buf);
  free(p.w.cats.b);
}

loom_status loom__write_chrome_json(const loom_trace *t, const char *path, int gzip) {
  loom__out o;
  jw w = {0};
  loom_status st = jw_open(&w, &o, t, path, gzip);
  if (st != LOOM_OK) return st;
  if (loom__memplan_build(&w.plan, t)) {
    jw_release(&w);
    loom__out_abort(&o);
    return loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
  }
  all_events(&w);
  for (size_t i = 0; i < t->nflows; i++) flow(&w, &t->flows[i]);
  trailer(&w);
  jw_release(&w);
  return loom__out_commit(&o);
}

int loom__json_header(const loom_trace *t, loom__out *mem) {
  jw w = {0};
  w.t = t;
  w.o = mem;
  int rc = jw_prepare(&w);
  if (rc == 0) {
    loom__out_lit(mem, "{");
    header_keys(&w);
    trace_name(&w);
    loom__out_lit(mem, "}");
    rc = mem->failed ? -1 : 0;
  }
  jw_release(&w);
  return rc;
}

/* ---- the same writer as a stream (loom merge) --------------------------- */
struct loom__jstream {
  jw w;
  loom__out o;
  loom__jsamples *smp; /* CPU samples, written as "samples" at the end */
};

loom_status loom__jstream_open(loom__jstream **out, const loom_trace *t, const char *path,
                               int gzip) {
  *out = calloc(1, sizeof **out);
  if (!*out) return loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
  (*out)->w.streaming = 1;
  loom__memkeys_find(&(*out)->w.plan.keys, t);
  (*out)->smp = loom__jsamples_new();
  if (!(*out)->smp) {
    free(*out);
    *out = NULL;
    return loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
  }
  loom_status st = jw_open(&(*out)->w, &(*out)->o, t, path, gzip);
  if (st != LOOM_OK) {
    loom__jsamples_free((*out)->smp);
    free(*out);
    *out = NULL;
  }
  return st;
}

void loom__jstream_event(loom__jstream *s, const loom__ev *e, const loom__targ *args) {
  if (e->kind == LOOM_KIND_MEMORY) memory(&s->w, e, args, 0);
  else if (e->kind != LOOM_KIND_SAMPLE) event(&s->w, e, args);
  else if (loom__jsamples_add(s->smp, s->w.t, e, args) && !s->o.failed)
    s->o.failed = ENOMEM; /* in "samples" (close) */
}

void loom__jstream_flow(loom__jstream *s, char ph, uint64_t id, uint32_t track, int64_t ts,
                        int bp_e, uint32_t name, uint32_t cat) {
  flow_end(&s->w, ph, id, track, ts, bp_e, "ac2g", name, cat);
}

void loom__jstream_message(loom__jstream *s, uint64_t id, uint32_t cat, uint32_t from_track,
                           int64_t from_ts, uint32_t to_track, int64_t to_ts, int64_t to_dur) {
  char buf[80];
  flow_pair(&s->w, message_cat(&s->w, cat, buf), id, from_track, from_ts, to_track, to_ts, to_dur);
}

loom_status loom__jstream_close(loom__jstream *s) {
  s->w.smp = s->smp;
  trailer(&s->w);
  jw_release(&s->w);
  loom_status st = loom__out_commit(&s->o);
  loom__jsamples_free(s->smp);
  free(s);
  return st;
}

void loom__jstream_abort(loom__jstream *s) {
  if (!s) return;
  jw_release(&s->w);
  loom__out_abort(&s->o);
  loom__jsamples_free(s->smp);
  free(s);
}
