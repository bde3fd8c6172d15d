/*
 * pftrace_read_events.c - the Perfetto reader's track descriptors (processes,
 * threads, counter and async tracks), track events (slices, instants,
 * counters, their debug annotations and flows) and CPU samples (profiling
 * tables and PerfSample).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "export/pftrace_read.h"

/* ---- CPU samples: profiling tables and PerfSample ----------------------- */
static const char *iid_str(pf_reader *r, loom__map *table, uint64_t iid) {
  uint64_t *id = iid ? loom__map_get(table, iid) : NULL;
  return id ? loom__trace_cstr(r->t, (uint32_t)*id) : "";
}

/* A mapping's path: loom writes it as one component, kept as it is; other
 * producers split it ("system", "lib64", "libc.so"), joined with "/"s. */
static void profile_mapping(pf_reader *r, pb_span msg) {
  uint64_t iid = 0, v;
  uint32_t f;
  int w, parts = 0;
  pb_span sub;
  char path[4096], one[4096];
  size_t n = 0;
  one[0] = 0;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
    if (f == PF_MAP_IID && w == PB_VARINT) iid = v;
    if (f != PF_MAP_PATH_STRING_IDS || w != PB_VARINT) continue;
    const char *c = iid_str(r, &r->mpaths, v);
    if (!parts++) snprintf(one, sizeof one, "%s", c);
    int k = snprintf(path + n, sizeof path - n, "/%s", c);
    if (k > 0) n = n + (size_t)k < sizeof path ? n + (size_t)k : sizeof path - 1;
  }
  if (!iid) return;
  const char *p = parts == 1 ? one : path;
  size_t len = parts == 1 ? strlen(one) : n;
  uint32_t id = loom__strtab_intern(&r->t->strs, p, len);
  if ((!id && len) || loom__map_put(&r->mappings, iid, id)) r->oom = 1;
}

static void profile_frame(pf_reader *r, pb_span msg) {
  uint64_t iid = 0, fn = 0, map = 0, pc = 0, v;
  uint32_t f;
  int w;
  pb_span sub;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
    if (w != PB_VARINT) continue;
    if (f == PF_FRAME_IID) iid = v;
    else if (f == PF_FRAME_FUNCTION_NAME_ID) fn = v;
    else if (f == PF_FRAME_MAPPING_ID) map = v;
    else if (f == PF_FRAME_REL_PC) pc = v;
  }
  if (!iid) return;
  long i =
      loom__samples_frame(&r->smp, iid_str(r, &r->fnames, fn), iid_str(r, &r->mappings, map), pc);
  if (i < 0 || loom__map_put(&r->frames, iid, (uint64_t)i + 1)) r->oom = 1;
}

/* A callstack (outermost frame first) as the call site of its leaf; a
 * frame id the file never interned is left out. */
static void profile_callstack(pf_reader *r, pb_span msg) {
  uint64_t iid = 0, v;
  uint32_t f, site = 0;
  int w;
  pb_span sub;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
    if (f == PF_CALLSTACK_IID && w == PB_VARINT) iid = v;
    uint64_t *fi =
        f == PF_CALLSTACK_FRAME_IDS && w == PB_VARINT ? loom__map_get(&r->frames, v) : NULL;
    if (fi && !(site = loom__samples_site(&r->smp, site, (uint32_t)(*fi - 1)))) r->oom = 1;
  }
  if (iid && loom__map_put(&r->callstacks, iid, site)) r->oom = 1;
}

/* Mappings, then frames, then callstacks, whatever their order in msg. */
void loom__pfr_interned_profile(pf_reader *r, pb_span msg) {
  static const uint32_t order[] = {PF_ID_MAPPINGS, PF_ID_FRAMES, PF_ID_CALLSTACKS};
  for (int pass = 0; pass < 3; pass++) {
    pb_span c = msg, sub;
    uint32_t f;
    int w;
    uint64_t v;
    while (rd_field(&c, &f, &w, &v, &sub)) {
      if (w != PB_LEN || f != order[pass]) continue;
      if (pass == 0) profile_mapping(r, sub);
      else if (pass == 1) profile_frame(r, sub);
      else profile_callstack(r, sub);
    }
  }
}

