/*
 * pf_bound.c - the smallest exact encoding of a trace's slices in Perfetto's
 * track-event format, from the protobuf wire format alone, and loom's
 * .pftrace of the same trace taken apart into the same event classes.
 *
 * What an exact encoding cannot do without (trace_processor v55, read with tests/tp/tp.mjs):
 * every packet is a Trace.packet field (tag, length); a TrackEvent without
 * trusted_packet_sequence_id is dropped, and only a sequence-scoped clock may be incremental,
 * so each packet carries its sequence id and a timestamp, the smallest being a delta on the
 * sequence's incremental clock. Perfetto's track event has no exact duration (the legacy
 * complete event holds whole microseconds), so a slice is two packets, a begin and an end, each
 * with its type, unless it lasts whole microseconds. Everything else is as small as the format
 * allows: one sequence per thread or queue (its track the sequence's default: no track_uuid),
 * the busiest tracks the smallest sequence ids, each sequence's clock in the largest unit that
 * divides all its times, names, categories, argument names and string values of two bytes or
 * more (a value's iid takes three bytes) interned per sequence (iids in order of first use: one
 * byte while a sequence has fewer than 128 of a kind, as in the benchmark's mixes; each entry
 * counted once, with the sequence flag of the packet that carries it), integer arguments as
 * varints, flow ids as varints (flow_ids_old / terminating_flow_ids_old) with the ids the trace
 * gives (trace_processor shows them: flow.trace_id). What a file needs once (descriptors, clock
 * snapshots, the header) is left out of the bound, which makes it smaller than any real file by
 * that much.  Slices are taken to nest on their track (the benchmark's mixes do); a slice of
 * whole microseconds is one packet, the legacy complete event being exact for it on a thread's
 * track (counted in whole_us: none in the benchmark's mixes, whose times are ns).
 */
#include "pf_bound.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static unsigned vlen(uint64_t v) {
  unsigned n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}
static uint64_t uintf(unsigned field, uint64_t v) { return vlen((uint64_t)field << 3) + vlen(v); }
static uint64_t lenf(unsigned field, uint64_t n) {
  return vlen((uint64_t)field << 3) + vlen(n) + n;
}

const char *pfb_class_name(int cls) {
  static const char *names[] = {"op + External id", "launch call", "kernel", "other"};
  return cls >= 0 && cls < PFB_NCLASS ? names[cls] : "?";
}

static int class_of(const loom__ev *e) {
  return e->kind == LOOM_KIND_CPU_OP ? PFB_OP : e->kind == LOOM_KIND_RUNTIME ? PFB_LAUNCH
       : e->kind == LOOM_KIND_KERNEL ? PFB_KERNEL : PFB_OTHER;
}

/* One sequence (a track) as the bound writes it. */
typedef struct bseq {
  loom__map iids;     /* table << 32 | string id -> iid */
  uint32_t niid[4];   /* names, categories, argument names, string values */
  uint64_t interned;  /* entries the packet being sized adds */
  uint64_t seq_len;   /* its sequence id field */
  int64_t first, last, unit;
} bseq;

typedef struct bctx {
  const loom_trace *t;
  pfb_sizes *s;
  const uint32_t *flowb; /* per event: its flow ids' bytes */
  bseq q;
  int oom;
} bctx;

enum { ID_EXT = -1, ID_CORR = -2 }; /* argument names the model keeps as fields */

/* The iid of a string on the sequence; its entry's bytes on first use. */
static uint64_t iid_of(bctx *c, int table, uint32_t id) {
  static const unsigned field[4] = {2, 1, 3, 29}; /* InternedData tables */
  uint64_t key = (uint64_t)table << 32 | id, *hit = loom__map_get(&c->q.iids, key);
  if (hit) return *hit;
  uint64_t iid = ++c->q.niid[table];
  if (loom__map_put(&c->q.iids, key, iid)) c->oom = 1;
  const char *s = id == (uint32_t)ID_EXT    ? "External id"
                  : id == (uint32_t)ID_CORR ? "correlation"
                                            : loom__trace_cstr(c->t, id);
  c->q.interned += lenf(field[table], uintf(1, iid) + lenf(2, strlen(s)));
  return iid;
}

