/*
 * pftrace_read.c - reads Perfetto protobuf traces that loom wrote
 * (pftrace_write.c) back into the trace model: processes, threads/queues,
 * counter series and async tracks from TrackDescriptors; slices from
 * begin/end pairs; instants; counters; debug annotations as arguments
 * ("External id" and "correlation" become the event's fields); flows from
 * flow_ids/terminating_flow_ids; interned names, categories and argument
 * names; absolute and incremental clocks.  Other producers' traces load as
 * far as they use the same features; packets it does not know are skipped.
 * The file is read in one pass: in place when it is not compressed
 * (input.h), else with one buffer per packet.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "core/core.h"
#include "export/input.h"
#include "export/pftrace.h"
#include "trace/samples.h"
#include "trace/trace.h"

typedef struct pbr {
  const uint8_t *p, *end;
  int bad;
} pbr;

__attribute__((always_inline)) static inline uint64_t rd_varint(pbr *r) {
  if (r->p < r->end && !(*r->p & 0x80)) return *r->p++; /* one byte: most */
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) {
      r->bad = 1;
      return 0;
    }
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  r->bad = 1;
  return 0;
}

/* Reads the next field: its number and wire type; for LEN, *sub is the
 * payload; for VARINT and I64, *v holds the value.  Both are always set
 * (empty, 0) for the other wire types, so a field of an unexpected type
 * never leaves a stale view of an earlier packet's buffer, which the file
 * reader has reallocated since. */
__attribute__((always_inline)) static inline int rd_field(pbr *r, uint32_t *field, int *wire, uint64_t *v, pbr *sub) {
  static const uint8_t none;
  sub->p = sub->end = &none;
  sub->bad = 0;
  *v = 0;
  if (r->p >= r->end || r->bad) return 0;
  uint64_t key = rd_varint(r);
  *field = (uint32_t)(key >> 3);
  *wire = (int)(key & 7);
  switch (*wire) {
  case PB_VARINT: *v = rd_varint(r); break;
  case PB_I64:
    if (r->end - r->p < 8) { r->bad = 1; return 0; }
    *v = 0;
    for (int i = 0; i < 8; i++) *v |= (uint64_t)r->p[i] << (8 * i);
    r->p += 8;
    break;
  case PB_I32:
    if (r->end - r->p < 4) { r->bad = 1; return 0; }
    r->p += 4;
    break;
  case PB_LEN: {
    uint64_t n = rd_varint(r);
    if (n > (uint64_t)(r->end - r->p)) { r->bad = 1; return 0; }
    sub->p = r->p;
    sub->end = r->p + n;
    sub->bad = 0;
    r->p += n;
    break;
  }
  default: r->bad = 1; return 0;
  }
  return !r->bad;
}

typedef struct trk {
  uint64_t uuid, parent;
  int64_t pid, tid;
  int is_proc, is_thread, is_counter;
  uint32_t name, desc;
  uint32_t track;    /* model track (threads), resolved lazily for others */
  int has_track;
} trk;

/* What a packet sequence set for the packets after: its clock 64 (an
 * incremental clock: real is its time at the snapshot, inc its value then,
 * acc its value now, mult its unit in ns), its default clock and track. */
typedef struct seqst {
  uint32_t seq;
  uint32_t default_clock;
  uint64_t track;
  int64_t real, inc, acc, mult;
} seqst;

typedef struct open_slice {
  uint64_t uuid;
  size_t ev;
} open_slice;

/* The strings a packet sequence interns for events (InternedData). */
enum { IID_NAMES = 1, IID_CATS, IID_ARGN, IID_STRV, IID_TABLES };

typedef struct rd {
  loom_trace *t;
  const char *path;
  loom__map iids[IID_TABLES];  /* IID_*: (sequence, iid) -> string id ([0] unused) */
  struct iid_slot { uint64_t key; uint32_t val, table; } iidc[1024]; /* in front of those four */
  loom__kind_cache kinds;      /* category id -> kind */
  loom__map tracks;            /* uuid -> index into trks */
  size_t trk_hit[64];          /* 1 + index into trks of recently found uuids (trk_of) */
  trk *trks;
  size_t ntrks, cap_trks;
  open_slice *open;
  size_t nopen, cap_open;
  loom__map flow_src;          /* flow id -> event index + 1 */
  loom__map flow_dst;
  seqst *seqs;                 /* per packet sequence */
  size_t nseqs, cap_seqs;
  loom__map seq_at;            /* sequence id -> index into seqs */
  loom__map is_json;           /* string id -> 2 JSON text, 1 not (checked once) */
  seqst *cur;                  /* the current packet's */
  int based;                   /* streaming: t->base_ns is set */
  int64_t ts;
  int64_t window_end_ts;
  const loom__sink *sink;     /* streaming: events go here in batches */
  const loom__flow_sink *fsink; /* streaming: flow ends (may be NULL) */
  uint32_t ext_key, corr_key; /* interned "External id", "correlation" */
  uint32_t role_key;          /* interned "loom_role": becomes the event's marks */
  uint32_t json_key;          /* interned "loom_json": which arguments are JSON */
  uint32_t unclosed_key;      /* interned "loom_unclosed": never ended in the trace read */
  loom__map pidmap;           /* device pids written apart (model_pid): file pid -> pid */
  uint32_t counter_key;       /* interned "loom_counter": a counter written as an instant */
  size_t counter_instant;     /* 1 + the index of the last such counter (joins no series) */
  int header_bad;             /* loom_header is not JSON (message set) */
  int role_unknown;           /* a loom_role word loom does not know was read */
  size_t flush_at;            /* streaming: flush when this many events are held */
  uint64_t flows_over;        /* flow ends past PF_EVENT_FLOWS on one event: not kept */
  uint64_t wrong_wire;        /* packet fields of a wire type they cannot have: skipped */
  uint64_t wrong_at, pkt_at;  /* offset of the first such packet, of the current one */
  /* CPU samples: InternedData's profiling tables, each iid -> */
  loom__map fnames, mpaths;   /* trace string id */
  loom__map mappings;         /* trace string id of its path */
  loom__map frames;           /* frame index in smp + 1 */
  loom__map callstacks;       /* leaf site in smp (0: empty) */
  loom__samples smp;
  char *stack;                /* scratch: a sample's stack text */
  size_t stack_cap;
  int oom;
} rd;