/* A PerfSample: a CPU sample on its thread, named and with its stack as
 * the Chrome JSON reader gives one.  Packets without a callstack (lost
 * records, skipped samples) are not samples. */
void loom__pfr_perf_sample(pf_reader *r, pb_span msg) {
  uint64_t pid = 0, tid = 0, cs = 0, v;
  uint32_t f;
  int w, has_cs = 0;
  pb_span sub;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
    if (w != PB_VARINT) continue;
    if (f == PF_PS_PID) pid = v;
    else if (f == PF_PS_TID) tid = v;
    else if (f == PF_PS_CALLSTACK_IID) cs = v, has_cs = 1;
  }
  if (!has_cs || msg.bad) return;
  uint64_t *site = loom__map_get(&r->callstacks, cs);
  uint32_t leaf = site ? (uint32_t)*site : 0, track;
  long n = loom__samples_text(&r->smp, leaf, &r->stack, &r->stack_cap);
  loom_trace *t = r->t;
  if (n < 0 || loom__trace_track(t, (int64_t)(uint32_t)pid, (int64_t)(uint32_t)tid, NULL,
                                 LOOM_DEVICE_HOST, &track)) {
    r->oom = 1;
    return;
  }
  char label[600];
  const char *name =
      leaf ? loom__samples_frame_label(&r->smp, r->smp.sites[leaf - 1].frame, label, sizeof label)
           : "[unknown]";
  loom__ev e = {.ts = r->ts,
                .name = loom__trace_str(t, name),
                .cat = loom__trace_str(t, "cpu_sample"),
                .track = track,
                .kind = LOOM_KIND_SAMPLE,
                .ph = LOOM__PH_INSTANT};
  if (loom__trace_add_ev(t, &e) || loom__trace_add_arg_str(t, "stack", r->stack)) r->oom = 1;
}

/* The descriptor of track uuid (NULL: none); the last few found are
 * remembered by index (events come in runs on one track). */
static pf_track *trk_of(pf_reader *r, uint64_t uuid) {
  size_t h = (size_t)((uuid * 0x9e3779b97f4a7c15ull) >> 58);
  if (r->trk_hit[h] && r->trks[r->trk_hit[h] - 1].uuid == uuid) return &r->trks[r->trk_hit[h] - 1];
  uint64_t *i = loom__map_get(&r->tracks, uuid);
  if (!i) return NULL;
  r->trk_hit[h] = (size_t)*i + 1;
  return &r->trks[*i];
}

/* The pid a descriptor's process has in the trace, and whether it is a
 * device: the writer's PF_DEVICE_PID_BASE + pid, or a pid of its own that
 * the process descriptor's description names ("loom: device pid -1"). */
static int model_pid(pf_reader *r, pf_track *k) {
  static const char mark[] = "loom: device pid ";
  const char *d = k->desc ? loom__trace_cstr(r->t, k->desc) : "";
  if (k->is_proc && !strncmp(d, mark, sizeof mark - 1)) {
    char *end;
    errno = 0;
    long long pid = strtoll(d + sizeof mark - 1, &end, 10);
    if (!errno && end != d + sizeof mark - 1 && !*end &&
        !loom__map_get(&r->pidmap, (uint64_t)k->pid) &&
        loom__map_put(&r->pidmap, (uint64_t)k->pid, (uint64_t)pid))
      r->oom = 1;
  }
  uint64_t *real = loom__map_get(&r->pidmap, (uint64_t)k->pid); /* the first description wins */
  if (real) {
    k->pid = (int64_t)*real;
    return 1;
  }
  if (k->pid < PF_DEVICE_PID_BASE) return 0;
  k->pid -= PF_DEVICE_PID_BASE;
  return 1;
}

