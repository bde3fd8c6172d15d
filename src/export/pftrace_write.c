/*
 * pftrace_write.c - Perfetto protobuf output (.pftrace).
 *
 * Each lane (a thread track, or one of its tracks of overlapping slices;
 * pftrace_write.h) is its own packet sequence.  Its first packet holds a
 * clock snapshot that makes REALTIME the trace clock and defines clock 64,
 * an incremental clock in units of the trace's time step, and the
 * sequence's defaults (that clock, the lane's track): every later timestamp
 * is a delta from the previous packet's, which keeps timestamps at 1-3
 * bytes while absolute (Unix epoch) times survive.  Descriptors go first,
 * one per process, thread/queue, counter series and async range; then the
 * events as TrackEvent slice begin/end pairs (a slice of whole microseconds
 * on a thread's track: one legacy complete event), instants and counters,
 * in time order on each lane.  Names, categories, argument names and
 * repeated string values are interned per sequence in the packet that
 * first uses them.  Flows use flow_ids on the source slice and
 * terminating_flow_ids on the target.
 * Field numbers come from Perfetto's perfetto_trace.proto.
 *
 * This file: lanes, packets, events, flows and the plan; descriptors and
 * CPU samples are in pftrace_write_tracks.c, the shared state and the
 * encoders in pftrace_write.h.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "export/outfile.h"
#include "export/pftrace_write.h"
#include "trace/samples.h"
#include "trace/trace.h"
#include "util/util.h"

static int cmp_idx(const void *pa, const void *pb_, void *ctx) {
  const loom_trace *t = ctx;
  const loom__ev *a = &t->ev[*(const uint32_t *)pa], *b = &t->ev[*(const uint32_t *)pb_];
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb_ ? -1 : 1;
}

void loom__pfw_emit_packet(writer *w, pb_buf *pkt) {
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
  if (pkt->n) loom__out_mem(w->o, pkt->p, pkt->n); /* p is NULL when its growth failed */
  if (pkt->oom) w->oom = 1;
  pkt->n = 0;
}

/* Names of the arguments the model keeps as fields (and of loom_json);
 * they get ids past the trace's string ids. */
static const char *field_arg_name(const writer *w, uint32_t id) {
  return id == w->iid_ext ? "External id" : id == w->iid_corr ? "correlation"
       : id == w->iid_role ? "loom_role" : id == w->iid_json ? "loom_json"
       : id == w->iid_kind ? "loom_kind"
       : id >= w->text_base ? loom__strtab_get(&w->texts, id - w->text_base)
       : loom__trace_cstr(w->t, id);
}

/* Strings interned at most, over all sequences; past it, new ones are
 * written in place (the writer's memory stays bounded). */
enum { PF_INTERN_MAX = 1 << 18 };

/* The iid of string id on lane L's sequence in one InternedData table
 * (event names, categories, argument names or string values): iids are
 * given per sequence in order of first use, from 1 (so the common ones
 * take one byte), and the entry goes into the packet being built the first
 * time.  0: id 0, or a new string past PF_INTERN_MAX (write it in place). */
static uint64_t iid_of(writer *w, lane *L, uint32_t field, uint32_t id) {
  if (!id) return 0;
  uint32_t table = field == PF_ID_EVENT_NAMES ? 0 : field == PF_ID_EVENT_CATEGORIES ? 1
                 : field == PF_ID_DEBUG_ANNOTATION_NAMES ? 2 : 3;
  uint64_t key = (uint64_t)L->seq << 34 | (uint64_t)table << 32 | id;
  uint64_t *hit = loom__map_get(&w->iids, key);
  if (hit) return *hit;
  if (w->iids.n >= PF_INTERN_MAX) return 0;
  uint64_t iid = ++L->niid[table];
  if (loom__map_put(&w->iids, key, iid)) w->oom = 1;
  pb_buf *m = &w->tmp;
  m->n = 0;
  pb_uint(m, 1, iid);
  pb_str(m, 2, field_arg_name(w, id));
  pb_msg(&w->interned, field, m);
  return iid;
}

/* A string of the trace as an iid (field) or, where it has none, in place
 * (field_str). */
static void pb_interned(writer *w, lane *L, pb_buf *b, uint32_t table, uint32_t field,
                        uint32_t field_str, uint32_t id) {
  uint64_t iid = iid_of(w, L, table, id);
  if (iid || (!id && table == PF_ID_EVENT_NAMES)) pb_uint(b, field, iid);
  else pb_str(b, field_str, field_arg_name(w, id));
}

/* A string value v (string id, 0: none) as its iid when that is smaller:
 * string_value_iid's tag takes two bytes, so a value of one byte or none
 * (three bytes or two in place) is written in place. */
