/*
 * pftrace_write.c - Perfetto protobuf output (.pftrace).
 *
 * One packet sequence (id 1).  The first packet holds a clock snapshot that
 * makes REALTIME the trace clock and defines clock 64, an incremental clock
 * in ns: every later timestamp is a delta from the previous packet's, which
 * keeps timestamps at 1-3 bytes while absolute (Unix epoch) times survive.
 * Then one descriptor per process, thread/queue, counter series and async
 * range; then the events as TrackEvent slice begin/end pairs, instants and
 * counters in time order.  Names, categories and argument names are interned
 * (iid = the trace's string id) in the packet that first uses them.  Flows
 * use flow_ids on the source slice and terminating_flow_ids on the target.
 * Field numbers come from Perfetto's perfetto_trace.proto.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "export/outfile.h"
#include "export/pftrace.h"
#include "trace/samples.h"
#include "trace/trace.h"

/* ---- a growable byte buffer with protobuf encoders ---------------------- */
typedef struct pb {
  uint8_t *p;
  size_t n, cap;
  int oom;
} pb;

static inline void pb_bytes(pb *b, const void *s, size_t n) {
  if (b->n + n > b->cap && loom__grow((void **)&b->p, &b->cap, b->n + n, 1)) {
    b->oom = 1;
    return;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
  if (b->n + 10 > b->cap && loom__grow((void **)&b->p, &b->cap, b->n + 10, 1)) {
    b->oom = 1;
    return;
  }
  uint8_t *d = b->p + b->n;
  while (v >= 0x80) {
    *d++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *d++ = (uint8_t)v;
  b->n = (size_t)(d - b->p);
}

static void pb_tag(pb *b, uint32_t field, uint32_t wire) { pb_varint(b, (uint64_t)field << 3 | wire); }
static void pb_uint(pb *b, uint32_t field, uint64_t v) { pb_tag(b, field, PB_VARINT); pb_varint(b, v); }
static void pb_sint(pb *b, uint32_t field, int64_t v) { pb_uint(b, field, (uint64_t)v); }
static void pb_fixed64(pb *b, uint32_t field, uint64_t v) {
  pb_tag(b, field, PB_I64);
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
  pb_bytes(b, le, 8);
}
static void pb_double(pb *b, uint32_t field, double d) {
  uint64_t v;
  memcpy(&v, &d, 8);
  pb_fixed64(b, field, v);
}
static void pb_lenbytes(pb *b, uint32_t field, const void *s, size_t n) {
  pb_tag(b, field, PB_LEN);
  pb_varint(b, n);
  pb_bytes(b, s, n);
}
static void pb_str(pb *b, uint32_t field, const char *s) { pb_lenbytes(b, field, s, strlen(s)); }
static void pb_msg(pb *b, uint32_t field, const pb *m) { pb_lenbytes(b, field, m->p, m->n); }

/* ---- edges: slice begins/ends, instants and counters in time order ------ */
enum { E_END = 0, E_BEGIN = 1, E_POINT = 2 };

typedef struct edge {
  int64_t ts;
  uint32_t ev;
  uint32_t track;  /* uuid index of the track it goes on */
  uint32_t seq;    /* order within its track */
  uint16_t lane;   /* 0: the track; k: its k-th track of overlapping slices */
  uint8_t what;
} edge;

static int cmp_edge(const void *pa, const void *pb_) {
  const edge *a = pa, *b = pb_;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int cmp_idx(const void *pa, const void *pb_, void *ctx) {
  const loom_trace *t = ctx;
  const loom__ev *a = &t->ev[*(const uint32_t *)pa], *b = &t->ev[*(const uint32_t *)pb_];
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb_ ? -1 : 1;
}

typedef struct writer {
  const loom_trace *t;
  loom__out *o;
  /* uuids: 1 + index; processes, then tracks, then counter and async tracks */
  uint64_t *track_uuid;      /* per trace track */
  uint64_t next_uuid;
  loom__map counter_tracks;  /* hash(track, name, key) -> uuid */
  loom__map async_tracks;    /* hash(track, id) -> uuid */
  loom__map lane_tracks;     /* hash(track, lane) -> uuid */
  uint8_t *seen_name, *seen_cat, *seen_arg; /* interned already */
  uint32_t iid_ext, iid_corr;   /* iids of "External id", "correlation" */
  uint32_t iid_role;            /* iid of "loom_role" (the event's marks) */
  uint32_t iid_json;            /* iid of "loom_json" (which arguments are JSON) */
  uint64_t dropped_overlap;
  uint64_t laned;               /* slices put on a track of overlapping slices */
  int64_t last_ts;
  pb pkt, te, tmp, interned, names;
  int oom;
  uint64_t *flow_id;   /* each flow's id in the file (pf_flow_ids) */
  /* CPU samples as PerfSample packets over interned frames and callstacks:
   * a function name's and a module's iid is its smp.strs id, a frame's its
   * index + 1, a callstack's its leaf site (index + 1) */
  loom__samples smp;
  loom__map site_of_ev;         /* event index + 1 -> leaf site */
  uint8_t *seen_str, *seen_frame, *seen_site;
} writer;

static void emit_packet(writer *w, pb *pkt) {
  uint8_t hdr[11];
  size_t k = 0;
  hdr[k++] = 0x0a; /* Trace.packet, length-delimited */
  uint64_t n = pkt->n;
  do {
    hdr[k] = (uint8_t)(n & 0x7f);
    n >>= 7;
    if (n) hdr[k] |= 0x80;
    k++;
  } while (n);
  loom__out_mem(w->o, hdr, k);
  loom__out_mem(w->o, pkt->p, pkt->n);
  if (pkt->oom) w->oom = 1;
  pkt->n = 0;
}

static void descriptor(writer *w, uint64_t uuid, uint64_t parent, const char *name,
                       const pb *proc, const pb *thread, int counter, const char *desc) {
  pb *d = &w->tmp;
  d->n = 0;
  pb_uint(d, PF_TD_UUID, uuid);
  if (parent) pb_uint(d, PF_TD_PARENT_UUID, parent);
  if (name && *name && !thread && !proc) pb_str(d, PF_TD_NAME, name);
  if (desc) pb_str(d, PF_TD_DESCRIPTION, desc);
  if (proc) pb_msg(d, PF_TD_PROCESS, proc);
  if (thread) pb_msg(d, PF_TD_THREAD, thread);
  if (counter) pb_lenbytes(d, PF_TD_COUNTER, "", 0);
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  pb_msg(&w->pkt, PF_PKT_TRACK_DESCRIPTOR, d);
  emit_packet(w, &w->pkt);
}

static int device_pid(const loom_trace *t, int64_t pid) {
  for (size_t i = 0; i < t->ntracks; i++)
    if (t->tracks[i].pid == pid) return t->tracks[i].device != LOOM_DEVICE_HOST;
  for (size_t i = 0; i < t->ndevs; i++)
    if (t->devs[i].pid == pid) return 1;
  return 0;
}

/* A device pid that BASE + pid cannot hold (Kineto writes pid -1): */
static int odd_device_pid(const loom_trace *t, int64_t pid) {
  return (pid < 0 || pid > INT32_MAX - PF_DEVICE_PID_BASE) && device_pid(t, pid);
}

/* The pid a process has in the file: a host pid as it is; a device pid
 * moved up by PF_DEVICE_PID_BASE, or, where that cannot hold it, the next
 * pid down from INT32_MAX, with the real one in its process descriptor's
 * description ("loom: device pid -1"). */
static int64_t pf_pid(const loom_trace *t, int64_t pid) {
  if (!device_pid(t, pid)) return pid;
  if (!odd_device_pid(t, pid)) return pid + PF_DEVICE_PID_BASE;
  int64_t k = 0;
  for (size_t i = 0; i < t->nprocs && t->procs[i].pid != pid; i++) k += odd_device_pid(t, t->procs[i].pid);
  return INT32_MAX - k;
}

static void describe_tracks(writer *w) {
  const loom_trace *t = w->t;
  pb a = {0};
  uint64_t *proc_uuid = calloc(t->nprocs + 1, sizeof *proc_uuid);
  if (!proc_uuid) {
    w->oom = 1;
    return;
  }
  for (size_t i = 0; i < t->nprocs; i++) {
    const loom__proc *p = &t->procs[i];
    a.n = 0;
    pb_sint(&a, PF_PD_PID, pf_pid(t, p->pid));
    if (p->name) pb_str(&a, PF_PD_NAME, loom__trace_cstr(t, p->name));
    if (p->labels) pb_str(&a, PF_PD_LABELS, loom__trace_cstr(t, p->labels));
    proc_uuid[i] = w->next_uuid++;
    char desc[48];
    snprintf(desc, sizeof desc, "loom: device pid %lld", (long long)p->pid);
    descriptor(w, proc_uuid[i], 0, NULL, &a, NULL, 0, odd_device_pid(t, p->pid) ? desc : NULL);
  }
  for (size_t i = 0; i < t->ntracks; i++) {
    const loom__track *k = &t->tracks[i];
    a.n = 0;
    pb_sint(&a, PF_THD_PID, pf_pid(t, k->pid));
    pb_sint(&a, PF_THD_TID, k->tid);
    if (k->name) pb_str(&a, PF_THD_NAME, loom__trace_cstr(t, k->name));
    w->track_uuid[i] = w->next_uuid++;
    descriptor(w, w->track_uuid[i], 0, NULL, NULL, &a, 0, NULL);
  }
  free(a.p);
  free(proc_uuid);
}

/* The uuid of the counter series (track, name, key), described on first use. */
static uint64_t counter_track(writer *w, const loom__ev *e, uint32_t key) {
  uint64_t h = loom__hash_u64(((uint64_t)e->track << 40) ^ ((uint64_t)e->name << 20) ^ key) | 1;
  uint64_t *u = loom__map_get(&w->counter_tracks, h);
  if (u) return *u;
  uint64_t uuid = w->next_uuid++;
  if (loom__map_put(&w->counter_tracks, h, uuid)) w->oom = 1;
  const char *name = loom__trace_cstr(w->t, e->name);
  const char *k = loom__trace_cstr(w->t, key);
  descriptor(w, uuid, w->track_uuid[e->track], name, NULL, NULL, 1,
             strcmp(name, k) ? k : NULL);
  return uuid;
}

static uint64_t async_track(writer *w, const loom__ev *e) {
  uint64_t h = loom__hash_u64(((uint64_t)e->track << 44) ^ e->correlation) | 1;
  uint64_t *u = loom__map_get(&w->async_tracks, h);
  if (u) return *u;
  uint64_t uuid = w->next_uuid++;
  if (loom__map_put(&w->async_tracks, h, uuid)) w->oom = 1;
  char desc[48];
  snprintf(desc, sizeof desc, "async %llu", (unsigned long long)e->correlation);
  descriptor(w, uuid, w->track_uuid[e->track], loom__trace_cstr(w->t, e->name), NULL, NULL, 0, desc);
  return uuid;
}

/* A slice that overlaps its parent without nesting goes on a child track of
 * its thread, "overlapping slices" (k > 1: "overlapping slices k"), one per
 * level of such overlap, described on first use; readers put its slices
 * back on the thread. */
static uint64_t lane_track(writer *w, uint32_t track, uint16_t lane) {
  uint64_t h = loom__hash_u64(((uint64_t)track << 20) ^ lane) | 1;
  uint64_t *u = loom__map_get(&w->lane_tracks, h);
  if (u) return *u;
  uint64_t uuid = w->next_uuid++;
  if (loom__map_put(&w->lane_tracks, h, uuid)) w->oom = 1;
  char name[48];
  if (lane > 1) snprintf(name, sizeof name, "overlapping slices %u", (unsigned)lane);
  else snprintf(name, sizeof name, "overlapping slices");
  descriptor(w, uuid, w->track_uuid[track], name, NULL, NULL, 0, PF_LANE_DESC);
  return uuid;
}

/* Names of the arguments the model keeps as fields (and of loom_json);
 * their iids follow the trace's string ids. */
static const char *field_arg_name(const writer *w, uint32_t id) {
  return id == w->iid_ext ? "External id" : id == w->iid_corr ? "correlation"
       : id == w->iid_role ? "loom_role" : id == w->iid_json ? "loom_json"
       : loom__trace_cstr(w->t, id);
}

/* Appends one interned entry (iid, name) of the given InternedData field,
 * the first time id is used. */
static void intern_into(writer *w, uint8_t *seen, uint32_t field, uint32_t id) {
  if (!id || seen[id]) return;
  seen[id] = 1;
  pb *m = &w->tmp;
  m->n = 0;
  pb_uint(m, 1, id);
  pb_str(m, 2, field_arg_name(w, id));
  pb_msg(&w->interned, field, m);
}

static void annotation(writer *w, pb *te, uint32_t key, int type, int64_t i, uint64_t u,
                       double d, uint32_t s) {
  pb *m = &w->names; /* scratch for the annotation body */
  m->n = 0;
  intern_into(w, w->seen_arg, PF_ID_DEBUG_ANNOTATION_NAMES, key);
  pb_uint(m, PF_DA_NAME_IID, key);
  switch (type) {
  case LOOM_ARG_INT: pb_sint(m, PF_DA_INT, i); break;
  case LOOM_ARG_UINT: pb_uint(m, PF_DA_UINT, u); break;
  case LOOM_ARG_DOUBLE: pb_double(m, PF_DA_DOUBLE, d); break;
  default: pb_str(m, PF_DA_STRING, loom__trace_cstr(w->t, s)); break;
  }
  pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
}

/* The marks as a string annotation "loom_role", as in the JSON. */
static void role_annotation(writer *w, pb *te, unsigned roles) {
  char v[LOOM__ROLE_BUF];
  loom__role_format(roles, v);
  pb *m = &w->names;
  m->n = 0;
  intern_into(w, w->seen_arg, PF_ID_DEBUG_ANNOTATION_NAMES, w->iid_role);
  pb_uint(m, PF_DA_NAME_IID, w->iid_role);
  pb_str(m, PF_DA_STRING, v);
  pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
}

/* Which of the event's arguments hold JSON text (nested values, booleans,
 * null): their positions, "0,3", as the string annotation "loom_json", so
 * readers mark them JSON again; the values themselves are strings. */
static void json_annotation(writer *w, pb *te, const loom__targ *a, uint16_t n) {
  char v[256];
  size_t k = 0;
  for (uint16_t i = 0; i < n && k + 8 < sizeof v; i++)
    if (a[i].json) k += (size_t)snprintf(v + k, sizeof v - k, k ? ",%u" : "%u", (unsigned)i);
  if (!k) return;
  pb *m = &w->names;
  m->n = 0;
  intern_into(w, w->seen_arg, PF_ID_DEBUG_ANNOTATION_NAMES, w->iid_json);
  pb_uint(m, PF_DA_NAME_IID, w->iid_json);
  pb_str(m, PF_DA_STRING, v);
  pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
}

static void window_end(writer *w, int64_t ts);

/* ---- CPU samples -------------------------------------------------------- */
static int samples_prepare(writer *w) {
  if (loom__samples_build(w->t, &w->smp)) return -1;
  if (!w->smp.nsamples) return 0;
  for (size_t i = 0; i < w->smp.nsamples; i++)
    if (w->smp.samples[i].site &&
        loom__map_put(&w->site_of_ev, w->smp.samples[i].ev + 1, w->smp.samples[i].site))
      return -1;
  w->seen_str = calloc(w->smp.strs.n + 1, 1);
  w->seen_frame = calloc(w->smp.nframes + 1, 1);
  w->seen_site = calloc(w->smp.nsites + 1, 1);
  return w->seen_str && w->seen_frame && w->seen_site ? 0 : -1;
}

static void samples_free(writer *w) {
  loom__samples_free(&w->smp);
  loom__map_free(&w->site_of_ev);
  free(w->seen_str);
  free(w->seen_frame);
  free(w->seen_site);
}

/* The leaf site of a sample that a PerfSample holds exactly, else 0 (it
 * is written as an instant with its "stack" annotation): a host thread
 * with pid and tid Perfetto can hold, its stack the only argument, and
 * the name and category a reader gives a sample of that stack. */
static uint32_t perf_sample_site(writer *w, const loom__ev *e, uint32_t ev) {
  const loom_trace *t = w->t;
  uint64_t *site = loom__map_get(&w->site_of_ev, (uint64_t)ev + 1);
  const loom__track *k = &t->tracks[e->track];
  if (!site || e->nargs != 1 || k->device != LOOM_DEVICE_HOST || k->pid <= 0 ||
      k->pid >= PF_DEVICE_PID_BASE || k->tid <= 0 || k->tid > UINT32_MAX ||
      strcmp(loom__trace_cstr(t, e->cat), "cpu_sample"))
    return 0;
  char label[600];
  const char *name = loom__samples_frame_label(&w->smp, w->smp.sites[*site - 1].frame, label, sizeof label);
  return strcmp(name, loom__trace_cstr(t, e->name)) ? 0 : (uint32_t)*site;
}

static void intern_sample_str(writer *w, uint32_t field, uint32_t id) {
  if (!id || w->seen_str[id] & (field == PF_ID_FUNCTION_NAMES ? 1 : 2)) return;
  w->seen_str[id] |= field == PF_ID_FUNCTION_NAMES ? 1 : 2;
  pb *m = &w->tmp;
  m->n = 0;
  pb_uint(m, 1, id);
  pb_str(m, 2, loom__strtab_get(&w->smp.strs, id));
  pb_msg(&w->interned, field, m);
  if (field != PF_ID_MAPPING_PATHS) return;
  m->n = 0; /* the module's mapping: its path alone (no addresses are kept) */
  pb_uint(m, PF_MAP_IID, id);
  pb_uint(m, PF_MAP_PATH_STRING_IDS, id);
  pb_msg(&w->interned, PF_ID_MAPPINGS, m);
}

/* Interns what the callstack of site needs that the file does not hold yet. */
static void intern_callstack(writer *w, uint32_t site) {
  if (w->seen_site[site]) return;
  w->seen_site[site] = 1;
  const loom__samples *s = &w->smp;
  pb *cs = &w->names; /* the callstack: frames outermost first */
  cs->n = 0;
  pb_uint(cs, PF_CALLSTACK_IID, site);
  uint32_t depth = s->sites[site - 1].depth, *ids = malloc(depth * sizeof *ids);
  if (!ids) {
    w->oom = 1;
    return;
  }
  uint32_t n = 0;
  for (uint32_t at = site; at && n < depth; at = s->sites[at - 1].parent) ids[n++] = s->sites[at - 1].frame;
  while (n--) {
    uint32_t fi = ids[n];
    const loom__sframe *f = &s->frames[fi];
    if (!w->seen_frame[fi]) {
      w->seen_frame[fi] = 1;
      intern_sample_str(w, PF_ID_FUNCTION_NAMES, f->name);
      intern_sample_str(w, PF_ID_MAPPING_PATHS, f->module);
      pb *m = &w->tmp;
      m->n = 0;
      pb_uint(m, PF_FRAME_IID, fi + 1);
      if (f->name) pb_uint(m, PF_FRAME_FUNCTION_NAME_ID, f->name);
      if (f->module) pb_uint(m, PF_FRAME_MAPPING_ID, f->module);
      if (f->module) pb_uint(m, PF_FRAME_REL_PC, f->offset);
      pb_msg(&w->interned, PF_ID_FRAMES, m);
    }
    pb_uint(cs, PF_CALLSTACK_FRAME_IDS, fi + 1);
  }
  free(ids);
  pb_msg(&w->interned, PF_ID_CALLSTACKS, cs);
}

static void write_perf_sample(writer *w, const loom__ev *e, uint32_t site, int64_t ts) {
  const loom__track *k = &w->t->tracks[e->track];
  intern_callstack(w, site);
  pb *ps = &w->te;
  ps->n = 0;
  pb_uint(ps, PF_PS_PID, (uint64_t)k->pid);
  pb_uint(ps, PF_PS_TID, (uint64_t)k->tid);
  pb_uint(ps, PF_PS_CALLSTACK_IID, site);
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP, (uint64_t)(ts - w->last_ts));
  w->last_ts = ts;
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  if (w->interned.n) pb_msg(&w->pkt, PF_PKT_INTERNED_DATA, &w->interned);
  pb_msg(&w->pkt, PF_PKT_PERF_SAMPLE, ps);
  emit_packet(w, &w->pkt);
}

static int numeric_series(const loom_trace *t, const loom__ev *e) {
  int n = 0;
  for (uint16_t k = 0; k < e->nargs; k++) n += t->args[e->args_off + k].type != LOOM_ARG_STRING;
  return n;
}

/* Perfetto's counters hold numbers only: a counter event with a string
 * series or with no value at all is written as an instant on its thread
 * with every argument, marked "loom_counter" so readers make it a counter
 * again. */
static int counter_as_series(const loom_trace *t, const loom__ev *e) {
  return e->nargs > 0 && numeric_series(t, e) == e->nargs;
}

static void write_edge(writer *w, const edge *g, const uint32_t *flow_out_first,
                       const uint32_t *flow_out, const uint32_t *flow_in_first,
                       const uint32_t *flow_in) {
  const loom_trace *t = w->t;
  if (g->ev == UINT32_MAX) {
    window_end(w, g->ts);
    return;
  }
  const loom__ev *e = &t->ev[g->ev];
  pb *te = &w->te;
  te->n = 0;
  w->interned.n = 0;
  uint64_t track;
  uint32_t site = e->kind == LOOM_KIND_SAMPLE ? perf_sample_site(w, e, g->ev) : 0;
  if (site) {
    write_perf_sample(w, e, site, g->ts);
    return;
  }
  if (e->ph == LOOM__PH_COUNTER && counter_as_series(t, e)) {
    /* one packet per series value */
    for (uint16_t k = 0; k < e->nargs; k++) {
      const loom__targ *a = &t->args[e->args_off + k];
      if (a->type == LOOM_ARG_STRING) continue; /* not a number: its string id is no value */
      double v = a->type == LOOM_ARG_DOUBLE ? a->v.d : a->type == LOOM_ARG_UINT ? (double)a->v.u : (double)a->v.i;
      uint64_t uuid = counter_track(w, e, a->key);
      te->n = 0;
      w->interned.n = 0;
      intern_into(w, w->seen_cat, PF_ID_EVENT_CATEGORIES, e->cat);
      pb_uint(te, PF_TE_TYPE, PF_TYPE_COUNTER);
      pb_uint(te, PF_TE_TRACK_UUID, uuid);
      if (e->cat) pb_uint(te, PF_TE_CATEGORY_IIDS, e->cat);
      pb_double(te, PF_TE_DOUBLE_COUNTER_VALUE, v);
      pb_uint(&w->pkt, PF_PKT_TIMESTAMP, (uint64_t)(g->ts - w->last_ts));
      w->last_ts = g->ts;
      pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
      if (w->interned.n) pb_msg(&w->pkt, PF_PKT_INTERNED_DATA, &w->interned);
      pb_msg(&w->pkt, PF_PKT_TRACK_EVENT, te);
      emit_packet(w, &w->pkt);
    }
    return;
  }
  track = e->ph == LOOM__PH_ASYNC ? async_track(w, e)
        : g->lane ? lane_track(w, e->track, g->lane) : w->track_uuid[e->track];
  if (g->what == E_END) {
    pb_uint(te, PF_TE_TYPE, PF_TYPE_SLICE_END);
    pb_uint(te, PF_TE_TRACK_UUID, track);
  } else {
    pb_uint(te, PF_TE_TYPE, g->what == E_POINT ? PF_TYPE_INSTANT : PF_TYPE_SLICE_BEGIN);
    pb_uint(te, PF_TE_TRACK_UUID, track);
    intern_into(w, w->seen_name, PF_ID_EVENT_NAMES, e->name);
    intern_into(w, w->seen_cat, PF_ID_EVENT_CATEGORIES, e->cat);
    pb_uint(te, PF_TE_NAME_IID, e->name);
    if (e->cat) pb_uint(te, PF_TE_CATEGORY_IIDS, e->cat);
    if (e->external_id)
      annotation(w, te, w->iid_ext, LOOM_ARG_UINT, 0, e->external_id, 0, 0);
    if (e->correlation && e->ph != LOOM__PH_ASYNC)
      annotation(w, te, w->iid_corr, LOOM_ARG_UINT, 0, e->correlation, 0, 0);
    if (LOOM__EV_ROLE_OF(e)) role_annotation(w, te, LOOM__EV_ROLE_OF(e));
    for (uint16_t k = 0; k < e->nargs; k++) {
      const loom__targ *a = &t->args[e->args_off + k];
      annotation(w, te, a->key, a->type, a->v.i, a->v.u, a->v.d, a->v.s);
    }
    const loom__targ *args = e->nargs ? t->args + e->args_off : NULL; /* NULL + 0 is UB */
    if (args) json_annotation(w, te, args, e->nargs);
    if (e->ph == LOOM__PH_COUNTER) { /* not as series (counter_as_series) */
      pb *m = &w->names;
      m->n = 0;
      pb_str(m, PF_DA_NAME, "loom_counter");
      pb_uint(m, PF_DA_INT, 1);
      pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
    }
    if (g->what == E_BEGIN && e->ph == LOOM__PH_COMPLETE && loom__ev_open_in_file(t, e, args)) {
      /* begun and never ended in the trace read; Perfetto's end closes the
       * innermost slice of a track, so the slice is ended (at its start) and
       * marked for loom's reader */
      pb *m = &w->names;
      m->n = 0;
      pb_str(m, PF_DA_NAME, "loom_unclosed");
      pb_uint(m, PF_DA_INT, 1);
      pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
    }
    for (uint32_t f = flow_out_first[g->ev]; f != UINT32_MAX; f = flow_out[f])
      pb_fixed64(te, PF_TE_FLOW_IDS, w->flow_id[f]);
    for (uint32_t f = flow_in_first[g->ev]; f != UINT32_MAX; f = flow_in[f])
      pb_fixed64(te, PF_TE_TERMINATING_FLOW_IDS, w->flow_id[f]);
  }
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP, (uint64_t)(g->ts - w->last_ts));
  w->last_ts = g->ts;
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  if (w->interned.n) { /* (the window-end marker uses plain strings) */
    pb_msg(&w->pkt, PF_PKT_INTERNED_DATA, &w->interned);
    pb_uint(&w->pkt, PF_PKT_SEQUENCE_FLAGS, PF_SEQ_NEEDS_INCREMENTAL_STATE);
  }
  pb_msg(&w->pkt, PF_PKT_TRACK_EVENT, te);
  emit_packet(w, &w->pkt);
}

/* Edges come as runs, one per track, each already in time order; a heap
 * merges them into one time-ordered stream without sorting them all. */
typedef struct run {
  size_t at, end;
} run;

typedef struct merger {
  const edge *g;
  run *runs;
  size_t nruns;
  uint32_t *heap; /* run indices, smallest head edge on top */
  size_t nheap;
} merger;

static int run_less(const merger *m, uint32_t a, uint32_t b) {
  return cmp_edge(&m->g[m->runs[a].at], &m->g[m->runs[b].at]) < 0;
}

static void sift_down(merger *m, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, k = i;
    if (l < m->nheap && run_less(m, m->heap[l], m->heap[k])) k = l;
    if (r < m->nheap && run_less(m, m->heap[r], m->heap[k])) k = r;
    if (k == i) return;
    uint32_t tmp = m->heap[i];
    m->heap[i] = m->heap[k];
    m->heap[k] = tmp;
    i = k;
  }
}