/* Whether a CounterDescriptor says its unit is bytes (UNIT_SIZE_BYTES). */
static int counter_in_bytes(int wire, pb_span msg) {
  uint32_t f;
  int w;
  uint64_t v, unit = 0;
  pb_span sub;
  if (wire != PB_LEN) return 0;
  while (rd_field(&msg, &f, &w, &v, &sub))
    if (f == 3 && w == PB_VARINT) unit = v;
  return unit == 3;
}

void loom__pfr_descriptor(pf_reader *r, pb_span msg) {
  pf_track k;
  memset(&k, 0, sizeof k);
  uint32_t f, f2;
  int w, w2;
  uint64_t v;
  pb_span sub, e;
  uint32_t labels = 0;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
    if (f == PF_TD_UUID && w == PB_VARINT) k.uuid = v;
    else if (f == PF_TD_PARENT_UUID && w == PB_VARINT) k.parent = v;
    else if (f == PF_TD_NAME && w == PB_LEN) k.name = str_of(r, &sub);
    else if (f == PF_TD_DESCRIPTION && w == PB_LEN) k.desc = str_of(r, &sub);
    else if (f == PF_TD_COUNTER) k.is_counter = 1 + counter_in_bytes(w, sub);
    else if ((f == PF_TD_PROCESS || f == PF_TD_THREAD) && w == PB_LEN) {
      int proc = f == PF_TD_PROCESS;
      (proc ? &k.is_proc : &k.is_thread)[0] = 1;
      while (rd_field(&sub, &f2, &w2, &v, &e)) {
        if (f2 == 1 && w2 == PB_VARINT) k.pid = (int64_t)(int32_t)v;
        else if (!proc && f2 == PF_THD_TID && w2 == PB_VARINT) k.tid = (int64_t)v;
        else if (w2 == PB_LEN && ((proc && f2 == PF_PD_NAME) || (!proc && f2 == PF_THD_NAME)))
          k.name = str_of(r, &e);
        else if (proc && f2 == PF_PD_LABELS && w2 == PB_LEN) labels = str_of(r, &e);
      }
    }
  }
  /* loom writes its derived counters in bytes and data counters without a
   * unit: a data counter whose key is the marker stays data */
  k.derived = k.is_counter == 2 && k.desc &&
              !strcmp(loom__trace_cstr(r->t, k.desc), LOOM__MEM_COUNTER_DESC);
  int device = model_pid(r, &k);
  if (k.is_proc) {
    loom__proc *p = loom__trace_proc(r->t, k.pid);
    if (!p) r->oom = 1;
    else {
      if (k.name) p->name = k.name;
      if (labels) p->labels = labels;
    }
  }
  if (k.is_thread) {
    if (loom__trace_track(r->t, k.pid, k.tid, NULL,
                          device ? loom__device_of_pid(k.pid) : LOOM_DEVICE_HOST, &k.track))
      r->oom = 1;
    else r->t->tracks[k.track].name = k.name;
    k.has_track = 1;
    if (!loom__trace_proc(r->t, k.pid)) r->oom = 1;
  }
  if (!k.uuid || trk_of(r, k.uuid)) return;
  if (LOOM__PUSH(r->trks, r->ntrks, r->cap_trks, k) ||
      loom__map_put(&r->tracks, k.uuid, r->ntrks - 1))
    r->oom = 1;
}

/* The writer gives each series of a counter event its own track and packet,
 * one after the other at the same time: a series of the same counter (same
 * thread track, name and time) that follows the event just read, and is not
 * in it yet, is another value of that event, not a new event. */
