/*
 * pftrace_write.h - the Perfetto writer's state and protobuf encoders,
 * shared by pftrace_write.c (lanes, packets, events, the plan) and
 * pftrace_write_tracks.c (track descriptors, CPU samples).
 */
#ifndef LOOM_PFTRACE_WRITE_H
#define LOOM_PFTRACE_WRITE_H

#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "export/export.h"
#include "export/memory.h"
#include "export/outfile.h"
#include "export/pftrace.h"
#include "trace/samples.h"
#include "trace/trace.h"
#include "util/util.h"

/* ---- a growable byte buffer with protobuf encoders ---------------------- */
typedef struct pb_buf {
  uint8_t *p;
  size_t n, cap;
  int oom;
} pb_buf;

static inline void pb_bytes(pb_buf *b, const void *s, size_t n) {
  if (!n) return; /* b->p may be NULL: never allocated, or its growth failed */
  if (b->n + n > b->cap && loom__grow((void **)&b->p, &b->cap, b->n + n, 1)) {
    b->oom = 1;
    return;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static inline void pb_varint(pb_buf *b, uint64_t v) {
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

static inline void pb_tag(pb_buf *b, uint32_t field, uint32_t wire) {
  pb_varint(b, (uint64_t)field << 3 | wire);
}
static inline void pb_uint(pb_buf *b, uint32_t field, uint64_t v) {
  pb_tag(b, field, PB_VARINT);
  pb_varint(b, v);
}
static inline void pb_sint(pb_buf *b, uint32_t field, int64_t v) { pb_uint(b, field, (uint64_t)v); }
static inline void pb_fixed64(pb_buf *b, uint32_t field, uint64_t v) {
  pb_tag(b, field, PB_I64);
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
  pb_bytes(b, le, 8);
}
static inline void pb_double(pb_buf *b, uint32_t field, double d) {
  uint64_t v;
  memcpy(&v, &d, 8);
  pb_fixed64(b, field, v);
}
static inline void pb_lenbytes(pb_buf *b, uint32_t field, const void *s, size_t n) {
  pb_tag(b, field, PB_LEN);
  pb_varint(b, n);
  pb_bytes(b, s, n);
}
static inline void pb_str(pb_buf *b, uint32_t field, const char *s) {
  pb_lenbytes(b, field, s, strlen(s));
}
/* A message built in m: a part of it lost to a failed allocation fails b. */
static inline void pb_msg(pb_buf *b, uint32_t field, const pb_buf *m) {
  pb_lenbytes(b, field, m->p, m->n);
  if (m->oom) b->oom = 1;
}

/* ---- lanes: one packet sequence per track of slices --------------------- */
/* Each thread track, and each of its tracks of overlapping slices, is a
 * lane: its own packet sequence (id: lane index + 1), whose defaults name
 * its track (no track_uuid per event) and its incremental clock (a delta
 * per packet, in units of the trace's time step).  Lane 0 is the misc
 * sequence (id 1): descriptors, the header, async ranges, CPU samples and
 * the window-end marker, each event naming its track. */
typedef struct lane {
  uint64_t uuid;            /* its track (0: the misc sequence) */
  uint32_t seq, track;
  uint32_t next;            /* the same track's next lane, or UINT32_MAX */
  uint16_t num;             /* 0: the thread's own track; k: overlapping slices k */
  int started;              /* its first packet (clock, defaults) is out */
  int64_t last;             /* the last timestamp written on it */
  uint32_t niid[4];         /* iids given on it: names, categories, argument names, string values */
  uint32_t *sev;            /* open slices: event, end; innermost last */
  int64_t *send;
  size_t depth, cap;
} lane;

/* The flows leaving (way 0) or entering (way 1) each event: while events go
 * in the model's order and the flows are sorted by that end, a cursor;
 * else chains built once (first[ev] -> flow, next[flow] -> flow). */
typedef struct flowway {
  size_t at;
  uint32_t *first, *next;
} flowway;

typedef struct writer {
  const loom_trace *t;
  loom__out *o;
  /* uuids: 1 + index; processes, then tracks, then counter and async tracks */
  uint64_t *track_uuid;      /* per trace track */
  uint64_t next_uuid;
  loom__map counter_tracks;  /* hash(track, name, key) -> uuid */
  loom__map async_tracks;    /* hash(track, id) -> uuid */
  lane *lanes;
  size_t nlanes, cap_lanes;
  uint32_t *lane0;           /* per trace track: its lane 0, or UINT32_MAX */
  loom__map iids;            /* (sequence, table, string id) -> iid on it */
  int64_t step;              /* every timestamp is t0 + a multiple of it (ns) */
  uint32_t iid_ext, iid_corr;   /* ids of "External id", "correlation" */
  uint32_t iid_role;            /* id of "loom_role" (the event's marks) */
  uint32_t iid_json;            /* id of "loom_json" (which arguments are JSON) */
  uint32_t iid_kind;            /* id of "loom_kind" (a kind the category does not imply) */
  loom__strtab texts;           /* texts the writer makes, as values: id text_base + theirs */
  uint32_t text_base;
  loom__cat_bytes cats;         /* category id -> class: which events need "loom_kind" */
  uint64_t dropped_overlap;
  uint64_t laned;               /* slices put on a track of overlapping slices */
  size_t last_series;           /* 1 + the last event written, when a counter's series */
  pb_buf pkt, te, tmp, interned, names;
  int oom;
  uint64_t *flow_id;   /* each flow's id in the file, when ids repeat (pf_flow_ids) */
  flowway way[2];
  /* CPU samples as PerfSample packets over interned frames and callstacks:
   * a function name's and a module's iid is its smp.strs id, a frame's its
   * index + 1, a callstack's its leaf site (index + 1) */
  loom__samples smp;
  loom__map site_of_ev;         /* event index + 1 -> leaf site */
  /* Memory events: their states in time order, the counter tracks of their
   * series (series * 2 + reserved + 1 -> uuid), each process's uuid */
  loom__memplan mem;
  loom__map mem_tracks, proc_uuids;
  uint8_t *seen_str, *seen_frame, *seen_site;
} writer;

void loom__pfw_emit_packet(writer *w, pb_buf *pkt);
void loom__pfw_put(writer *w, lane *L, int64_t ts, uint32_t field, const pb_buf *msg);
void loom__pfw_descriptor(writer *w, uint64_t uuid, uint64_t parent, const char *name,
                       const pb_buf *proc, const pb_buf *thread, int counter, const char *desc);
void loom__pfw_describe_tracks(writer *w);
uint64_t loom__pfw_counter_track(writer *w, const loom__ev *e, uint32_t key);
uint64_t loom__pfw_async_track(writer *w, const loom__ev *e);
uint64_t loom__pfw_lane_track(writer *w, uint32_t track, uint16_t num);
uint64_t loom__pfw_mem_track(writer *w, uint32_t series, int reserved);
int loom__pfw_samples_prepare(writer *w);
void loom__pfw_samples_free(writer *w);
uint32_t loom__pfw_perf_sample_site(writer *w, const loom__ev *e, uint32_t ev);
void loom__pfw_write_perf_sample(writer *w, const loom__ev *e, uint32_t site);

#endif