static const edge *merger_next(merger *m) {
  if (!m->nheap) return NULL;
  run *r = &m->runs[m->heap[0]];
  const edge *e = &m->g[r->at++];
  if (r->at == r->end) m->heap[0] = m->heap[--m->nheap];
  sift_down(m, 0);
  return e;
}

/* The state of make_edges: edges so far, async edges at the front. */
typedef struct edges {
  const loom_trace *t;
  merger *m;
  edge *g;
  size_t n, na;
  uint32_t seq;
  uint32_t *stack;
  int64_t *ends;
} edges;

/* One lane of a track: a stack sweep over idx[lo, hi) in (start, longer
 * first) order emits each end before what starts at or after it, so begins
 * and ends nest.  A slice that overlaps its parent without nesting goes to
 * the next lane: it is moved to idx[lo, lo + returned count), in order.
 * The lane is one run of time-ordered edges. */
static size_t sweep_lane(edges *x, uint32_t *idx, size_t lo, size_t hi, uint32_t track,
                         uint16_t lane) {
  const loom_trace *t = x->t;
  size_t depth = 0, nd = 0;
  x->m->runs[x->m->nruns++] = (run){x->n, SIZE_MAX};
  for (size_t j = lo; j < hi; j++) {
    const loom__ev *e = &t->ev[idx[j]];
    while (depth && x->ends[depth - 1] <= e->ts) {
      depth--;
      x->g[x->n++] = (edge){x->ends[depth], x->stack[depth], track, x->seq++, lane, E_END};
    }
    if (e->ph == LOOM__PH_COMPLETE) {
      int64_t end = e->ts + e->dur;
      if (depth && end > x->ends[depth - 1]) { /* overlaps its parent: next lane */
        idx[lo + nd++] = idx[j];
        continue;
      }
      x->g[x->n++] = (edge){e->ts, idx[j], track, x->seq++, lane, E_BEGIN};
      x->stack[depth] = idx[j];
      x->ends[depth++] = end;
    } else if (e->ph == LOOM__PH_ASYNC) {
      x->g[x->na++] = (edge){e->ts, idx[j], UINT32_MAX - 1, x->seq++, 0, E_BEGIN};
      x->g[x->na++] = (edge){e->ts + e->dur, idx[j], UINT32_MAX - 1, x->seq++, 0, E_END};
    } else {
      x->g[x->n++] = (edge){e->ts, idx[j], track, x->seq++, lane, E_POINT};
    }
  }
  while (depth) { /* close what the lane left open */
    depth--;
    x->g[x->n++] = (edge){x->ends[depth], x->stack[depth], track, x->seq++, lane, E_END};
  }
  x->m->runs[x->m->nruns - 1].end = x->n;
  return nd;
}