static int same_counter_event(const loom_trace *t, const loom__ev *e, uint32_t key) {
  if (!t->nev) return 0;
  const loom__ev *last = &t->ev[t->nev - 1];
  if (last->ph != LOOM__PH_COUNTER || last->ts != e->ts || last->track != e->track ||
      last->name != e->name || last->cat != e->cat || last->args_off + last->nargs != t->nargs)
    return 0;
  for (uint32_t i = 0; i < last->nargs; i++)
    if (t->args[last->args_off + i].key == key) return 0;
  return 1;
}

/* A track of a process, not of one of its threads (other producers' async
 * and counter tracks, or the process's own): a thread track of its own in
 * the model, numbered from PF_SYNTH_TID and named as the track is. */
static pf_track *process_track(pf_reader *r, pf_track *own, const pf_track *proc) {
  loom_trace *t = r->t;
  int device = LOOM_DEVICE_HOST;
  for (size_t i = 0; i < t->ntracks; i++)
    if (t->tracks[i].pid == proc->pid) device = t->tracks[i].device;
  uint32_t track;
  if (loom__trace_track(t, proc->pid, PF_SYNTH_TID + (int64_t)r->nsynth++, NULL, device, &track)) {
    r->oom = 1;
    return NULL;
  }
  t->tracks[track].name = own->name ? own->name : proc->name;
  own->track = track;
  own->has_track = 1;
  return own;
}

/* The model track an event on uuid goes to (async and counter tracks hang
 * off a thread track, or off a process); NULL for tracks loom does not
 * model (global ones). */
static pf_track *event_track(pf_reader *r, uint64_t uuid, pf_track **own) {
  pf_track *k = trk_of(r, uuid);
  *own = k;
  if (k && k->derived) return NULL; /* a memory counter: figures of the events, not data */
  /* a file's parents can form a loop: a chain longer than any real one
   * (process > thread > counter or async track) ends the walk */
  for (int up = 0; k && !k->has_track && !k->is_proc && k->parent; up++)
    k = up < 16 ? trk_of(r, k->parent) : NULL;
  if (k && !k->has_track && k->is_proc) return process_track(r, *own, k);
  return k && k->has_track ? k : NULL;
}

/* The fields of one TrackEvent that matter before it is added. */
typedef struct event_fields {
  uint64_t type, uuid, name_iid, cat_iid;
  uint32_t name, cat;
  double dvalue;
  int has_value;
  int legacy_x;       /* a legacy complete event (phase 'X'), of legacy_us microseconds */
  uint64_t legacy_us;
  uint64_t flows_out[PF_EVENT_FLOWS], flows_in[PF_EVENT_FLOWS];
  int nout, nin;
  pb_span ann[64], whole; /* its debug annotations, read once the event is added */
  int nann, more;         /* more: annotations past the 64 kept here (read again) */
  unsigned cls;           /* its category's class (loom__cat_class) */
} event_fields;

/* "loom_json" (written after the arguments): the positions of e's
 * arguments that hold JSON text, "0,3". */
/* Whether s is one JSON value (yajl, no callbacks). */
static int is_json(const char *s) {
  yajl_handle y = yajl_alloc(NULL, NULL, NULL);
  if (!y) return 0;
  int ok = yajl_parse(y, (const unsigned char *)s, strlen(s)) == yajl_status_ok &&
           yajl_complete_parse(y) == yajl_status_ok;
  yajl_free(y);
  return ok;
}

/* is_json of a trace string, remembered: the same argument texts come back
 * on every event (tensor shapes), and checking one costs a parser. */
static int is_json_str(pf_reader *r, uint32_t id) {
  if (id >= r->cap_is_json) { /* string ids are dense: a byte each */
    size_t was = r->cap_is_json;
    if (loom__grow((void **)&r->is_json, &r->cap_is_json, (size_t)id + 1, 1)) {
      r->oom = 1;
      return is_json(loom__trace_cstr(r->t, id));
    }
    memset(r->is_json + was, 0, r->cap_is_json - was);
  }
  if (!r->is_json[id]) r->is_json[id] = is_json(loom__trace_cstr(r->t, id)) ? 2 : 1;
  return r->is_json[id] == 2;
}