static void value_text(writer *w, lane *L, pb_buf *m, uint32_t id, const char *v) {
  if (id && v[0] && v[1])
    pb_interned(w, L, m, PF_ID_DEBUG_ANNOTATION_STRING_VALUES, PF_DA_STRING_VALUE_IID, PF_DA_STRING,
                id);
  else pb_str(m, PF_DA_STRING, v);
}

static void annotation(writer *w, lane *L, pb_buf *te, uint32_t key, int type, int64_t i,
                       uint64_t u, double d, uint32_t s) {
  pb_buf *m = &w->names; /* scratch for the annotation body */
  m->n = 0;
  pb_interned(w, L, m, PF_ID_DEBUG_ANNOTATION_NAMES, PF_DA_NAME_IID, PF_DA_NAME, key);
  switch (type) {
  case LOOM_ARG_INT: pb_sint(m, PF_DA_INT, i); break;
  case LOOM_ARG_UINT: pb_uint(m, PF_DA_UINT, u); break;
  case LOOM_ARG_DOUBLE: pb_double(m, PF_DA_DOUBLE, d); break;
  default: /* repeated values (shapes, types) cost an iid after the first time */
    value_text(w, L, m, s, loom__trace_cstr(w->t, s));
    break;
  }
  pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
}

/* Texts the writer makes (marks, kinds, loom_json's positions) it keeps at
 * most, to intern them as values; past it, a new one is written in place. */
enum { PF_TEXTS_MAX = 1 << 12 };

/* The string id of a text the writer makes: the trace's own when it holds
 * the text, else one past w->text_base; 0: written in place. */
static uint32_t text_id(writer *w, const char *v) {
  size_t n = strlen(v);
  uint32_t id = loom__strtab_find(&w->t->strs, v, n);
  if (id) return id;
  if (w->texts.n >= PF_TEXTS_MAX) id = loom__strtab_find(&w->texts, v, n);
  else if (!(id = loom__strtab_intern(&w->texts, v, n))) w->oom = 1;
  return id && (uint64_t)w->text_base + id <= UINT32_MAX ? w->text_base + id : 0;
}

/* A string annotation whose value repeats over the events (a mark, a kind,
 * which arguments are JSON): its value interned as the arguments' are. */
static void text_annotation(writer *w, lane *L, pb_buf *te, uint32_t key, const char *v) {
  pb_buf *m = &w->names;
  m->n = 0;
  pb_interned(w, L, m, PF_ID_DEBUG_ANNOTATION_NAMES, PF_DA_NAME_IID, PF_DA_NAME, key);
  value_text(w, L, m, v[0] && v[1] ? text_id(w, v) : 0, v);
  pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
}

/* The marks as a string annotation "loom_role", as in the JSON. */
static void role_annotation(writer *w, lane *L, pb_buf *te, unsigned roles) {
  char v[LOOM__ROLE_BUF];
  loom__role_format(roles, v);
  text_annotation(w, L, te, w->iid_role, v);
}

/* Which of the event's arguments hold JSON text (nested values, booleans,
 * null): their positions, "0,3", as the string annotation "loom_json", so
 * readers mark them JSON again; the values themselves are strings. */
static void json_annotation(writer *w, lane *L, pb_buf *te, const loom__targ *a, uint16_t n) {
  char small[256], *v = small;
  size_t cap = sizeof small, k = 0;
  if ((size_t)n * 6 + 1 > cap) { /* "65535," at most per argument: every one listed */
    cap = (size_t)n * 6 + 1;
    if (!(v = malloc(cap))) {
      w->oom = 1;
      return;
    }
  }
  for (uint16_t i = 0; i < n; i++)
    if (a[i].json) k += (size_t)snprintf(v + k, cap - k, k ? ",%u" : "%u", (unsigned)i);
  if (k) text_annotation(w, L, te, w->iid_json, v);
  if (v != small) free(v);
}

/* A flag annotation with a plain name (rare: "loom_counter", "loom_unclosed"). */
static void flag_annotation(writer *w, pb_buf *te, const char *name) {
  pb_buf *m = &w->names;
  m->n = 0;
  pb_str(m, PF_DA_NAME, name);
  pb_uint(m, PF_DA_INT, 1);
  pb_msg(te, PF_TE_DEBUG_ANNOTATIONS, m);
}

/* ---- packets on a lane -------------------------------------------------- */
/* A lane's first packet: incremental state cleared; a clock snapshot that
 * makes REALTIME the trace clock and starts the lane's clock 64 (its ticks
 * are w->step ns, each packet's timestamp the ticks since the previous
 * packet's) at 0 = ts; the defaults: clock 64 and the lane's track. */