static uint32_t str_of(rd *r, const pbr *s) {
  uint32_t id = loom__strtab_intern(&r->t->strs, (const char *)s->p, (size_t)(s->end - s->p));
  if (!id && s->end > s->p) r->oom = 1;
  return id;
}

/* Event names, categories and argument names are interned per packet
 * sequence: keyed by (sequence, iid). */
static uint64_t seq_iid(const rd *r, uint64_t iid) {
  return r->cur ? iid ^ (uint64_t)r->cur->seq << 40 : iid;
}

/* The string id of iid in table (IID_*) for the current sequence (0:
 * none).  Events look their names, categories and argument names up by
 * iid: a direct-mapped cache in front of the maps (written through by
 * interned()) takes the hashing and the misses off most of them. */
static struct iid_slot *iid_slot(rd *r, uint32_t table, uint64_t key) {
  uint64_t h = (key ^ ((uint64_t)table << 56)) * 0x9e3779b97f4a7c15ull;
  return &r->iidc[h >> 54];
}

__attribute__((always_inline)) static inline uint32_t iid_get(rd *r, uint32_t table, uint64_t iid) {
  uint64_t key = seq_iid(r, iid);
  struct iid_slot *c = iid_slot(r, table, key);
  if (c->table == table && c->key == key) return c->val;
  uint64_t *v = loom__map_get(&r->iids[table], key);
  if (!v) return 0;
  c->key = key, c->table = table, c->val = (uint32_t)*v;
  return c->val;
}

static void interned(rd *r, pbr m) {
  uint32_t f;
  int w;
  uint64_t v;
  pbr sub, e;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (w != PB_LEN) continue;
    uint32_t table = f == PF_ID_EVENT_NAMES ? IID_NAMES : f == PF_ID_EVENT_CATEGORIES ? IID_CATS
                   : f == PF_ID_DEBUG_ANNOTATION_NAMES ? IID_ARGN
                   : f == PF_ID_DEBUG_ANNOTATION_STRING_VALUES ? IID_STRV : 0;
    loom__map *dst = table ? &r->iids[table] : f == PF_ID_FUNCTION_NAMES ? &r->fnames
                   : f == PF_ID_MAPPING_PATHS ? &r->mpaths : NULL;
    if (!dst) continue;
    uint64_t iid = 0;
    uint32_t name = 0, f2;
    int w2;
    while (rd_field(&sub, &f2, &w2, &v, &e)) {
      if (f2 == 1 && w2 == PB_VARINT) iid = v;
      if (f2 == 2 && w2 == PB_LEN) name = str_of(r, &e);
    }
    uint64_t key = table ? seq_iid(r, iid) : iid;
    if (iid && loom__map_put(dst, key, name)) r->oom = 1;
    struct iid_slot *c = table ? iid_slot(r, table, key) : NULL;
    if (c && c->table == table && c->key == key) c->val = name; /* written through */
  }
}

/* ---- CPU samples: profiling tables and PerfSample ----------------------- */
static const char *iid_str(rd *r, loom__map *m, uint64_t iid) {
  uint64_t *id = iid ? loom__map_get(m, iid) : NULL;
  return id ? loom__trace_cstr(r->t, (uint32_t)*id) : "";
}

/* A mapping's path: loom writes it as one component, kept as it is; other
 * producers split it ("system", "lib64", "libc.so"), joined with "/"s. */