/* Builds the edges of every track, lane by lane (sweep_lane): slices that
 * overlap their parent without nesting go on tracks of their own (more
 * than 65535 levels of that on one thread: the rest are left out, counted).
 * Async ranges (their own tracks) form one extra run, sorted. */
static int make_edges(writer *w, merger *m, edge **gout) {
  const loom_trace *t = w->t;
  size_t nasync = 0;
  for (size_t i = 0; i < t->nev; i++) nasync += t->ev[i].ph == LOOM__PH_ASYNC;
  uint32_t *idx = malloc((t->nev + 1) * sizeof *idx);
  edge *g = malloc((2 * t->nev + 2) * sizeof *g);
  uint32_t *stack = malloc((t->nev + 1) * sizeof *stack);
  int64_t *ends = malloc((t->nev + 1) * sizeof *ends);
  m->runs = malloc((t->nev + t->ntracks + 3) * sizeof *m->runs);
  m->heap = malloc((t->nev + t->ntracks + 3) * sizeof *m->heap);
  int ok = idx && g && stack && ends && m->runs && m->heap;
  if (ok) {
    int sorted = 1;
    for (size_t i = 0; i < t->nev; i++) {
      idx[i] = (uint32_t)i;
      if (i && sorted && cmp_idx(&idx[i - 1], &idx[i], (void *)t) > 0) sorted = 0;
    }
    if (!sorted) qsort_r(idx, t->nev, sizeof *idx, cmp_idx, (void *)t);
    edges x = {t, m, g, 2 * nasync, 0, 0, stack, ends};
    for (size_t j = 0; j < t->nev;) {
      uint32_t track = t->ev[idx[j]].track;
      size_t k = j;
      while (k < t->nev && t->ev[idx[k]].track == track) k++;
      size_t hi = k;
      for (uint16_t lane = 0; hi > j; lane++) {
        if (lane == UINT16_MAX) {
          w->dropped_overlap += hi - j;
          break;
        }
        size_t nd = sweep_lane(&x, idx, j, hi, track, lane);
        if (lane) w->laned += hi - j - nd;
        hi = j + nd;
      }
      j = k;
    }
    size_t n = x.n, na = x.na;
    if (na) {
      qsort(g, na, sizeof *g, cmp_edge);
      m->runs[m->nruns++] = (run){0, na};
    }
    if (t->window_end) { /* the marker goes in time order like the rest */
      g[n] = (edge){t->end_ns, UINT32_MAX, UINT32_MAX, 0, 0, E_POINT};
      m->runs[m->nruns++] = (run){n, n + 1};
      n++;
    }
    m->g = g;
    for (size_t i = 0; i < m->nruns; i++)
      if (m->runs[i].at < m->runs[i].end) m->heap[m->nheap++] = (uint32_t)i;
    for (size_t i = m->nheap / 2 + 1; i-- > 0;) sift_down(m, i);
  }
  free(idx);
  free(stack);
  free(ends);
  if (!ok) {
    free(g);
    return -1;
  }
  *gout = g;
  return 0;
}