static void lane_start(writer *w, lane *L, int64_t ts) {
  pb_buf *c = &w->tmp, snap = {0}, defaults = {0}, ted = {0};
  const uint32_t ids[] = {PF_CLOCK_BOOTTIME, PF_CLOCK_REALTIME, PF_CLOCK_LOOM};
  for (int i = 0; i < 3; i++) {
    c->n = 0;
    pb_uint(c, PF_CLK_ID, ids[i]);
    if (ids[i] != PF_CLOCK_LOOM) pb_uint(c, PF_CLK_TIMESTAMP, (uint64_t)ts);
    if (ids[i] == PF_CLOCK_LOOM) pb_uint(c, PF_CLK_INCREMENTAL, 1);
    if (ids[i] == PF_CLOCK_LOOM && w->step > 1)
      pb_uint(c, PF_CLK_UNIT_MULTIPLIER, (uint64_t)w->step);
    pb_msg(&snap, PF_CS_CLOCKS, c);
  }
  pb_uint(&snap, PF_CS_PRIMARY, PF_CLOCK_REALTIME);
  pb_uint(&defaults, PF_TPD_TIMESTAMP_CLOCK_ID, PF_CLOCK_LOOM);
  if (L->uuid) {
    pb_uint(&ted, PF_TED_TRACK_UUID, L->uuid);
    pb_msg(&defaults, PF_TPD_TRACK_EVENT_DEFAULTS, &ted);
  }
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP, (uint64_t)ts);
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP_CLOCK_ID, PF_CLOCK_REALTIME);
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, L->seq);
  pb_uint(&w->pkt, PF_PKT_SEQUENCE_FLAGS, PF_SEQ_INCREMENTAL_STATE_CLEARED);
  pb_msg(&w->pkt, PF_PKT_CLOCK_SNAPSHOT, &snap);
  pb_msg(&w->pkt, PF_PKT_DEFAULTS, &defaults);
  loom__pfw_emit_packet(w, &w->pkt);
  if (snap.oom || defaults.oom || ted.oom) w->oom = 1;
  free(snap.p);
  free(defaults.p);
  free(ted.p);
  L->started = 1;
  L->last = ts;
}

/* Writes msg (a TrackEvent or PerfSample) at ts on lane L, with what
 * w->interned gathered for it. */
void loom__pfw_put(writer *w, lane *L, int64_t ts, uint32_t field, const pb_buf *msg) {
  if (!L->started) lane_start(w, L, ts);
  uint64_t d = (uint64_t)ts - (uint64_t)L->last; /* two's complement: may go back */
  pb_uint(&w->pkt, PF_PKT_TIMESTAMP, w->step > 1 ? (uint64_t)((int64_t)d / w->step) : d);
  L->last = ts;
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, L->seq);
  if (w->interned.n) {
    pb_msg(&w->pkt, PF_PKT_INTERNED_DATA, &w->interned);
    pb_uint(&w->pkt, PF_PKT_SEQUENCE_FLAGS, PF_SEQ_NEEDS_INCREMENTAL_STATE);
    w->interned.n = 0;
  }
  pb_msg(&w->pkt, field, msg);
  loom__pfw_emit_packet(w, &w->pkt);
}

/* Lane num of a trace track, made on first use (the lanes before it exist:
 * a slice reaches lane k through k - 1).  Pointers into w->lanes are
 * invalid after a call that makes one. */
static lane *lane_of(writer *w, uint32_t track, uint16_t num) {
  uint32_t prev = UINT32_MAX, cur = w->lane0[track];
  for (uint16_t k = 0; cur != UINT32_MAX; k++) {
    if (k == num) return &w->lanes[cur];
    prev = cur;
    cur = w->lanes[cur].next;
  }
  uint64_t uuid = num ? loom__pfw_lane_track(w, track, num) : w->track_uuid[track];
  lane L = {.uuid = uuid, .seq = (uint32_t)w->nlanes + 1, .track = track, .next = UINT32_MAX,
            .num = num};
  if (LOOM__PUSH(w->lanes, w->nlanes, w->cap_lanes, L)) {
    w->oom = 1;
    return NULL;
  }
  uint32_t id = (uint32_t)(w->nlanes - 1);
  if (prev == UINT32_MAX) w->lane0[track] = id;
  else w->lanes[prev].next = id;
  return &w->lanes[id];
}

static int numeric_series(const loom_trace *t, const loom__ev *e) {
  int n = 0;
  for (uint16_t k = 0; k < e->nargs; k++) n += t->args[e->args_off + k].type != LOOM_ARG_STRING;
  return n;
}

/* Whether two of e's series have one key (each series is a track: the
 * reader could not tell them apart). */