static void profile_mapping(rd *r, pbr m) {
  uint64_t iid = 0, v;
  uint32_t f;
  int w, parts = 0;
  pbr sub;
  char path[4096], one[4096];
  size_t n = 0;
  one[0] = 0;
  while (rd_field(&m, &f, &w, &v, &sub)) {
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

static void profile_frame(rd *r, pbr m) {
  uint64_t iid = 0, fn = 0, map = 0, pc = 0, v;
  uint32_t f;
  int w;
  pbr sub;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (w != PB_VARINT) continue;
    if (f == PF_FRAME_IID) iid = v;
    else if (f == PF_FRAME_FUNCTION_NAME_ID) fn = v;
    else if (f == PF_FRAME_MAPPING_ID) map = v;
    else if (f == PF_FRAME_REL_PC) pc = v;
  }
  if (!iid) return;
  long i = loom__samples_frame(&r->smp, iid_str(r, &r->fnames, fn), iid_str(r, &r->mappings, map), pc);
  if (i < 0 || loom__map_put(&r->frames, iid, (uint64_t)i + 1)) r->oom = 1;
}

/* A callstack (outermost frame first) as the call site of its leaf; a
 * frame id the file never interned is left out. */
static void profile_callstack(rd *r, pbr m) {
  uint64_t iid = 0, v;
  uint32_t f, site = 0;
  int w;
  pbr sub;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (f == PF_CALLSTACK_IID && w == PB_VARINT) iid = v;
    uint64_t *fi = f == PF_CALLSTACK_FRAME_IDS && w == PB_VARINT ? loom__map_get(&r->frames, v) : NULL;
    if (fi && !(site = loom__samples_site(&r->smp, site, (uint32_t)(*fi - 1)))) r->oom = 1;
  }
  if (iid && loom__map_put(&r->callstacks, iid, site)) r->oom = 1;
}