static void json_marks(pf_reader *r, const loom__ev *e, const char *s) {
  loom_trace *t = r->t;
  while (*s) {
    char *end;
    unsigned long i = strtoul(s, &end, 10);
    if (end == s) return;
    /* only a string that is JSON: a file could mark any text, and the JSON
     * writer copies a JSON argument as it is */
    if (i < e->nargs && t->args[e->args_off + i].type == LOOM_ARG_STRING &&
        is_json_str(r, t->args[e->args_off + i].v.s))
      t->args[e->args_off + i].json = 1;
    s = *end == ',' ? end + 1 : end;
  }
}

/* A "loom_kind" value: 1 when it names a kind (the event's, then), else 0
 * (kept as an argument, said once). */
static int kind_arg(pf_reader *r, uint32_t s) {
  const char *v = loom__trace_cstr(r->t, s);
  int k = loom__kind_parse(v, strlen(v));
  if (k < 0) r->kind_unknown = 1;
  else r->ev_kind = k + 1;
  return k >= 0;
}

static void annotation(pf_reader *r, pb_span msg, loom__ev *e) {
  pb_span whole_msg = msg;
  uint32_t f;
  int w;
  uint64_t v;
  pb_span sub;
  loom__targ a = {0};
  int have = 0;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
    if (f == PF_DA_NAME_IID && w == PB_VARINT) {
      a.key = iid_get(r, IID_ARGN, v);
    } else if (f == PF_DA_NAME && w == PB_LEN) a.key = str_of(r, &sub);
    else if (f == PF_DA_INT && w == PB_VARINT) a.type = LOOM_ARG_INT, a.v.i = (int64_t)v, have = 1;
    else if (f == PF_DA_UINT && w == PB_VARINT) a.type = LOOM_ARG_UINT, a.v.u = v, have = 1;
    else if (f == PF_DA_BOOL && w == PB_VARINT) a.type = LOOM_ARG_INT, a.v.i = v != 0, have = 1;
    else if (f == PF_DA_DOUBLE && w == PB_I64)
      a.type = LOOM_ARG_DOUBLE, memcpy(&a.v.d, &v, 8), have = 1;
    else if (f == PF_DA_STRING && w == PB_LEN)
      a.type = LOOM_ARG_STRING, a.v.s = str_of(r, &sub), have = 1;
    else if (f == PF_DA_STRING_VALUE_IID && w == PB_VARINT) {
      a.type = LOOM_ARG_STRING, a.v.s = iid_get(r, IID_STRV, v), have = 1;
    }
  }
  if (!have) { /* dicts, arrays, nested values, legacy JSON, pointers */
    uint32_t id = 0;
    int json = 0;
    r->odd_value = 0;
    int k = loom__pfr_value_text(r, whole_msg, &id,
                                 &json); /* 0 here: a scalar of the wrong wire type */
    if (k <= 0 || r->odd_value) {
      const char *name = a.key ? loom__trace_cstr(r->t, a.key) : "";
      static const char what[] = "(a value loom does not read)";
      loom__trace_bad(r->t, LOOM__BAD_ANNOTATION, name, what, sizeof what - 1,
                      loom__trace_cstr(r->t, e->name));
    }
    if (r->oom) return;
    if (k <= 0) id = loom__trace_str(r->t, "null"), json = 1; /* kept as null, counted */
    a.type = LOOM_ARG_STRING, a.v.s = id;
    a.json = json && is_json_str(r, id);
  }
  uint64_t num = a.type == LOOM_ARG_UINT ? a.v.u : (uint64_t)a.v.i;
  if (a.key == r->ext_key && a.type != LOOM_ARG_STRING) e->external_id = num;
  else if (a.key == r->corr_key && a.type != LOOM_ARG_STRING) e->correlation = num;
  else if (a.key == r->role_key && a.type == LOOM_ARG_STRING) {
    const char *val = loom__trace_cstr(r->t, a.v.s);
    e->flags |=
        (uint16_t)(loom__role_parse(val, strlen(val), &r->role_unknown) << LOOM__EV_ROLE_SHIFT);
  } else if (a.key == r->kind_key && a.type == LOOM_ARG_STRING && kind_arg(r, a.v.s)) {
  } else if (a.key == r->unclosed_key && a.type == LOOM_ARG_INT) {
    e->flags |= LOOM__EV_UNCLOSED;
  } else if (a.key == r->counter_key && a.type == LOOM_ARG_INT && e->ph == LOOM__PH_INSTANT) {
    e->ph = LOOM__PH_COUNTER;
  } else if (a.key == r->json_key && a.type == LOOM_ARG_STRING) {
    json_marks(r, e, loom__trace_cstr(r->t, a.v.s));
  } else if (loom__trace_add_arg(r->t, &a)) r->oom = 1;
}