static int repeats_key(const loom_trace *t, const loom__ev *e) {
  const loom__targ *a = &t->args[e->args_off];
  if (e->nargs <= 32) {
    for (uint16_t i = 1; i < e->nargs; i++)
      for (uint16_t k = 0; k < i; k++)
        if (a[i].key == a[k].key) return 1;
    return 0;
  }
  loom__map seen = {0};
  int rep = 0;
  for (uint16_t i = 0; i < e->nargs && !rep; i++) {
    rep = loom__map_get(&seen, (uint64_t)a[i].key + 1) != NULL;
    if (!rep && loom__map_put(&seen, (uint64_t)a[i].key + 1, 1))
      rep = 1; /* out of memory: the safe way */
  }
  loom__map_free(&seen);
  return rep;
}

/* Perfetto's counters hold numbers only: a counter event with a string
 * series or with no value at all is written as an instant on its thread
 * with every argument, marked "loom_counter" so readers make it a counter
 * again.  So is one whose series repeat a key, and one that follows a
 * counter event written as series at the same time on the same thread
 * with the same name and category: the reader joins such series into one
 * event (a counter's values at one time come as one packet per series).
 * So is a counter event of another kind: series cannot say "loom_kind". */
static int counter_as_series(const loom_trace *t, const loom__ev *e, size_t last_series) {
  if (!e->nargs || numeric_series(t, e) != e->nargs || repeats_key(t, e) ||
      e->kind != LOOM_KIND_COUNTER)
    return 0;
  const loom__ev *p = last_series ? &t->ev[last_series - 1] : NULL;
  return !p || p->track != e->track || p->ts != e->ts || p->name != e->name || p->cat != e->cat;
}

/* A counter event: one packet per series value, on its thread's lane,
 * each on the series' own track. */
static void write_counter(writer *w, lane *L, const loom__ev *e) {
  const loom_trace *t = w->t;
  pb_buf *te = &w->te;
  for (uint16_t k = 0; k < e->nargs; k++) {
    const loom__targ *a = &t->args[e->args_off + k];
    if (a->type == LOOM_ARG_STRING) continue; /* not a number: its string id is no value */
    double v = a->type == LOOM_ARG_DOUBLE ? a->v.d
               : a->type == LOOM_ARG_UINT ? (double)a->v.u
                                          : (double)a->v.i;
    uint64_t uuid = loom__pfw_counter_track(w, e, a->key);
    te->n = 0;
    w->interned.n = 0;
    pb_uint(te, PF_TE_TYPE, PF_TYPE_COUNTER);
    pb_uint(te, PF_TE_TRACK_UUID, uuid);
    if (e->cat)
      pb_interned(w, L, te, PF_ID_EVENT_CATEGORIES, PF_TE_CATEGORY_IIDS, PF_TE_CATEGORIES, e->cat);
    pb_double(te, PF_TE_DOUBLE_COUNTER_VALUE, v);
    loom__pfw_put(w, L, e->ts, PF_PKT_TRACK_EVENT, te);
  }
}

/* A memory event's series after it (memory.h): bytes in use, and reserved
 * once its pool has said, each a value on its counter track. */
static void mem_counters(writer *w, lane *L, uint32_t ev) {
  const loom__memstate *st = loom__memplan_get(&w->mem, ev);
  if (!st || !st->counted) return;
  for (int k = 0; k < 1 + st->has_reserved; k++) {
    uint64_t uuid = loom__pfw_mem_track(w, st->series, k);
    pb_buf *te = &w->te;
    te->n = 0;
    w->interned.n = 0;
    pb_uint(te, PF_TE_TYPE, PF_TYPE_COUNTER);
    pb_uint(te, PF_TE_TRACK_UUID, uuid);
    pb_sint(te, PF_TE_COUNTER_VALUE, (int64_t)(k ? st->reserved : st->in_use));
    loom__pfw_put(w, L, w->t->ev[ev].ts, PF_PKT_TRACK_EVENT, te);
  }
}

/* The written id of flow f (pf_flow_ids): while no id repeats, the id,
 * or, with the bit PF_FLOW_DUP set, made unique as a repeated one is. */
static uint64_t flow_wid(const writer *w, size_t f) {
  if (w->flow_id) return w->flow_id[f];
  uint64_t id = w->t->flows[f].id;
  return id & PF_FLOW_DUP ? PF_FLOW_DUP | (uint64_t)(f + 1) << 32 | (id >> 32 ? 0 : id) : id;
}

static uint32_t flow_end(const loom_trace *t, size_t f, int way) {
  return way ? t->flows[f].to : t->flows[f].from;
}

