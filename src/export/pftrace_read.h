/*
 * pftrace_read.h - the Perfetto reader's state and protobuf field reading,
 * shared by pftrace_read.c (packets, clocks, interning, the input) and
 * pftrace_read_events.c (track descriptors, track events, CPU samples).
 */
#ifndef LOOM_PFTRACE_READ_H
#define LOOM_PFTRACE_READ_H

#include <stdint.h>

#include "base/base.h"
#include "export/export.h"
#include "export/memory.h"
#include "export/outfile.h"
#include "export/pftrace.h"
#include "trace/samples.h"
#include "trace/trace.h"
#include "util/util.h"

/* The bytes of a protobuf message being read, field by field (rd_field). */
typedef struct pb_span {
  const uint8_t *p, *end;
  int bad;
} pb_span;

__attribute__((always_inline)) static inline uint64_t rd_varint(pb_span *r) {
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
__attribute__((always_inline)) static inline int rd_field(pb_span *r, uint32_t *field, int *wire,
                                                          uint64_t *v, pb_span *sub) {
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

/* A track the file describes (TrackDescriptor), by its uuid. */
typedef struct pf_track {
  uint64_t uuid, parent;
  int64_t pid, tid;
  int is_proc, is_thread, is_counter;
  int derived;       /* a memory counter loom derives (export/memory.h): skipped */
  uint32_t name, desc;
  uint32_t track;    /* model track (threads), resolved lazily for others */
  int has_track;
} pf_track;

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

/* The reader of one file: the trace it fills and what the packets set. */
typedef struct pf_reader {
  loom_trace *t;
  const char *path;
  loom__map iids[IID_TABLES];  /* IID_*: (sequence, iid) -> string id ([0] unused) */
  struct iid_slot { uint64_t key; uint32_t val, table; } iidc[1024]; /* in front of those four */
  loom__kind_cache kinds;      /* category id -> class (loom__cat_class) */
  loom__map tracks;            /* uuid -> index into trks */
  size_t trk_hit[64];          /* 1 + index into trks of recently found uuids (trk_of) */
  pf_track *trks;
  size_t ntrks, cap_trks;
  open_slice *open;
  size_t nopen, cap_open;
  loom__map flow_src;          /* flow id -> event index + 1 */
  loom__map flow_dst;
  seqst *seqs;                 /* per packet sequence */
  size_t nseqs, cap_seqs;
  loom__map seq_at;            /* sequence id -> index into seqs */
  uint8_t *is_json;            /* by string id: 2 JSON text, 1 not, 0 not checked yet */
  size_t cap_is_json;
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
  uint32_t kind_key;          /* interned "loom_kind": becomes the event's kind */
  int ev_kind;                /* 1 + the kind the event being read names, 0: none */
  int kind_unknown;           /* a loom_kind value loom does not know was read */
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
  loom__out jtext;            /* scratch: an annotation's value as JSON text */
  int odd_value;              /* a part of it loom cannot read (no type it knows, too deep) */
  uint32_t nsynth;            /* process tracks given a thread track (PF_SYNTH_TID + n) */
  char *stack;                /* scratch: a sample's stack text */
  size_t stack_cap;
  int oom;
} pf_reader;

static inline uint32_t str_of(pf_reader *r, const pb_span *s) {
  uint32_t id = loom__strtab_intern(&r->t->strs, (const char *)s->p, (size_t)(s->end - s->p));
  if (!id && s->end > s->p) r->oom = 1;
  return id;
}

/* Event names, categories and argument names are interned per packet
 * sequence: keyed by (sequence, iid). */
static inline uint64_t seq_iid(const pf_reader *r, uint64_t iid) {
  return r->cur ? iid ^ (uint64_t)r->cur->seq << 40 : iid;
}

/* The string id of iid in table (IID_*) for the current sequence (0:
 * none).  Events look their names, categories and argument names up by
 * iid: a direct-mapped cache in front of the maps (written through by
 * interned()) takes the hashing and the misses off most of them. */
static inline struct iid_slot *iid_slot(pf_reader *r, uint32_t table, uint64_t key) {
  uint64_t h = (key ^ ((uint64_t)table << 56)) * 0x9e3779b97f4a7c15ull;
  return &r->iidc[h >> 54];
}

__attribute__((always_inline)) static inline uint32_t iid_get(pf_reader *r, uint32_t table,
                                                              uint64_t iid) {
  uint64_t key = seq_iid(r, iid);
  struct iid_slot *c = iid_slot(r, table, key);
  if (c->table == table && c->key == key) return c->val;
  uint64_t *v = loom__map_get(&r->iids[table], key);
  if (!v) return 0;
  c->key = key, c->table = table, c->val = (uint32_t)*v;
  return c->val;
}

enum { PF_EVENT_FLOWS = 64 }; /* flows kept per event and way; more are counted */

/* pftrace_read_args.c: the value of a debug annotation loom keeps as JSON
 * text or as a string (dicts, arrays, nested values, legacy JSON,
 * pointers): 1 with *id the text interned and *json whether it is JSON; 0
 * for a scalar the caller reads itself; -1 for a value of no type loom
 * reads (counted by the caller). */
int loom__pfr_value_text(pf_reader *r, pb_span msg, uint32_t *id, int *json);
void loom__pfr_descriptor(pf_reader *r, pb_span msg);
void loom__pfr_track_event(pf_reader *r, pb_span msg);
void loom__pfr_interned_profile(pf_reader *r, pb_span msg);
void loom__pfr_perf_sample(pf_reader *r, pb_span msg);

#endif