/* A flow id leaving (way 0) or entering (way 1): fixed64 flow_ids (loom
 * before) or varint flow_ids_old (loom now). */
static int is_flow(uint32_t f, int w, int way) {
  return way ? (f == PF_TE_TERMINATING_FLOW_IDS && w == PB_I64) ||
               (f == PF_TE_TERMINATING_FLOW_IDS_OLD && w == PB_VARINT)
             : (f == PF_TE_FLOW_IDS && w == PB_I64) || (f == PF_TE_FLOW_IDS_OLD && w == PB_VARINT);
}

/* A LegacyEvent: whether it is a complete event ('X'), and its duration. */
static void read_legacy(pb_span msg, event_fields *f) {
  uint32_t fn;
  int w;
  uint64_t v, phase = 0;
  pb_span sub;
  while (rd_field(&msg, &fn, &w, &v, &sub))
    if (fn == PF_LE_PHASE && w == PB_VARINT) phase = v;
    else if (fn == PF_LE_DURATION_US && w == PB_VARINT) f->legacy_us = v;
  f->legacy_x = phase == 'X';
}

/* The fields of msg into f (the flow arrays are read up to nout and nin
 * only: not cleared, 1 KiB an event). */
static void read_event_fields(pf_reader *r, pb_span msg, event_fields *f) {
  f->type = f->name_iid = f->cat_iid = 0;
  f->name = f->cat = 0;
  f->dvalue = 0;
  f->has_value = f->nout = f->nin = f->nann = f->more = f->legacy_x = 0;
  f->legacy_us = 0;
  f->uuid = r->cur ? r->cur->track : 0; /* the sequence's default track */
  f->whole = msg;
  uint32_t fn;
  int w;
  uint64_t v;
  pb_span sub;
  while (rd_field(&msg, &fn, &w, &v, &sub)) {
    if (fn == PF_TE_TYPE && w == PB_VARINT) f->type = v;
    else if (fn == PF_TE_TRACK_UUID && w == PB_VARINT) f->uuid = v;
    else if (fn == PF_TE_NAME_IID && w == PB_VARINT) f->name = iid_get(r, IID_NAMES, v);
    else if (fn == PF_TE_NAME && w == PB_LEN) f->name = str_of(r, &sub);
    else if (fn == PF_TE_CATEGORY_IIDS && w == PB_VARINT) f->cat = iid_get(r, IID_CATS, v);
    else if (fn == PF_TE_CATEGORIES && w == PB_LEN) f->cat = str_of(r, &sub);
    else if (fn == PF_TE_DOUBLE_COUNTER_VALUE && w == PB_I64)
      memcpy(&f->dvalue, &v, 8), f->has_value = 1;
    else if (fn == PF_TE_COUNTER_VALUE && w == PB_VARINT)
      f->dvalue = (double)(int64_t)v, f->has_value = 1;
    else if (is_flow(fn, w, 0) && f->nout < PF_EVENT_FLOWS) f->flows_out[f->nout++] = v;
    else if (is_flow(fn, w, 1) && f->nin < PF_EVENT_FLOWS) f->flows_in[f->nin++] = v;
    else if (is_flow(fn, w, 0) || is_flow(fn, w, 1)) r->flows_over++;
    else if (fn == PF_TE_LEGACY_EVENT && w == PB_LEN) read_legacy(sub, f);
    else if (fn == PF_TE_DEBUG_ANNOTATIONS && w == PB_LEN) {
      if (f->nann < 64) f->ann[f->nann++] = sub;
      else f->more = 1;
    }
  }
}