/* Writes the ids of the flows leaving (way 0) or entering (way 1) event ev. */
static void write_flows(writer *w, pb_buf *te, uint32_t ev, int way) {
  const loom_trace *t = w->t;
  flowway *fw = &w->way[way];
  uint32_t field = way ? PF_TE_TERMINATING_FLOW_IDS_OLD : PF_TE_FLOW_IDS_OLD;
  if (fw->first) {
    for (uint32_t f = fw->first[ev]; f != UINT32_MAX; f = fw->next[f])
      pb_uint(te, field, flow_wid(w, f));
    return;
  }
  while (fw->at < t->nflows && flow_end(t, fw->at, way) < ev) fw->at++;
  for (; fw->at < t->nflows && flow_end(t, fw->at, way) == ev; fw->at++)
    pb_uint(te, field, flow_wid(w, fw->at));
}

/* A slice begin (E_BEGIN), an instant or another point event (E_POINT) on
 * lane L; on the misc lane (async ranges) with its track's uuid. */
enum { E_END = 0, E_BEGIN = 1, E_POINT = 2 };

/* Whether a slice on lane L is one packet, a legacy complete event (phase
 * 'X' and duration_us, no type): exact when it lasts whole microseconds, and
 * 10-12 bytes smaller than a begin and an end.  trace_processor nests it
 * among begins and ends as it nests those, on a thread's own track only (on
 * a track of overlapping slices it leaves it out): lane 0; and it nests a
 * slice that starts when one of no duration does in that one: a slice of
 * no duration keeps its end (so does a slice open in the file, which has
 * none: loom__ev_open_in_file). */
static int whole_us(const lane *L, const loom__ev *e) {
  return !L->num && L->uuid && e->ph == LOOM__PH_COMPLETE && e->dur > 0 && e->dur % 1000 == 0;
}

/* TrackEvent.legacy_event: phase 'X' and the duration in microseconds. */
static void legacy_complete(pb_buf *te, int64_t dur) {
  uint8_t m[16] = {PF_LE_PHASE << 3 | PB_VARINT, 'X', PF_LE_DURATION_US << 3 | PB_VARINT};
  size_t k = 3;
  uint64_t us = (uint64_t)(dur / 1000);
  for (; us >= 0x80; us >>= 7) m[k++] = (uint8_t)(us | 0x80);
  m[k++] = (uint8_t)us;
  pb_lenbytes(te, PF_TE_LEGACY_EVENT, m, k);
}

static void write_event(writer *w, lane *L, uint32_t ev, int what, uint64_t track) {
  const loom_trace *t = w->t;
  const loom__ev *e = &t->ev[ev];
  pb_buf *te = &w->te;
  te->n = 0;
  w->interned.n = 0;
  int x = what == E_BEGIN && !track && whole_us(L, e);
  if (x) legacy_complete(te, e->dur);
  else pb_uint(te, PF_TE_TYPE, what == E_POINT ? PF_TYPE_INSTANT : PF_TYPE_SLICE_BEGIN);
  if (track) pb_uint(te, PF_TE_TRACK_UUID, track);
  pb_interned(w, L, te, PF_ID_EVENT_NAMES, PF_TE_NAME_IID, PF_TE_NAME, e->name);
  if (e->cat)
    pb_interned(w, L, te, PF_ID_EVENT_CATEGORIES, PF_TE_CATEGORY_IIDS, PF_TE_CATEGORIES, e->cat);
  if (e->external_id) annotation(w, L, te, w->iid_ext, LOOM_ARG_UINT, 0, e->external_id, 0, 0);
  if (e->correlation && e->ph != LOOM__PH_ASYNC)
    annotation(w, L, te, w->iid_corr, LOOM_ARG_UINT, 0, e->correlation, 0, 0);
  if (LOOM__EV_ROLE_OF(e)) role_annotation(w, L, te, LOOM__EV_ROLE_OF(e));
  int kind = loom__kind_to_write(&w->cats, t, e);
  if (kind >= 0) text_annotation(w, L, te, w->iid_kind, loom_kind_name((loom_kind)kind));
  for (uint16_t k = 0; k < e->nargs; k++) {
    const loom__targ *a = &t->args[e->args_off + k];
    annotation(w, L, te, a->key, a->type, a->v.i, a->v.u, a->v.d, a->v.s);
  }
  const loom__targ *args = e->nargs ? t->args + e->args_off : NULL; /* NULL + 0 is UB */
  if (args) json_annotation(w, L, te, args, e->nargs);
  if (e->ph == LOOM__PH_COUNTER) flag_annotation(w, te, "loom_counter"); /* not as series */
  if (what == E_BEGIN && e->ph == LOOM__PH_COMPLETE && loom__ev_open_in_file(t, e, args))
    /* begun and never ended in the trace read; Perfetto's end closes the
     * innermost slice of a track, so the slice is ended (at its start) and
     * marked for loom's reader */
    flag_annotation(w, te, "loom_unclosed");
  write_flows(w, te, ev, 0);
  write_flows(w, te, ev, 1);
  loom__pfw_put(w, L, e->ts, PF_PKT_TRACK_EVENT, te);
}