/* Like the JSON writer, end with the instant "Record Window End" (Kineto's
 * marker) on a global track; readers drop it. */
static void window_end(writer *w, int64_t ts) {
  uint64_t uuid = w->next_uuid++;
  descriptor(w, uuid, 0, NULL, NULL, NULL, 0, NULL);
  pb *te = &w->te;
  te->n = 0;
  pb_uint(te, PF_TE_TYPE, PF_TYPE_INSTANT);
  pb_uint(te, PF_TE_TRACK_UUID, uuid);
  pb_str(te, PF_TE_NAME, "Record Window End");
  pb_str(te, PF_TE_CATEGORIES, "marker");
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP, (uint64_t)(ts - w->last_ts));
  w->last_ts = ts;
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  pb_msg(&w->pkt, PF_PKT_TRACK_EVENT, te);
  emit_packet(w, &w->pkt);
}

/* The JSON writer's top-level keys (deviceProperties, metadata, others'
 * top-level values, warnings, the dropped count, the trace name) as one
 * JSON object: ChromeEventBundle metadata "loom_header", which
 * trace_processor keeps as metadata and pftrace_read.c reads back. */
static void header_packet(writer *w, const char *path) {
  loom__out mem;
  if (loom__out_mem_init(&mem) || loom__json_header(w->t, &mem)) {
    free(mem.buf);
    w->oom = 1;
    return;
  }
  (void)path;
  pb *md = &w->tmp, bundle = {0};
  md->n = 0;
  pb_str(md, PF_CM_NAME, PF_HEADER_NAME);
  pb_lenbytes(md, PF_CM_STRING, mem.buf, mem.len);
  pb_msg(&bundle, PF_CEB_METADATA, md);
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  pb_msg(&w->pkt, PF_PKT_CHROME_EVENTS, &bundle);
  emit_packet(w, &w->pkt);
  if (bundle.oom) w->oom = 1;
  free(bundle.p);
  free(mem.buf);
}