/* A SLICE_END: the innermost slice open on its track ends now. */
static void end_slice(pf_reader *r, uint64_t uuid) {
  loom_trace *t = r->t;
  for (size_t i = r->nopen; i-- > 0;) {
    if (r->open[i].uuid != uuid) continue;
    loom__ev *e = &t->ev[r->open[i].ev];
    e->dur = r->ts - e->ts;
    if (e->dur < 0) { /* an end before its begin: kept as 0, counted */
      char text[40];
      int n = snprintf(text, sizeof text, "%lld ns", (long long)e->dur);
      loom__trace_bad(t, LOOM__BAD_NEG_DUR, "dur", text, (size_t)n, loom__trace_cstr(t, e->name));
      e->dur = 0;
    }
    e->flags &= (uint16_t)~LOOM__EV_OPEN;
    memmove(&r->open[i], &r->open[i + 1], (r->nopen - i - 1) * sizeof *r->open);
    r->nopen--;
    return;
  }
}

/* A legacy complete event's duration (loom writes a slice of whole
 * microseconds so): past the model's time limit, clamped there, counted. */
static void legacy_duration(pf_reader *r, loom__ev *e, uint64_t us) {
  if (us <= (uint64_t)LOOM__TIME_LIMIT / 1000) {
    e->dur = (int64_t)us * 1000;
    return;
  }
  char text[40];
  int n = snprintf(text, sizeof text, "%llu us", (unsigned long long)us);
  loom__trace_bad(r->t, LOOM__BAD_TIME_RANGE, "dur", text, (size_t)n,
                  loom__trace_cstr(r->t, e->name));
  e->dur = LOOM__TIME_LIMIT;
}

/* A counter value: one sample of its track's series, joined to the
 * counter event of the same time when there is one. */
static void add_counter(pf_reader *r, loom__ev *e, const pf_track *own, double value) {
  loom_trace *t = r->t;
  e->ph = LOOM__PH_COUNTER;
  e->kind = LOOM_KIND_COUNTER;
  e->name = own->name;
  loom__targ a = {.key = own->desc ? own->desc : own->name, .type = LOOM_ARG_DOUBLE};
  a.v.d = value;
  int join = r->counter_instant != t->nev && same_counter_event(t, e, a.key);
  if (!join && loom__trace_add_ev(t, e)) {
    r->oom = 1;
    return;
  }
  if (loom__trace_add_arg(t, &a)) r->oom = 1;
}

/* The added event's arguments, then what they and its track say of it. */
static void annotate(pf_reader *r, loom__ev *added, event_fields *f, const pf_track *k,
                     const pf_track *own) {
  loom_trace *t = r->t;
  uint32_t fn;
  int w;
  uint64_t v;
  pb_span sub;
  for (int i = 0; i < f->nann; i++) annotation(r, f->ann[i], added);
  for (int i = 0; f->more && rd_field(&f->whole, &fn, &w, &v, &sub);) /* the rest, read again */
    if (fn == PF_TE_DEBUG_ANNOTATIONS && w == PB_LEN && i++ >= 64) annotation(r, sub, added);
  added->kind = (uint8_t)(r->ev_kind ? (loom_kind)(r->ev_kind - 1)
                                      : loom__kind_derive(f->cls, added->ph,
                                                          LOOM__EV_ROLE_OF(added)));
  if (added->ph == LOOM__PH_COUNTER) r->counter_instant = t->nev; /* marked loom_counter */
  if (added->ph == LOOM__PH_ASYNC)
    added->correlation = strtoull(loom__trace_cstr(t, own->desc) + 6, NULL, 10);
  if (loom__kind_on_device(added->kind) && t->tracks[k->track].device == LOOM_DEVICE_HOST)
    for (size_t i = 0; i < t->ntracks; i++)
      if (t->tracks[i].pid == t->tracks[k->track].pid)
        t->tracks[i].device = loom__device_of_pid(t->tracks[i].pid);
}