static void write_end(writer *w, lane *L, int64_t ts, uint64_t track) {
  pb_buf *te = &w->te;
  te->n = 0;
  w->interned.n = 0;
  pb_uint(te, PF_TE_TYPE, PF_TYPE_SLICE_END);
  if (track) pb_uint(te, PF_TE_TRACK_UUID, track);
  loom__pfw_put(w, L, ts, PF_PKT_TRACK_EVENT, te);
}

/* Ends the lane's open slices that end at or before ts (ts = INT64_MAX: all). */
static void lane_pop(writer *w, lane *L, int64_t ts) {
  while (L->depth && L->send[L->depth - 1] <= ts) {
    L->depth--;
    if (!whole_us(L, &w->t->ev[L->sev[L->depth]])) write_end(w, L, L->send[L->depth], 0);
  }
}

static int lane_push(lane *L, uint32_t ev, int64_t end) {
  if (L->depth == L->cap) {
    size_t cap = L->cap ? 2 * L->cap : 16;
    uint32_t *sev = realloc(L->sev, cap * sizeof *sev);
    if (!sev) return -1;
    L->sev = sev;
    int64_t *send = realloc(L->send, cap * sizeof *send);
    if (!send) return -1;
    L->send = send;
    L->cap = cap;
  }
  L->sev[L->depth] = ev;
  L->send[L->depth++] = end;
  return 0;
}

/* One event, in its track's order (start, longer first).  A slice goes on
 * the first lane of its track where it nests: each lane is a stack of open
 * slices whose ends are written once a later event starts at or after them;
 * a slice that overlaps its parent without nesting tries the next lane
 * (more than 65535 levels of that on one thread: left out, counted). */
static void write_one(writer *w, uint32_t ev) {
  const loom_trace *t = w->t;
  const loom__ev *e = &t->ev[ev];
  size_t last_series = w->last_series;
  w->last_series = 0; /* set again below when this one is a counter's series */
  uint32_t site = e->kind == LOOM_KIND_SAMPLE ? loom__pfw_perf_sample_site(w, e, ev) : 0;
  if (site) {
    loom__pfw_write_perf_sample(w, e, site);
    return;
  }
  if (e->ph == LOOM__PH_ASYNC) { /* its own track: begin and end at once */
    uint64_t track = loom__pfw_async_track(w, e);
    write_event(w, &w->lanes[0], ev, E_BEGIN, track);
    write_end(w, &w->lanes[0], e->ts + e->dur, track);
    return;
  }
  lane *L = lane_of(w, e->track, 0);
  if (!L) return;
  lane_pop(w, L, e->ts);
  if (e->ph == LOOM__PH_COUNTER && counter_as_series(t, e, last_series)) {
    write_counter(w, L, e);
    w->last_series = (size_t)ev + 1;
    return;
  }
  if (e->ph != LOOM__PH_COMPLETE) {
    write_event(w, L, ev, E_POINT, 0);
    if (e->kind == LOOM_KIND_MEMORY) mem_counters(w, L, ev);
    return;
  }
  int64_t end = e->ts + e->dur;
  for (uint16_t num = 0;;) {
    if (!L->depth || end <= L->send[L->depth - 1]) {
      write_event(w, L, ev, E_BEGIN, 0);
      if (lane_push(L, ev, end)) w->oom = 1;
      w->laned += num > 0;
      return;
    }
    if (++num == UINT16_MAX) {
      w->dropped_overlap++;
      return;
    }
    if (!(L = lane_of(w, e->track, num))) return;
    lane_pop(w, L, e->ts);
  }
}

/* Like the JSON writer, end with the instant "Record Window End" (Kineto's
 * marker) on a global track; readers drop it. */
static void window_end(writer *w, int64_t ts) {
  uint64_t uuid = w->next_uuid++;
  loom__pfw_descriptor(w, uuid, 0, NULL, NULL, NULL, 0, NULL);
  pb_buf *te = &w->te;
  te->n = 0;
  w->interned.n = 0;
  pb_uint(te, PF_TE_TYPE, PF_TYPE_INSTANT);
  pb_uint(te, PF_TE_TRACK_UUID, uuid);
  pb_str(te, PF_TE_NAME, "Record Window End");
  pb_str(te, PF_TE_CATEGORIES, "marker");
  loom__pfw_put(w, &w->lanes[0], ts, PF_PKT_TRACK_EVENT, te);
}