static void clock_snapshot(writer *w, int64_t t0) {
  pb *c = &w->tmp, snap = {0}, defaults = {0};
  const uint32_t ids[] = {PF_CLOCK_BOOTTIME, PF_CLOCK_REALTIME, PF_CLOCK_LOOM};
  for (int i = 0; i < 3; i++) {
    c->n = 0;
    pb_uint(c, PF_CLK_ID, ids[i]);
    pb_uint(c, PF_CLK_TIMESTAMP, (uint64_t)t0);
    if (ids[i] == PF_CLOCK_LOOM) pb_uint(c, PF_CLK_INCREMENTAL, 1);
    pb_msg(&snap, PF_CS_CLOCKS, c);
  }
  pb_uint(&snap, PF_CS_PRIMARY, PF_CLOCK_REALTIME);
  pb_uint(&defaults, PF_TPD_TIMESTAMP_CLOCK_ID, PF_CLOCK_LOOM);
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP, (uint64_t)t0);
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP_CLOCK_ID, PF_CLOCK_REALTIME);
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  pb_uint(&w->pkt, PF_PKT_SEQUENCE_FLAGS, PF_SEQ_INCREMENTAL_STATE_CLEARED);
  pb_msg(&w->pkt, PF_PKT_CLOCK_SNAPSHOT, &snap);
  pb_msg(&w->pkt, PF_PKT_DEFAULTS, &defaults);
  emit_packet(w, &w->pkt);
  if (snap.oom || defaults.oom) w->oom = 1;
  free(snap.p);
  free(defaults.p);
  w->last_ts = t0;
}