static uint64_t arg_bytes(bctx *c, uint32_t key, const loom__targ *a, uint64_t u) {
  uint64_t v = uintf(1, iid_of(c, 2, key)); /* name_iid */
  if (!a) v += uintf(3, u);
  else if (a->type == LOOM_ARG_UINT || (a->type == LOOM_ARG_INT && a->v.i >= 0))
    v += uintf(3, a->v.u);
  else if (a->type == LOOM_ARG_INT) v += uintf(4, a->v.u); /* int64: ten bytes */
  else if (a->type == LOOM_ARG_DOUBLE) v += 9;
  else if (strlen(loom__trace_cstr(c->t, a->v.s)) <= 1) /* in place: no longer than an iid */
    v += lenf(6, strlen(loom__trace_cstr(c->t, a->v.s)));
  else v += uintf(17, iid_of(c, 3, a->v.s)); /* string_value_iid */
  return lenf(4, v);
}

/* The TrackEvent of a slice's begin (or an instant): type, name, category,
 * arguments, flow ids. */
static uint64_t begin_bytes(bctx *c, uint32_t ev, int cls) {
  const loom__ev *e = &c->t->ev[ev];
  uint64_t te = uintf(9, 1) + uintf(10, iid_of(c, 0, e->name)), args = 0;
  if (e->cat) te += uintf(3, iid_of(c, 1, e->cat));
  if (e->external_id) args += arg_bytes(c, (uint32_t)ID_EXT, NULL, e->external_id);
  if (e->correlation && e->ph != LOOM__PH_ASYNC)
    args += arg_bytes(c, (uint32_t)ID_CORR, NULL, e->correlation);
  for (uint16_t k = 0; k < e->nargs; k++) {
    const loom__targ *a = &c->t->args[e->args_off + k];
    args += arg_bytes(c, a->key, a, 0);
  }
  c->s->bound_args[cls] += args;
  c->s->bound_flows[cls] += c->flowb[ev];
  return te + args + c->flowb[ev];
}

/* A slice of whole microseconds is one packet, a legacy complete event
 * (no type; LegacyEvent phase 'X' and duration_us): smaller than a begin
 * and an end while it lasts under 2^35 us. */
static int whole_us(const loom__ev *e) {
  return e->ph == LOOM__PH_COMPLETE && e->dur > 0 && e->dur % 1000 == 0;
}