/* The event's flow ends: to the flow sink when streaming, else remembered
 * for the links made at the end of the read. */
static void event_flows(pf_reader *r, const loom__ev *added, const event_fields *f) {
  loom_trace *t = r->t;
  for (int i = 0; r->sink && r->fsink && i < f->nout + f->nin; i++) {
    int out = i < f->nout; /* streaming: the ends bind to this event */
    uint64_t id = out ? f->flows_out[i] : f->flows_in[i - f->nout];
    if (r->fsink->flow(r->fsink->ctx, t, id, added->ts, added->track, out ? 's' : 'f', 1, 0, 0))
      r->oom = 1;
  }
  for (int i = 0; !r->sink && i < f->nout; i++)
    if (loom__map_put(&r->flow_src, f->flows_out[i], t->nev)) r->oom = 1;
  for (int i = 0; !r->sink && i < f->nin; i++)
    if (loom__map_put(&r->flow_dst, f->flows_in[i], t->nev)) r->oom = 1;
}

/* An event on no track of the model: a global track, where only loom's
 * "Record Window End" marker means something. */
static void global_event(pf_reader *r, const event_fields *f) {
  if (f->type == PF_TYPE_INSTANT && !strcmp(loom__trace_cstr(r->t, f->name), "Record Window End")) {
    r->t->window_end = 1;
    r->window_end_ts = r->ts;
  }
}

void loom__pfr_track_event(pf_reader *r, pb_span msg) {
  event_fields f;
  read_event_fields(r, msg, &f);
  pf_track *own;
  pf_track *k = event_track(r, f.uuid, &own);
  if (!k) {
    global_event(r, &f);
    return;
  }
  if (f.type == PF_TYPE_SLICE_END) {
    end_slice(r, f.uuid);
    return;
  }
  loom_trace *t = r->t;
  loom__ev e = {.ts = r->ts,
                .name = f.name,
                .cat = f.cat,
                .track = k->track,
                .ph = LOOM__PH_COMPLETE};
  if (f.type == PF_TYPE_COUNTER) {
    add_counter(r, &e, own, f.dvalue);
    return;
  }
  if (!f.type && f.legacy_x) legacy_duration(r, &e, f.legacy_us);
  f.cls = loom__cat_class_of_id(&r->kinds, t, f.cat);
  r->ev_kind = 0;
  if (f.type == PF_TYPE_INSTANT) {
    e.ph = LOOM__PH_INSTANT;
  } else if (own != k && own->desc && !strncmp(loom__trace_cstr(t, own->desc), "async ", 6)) {
    e.ph = LOOM__PH_ASYNC;
  }
  if (loom__trace_add_ev(t, &e)) {
    r->oom = 1;
    return;
  }
  loom__ev *added = &t->ev[t->nev - 1];
  annotate(r, added, &f, k, own);
  event_flows(r, added, &f);
  if (f.type == PF_TYPE_SLICE_BEGIN) {
    added->flags |= LOOM__EV_OPEN;
    open_slice o = {f.uuid, t->nev - 1};
    if (LOOM__PUSH(r->open, r->nopen, r->cap_open, o)) r->oom = 1;
  }
}