/* Perfetto links a flow id's ends pairwise, so flows that share an id
 * (Kineto's, one start and several ends) need their own ids in the file:
 * the first flow of an id keeps it, a later one is written as
 * PF_FLOW_DUP | (its index + 1) << 32 | the id (ids below 2^32; a larger
 * shared id gets the index alone), which the reader turns back. */
static uint64_t *pf_flow_ids(const loom_trace *t) {
  uint64_t *ids = malloc((t->nflows + 1) * sizeof *ids);
  loom__map seen;
  memset(&seen, 0, sizeof seen);
  for (size_t f = 0; ids && f < t->nflows; f++) {
    uint64_t id = t->flows[f].id;
    if (!loom__map_get(&seen, id) && !(id & PF_FLOW_DUP)) {
      if (loom__map_put(&seen, id, 1)) { free(ids); ids = NULL; break; }
      ids[f] = id;
    } else {
      ids[f] = PF_FLOW_DUP | (uint64_t)(f + 1) << 32 | (id >> 32 ? 0 : id);
    }
  }
  loom__map_free(&seen);
  return ids;
}

/* Chains the flows leaving (and entering) each event: first[ev] -> flow,
 * next[flow] -> flow, UINT32_MAX ends. */
static int chain_flows(const loom_trace *t, uint32_t **out_first, uint32_t **out_next,
                       uint32_t **in_first, uint32_t **in_next) {
  *out_first = malloc((t->nev + 1) * sizeof **out_first);
  *in_first = malloc((t->nev + 1) * sizeof **in_first);
  *out_next = malloc((t->nflows + 1) * sizeof **out_next);
  *in_next = malloc((t->nflows + 1) * sizeof **in_next);
  if (!*out_first || !*in_first || !*out_next || !*in_next) return -1;
  memset(*out_first, 0xff, (t->nev + 1) * sizeof **out_first);
  memset(*in_first, 0xff, (t->nev + 1) * sizeof **in_first);
  for (size_t f = t->nflows; f-- > 0;) {
    (*out_next)[f] = (*out_first)[t->flows[f].from];
    (*out_first)[t->flows[f].from] = (uint32_t)f;
    (*in_next)[f] = (*in_first)[t->flows[f].to];
    (*in_first)[t->flows[f].to] = (uint32_t)f;
  }
  return 0;
}


