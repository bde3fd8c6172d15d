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
 *
 * This file: packets, clocks, interned strings, the input and the model
 * finished; descriptors, events and samples are in pftrace_read_events.c,
 * the state they share in pftrace_read.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

#include "base/base.h"
#include "export/input.h"
#include "export/pftrace_read.h"
#include "trace/samples.h"
#include "trace/trace.h"
#include "util/util.h"

static void interned(pf_reader *r, pb_span msg) {
  uint32_t f;
  int w;
  uint64_t v;
  pb_span sub, e;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
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

/* A clock snapshot: clock 64 of the sequence starts at its value, which
 * is REALTIME's in the same snapshot (loom's files: at value 0, in units of
 * unit_multiplier_ns), or, without REALTIME, taken as it is. */
static void clock_snapshot(pf_reader *r, seqst *q, pb_span msg) {
  uint32_t f, f2;
  int w, w2, has_real = 0, has_loom = 0;
  uint64_t v, real = 0, loom = 0, mult = 1;
  pb_span sub, e;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
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
static seqst *seq_of(pf_reader *r, uint32_t seq) {
  if (r->cur && r->cur->seq == seq) return r->cur; /* the same sequence as the last packet */
  uint64_t *i = loom__map_get(&r->seq_at, seq);
  if (i) return &r->seqs[*i];
  seqst q = {.seq = seq, .mult = 1};
  if (LOOM__PUSH(r->seqs, r->nseqs, r->cap_seqs, q) ||
      loom__map_put(&r->seq_at, seq, r->nseqs - 1)) {
    r->oom = 1;
    return NULL;
  }
  return &r->seqs[r->nseqs - 1];
}

/* Streaming: times go out relative to a base, as a JSON file's do (the
 * base the JSON writer would pick, from the first time read), and the
 * trace's base_ns says what to add. */
static int64_t stream_time(pf_reader *r, int64_t ts) {
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
static void time_out_of_range(pf_reader *r) {
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
static void chrome_events(pf_reader *r, pb_span msg) {
  uint32_t f, f2;
  int w, w2;
  uint64_t v;
  pb_span sub, e;
  while (rd_field(&msg, &f, &w, &v, &sub)) {
    if (f != PF_CEB_METADATA || w != PB_LEN) continue;
    pb_span name = {0}, value = {0};
    while (rd_field(&sub, &f2, &w2, &v, &e)) {
      if (f2 == PF_CM_NAME && w2 == PB_LEN) name = e;
      if (f2 == PF_CM_STRING && w2 == PB_LEN) value = e;
    }
    size_t n = (size_t)(name.end - name.p);
    if (!value.p || n != strlen(PF_HEADER_NAME) || memcmp(name.p, PF_HEADER_NAME, n)) continue;
    int rc = loom__read_json_header(r->t, r->path, (const char *)value.p,
                                    (size_t)(value.end - value.p));
    if (rc == -2) r->oom = 1;
    else if (rc) r->header_bad = 1;
  }
}

static void packet(pf_reader *r, pb_span msg) {
  uint32_t f, f2;
  int w, w2;
  uint64_t v, ts = 0, clock = 0, seq = 0;
  int has_ts = 0, has_clock = 0;
  pb_span sub, e, te = {0}, td = {0}, in = {0}, cs = {0}, ce = {0}, ps = {0}, defaults = {0};
  while (rd_field(&msg, &f, &w, &v, &sub)) {
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
  if (msg.bad) return;
  seqst *q = r->cur = seq_of(r, (uint32_t)seq);
  if (!q) return;
  while (defaults.p && rd_field(&defaults, &f2, &w2, &v, &e)) {
    if (f2 == PF_TPD_TIMESTAMP_CLOCK_ID && w2 == PB_VARINT) q->default_clock = (uint32_t)v;
    if (f2 != PF_TPD_TRACK_EVENT_DEFAULTS || w2 != PB_LEN) continue;
    uint32_t f3;
    int w3;
    pb_span e3;
    while (rd_field(&e, &f3, &w3, &v, &e3))
      if (f3 == PF_TED_TRACK_UUID && w3 == PB_VARINT) q->track = v;
  }
  if (cs.p) clock_snapshot(r, q, cs);
  if (in.p) interned(r, in), loom__pfr_interned_profile(r, in);
  if (td.p) loom__pfr_descriptor(r, td);
  if (has_ts) {
    uint32_t c = has_clock ? (uint32_t)clock : q->default_clock;
    if (c == PF_CLOCK_LOOM) { /* a delta, which may be negative */
      q->acc = (int64_t)((uint64_t)q->acc + ts * (uint64_t)q->mult);
      r->ts = (int64_t)((uint64_t)q->real + ((uint64_t)q->acc - (uint64_t)q->inc));
    } else {
      r->ts = (int64_t)ts;
    }
    /* clamped before and after streaming's base is taken off: both within
     * the limits, their difference fits in 64 bits */
    if (r->ts < PF_TIME_MIN || r->ts > PF_TIME_MAX) time_out_of_range(r);
    if (r->sink) r->ts = stream_time(r, r->ts);
    if (r->ts < PF_TIME_MIN || r->ts > PF_TIME_MAX) time_out_of_range(r);
  }
  if (te.p) loom__pfr_track_event(r, te);
  if (ps.p) loom__pfr_perf_sample(r, ps);
  if (ce.p) chrome_events(r, ce);
}

static void rd_free(pf_reader *r) {
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
  free(r->is_json);
  free(r->seqs);
  loom__samples_free(&r->smp);
  free(r->stack);
  free(r->jtext.buf);
  free(r->trks);
  free(r->open);
  loom__map_free(&r->pidmap);
}

/* Streaming: hands the closed events to the sink; at the end (all) also
 * the ones never closed. */
static int flush(pf_reader *r, int all) {
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
static int flush_but_counter(pf_reader *r) {
  loom__ev *last = &r->t->ev[r->t->nev - 1];
  int hold = last->ph == LOOM__PH_COUNTER && !(last->flags & LOOM__EV_OPEN);
  if (hold) last->flags |= LOOM__EV_OPEN;
  int rc = flush(r, 0);
  if (hold) r->t->ev[r->t->nev - 1].flags &= (uint16_t)~LOOM__EV_OPEN;
  return rc;
}

static int finish(pf_reader *r) {
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
static int next_packet(pfin *in, const char *path, uint64_t *offset, uint64_t *at,
                       const uint8_t **p, uint64_t *len, loom_status *st) {
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
    *st = loom__fail(LOOM_EFORMAT, "%s: truncated or corrupt packet header at byte offset %llu",
                     path, (unsigned long long)*at);
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
    *st = loom__fail(LOOM_EFORMAT,
                     "%s: truncated: the packet at byte offset %llu needs %llu "
                     "bytes, the file ends first",
                     path, (unsigned long long)*at, (unsigned long long)*len);
    return -1;
  }
  *offset += *len;
  return 1;
}

/* The reader's state for path, with the keys it looks for interned. */
static void reader_init(pf_reader *r, const char *path, const loom__sink *sink,
                        const loom__flow_sink *flows) {
  memset(r, 0, sizeof *r);
  loom__samples_init(&r->smp);
  r->t = loom__trace_new();
  r->path = path;
  r->sink = sink;
  r->fsink = flows;
  r->flush_at = LOOM__STREAM_BATCH;
  if (!r->t) return;
  r->ext_key = loom__trace_str(r->t, "External id");
  r->corr_key = loom__trace_str(r->t, "correlation");
  r->role_key = loom__trace_str(r->t, "loom_role");
  r->kind_key = loom__trace_str(r->t, "loom_kind");
  r->json_key = loom__trace_str(r->t, "loom_json");
  r->unclosed_key = loom__trace_str(r->t, "loom_unclosed");
  r->counter_key = loom__trace_str(r->t, "loom_counter");
}

/* The warnings of a read that went through: what was not kept, counted. */
static loom_status read_warnings(pf_reader *r, const char *path) {
  if (r->role_unknown && loom__role_warning(r->t, path)) return LOOM_ENOMEM;
  if (r->kind_unknown && loom__kind_warning(r->t, path)) return LOOM_ENOMEM;
  if (r->flows_over) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %llu flow ends past %d on one event were not kept", path,
             (unsigned long long)r->flows_over, (int)PF_EVENT_FLOWS);
    if (loom__trace_add_warning(r->t, msg)) return LOOM_ENOMEM;
  }
  if (r->wrong_wire) {
    char msg[512];
    snprintf(msg, sizeof msg,
             "%s: %llu packet fields with a wire type they cannot have were skipped "
             "(the first in the packet at byte offset %llu)",
             path, (unsigned long long)r->wrong_wire, (unsigned long long)r->wrong_at);
    if (loom__trace_add_warning(r->t, msg)) return LOOM_ENOMEM;
  }
  if (loom__trace_bad_warnings(r->t, path)) return LOOM_ENOMEM;
  return LOOM_OK;
}

/* Every packet of the input; *offset is past the last one read. */
static loom_status read_packets(pf_reader *r, pfin *in, const char *path, uint64_t *offset) {
  uint64_t at, len;
  const uint8_t *p;
  loom_status st = r->t ? LOOM_OK : loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  while (st == LOOM_OK && next_packet(in, path, offset, &at, &p, &len, &st) == 1) {
    if (!len) continue; /* an empty packet: nothing to read */
    pb_span msg = {p, p + len, 0};
    r->pkt_at = at;
    packet(r, msg);
    if (r->sink && r->t->nev >= r->flush_at && flush_but_counter(r) != 0) r->oom = 1;
    if (r->oom) st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
    else if (r->header_bad) st = LOOM_EFORMAT; /* message set by the JSON reader */
  }
  return st;
}

loom_status loom__read_pftrace(const char *path, const loom__sink *sink,
                               const loom__flow_sink *flows, loom_trace **out) {
  *out = NULL;
  gzFile fp = gzopen(path, "rb"); /* a .pftrace.gz, or a plain file passed through */
  if (!fp) return loom__fail(LOOM_EIO, "cannot open %s: %s", path, strerror(errno));
  pf_reader r;
  reader_init(&r, path, sink, flows);
  pfin in = {.f = fp};
  in.map = loom__input_map(fp, path, &in.map_len, NULL);
  uint64_t offset = 0;
  loom_status st = read_packets(&r, &in, path, &offset);
  if (st == LOOM_OK && offset == 0) st = loom__fail(LOOM_EFORMAT, "%s: empty file", path);
  if (st == LOOM_OK && (read_warnings(&r, path) != LOOM_OK || finish(&r)))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
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