/* Mappings, then frames, then callstacks, whatever their order in m. */
static void interned_profile(rd *r, pbr m) {
  static const uint32_t order[] = {PF_ID_MAPPINGS, PF_ID_FRAMES, PF_ID_CALLSTACKS};
  for (int pass = 0; pass < 3; pass++) {
    pbr c = m, sub;
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
static void perf_sample(rd *r, pbr m) {
  uint64_t pid = 0, tid = 0, cs = 0, v;
  uint32_t f;
  int w, has_cs = 0;
  pbr sub;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (w != PB_VARINT) continue;
    if (f == PF_PS_PID) pid = v;
    else if (f == PF_PS_TID) tid = v;
    else if (f == PF_PS_CALLSTACK_IID) cs = v, has_cs = 1;
  }
  if (!has_cs || m.bad) return;
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
  const char *name = leaf ? loom__samples_frame_label(&r->smp, r->smp.sites[leaf - 1].frame, label, sizeof label)
                          : "[unknown]";
  loom__ev e = {.ts = r->ts, .name = loom__trace_str(t, name), .cat = loom__trace_str(t, "cpu_sample"),
                .track = track, .kind = LOOM_KIND_SAMPLE, .ph = LOOM__PH_INSTANT};
  if (loom__trace_add_ev(t, &e) || loom__trace_add_arg_str(t, "stack", r->stack)) r->oom = 1;
}

/* The descriptor of track uuid (NULL: none); the last few found are
 * remembered by index (events come in runs on one track). */
static trk *trk_of(rd *r, uint64_t uuid) {
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
static int model_pid(rd *r, trk *k) {
  static const char mark[] = "loom: device pid ";
  const char *d = k->desc ? loom__trace_cstr(r->t, k->desc) : "";
  if (k->is_proc && !strncmp(d, mark, sizeof mark - 1)) {
    char *end;
    errno = 0;
    long long pid = strtoll(d + sizeof mark - 1, &end, 10);
    if (!errno && end != d + sizeof mark - 1 && !*end && !loom__map_get(&r->pidmap, (uint64_t)k->pid) &&
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

static void descriptor(rd *r, pbr m) {
  trk k;
  memset(&k, 0, sizeof k);
  uint32_t f, f2;
  int w, w2;
  uint64_t v;
  pbr sub, e;
  uint32_t labels = 0;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (f == PF_TD_UUID && w == PB_VARINT) k.uuid = v;
    else if (f == PF_TD_PARENT_UUID && w == PB_VARINT) k.parent = v;
    else if (f == PF_TD_NAME && w == PB_LEN) k.name = str_of(r, &sub);
    else if (f == PF_TD_DESCRIPTION && w == PB_LEN) k.desc = str_of(r, &sub);
    else if (f == PF_TD_COUNTER) k.is_counter = 1;
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
    if (loom__trace_track(r->t, k.pid, k.tid, NULL, device ? loom__device_of_pid(k.pid) : LOOM_DEVICE_HOST,
                          &k.track))
      r->oom = 1;
    else r->t->tracks[k.track].name = k.name;
    k.has_track = 1;
    if (!loom__trace_proc(r->t, k.pid)) r->oom = 1;
  }
  if (!k.uuid || trk_of(r, k.uuid)) return;
  if (LOOM__PUSH(r->trks, r->ntrks, r->cap_trks, k) || loom__map_put(&r->tracks, k.uuid, r->ntrks - 1))
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

/* The model track an event on uuid goes to (async and counter tracks hang
 * off a thread track); NULL for tracks loom does not model (global). */
static trk *event_track(rd *r, uint64_t uuid, trk **own) {
  trk *k = trk_of(r, uuid);
  *own = k;
  /* a file's parents can form a loop: a chain longer than any real one
   * (process > thread > counter or async track) ends the walk */
  for (int up = 0; k && !k->has_track && k->parent; up++) k = up < 16 ? trk_of(r, k->parent) : NULL;
  return k && k->has_track ? k : NULL;
}

enum { PF_EVENT_FLOWS = 64 }; /* flows kept per event and way; more are counted */

typedef struct te_fields {
  uint64_t type, uuid, name_iid, cat_iid;
  uint32_t name, cat;
  double dvalue;
  int has_value;
  uint64_t flows_out[PF_EVENT_FLOWS], flows_in[PF_EVENT_FLOWS];
  int nout, nin;
} te_fields;

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
static int is_json_str(rd *r, uint32_t id) {
  uint64_t *k = loom__map_get(&r->is_json, id);
  if (k) return *k == 2;
  int ok = is_json(loom__trace_cstr(r->t, id));
  if (loom__map_put(&r->is_json, id, ok ? 2 : 1)) r->oom = 1;
  return ok;
}

static void json_marks(rd *r, const loom__ev *e, const char *s) {
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

static void annotation(rd *r, pbr m, loom__ev *e) {
  uint32_t f;
  int w;
  uint64_t v;
  pbr sub;
  loom__targ a = {0};
  int have = 0;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (f == PF_DA_NAME_IID && w == PB_VARINT) {
      a.key = iid_get(r, IID_ARGN, v);
    } else if (f == PF_DA_NAME && w == PB_LEN) a.key = str_of(r, &sub);
    else if (f == PF_DA_INT && w == PB_VARINT) a.type = LOOM_ARG_INT, a.v.i = (int64_t)v, have = 1;
    else if (f == PF_DA_UINT && w == PB_VARINT) a.type = LOOM_ARG_UINT, a.v.u = v, have = 1;
    else if (f == PF_DA_BOOL && w == PB_VARINT) a.type = LOOM_ARG_INT, a.v.i = v != 0, have = 1;
    else if (f == PF_DA_DOUBLE && w == PB_I64) a.type = LOOM_ARG_DOUBLE, memcpy(&a.v.d, &v, 8), have = 1;
    else if (f == PF_DA_STRING && w == PB_LEN) a.type = LOOM_ARG_STRING, a.v.s = str_of(r, &sub), have = 1;
    else if (f == PF_DA_STRING_VALUE_IID && w == PB_VARINT) {
      a.type = LOOM_ARG_STRING, a.v.s = iid_get(r, IID_STRV, v), have = 1;
    }
  }
  if (!have) return;
  uint64_t num = a.type == LOOM_ARG_UINT ? a.v.u : (uint64_t)a.v.i;
  if (a.key == r->ext_key && a.type != LOOM_ARG_STRING) e->external_id = num;
  else if (a.key == r->corr_key && a.type != LOOM_ARG_STRING) e->correlation = num;
  else if (a.key == r->role_key && a.type == LOOM_ARG_STRING) {
    const char *val = loom__trace_cstr(r->t, a.v.s);
    e->flags |= (uint16_t)(loom__role_parse(val, strlen(val), &r->role_unknown) << LOOM__EV_ROLE_SHIFT);
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

static void track_event(rd *r, pbr m) {
  te_fields x; /* the flow arrays are read up to nout and nin only: not cleared (1 KiB an event) */
  x.type = x.name_iid = x.cat_iid = 0;
  x.name = x.cat = 0;
  x.dvalue = 0;
  x.has_value = x.nout = x.nin = 0;
  x.uuid = r->cur ? r->cur->track : 0; /* the sequence's default track */
  uint32_t f;
  int w;
  uint64_t v;
  pbr sub;
  pbr ann[64];
  int nann = 0;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (f == PF_TE_TYPE && w == PB_VARINT) x.type = v;
    else if (f == PF_TE_TRACK_UUID && w == PB_VARINT) x.uuid = v;
    else if (f == PF_TE_NAME_IID && w == PB_VARINT) {
      x.name = iid_get(r, IID_NAMES, v);
    } else if (f == PF_TE_NAME && w == PB_LEN) x.name = str_of(r, &sub);
    else if (f == PF_TE_CATEGORY_IIDS && w == PB_VARINT) {
      x.cat = iid_get(r, IID_CATS, v);
    } else if (f == PF_TE_CATEGORIES && w == PB_LEN) x.cat = str_of(r, &sub);
    else if (f == PF_TE_DOUBLE_COUNTER_VALUE && w == PB_I64) memcpy(&x.dvalue, &v, 8), x.has_value = 1;
    else if (f == PF_TE_COUNTER_VALUE && w == PB_VARINT) x.dvalue = (double)(int64_t)v, x.has_value = 1;
    else if (is_flow(f, w, 0) && x.nout < PF_EVENT_FLOWS) x.flows_out[x.nout++] = v;
    else if (is_flow(f, w, 1) && x.nin < PF_EVENT_FLOWS) x.flows_in[x.nin++] = v;
    else if (is_flow(f, w, 0) || is_flow(f, w, 1)) r->flows_over++;
    else if (f == PF_TE_DEBUG_ANNOTATIONS && w == PB_LEN && nann < 64) ann[nann++] = sub;
  }
  trk *own;
  trk *k = event_track(r, x.uuid, &own);
  if (!k) { /* a global track: loom's "Record Window End" marker */
    if (x.type == PF_TYPE_INSTANT && !strcmp(loom__trace_cstr(r->t, x.name), "Record Window End")) {
      r->t->window_end = 1;
      r->window_end_ts = r->ts;
    }
    return;
  }
  loom_trace *t = r->t;
  if (x.type == PF_TYPE_SLICE_END) {
    for (size_t i = r->nopen; i-- > 0;) {
      if (r->open[i].uuid != x.uuid) continue;
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
      break;
    }
    return;
  }
  loom__ev e = {.ts = r->ts, .name = x.name, .cat = x.cat, .track = k->track,
                .kind = (uint8_t)loom__kind_of_cat_id(&r->kinds, t, x.cat), .ph = LOOM__PH_COMPLETE};
  if (x.type == PF_TYPE_COUNTER) {
    e.ph = LOOM__PH_COUNTER;
    e.kind = LOOM_KIND_COUNTER;
    e.name = own->name;
    loom__targ a = {.key = own->desc ? own->desc : own->name, .type = LOOM_ARG_DOUBLE};
    a.v.d = x.dvalue;
    int join = r->counter_instant != t->nev && same_counter_event(t, &e, a.key);
    if (!join && loom__trace_add_ev(t, &e)) { r->oom = 1; return; }
    if (loom__trace_add_arg(t, &a)) r->oom = 1;
    return;
  }
  if (x.type == PF_TYPE_INSTANT) {
    e.ph = LOOM__PH_INSTANT;
    if (e.kind == LOOM_KIND_MARKER && strcmp(loom__trace_cstr(t, x.cat), "marker")) e.kind = LOOM_KIND_INSTANT;
  } else if (own != k && own->desc && !strncmp(loom__trace_cstr(t, own->desc), "async ", 6)) {
    e.ph = LOOM__PH_ASYNC;
  }
  if (loom__trace_add_ev(t, &e)) { r->oom = 1; return; }
  loom__ev *added = &t->ev[t->nev - 1];
  for (int i = 0; i < nann; i++) annotation(r, ann[i], added);
  added->kind = (uint8_t)loom__kind_of_marks((loom_kind)added->kind, LOOM__EV_ROLE_OF(added),
                                             added->ph == LOOM__PH_INSTANT);
  if (added->ph == LOOM__PH_COUNTER) { /* an instant marked loom_counter */
    added->kind = LOOM_KIND_COUNTER;
    r->counter_instant = t->nev;
  }
  if (added->ph == LOOM__PH_ASYNC)
    added->correlation = strtoull(loom__trace_cstr(t, own->desc) + 6, NULL, 10);
  if (loom__kind_on_device(added->kind) && t->tracks[k->track].device == LOOM_DEVICE_HOST)
    for (size_t i = 0; i < t->ntracks; i++)
      if (t->tracks[i].pid == t->tracks[k->track].pid) t->tracks[i].device = loom__device_of_pid(t->tracks[i].pid);
  for (int i = 0; r->sink && r->fsink && i < x.nout + x.nin; i++) {
    int out = i < x.nout; /* streaming: the ends bind to this event */
    uint64_t id = out ? x.flows_out[i] : x.flows_in[i - x.nout];
    if (r->fsink->flow(r->fsink->ctx, t, id, added->ts, added->track, out ? 's' : 'f', 1, 0, 0)) r->oom = 1;
  }
  for (int i = 0; !r->sink && i < x.nout; i++) loom__map_put(&r->flow_src, x.flows_out[i], t->nev);
  for (int i = 0; !r->sink && i < x.nin; i++) loom__map_put(&r->flow_dst, x.flows_in[i], t->nev);
  if (x.type == PF_TYPE_SLICE_BEGIN) {
    added->flags |= LOOM__EV_OPEN;
    open_slice o = {x.uuid, t->nev - 1};
    if (LOOM__PUSH(r->open, r->nopen, r->cap_open, o)) r->oom = 1;
  }
}

/* A clock snapshot: clock 64 of the sequence starts at its value, which
 * is REALTIME's in the same snapshot (loom's files: at value 0, in units of
 * unit_multiplier_ns), or, without REALTIME, taken as it is. */
static void clock_snapshot(rd *r, seqst *q, pbr m) {
  uint32_t f, f2;
  int w, w2, has_real = 0, has_loom = 0;
  uint64_t v, real = 0, loom = 0, mult = 1;
  pbr sub, e;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (f != PF_CS_CLOCKS || w != PB_LEN) continue;
    uint64_t id = 0, ts = 0, unit = 1;
    while (rd_field(&sub, &f2, &w2, &v, &e)) {
      if (f2 == PF_CLK_ID) id = v;
      if (f2 == PF_CLK_TIMESTAMP) ts = v;
      if (f2 == PF_CLK_UNIT_MULTIPLIER && v) unit = v;
    }
    if (id == PF_CLOCK_LOOM) loom = ts, mult = unit, has_loom = 1;
    if (id == PF_CLOCK_REALTIME) real = ts, has_real = 1;
  }
  (void)r;
  if (!has_loom) return;
  q->mult = (int64_t)mult;
  q->inc = q->acc = (int64_t)(loom * mult);
  q->real = has_real ? (int64_t)real : q->inc;
}

/* The state of packet sequence seq, made on first use (NULL: out of memory). */
static seqst *seq_of(rd *r, uint32_t seq) {
  if (r->cur && r->cur->seq == seq) return r->cur; /* the same sequence as the last packet */
  uint64_t *i = loom__map_get(&r->seq_at, seq);
  if (i) return &r->seqs[*i];
  seqst q = {.seq = seq, .mult = 1};
  if (LOOM__PUSH(r->seqs, r->nseqs, r->cap_seqs, q) || loom__map_put(&r->seq_at, seq, r->nseqs - 1)) {
    r->oom = 1;
    return NULL;
  }
  return &r->seqs[r->nseqs - 1];
}

/* Streaming: times go out relative to a base, as a JSON file's do (the
 * base the JSON writer would pick, from the first time read), and the
 * trace's base_ns says what to add. */
static int64_t stream_time(rd *r, int64_t ts) {
  if (!r->based) {
    r->based = 1;
    r->t->base_ns = loom__base_of(ts);
  }
  return ts - r->t->base_ns;
}

/* Packet times are kept within what a JSON trace's clamped start and
 * duration can reach (docs/formats.md): a start at -+LOOM__TIME_LIMIT, an
 * end up to twice the limit.  Past that (a hostile file) the time is
 * clamped and counted as a bad value, so that spans and differences of
 * times stay within 64 bits downstream. */
#define PF_TIME_MIN (-LOOM__TIME_LIMIT)
#define PF_TIME_MAX (2 * LOOM__TIME_LIMIT)
static void time_out_of_range(rd *r) {
  char text[40];
  int n = snprintf(text, sizeof text, "%lld ns", (long long)r->ts);
  loom__trace_bad(r->t, LOOM__BAD_TIME_RANGE, "ts", text, (size_t)n, NULL);
  r->ts = r->ts < PF_TIME_MIN ? PF_TIME_MIN : PF_TIME_MAX;
}

/* A packet field loom reads that came with another wire type. */
static int wrong_wire(uint32_t f, int w) {
  switch (f) {
  case PF_PKT_TIMESTAMP:
  case PF_PKT_TIMESTAMP_CLOCK_ID: return w != PB_VARINT;
  case PF_PKT_TRACK_EVENT:
  case PF_PKT_TRACK_DESCRIPTOR:
  case PF_PKT_INTERNED_DATA:
  case PF_PKT_CLOCK_SNAPSHOT:
  case PF_PKT_CHROME_EVENTS:
  case PF_PKT_PERF_SAMPLE:
  case PF_PKT_DEFAULTS: return w != PB_LEN;
  default: return 0;
  }
}

/* ChromeEventBundle: the metadata entry "loom_header" holds the JSON
 * writer's top-level keys (pftrace_write.c), read as the JSON reader reads
 * them. */
static void chrome_events(rd *r, pbr m) {
  uint32_t f, f2;
  int w, w2;
  uint64_t v;
  pbr sub, e;
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (f != PF_CEB_METADATA || w != PB_LEN) continue;
    pbr name = {0}, value = {0};
    while (rd_field(&sub, &f2, &w2, &v, &e)) {
      if (f2 == PF_CM_NAME && w2 == PB_LEN) name = e;
      if (f2 == PF_CM_STRING && w2 == PB_LEN) value = e;
    }
    size_t n = (size_t)(name.end - name.p);
    if (!value.p || n != strlen(PF_HEADER_NAME) || memcmp(name.p, PF_HEADER_NAME, n)) continue;
    if (loom__read_json_header(r->t, r->path, (const char *)value.p, (size_t)(value.end - value.p)))
      r->header_bad = 1;
  }
}

static void packet(rd *r, pbr m) {
  uint32_t f, f2;
  int w, w2;
  uint64_t v, ts = 0, clock = 0, seq = 0;
  int has_ts = 0, has_clock = 0;
  pbr sub, e, te = {0}, td = {0}, in = {0}, cs = {0}, ce = {0}, ps = {0}, defaults = {0};
  while (rd_field(&m, &f, &w, &v, &sub)) {
    if (wrong_wire(f, w) && !r->wrong_wire++) r->wrong_at = r->pkt_at;
    switch (f) {
    case PF_PKT_TIMESTAMP: if (w == PB_VARINT) ts = v, has_ts = 1; break;
    case PF_PKT_TIMESTAMP_CLOCK_ID: if (w == PB_VARINT) clock = v, has_clock = 1; break;
    case PF_PKT_SEQ_ID: if (w == PB_VARINT) seq = v; break;
    case PF_PKT_TRACK_EVENT: if (w == PB_LEN) te = sub; break;
    case PF_PKT_TRACK_DESCRIPTOR: if (w == PB_LEN) td = sub; break;
    case PF_PKT_INTERNED_DATA: if (w == PB_LEN) in = sub; break;
    case PF_PKT_CLOCK_SNAPSHOT: if (w == PB_LEN) cs = sub; break;
    case PF_PKT_CHROME_EVENTS: if (w == PB_LEN) ce = sub; break;
    case PF_PKT_PERF_SAMPLE: if (w == PB_LEN) ps = sub; break;
    case PF_PKT_DEFAULTS: if (w == PB_LEN) defaults = sub; break;
    default: break;
    }
  }
  if (m.bad) return;
  seqst *q = r->cur = seq_of(r, (uint32_t)seq);
  if (!q) return;
  while (defaults.p && rd_field(&defaults, &f2, &w2, &v, &e)) {
    if (f2 == PF_TPD_TIMESTAMP_CLOCK_ID && w2 == PB_VARINT) q->default_clock = (uint32_t)v;
    if (f2 != PF_TPD_TRACK_EVENT_DEFAULTS || w2 != PB_LEN) continue;
    uint32_t f3;
    int w3;
    pbr e3;
    while (rd_field(&e, &f3, &w3, &v, &e3))
      if (f3 == PF_TED_TRACK_UUID && w3 == PB_VARINT) q->track = v;
  }
  if (cs.p) clock_snapshot(r, q, cs);
  if (in.p) interned(r, in), interned_profile(r, in);
  if (td.p) descriptor(r, td);
  if (has_ts) {
    uint32_t c = has_clock ? (uint32_t)clock : q->default_clock;
    if (c == PF_CLOCK_LOOM) { /* a delta, which may be negative */
      q->acc = (int64_t)((uint64_t)q->acc + ts * (uint64_t)q->mult);
      r->ts = (int64_t)((uint64_t)q->real + ((uint64_t)q->acc - (uint64_t)q->inc));
    } else {
      r->ts = (int64_t)ts;
    }
    if (r->sink) r->ts = stream_time(r, r->ts);
    if (r->ts < PF_TIME_MIN || r->ts > PF_TIME_MAX) time_out_of_range(r);
  }
  if (te.p) track_event(r, te);
  if (ps.p) perf_sample(r, ps);
  if (ce.p) chrome_events(r, ce);
}

static void rd_free(rd *r) {
  for (int i = 0; i < IID_TABLES; i++) loom__map_free(&r->iids[i]);
  loom__map_free(&r->tracks);
  loom__map_free(&r->flow_src);
  loom__map_free(&r->flow_dst);
  loom__map_free(&r->fnames);
  loom__map_free(&r->mpaths);
  loom__map_free(&r->mappings);
  loom__map_free(&r->frames);
  loom__map_free(&r->callstacks);
  loom__map_free(&r->seq_at);
  loom__map_free(&r->is_json);
  free(r->seqs);
  loom__samples_free(&r->smp);
  free(r->stack);
  free(r->trks);
  free(r->open);
  loom__map_free(&r->pidmap);
}

/* Streaming: hands the closed events to the sink; at the end (all) also
 * the ones never closed. */
static int flush(rd *r, int all) {
  size_t n = 0, **keep = NULL;
  if (all) {
    loom__trace_close_open(r->t);
  } else if (r->nopen) {
    keep = malloc(r->nopen * sizeof *keep);
    if (!keep) return -1;
    for (size_t i = 0; i < r->nopen; i++) keep[n++] = &r->open[i].ev;
  }
  int rc = loom__trace_stream_flush(r->t, r->sink, keep, n);
  free(keep);
  r->flush_at = 2 * r->t->nev + LOOM__STREAM_BATCH; /* linear with open slices */
  return rc;
}

/* A flush between two series of one counter event would cut it in two: the
 * last event, when a counter, stays (as an open one does) for its next series. */
static int flush_but_counter(rd *r) {
  loom__ev *last = &r->t->ev[r->t->nev - 1];
  int hold = last->ph == LOOM__PH_COUNTER && !(last->flags & LOOM__EV_OPEN);
  if (hold) last->flags |= LOOM__EV_OPEN;
  int rc = flush(r, 0);
  if (hold) r->t->ev[r->t->nev - 1].flags &= (uint16_t)~LOOM__EV_OPEN;
  return rc;
}

static int finish(rd *r) {
  loom_trace *t = r->t;
  if (r->sink) {
    if (flush(r, 1) != 0) return -1;
    t->start_ns = t->end_ns = 0;
    if (t->window_end) t->end_ns = r->window_end_ts + t->base_ns;
    return 0;
  }
  for (size_t i = 0; i < r->flow_src.cap; i++) {
    uint64_t id = r->flow_src.keys[i];
    if (!id) continue;
    uint64_t *to = loom__map_get(&r->flow_dst, id);
    if (!to) continue;
    /* a shared id the writer made unique: back to the id */
    uint64_t orig = id & PF_FLOW_DUP && id & 0xffffffffu ? id & 0xffffffffu : id;
    loom__flow f = {(uint32_t)(r->flow_src.vals[i] - 1), (uint32_t)(*to - 1), orig};
    if (LOOM__PUSH(t->flows, t->nflows, t->cap_flows, f)) return -1;
  }
  loom__trace_close_open(t);
  loom__trace_span(t);
  if (t->window_end) t->end_ns = r->window_end_ts;
  return 0;
}

/* ---- the packets ---------------------------------------------------------
 * An uncompressed file is mapped and its packets read in place (input.h: no
 * gzread per packet); else zlib reads each into one buffer. */
typedef struct pfin {
  gzFile f;
  const uint8_t *map;
  size_t map_len;
  uint64_t dropped;
  uint8_t *buf;
  size_t cap;
} pfin;

/* One byte of the packet stream, or EOF. */
static int pfin_byte(pfin *in, uint64_t *offset) {
  if (!in->map) {
    int c = gzgetc(in->f);
    if (c != EOF) ++*offset;
    return c;
  }
  return *offset < in->map_len ? in->map[(*offset)++] : EOF;
}

/* The next packet's payload (*p, *len; its header at *at): 1, 0 at the end,
 * -1 with *st set. */
static int next_packet(pfin *in, const char *path, uint64_t *offset, uint64_t *at, const uint8_t **p,
                       uint64_t *len, loom_status *st) {
  /* Each packet: tag 0x0a, varint length, payload. */
  *at = *offset;
  int c = pfin_byte(in, offset);
  if (c == EOF) return 0;
  if (c != 0x0a) {
    *st = loom__fail(LOOM_EFORMAT, "%s: not a Perfetto trace packet at byte offset %llu", path,
                     (unsigned long long)*at);
    return -1;
  }
  int shift = 0, b = 0;
  *len = 0;
  do {
    b = pfin_byte(in, offset);
    if (b == EOF || shift > 56) break;
    *len |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (b == EOF || *len > (1u << 30)) {
    *st = loom__fail(LOOM_EFORMAT, "%s: truncated or corrupt packet header at byte offset %llu", path,
                     (unsigned long long)*at);
    return -1;
  }
  int whole;
  if (in->map) {
    whole = *len <= in->map_len - *offset;
    *p = in->map + *offset;
    loom__input_drop(in->map, &in->dropped, *offset);
  } else {
    if (*len > in->cap) {
      uint8_t *nb = realloc(in->buf, *len);
      if (!nb) {
        *st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
        return -1;
      }
      in->buf = nb;
      in->cap = *len;
    }
    whole = gzread(in->f, in->buf, (unsigned)*len) == (int)*len;
    *p = in->buf;
  }
  if (!whole) {
    *st = loom__fail(LOOM_EFORMAT, "%s: truncated: the packet at byte offset %llu needs %llu "
                     "bytes, the file ends first", path, (unsigned long long)*at, (unsigned long long)*len);
    return -1;
  }
  *offset += *len;
  return 1;
}

loom_status loom__read_pftrace(const char *path, const loom__sink *sink, const loom__flow_sink *flows,
                               loom_trace **out) {
  *out = NULL;
  gzFile fp = gzopen(path, "rb"); /* a .pftrace.gz, or a plain file passed through */
  if (!fp) return loom__fail(LOOM_EIO, "cannot open %s: %s", path, strerror(errno));
  rd r;
  memset(&r, 0, sizeof r);
  loom__samples_init(&r.smp);
  r.t = loom__trace_new();
  r.path = path;
  r.sink = sink;
  r.fsink = flows;
  r.flush_at = LOOM__STREAM_BATCH;
  if (r.t) {
    r.ext_key = loom__trace_str(r.t, "External id");
    r.corr_key = loom__trace_str(r.t, "correlation");
    r.role_key = loom__trace_str(r.t, "loom_role");
    r.json_key = loom__trace_str(r.t, "loom_json");
    r.unclosed_key = loom__trace_str(r.t, "loom_unclosed");
    r.counter_key = loom__trace_str(r.t, "loom_counter");
  }
  pfin in = {.f = fp};
  in.map = loom__input_map(fp, path, &in.map_len, NULL);
  uint64_t offset = 0, at, len;
  const uint8_t *p;
  loom_status st = r.t ? LOOM_OK : LOOM_ENOMEM;
  while (st == LOOM_OK && next_packet(&in, path, &offset, &at, &p, &len, &st) == 1) {
    if (!len) continue; /* an empty packet: nothing to read */
    pbr m = {p, p + len, 0};
    r.pkt_at = at;
    packet(&r, m);
    if (sink && r.t->nev >= r.flush_at && flush_but_counter(&r) != 0) r.oom = 1;
    if (r.oom) st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
    else if (r.header_bad) st = LOOM_EFORMAT; /* message set by the JSON reader */
  }
  if (st == LOOM_OK && offset == 0) st = loom__fail(LOOM_EFORMAT, "%s: empty file", path);
  if (st == LOOM_OK && r.role_unknown && loom__role_warning(r.t, path))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  if (st == LOOM_OK && r.flows_over) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %llu flow ends past %d on one event were not kept", path,
             (unsigned long long)r.flows_over, (int)PF_EVENT_FLOWS);
    if (loom__trace_add_warning(r.t, msg)) st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  }
  if (st == LOOM_OK && r.wrong_wire) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %llu packet fields with a wire type they cannot have were skipped "
             "(the first in the packet at byte offset %llu)", path, (unsigned long long)r.wrong_wire,
             (unsigned long long)r.wrong_at);
    if (loom__trace_add_warning(r.t, msg)) st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  }
  if (st == LOOM_OK && loom__trace_bad_warnings(r.t, path))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  if (st == LOOM_OK && finish(&r)) st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  if (in.map) munmap((void *)in.map, in.map_len);
  free(in.buf);
  gzclose(fp);
  rd_free(&r);
  if (st != LOOM_OK) {
    loom_trace_free(r.t);
    return st;
  }
  *out = r.t;
  return LOOM_OK;
}