loom_status loom__write_pftrace(const loom_trace *t, const char *path) {
  writer w;
  memset(&w, 0, sizeof w);
  w.t = t;
  w.next_uuid = 1;
  loom__samples_init(&w.smp);
  size_t nstr = t->strs.n ? t->strs.n : 1;
  w.iid_ext = (uint32_t)nstr;
  w.iid_corr = (uint32_t)nstr + 1;
  w.iid_role = (uint32_t)nstr + 2;
  w.iid_json = (uint32_t)nstr + 3;
  w.seen_name = calloc(nstr + 4, 1);
  w.seen_cat = calloc(nstr + 4, 1);
  w.seen_arg = calloc(nstr + 4, 1);
  w.track_uuid = calloc(t->ntracks + 1, sizeof *w.track_uuid);
  uint32_t *of = NULL, *on = NULL, *inf = NULL, *inn = NULL;
  edge *g = NULL;
  merger m;
  memset(&m, 0, sizeof m);
  loom_status st = LOOM_OK;
  if (!w.seen_name || !w.seen_cat || !w.seen_arg || !w.track_uuid ||
      !(w.flow_id = pf_flow_ids(t)) || samples_prepare(&w) ||
      chain_flows(t, &of, &on, &inf, &inn) || make_edges(&w, &m, &g))
    st = loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
  loom__out o;
  if (st == LOOM_OK) st = loom__out_open(&o, path, -1);
  if (st == LOOM_OK) {
    w.o = &o;
    const edge *first = m.nheap ? &g[m.runs[m.heap[0]].at] : NULL;
    clock_snapshot(&w, first ? first->ts : t->start_ns);
    describe_tracks(&w);
    header_packet(&w, path);
    for (const edge *e; (e = merger_next(&m));) write_edge(&w, e, of, on, inf, inn);
    if (w.oom) {
      loom__out_abort(&o);
      st = loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
    } else {
      st = loom__out_commit(&o);
      if (st == LOOM_OK && w.dropped_overlap)
        loom__log(LOOM_SEV_WARNING, "%s: %llu slices overlap their parent without "
                  "nesting more than 65535 levels deep and were left out",
                  path, (unsigned long long)w.dropped_overlap);
    }
  }
  free(g);
  free(m.runs);
  free(m.heap);
  free(of);
  free(on);
  free(inf);
  free(inn);
  free(w.seen_name);
  free(w.seen_cat);
  free(w.seen_arg);
  free(w.track_uuid);
  free(w.flow_id);
  free(w.pkt.p);
  free(w.te.p);
  free(w.tmp.p);
  free(w.interned.p);
  free(w.names.p);
  loom__map_free(&w.counter_tracks);
  loom__map_free(&w.async_tracks);
  loom__map_free(&w.lane_tracks);
  samples_free(&w);
  return st;
}