/* One packet of the sequence: a slice's begin or end at ts. */
static void packet(void *ctx, uint32_t ev, int end, int64_t ts) {
  bctx *c = ctx;
  const loom__ev *e = &c->t->ev[ev];
  int cls = class_of(e);
  if (end && whole_us(e)) return;
  c->q.interned = 0;
  uint64_t te = end ? uintf(9, 2) : begin_bytes(c, ev, cls);
  if (!end && whole_us(e)) te += lenf(6, uintf(2, 'X') + uintf(3, (uint64_t)e->dur / 1000)) - 2;
  uint64_t p = uintf(8, (uint64_t)((ts - c->q.last) / c->q.unit)) + c->q.seq_len + lenf(11, te);
  if (c->q.interned)
    p += lenf(12, c->q.interned) + uintf(13, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
  c->s->bound_interned += c->q.interned;
  c->q.last = ts;
  uint64_t bytes = lenf(1, p);
  c->s->bound[cls] += bytes;
  if (end) c->s->bound_end[cls] += bytes;
  if (!end) c->s->events[cls]++;
  if (!end && !c->s->cat[cls] && e->cat) c->s->cat[cls] = loom__trace_cstr(c->t, e->cat);
}

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* Pass 1 of a sequence: the clock's unit, the gcd of its times' distances. */
static void unit_of(void *ctx, uint32_t ev, int end, int64_t ts) {
  bctx *c = ctx;
  bseq *q = &c->q;
  if (end && whole_us(&c->t->ev[ev])) return;
  q->unit = (int64_t)gcd((uint64_t)q->unit, (uint64_t)(ts - q->first));
}

typedef struct stack {
  int64_t *end;
  uint32_t *ev;
  size_t n, cap;
} stack;

/* The packets of one track's events idx[a..b) (in order of start, longer
 * first): each begin after the ends of the slices that end by its start. */
static int walk(const loom_trace *t, const uint32_t *idx, size_t a, size_t b, stack *st,
                void (*fn)(void *, uint32_t, int, int64_t), void *ctx) {
  st->n = 0;
  for (size_t i = a; i < b; i++) {
    const loom__ev *e = &t->ev[idx[i]];
    for (; st->n && st->end[st->n - 1] <= e->ts; st->n--)
      fn(ctx, st->ev[st->n - 1], 1, st->end[st->n - 1]);
    fn(ctx, idx[i], 0, e->ts);
    if (e->ph != LOOM__PH_COMPLETE) continue;
    if (st->n == st->cap) {
      size_t cap = st->cap ? 2 * st->cap : 64;
      int64_t *en = realloc(st->end, cap * sizeof *en);
      if (en) st->end = en;
      uint32_t *ev = realloc(st->ev, cap * sizeof *ev);
      if (ev) st->ev = ev;
      if (!en || !ev) return -1;
      st->cap = cap;
    }
    st->end[st->n] = e->ts + e->dur;
    st->ev[st->n++] = idx[i];
  }
  for (; st->n; st->n--) fn(ctx, st->ev[st->n - 1], 1, st->end[st->n - 1]);
  return 0;
}

static const loom_trace *sort_t;
static int by_track_time(const void *pa, const void *pb) {
  const loom__ev *a = &sort_t->ev[*(const uint32_t *)pa], *b = &sort_t->ev[*(const uint32_t *)pb];
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

static const uint64_t *sort_count;
static int by_count(const void *pa, const void *pb) {
  uint64_t a = sort_count[*(const uint32_t *)pa], b = sort_count[*(const uint32_t *)pb];
  return a != b ? (a > b ? -1 : 1) : 0;
}

/* Per event, the bytes of the ids of the flows leaving and entering it. */
static uint32_t *flow_bytes(const loom_trace *t) {
  uint32_t *fb = calloc(t->nev + 1, sizeof *fb);
  for (size_t f = 0; fb && f < t->nflows; f++) {
    fb[t->flows[f].from] += (uint32_t)uintf(36, t->flows[f].id); /* flow_ids_old */
    fb[t->flows[f].to] += (uint32_t)uintf(42, t->flows[f].id);   /* terminating_flow_ids_old */
  }
  return fb;
}

/* Per track, the bytes of its sequence id: the busiest tracks the smallest. */
static uint64_t *seq_lens(const loom_trace *t, const uint32_t *idx, size_t n) {
  uint64_t *count = calloc(t->ntracks + 1, sizeof *count), *len = calloc(t->ntracks + 1, 8);
  uint32_t *order = malloc((t->ntracks + 1) * sizeof *order);
  if (count && len && order) {
    for (size_t i = 0; i < n; i++) count[t->ev[idx[i]].track]++;
    for (uint32_t k = 0; k < t->ntracks; k++) order[k] = k;
    sort_count = count;
    qsort(order, t->ntracks, sizeof *order, by_count);
    for (uint32_t r = 0; r < t->ntracks; r++) len[order[r]] = uintf(10, r + 1);
  }
  free(count);
  free(order);
  return len;
}

static int bound_tracks(bctx *c, const uint32_t *idx, size_t n, const uint64_t *seqlen) {
  stack st = {0};
  int rc = 0;
  for (size_t a = 0, b; a < n && !rc; a = b) {
    uint32_t track = c->t->ev[idx[a]].track;
    for (b = a; b < n && c->t->ev[idx[b]].track == track; b++) {}
    loom__map_free(&c->q.iids);
    memset(&c->q, 0, sizeof c->q);
    c->q.seq_len = seqlen[track];
    c->q.first = c->q.last = c->t->ev[idx[a]].ts;
    rc = walk(c->t, idx, a, b, &st, unit_of, c);
    if (!c->q.unit) c->q.unit = 1;
    if (!rc) rc = walk(c->t, idx, a, b, &st, packet, c);
  }
  loom__map_free(&c->q.iids);
  free(st.end);
  free(st.ev);
  return rc || c->oom ? -1 : 0;
}

int pfb_bound(const loom_trace *t, pfb_sizes *s) {
  memset(s, 0, sizeof *s);
  uint32_t *idx = malloc((t->nev + 1) * sizeof *idx);
  size_t n = 0;
  for (size_t i = 0; idx && i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    if (e->ph == LOOM__PH_ASYNC || e->ph == LOOM__PH_COUNTER) continue; /* not in the mixes */
    idx[n++] = (uint32_t)i;
    s->whole_us += whole_us(e);
  }
  bctx c = {.t = t, .s = s, .flowb = idx ? flow_bytes(t) : NULL};
  uint64_t *seqlen = c.flowb ? seq_lens(t, idx, n) : NULL;
  int rc = -1;
  if (seqlen) {
    sort_t = t;
    qsort(idx, n, sizeof *idx, by_track_time);
    rc = bound_tracks(&c, idx, n, seqlen);
  }
  free(seqlen);
  free((void *)c.flowb);
  free(idx);
  return rc;
}