/* The JSON writer's top-level keys (deviceProperties, metadata, others'
 * top-level values, warnings, the dropped count, the trace name) as one
 * JSON object: ChromeEventBundle metadata "loom_header", which
 * trace_processor keeps as metadata and pftrace_read.c reads back. */
static void header_packet(writer *w) {
  loom__out mem;
  if (loom__out_mem_init(&mem) || loom__json_header(w->t, &mem)) {
    free(mem.buf);
    w->oom = 1;
    return;
  }
  pb_buf *md = &w->tmp, bundle = {0};
  md->n = 0;
  pb_str(md, PF_CM_NAME, PF_HEADER_NAME);
  pb_lenbytes(md, PF_CM_STRING, mem.buf, mem.len);
  pb_msg(&bundle, PF_CEB_METADATA, md);
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  pb_msg(&w->pkt, PF_PKT_CHROME_EVENTS, &bundle);
  loom__pfw_emit_packet(w, &w->pkt);
  if (bundle.oom) w->oom = 1;
  free(bundle.p);
  free(mem.buf);
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

/* Chains the flows leaving (way 0) or entering (way 1) each event. */
static int chain_flows(const loom_trace *t, flowway *fw, int way) {
  fw->first = malloc((t->nev + 1) * sizeof *fw->first);
  fw->next = malloc((t->nflows + 1) * sizeof *fw->next);
  if (!fw->first || !fw->next) return -1;
  memset(fw->first, 0xff, (t->nev + 1) * sizeof *fw->first);
  for (size_t f = t->nflows; f-- > 0;) {
    uint32_t ev = flow_end(t, f, way);
    fw->next[f] = fw->first[ev];
    fw->first[ev] = (uint32_t)f;
  }
  return 0;
}

/* The gcd of a and the distance b - c (computed without overflow). */
static uint64_t gcd_dist(uint64_t a, int64_t b, int64_t c) {
  uint64_t d = (uint64_t)b - (uint64_t)c;
  if (d >> 63) d = -d;
  while (d) {
    uint64_t r = a % d;
    a = d;
    d = r;
  }
  return a;
}

/* One pass over the trace, in bounded memory: the time step (the greatest
 * common divisor of every time's distance from the first, 1 at least);
 * whether each track's events already come in the order the lanes need;
 * which flow lists are sorted and whether flow ids repeat.  Only what is
 * out of order costs memory per event: an index sorted by track and time,
 * chains of flows, each flow's id. */
static int plan(writer *w, uint32_t **idx_out) {
  const loom_trace *t = w->t;
  *idx_out = NULL;
  uint32_t *last = malloc((t->ntracks + 1) * sizeof *last);
  if (!last) return -1;
  memset(last, 0xff, (t->ntracks + 1) * sizeof *last);
  int64_t ref = t->nev ? t->ev[0].ts : t->end_ns;
  uint64_t g = t->window_end ? gcd_dist(0, t->end_ns, ref) : 0;
  int in_order = 1, wide = 0;
  int64_t lo = ref, hi = ref, span;
  if (t->window_end) lo = t->end_ns < lo ? t->end_ns : lo, hi = t->end_ns > hi ? t->end_ns : hi;
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    int64_t end;
    if (__builtin_add_overflow(e->ts, e->dur, &end)) wide = 1;
    lo = e->ts < lo ? e->ts : lo;
    hi = end > hi ? end : hi;
    g = gcd_dist(gcd_dist(g, e->ts, ref), e->dur, 0);
    if (e->ph == LOOM__PH_ASYNC) continue;
    if (last[e->track] != UINT32_MAX) {
      const loom__ev *p = &t->ev[last[e->track]];
      if (p->ts > e->ts || (p->ts == e->ts && p->dur < e->dur)) in_order = 0;
    }
    last[e->track] = (uint32_t)i;
  }
  free(last);
  if (__builtin_sub_overflow(hi, lo, &span)) wide = 1; /* times 2^63 ns apart: steps of 1 ns */
  w->step = g > 0 && g <= INT64_MAX && !wide ? (int64_t)g : 1;
  int by[2] = {1, 1}, unique = 1;
  for (size_t f = 1; f < t->nflows; f++) {
    by[0] &= t->flows[f - 1].from <= t->flows[f].from;
    by[1] &= t->flows[f - 1].to <= t->flows[f].to;
    unique &= t->flows[f - 1].id < t->flows[f].id;
  }
  if (!unique && !(w->flow_id = pf_flow_ids(t))) return -1;
  for (int way = 0; way < 2; way++)
    if ((!in_order || !by[way]) && chain_flows(t, &w->way[way], way)) return -1;
  if (in_order) return 0;
  uint32_t *idx = malloc((t->nev + 1) * sizeof *idx);
  if (!idx) return -1;
  for (size_t i = 0; i < t->nev; i++) idx[i] = (uint32_t)i;
  qsort_r(idx, t->nev, sizeof *idx, cmp_idx, (void *)t);
  *idx_out = idx;
  return 0;
}

