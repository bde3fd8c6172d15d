/*
 * pf_attr.c - loom's .pftrace taken apart by event class for bench_writers
 * pftrace: every packet's bytes (its Trace.packet tag and length included)
 * go to the class of the event it holds: a slice begin or instant by its
 * category (interned per sequence, or in place), a slice end to the begin it
 * closes on its sequence; packets of no event (track descriptors, a lane's
 * clock snapshot, the header) to loom_fixed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_bound.h"

typedef struct rd {
  const uint8_t *p, *end;
} rd;

static int rd_varint(rd *r, uint64_t *v) {
  *v = 0;
  for (int s = 0; s < 64 && r->p < r->end; s += 7) {
    uint8_t b = *r->p++;
    *v |= (uint64_t)(b & 0x7f) << s;
    if (b < 0x80) return 0;
  }
  return -1;
}

/* The next field: number, wire type, its varint (or length), its bytes. */
static int rd_field(rd *r, uint32_t *field, uint64_t *v, rd *sub) {
  uint64_t tag;
  if (r->p >= r->end || rd_varint(r, &tag)) return -1;
  *field = (uint32_t)(tag >> 3);
  int wire = (int)(tag & 7);
  if (wire == 0) return rd_varint(r, v);
  if (wire == 1 || wire == 5) {
    uint64_t n = wire == 1 ? 8 : 4;
    if ((uint64_t)(r->end - r->p) < n) return -1;
    r->p += n;
    *v = 0;
    return 0;
  }
  if (wire != 2 || rd_varint(r, v) || *v > (uint64_t)(r->end - r->p)) return -1;
  sub->p = r->p;
  sub->end = r->p + *v;
  r->p += *v;
  *v = (uint64_t)-1; /* a length, not a value */
  return 0;
}

/* Per sequence: each category iid's class, the classes of the open slices. */
typedef struct aseq {
  uint8_t cls_of[256];
  uint8_t open[4096];
  size_t depth;
} aseq;

static int cls_of_name(const pfb_sizes *s, rd name) {
  size_t n = (size_t)(name.end - name.p);
  for (int c = 0; c < PFB_NCLASS; c++)
    if (s->cat[c] && strlen(s->cat[c]) == n && !memcmp(s->cat[c], name.p, n)) return c;
  return PFB_OTHER;
}

static void read_interned(const pfb_sizes *s, aseq *q, rd in) {
  uint32_t f, g;
  uint64_t v, iid = 0;
  rd entry, x, name = {0};
  while (!rd_field(&in, &f, &v, &entry)) {
    if (f != 1 || v != (uint64_t)-1) continue; /* event_categories */
    while (!rd_field(&entry, &g, &v, &x))
      if (g == 1) iid = v;
      else if (g == 2) name = x;
    if (iid < 256 && name.p) q->cls_of[iid] = (uint8_t)cls_of_name(s, name);
  }
}

/* The class of a TrackEvent on sequence q (a begin opens it, an end closes it). */
static int event_class(const pfb_sizes *s, aseq *q, rd te) {
  uint32_t f;
  uint64_t v, type = 0;
  int cls = PFB_OTHER;
  rd x;
  while (!rd_field(&te, &f, &v, &x))
    if (f == 9) type = v;
    else if (f == 3 && v < 256) cls = q->cls_of[v];
    else if (f == 22) cls = cls_of_name(s, x);
  if (type == 2) return q->depth ? q->open[--q->depth] : PFB_OTHER;
  if (type == 1 && q->depth < sizeof q->open) q->open[q->depth++] = (uint8_t)cls;
  return type == 4 ? PFB_OTHER : cls;
}

static int attribute(pfb_sizes *s, const uint8_t *buf, size_t len) {
  aseq *seqs = calloc(1024, sizeof *seqs);
  rd r = {buf, buf + len}, pkt, x, te = {0}, in = {0};
  uint32_t f;
  uint64_t v;
  if (!seqs) return -1;
  s->loom_total = len;
  while (r.p < r.end) {
    const uint8_t *at = r.p;
    if (rd_field(&r, &f, &v, &pkt) || f != 1) break;
    uint64_t seq = 0;
    te.p = in.p = NULL;
    while (!rd_field(&pkt, &f, &v, &x))
      if (f == 10) seq = v;
      else if (f == 11) te = x;
      else if (f == 12) in = x;
    aseq *q = &seqs[seq < 1024 ? seq : 0];
    if (in.p) read_interned(s, q, in);
    if (te.p) s->loom[event_class(s, q, te)] += (uint64_t)(r.p - at);
    else s->loom_fixed += (uint64_t)(r.p - at);
  }
  free(seqs);
  return r.p == r.end ? 0 : -1;
}

int pfb_attribute(const char *path, pfb_sizes *s) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL;
  int rc = buf && fread(buf, 1, (size_t)n, f) == (size_t)n ? attribute(s, buf, (size_t)n) : -1;
  fclose(f);
  free(buf);
  return rc;
}