/* The writer's state for t: interned ids past the trace's strings, track
 * and lane tables, the order of the events (*idx).  -1 when out of memory. */
static int writer_init(writer *w, const loom_trace *t, uint32_t **idx) {
  memset(w, 0, sizeof *w);
  w->t = t;
  w->next_uuid = 1;
  loom__samples_init(&w->smp);
  size_t nstr = t->strs.n ? t->strs.n : 1;
  w->iid_ext = (uint32_t)nstr;
  w->iid_corr = (uint32_t)nstr + 1;
  w->iid_role = (uint32_t)nstr + 2;
  w->iid_json = (uint32_t)nstr + 3;
  w->iid_kind = (uint32_t)nstr + 4;
  w->text_base = (uint32_t)nstr + 5;
  loom__strtab_init(&w->texts);
  w->track_uuid = calloc(t->ntracks + 1, sizeof *w->track_uuid);
  w->lane0 = malloc((t->ntracks + 1) * sizeof *w->lane0);
  if (w->lane0) memset(w->lane0, 0xff, (t->ntracks + 1) * sizeof *w->lane0);
  lane misc = {.seq = 1, .next = UINT32_MAX};
  if (!w->track_uuid || !w->lane0 || LOOM__PUSH(w->lanes, w->nlanes, w->cap_lanes, misc) ||
      loom__pfw_samples_prepare(w) || plan(w, idx) || loom__memplan_build(&w->mem, t))
    return -1;
  return 0;
}

static void writer_free(writer *w) {
  for (int way = 0; way < 2; way++) {
    free(w->way[way].first);
    free(w->way[way].next);
  }
  for (size_t i = 0; i < w->nlanes; i++) {
    free(w->lanes[i].sev);
    free(w->lanes[i].send);
  }
  free(w->lanes);
  free(w->lane0);
  free(w->track_uuid);
  free(w->flow_id);
  free(w->pkt.p);
  free(w->te.p);
  free(w->tmp.p);
  free(w->interned.p);
  free(w->names.p);
  loom__map_free(&w->iids);
  loom__strtab_free(&w->texts);
  loom__map_free(&w->counter_tracks);
  loom__map_free(&w->async_tracks);
  loom__map_free(&w->mem_tracks);
  loom__map_free(&w->proc_uuids);
  loom__memplan_free(&w->mem);
  loom__pfw_samples_free(w);
  free(w->cats.b);
}

/* Tracks, the header, every event in the planned order, then what the
 * lanes still hold and the window's end, into the open output o. */
static loom_status write_all(writer *w, loom__out *o, const uint32_t *idx, const char *path) {
  const loom_trace *t = w->t;
  w->o = o;
  loom__pfw_describe_tracks(w);
  header_packet(w);
  for (size_t j = 0; j < t->nev && !w->oom; j++) write_one(w, idx ? idx[j] : (uint32_t)j);
  for (size_t i = 1; i < w->nlanes; i++) lane_pop(w, &w->lanes[i], INT64_MAX);
  if (t->window_end) window_end(w, t->end_ns);
  if (w->oom) {
    loom__out_abort(o);
    return loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
  }
  loom_status st = loom__out_commit(o);
  if (st == LOOM_OK && w->dropped_overlap)
    loom__log(LOOM_SEV_WARNING, "%s: %llu slices overlap their parent without "
              "nesting more than 65535 levels deep and were left out",
              path, (unsigned long long)w->dropped_overlap);
  return st;
}

static loom_status write_pftrace(const loom_trace *t, const char *path, int gzip) {
  writer w;
  uint32_t *idx = NULL;
  loom_status st = LOOM_OK;
  if (writer_init(&w, t, &idx)) st = loom__fail(LOOM_ENOMEM, "out of memory writing %s", path);
  loom__out o;
  if (st == LOOM_OK) st = loom__out_open(&o, path, gzip);
  if (st == LOOM_OK) st = write_all(&w, &o, idx, path);
  free(idx);
  writer_free(&w);
  return st;
}

loom_status loom__write_pftrace(const loom_trace *t, const char *path) {
  return write_pftrace(t, path, -1);
}

/* .pftrace.gz: the same stream through gzip, which trace_processor and
 * loom's reader open as they open the plain file. */
loom_status loom__write_pftrace_gz(const loom_trace *t, const char *path) {
  return write_pftrace(t, path, 3);
}
