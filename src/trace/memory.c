/*
 * memory.c - the accounting of memory events (memory.h): series per device
 * and memory kind, live allocations keyed by producer and address, a tally
 * per (series, op), the peak and the timeline buckets.
 *
 * The ops' bytes live at the peak come without a copy at each new peak:
 * each tally also counts what its op's live bytes moved since the series'
 * last peak ("since"), reset at every new peak for the tallies touched
 * since (a list per series), so at the end live - since is the op's bytes
 * at the peak.  Each event costs O(1) amortised.
 */
#include <stdlib.h>
#include <string.h>

#include "trace/memory.h"

typedef struct tally {
  uint32_t series, op;
  uint64_t alloc_bytes, nalloc;
  int64_t live, nlive;   /* bytes and count of its allocations live now */
  int64_t since, nsince; /* their change since the series' last peak */
  int dirty;             /* on its series' list of tallies touched since the peak */
} tally;

typedef struct blk { /* a live allocation */
  loom__mem_block b;
  uint32_t tally;
  uint32_t space; /* its space's index; UINT32_MAX: a free slot */
} blk;

typedef struct space { /* addresses of one producer in one series */
  int64_t device, pid;
  uint32_t kind, series;
  uint16_t src;
  loom__map live; /* addr -> block index + 1 */
} space;

typedef struct sstate {
  uint32_t dev; /* its device's totals */
  uint32_t *dirty;
  size_t ndirty, cap_dirty;
  size_t cur; /* open timeline bucket + 1, 0: none yet */
} sstate;

struct loom__mem {
  int64_t t0, t1;
  size_t nb;
  loom__mem_series *s;
  sstate *ss;
  size_t ns, cap_s, cap_ss;
  space *sp;
  size_t nsp, cap_sp, last_sp;
  struct mdev { int64_t device, pid; uint64_t in_use, res; } *dv; /* per device */
  size_t ndv, cap_dv;
  tally *tl;
  size_t ntl, cap_tl;
  loom__map tally_of; /* series << 32 | op -> tally index + 1 */
  blk *bl;
  size_t nbl, cap_bl;
  uint32_t *free_bl;
  size_t nfree, cap_free;
};

loom__mem *loom__mem_new(int64_t t0, int64_t t1, size_t nbuckets) {
  loom__mem *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->t0 = t0;
  m->t1 = t1 > t0 ? t1 : t0 + 1;
  m->nb = nbuckets;
  return m;
}

void loom__mem_free(loom__mem *m) {
  if (!m) return;
  for (size_t i = 0; i < m->ns; i++) {
    free(m->s[i].by_alloc);
    free(m->s[i].at_peak);
    free(m->s[i].leaks);
    free(m->s[i].bmax);
    free(m->s[i].bres);
    free(m->ss[i].dirty);
  }
  for (size_t i = 0; i < m->nsp; i++) loom__map_free(&m->sp[i].live);
  free(m->s);
  free(m->ss);
  free(m->sp);
  free(m->dv);
  free(m->tl);
  loom__map_free(&m->tally_of);
  free(m->bl);
  free(m->free_bl);
  free(m);
}

size_t loom__mem_count(const loom__mem *m) { return m ? m->ns : 0; }
const loom__mem_series *loom__mem_series_at(const loom__mem *m, size_t i) { return &m->s[i]; }
void loom__mem_span(const loom__mem *m, int64_t *t0, int64_t *t1, size_t *nbuckets) {
  *t0 = m->t0;
  *t1 = m->t1;
  *nbuckets = m->nb;
}

/* The index of (device, pid)'s totals, made when new; -1 out of memory. */
static long dev_of(loom__mem *m, int64_t device, int64_t pid) {
  for (size_t i = 0; i < m->ndv; i++)
    if (m->dv[i].device == device && m->dv[i].pid == pid) return (long)i;
  struct mdev z = {device, pid, 0, 0};
  return LOOM__PUSH(m->dv, m->ndv, m->cap_dv, z) ? -1 : (long)m->ndv - 1;
}

static long new_series(loom__mem *m, int64_t device, int64_t pid, uint32_t kind) {
  for (size_t i = 0; i < m->ns; i++)
    if (m->s[i].device == device && m->s[i].pid == pid && m->s[i].kind == kind) return (long)i;
  long dev = dev_of(m, device, pid);
  if (dev < 0) return -1;
  loom__mem_series z;
  memset(&z, 0, sizeof z);
  z.device = device;
  z.pid = pid;
  z.kind = kind;
  sstate zs = {(uint32_t)dev, NULL, 0, 0, 0};
  if (m->nb && (!(z.bmax = calloc(m->nb, sizeof *z.bmax)) ||
                !(z.bres = calloc(m->nb, sizeof *z.bres)))) {
    free(z.bmax);
    return -1;
  }
  if (LOOM__PUSH(m->s, m->ns, m->cap_s, z)) {
    free(z.bmax);
    free(z.bres);
    return -1;
  }
  size_t nss = m->ns - 1;
  if (LOOM__PUSH(m->ss, nss, m->cap_ss, zs)) {
    m->ns--;
    free(z.bmax);
    free(z.bres);
    return -1;
  }
  return (long)m->ns - 1;
}

static int same_space(const space *c, const loom__mem_ev *e) {
  return c->device == e->device && c->pid == e->pid && c->kind == e->kind && c->src == e->src;
}

/* The space of (device, pid, kind, src), made with its series when new. */
static space *space_of(loom__mem *m, const loom__mem_ev *e) {
  space *c = m->nsp ? &m->sp[m->last_sp] : NULL;
  if (c && same_space(c, e)) return c;
  for (size_t i = 0; i < m->nsp; i++) {
    c = &m->sp[i];
    if (same_space(c, e)) {
      m->last_sp = i;
      return c;
    }
  }
  long s = new_series(m, e->device, e->pid, e->kind);
  if (s < 0) return NULL;
  space z;
  memset(&z, 0, sizeof z);
  z.device = e->device;
  z.pid = e->pid;
  z.kind = e->kind;
  z.src = e->src;
  z.series = (uint32_t)s;
  if (LOOM__PUSH(m->sp, m->nsp, m->cap_sp, z)) return NULL;
  m->last_sp = m->nsp - 1;
  return &m->sp[m->nsp - 1];
}

static tally *tally_of(loom__mem *m, uint32_t series, uint32_t op, uint32_t *idx) {
  int added;
  uint64_t *v = loom__map_slot(&m->tally_of, (uint64_t)series << 32 | op, &added);
  if (!v) return NULL;
  if (added) {
    tally z;
    memset(&z, 0, sizeof z);
    z.series = series;
    z.op = op;
    if (LOOM__PUSH(m->tl, m->ntl, m->cap_tl, z)) {
      loom__map_del(&m->tally_of, (uint64_t)series << 32 | op);
      return NULL;
    }
    *v = m->ntl;
  }
  *idx = (uint32_t)(*v - 1);
  return &m->tl[*v - 1];
}

/* An op's live bytes moved by sign * bytes (its series' since-peak too). */
static int move_live(loom__mem *m, uint32_t ti, int sign, uint64_t bytes) {
  tally *t = &m->tl[ti];
  t->live += sign * (int64_t)bytes;
  t->nlive += sign;
  t->since += sign * (int64_t)bytes;
  t->nsince += sign;
  if (t->dirty) return 0;
  sstate *ss = &m->ss[t->series];
  if (LOOM__PUSH(ss->dirty, ss->ndirty, ss->cap_dirty, ti)) return -1;
  t->dirty = 1;
  return 0;
}

static size_t bucket_of(const loom__mem *m, int64_t ts) {
  if (ts <= m->t0) return 0;
  size_t i = (size_t)((__int128)(ts - m->t0) * (__int128)m->nb / (m->t1 - m->t0));
  return i >= m->nb ? m->nb - 1 : i;
}

/* Opens the bucket of ts for series s (the levels before the event carried
 * into the buckets it skipped). */
static size_t bucket_open(loom__mem *m, size_t s, int64_t ts) {
  loom__mem_series *se = &m->s[s];
  sstate *ss = &m->ss[s];
  size_t i = bucket_of(m, ts);
  if (ss->cur && i < ss->cur - 1) i = ss->cur - 1;
  for (size_t b = ss->cur; b <= i; b++) {
    if (se->bmax[b] < se->in_use) se->bmax[b] = se->in_use;
    if (se->bres[b] < se->reserved) se->bres[b] = se->reserved;
  }
  ss->cur = i + 1;
  return i;
}

static void new_peak(loom__mem *m, size_t s, const loom__mem_ev *e) {
  loom__mem_series *se = &m->s[s];
  sstate *ss = &m->ss[s];
  se->peak = se->in_use;
  se->peak_ts = e->ts;
  se->peak_op = e->op;
  se->peak_call = e->call;
  se->peak_range = e->range;
  se->peak_step = e->step;
  for (size_t i = 0; i < ss->ndirty; i++) {
    tally *t = &m->tl[ss->dirty[i]];
    t->since = t->nsince = 0;
    t->dirty = 0;
  }
  ss->ndirty = 0;
}

/* Frees the live block bi of space sp (its bytes leave the series). */
static int drop_block(loom__mem *m, space *sp, uint32_t bi) {
  blk *b = &m->bl[bi];
  loom__mem_series *se = &m->s[sp->series];
  se->in_use -= b->b.bytes;
  if (move_live(m, b->tally, -1, b->b.bytes)) return -1;
  loom__map_del(&sp->live, b->b.addr);
  b->space = UINT32_MAX;
  return LOOM__PUSH(m->free_bl, m->nfree, m->cap_free, bi);
}

static int alloc_ev(loom__mem *m, space *sp, const loom__mem_ev *e) {
  loom__mem_series *se = &m->s[sp->series];
  uint64_t *old = loom__map_get(&sp->live, e->addr);
  if (old) { /* its free was never seen: taken as freed now */
    se->nreplaced++;
    if (drop_block(m, sp, (uint32_t)(*old - 1))) return -1;
  }
  int start = (e->flags & LOOM__MEM_AT_START) != 0;
  uint32_t ti;
  tally *t = tally_of(m, sp->series, e->op, &ti);
  if (!t) return -1;
  if (start) {
    se->nstart++;
    se->start_bytes += e->bytes;
  } else {
    se->nalloc++;
    se->alloc_bytes += e->bytes;
    t->nalloc++;
    t->alloc_bytes += e->bytes;
  }
  blk b = {{e->addr, e->bytes, e->ts, e->op, e->call, e->range, e->step, (uint8_t)start}, ti,
           (uint32_t)(sp - m->sp)};
  uint32_t bi;
  if (m->nfree) {
    bi = m->free_bl[--m->nfree];
    m->bl[bi] = b;
  } else {
    if (LOOM__PUSH(m->bl, m->nbl, m->cap_bl, b)) return -1;
    bi = (uint32_t)m->nbl - 1;
  }
  if (loom__map_put(&sp->live, e->addr, (uint64_t)bi + 1)) return -1;
  se->in_use += e->bytes;
  return move_live(m, ti, 1, e->bytes);
}

static int free_ev(loom__mem *m, space *sp, const loom__mem_ev *e, loom__mem_after *af) {
  loom__mem_series *se = &m->s[sp->series];
  uint64_t *bi = loom__map_get(&sp->live, e->addr);
  if (!bi) {
    af->unknown = 1;
    af->bytes = e->bytes;
    if (se->nunknown < LOOM__MEM_EXAMPLES)
      se->unknown[se->nunknown] = (loom__mem_block){e->addr, e->bytes, e->ts, e->op, e->call,
                                                    e->range, e->step, 0};
    se->nunknown++;
    se->unknown_bytes += e->bytes;
    return 0;
  }
  blk *b = &m->bl[*bi - 1];
  af->alloc_op = b->b.op;
  af->bytes = b->b.bytes;
  se->nfree++;
  se->free_bytes += b->b.bytes;
  return drop_block(m, sp, (uint32_t)(*bi - 1));
}

/* What a series adds to its device's reserved bytes: what its pool
 * reported, or, for memory not from a pool, what is in use. */
static uint64_t reserved_part(const loom__mem_series *se) {
  return se->has_reserved ? se->reserved : se->in_use;
}

long loom__mem_add(loom__mem *m, const loom__mem_ev *e, loom__mem_after *after) {
  space *sp = space_of(m, e);
  if (!sp) return -1;
  size_t s = sp->series;
  struct mdev *d = &m->dv[m->ss[s].dev];
  d->in_use -= m->s[s].in_use; /* the series' part taken out, put back after */
  d->res -= reserved_part(&m->s[s]);
  size_t b = m->nb ? bucket_open(m, s, e->ts) : 0;
  loom__mem_after af = {.bytes = e->bytes};
  int rc = e->flags & LOOM__MEM_FREE ? free_ev(m, sp, e, &af) : alloc_ev(m, sp, e);
  if (rc) return -1;
  loom__mem_series *se = &m->s[s];
  if (e->flags & LOOM__MEM_HAS_RESERVED) {
    se->reserved = e->reserved;
    se->has_reserved = 1;
    if (e->reserved > se->peak_reserved) {
      se->peak_reserved = e->reserved;
      se->peak_reserved_ts = e->ts;
    }
  }
  if (se->in_use > se->peak) new_peak(m, s, e);
  if (m->nb) {
    if (se->bmax[b] < se->in_use) se->bmax[b] = se->in_use;
    if (se->bres[b] < se->reserved) se->bres[b] = se->reserved;
  }
  d->in_use += se->in_use;
  d->res += reserved_part(se);
  af.in_use = se->in_use;
  af.reserved = se->reserved;
  af.has_reserved = (uint8_t)se->has_reserved;
  af.dev_in_use = d->in_use;
  af.dev_reserved = d->res;
  if (after) *after = af;
  return (long)s;
}

/* ---- finishing ------------------------------------------------------------ */
static int cmp_top(const void *pa, const void *pb) {
  const loom__mem_top *a = pa, *b = pb;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return a->op < b->op ? -1 : a->op > b->op;
}

static int cmp_block(const void *pa, const void *pb) {
  const loom__mem_block *a = pa, *b = pb;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int cmp_series(const void *pa, const void *pb) {
  const loom__mem_series *a = pa, *b = pb;
  if (a->device != b->device) return a->device < b->device ? -1 : 1;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  return a->kind < b->kind ? -1 : a->kind > b->kind;
}

/* Each series' top lists from the tallies. */
static int tops(loom__mem *m) {
  for (size_t i = 0; i < m->ntl; i++) {
    const tally *t = &m->tl[i];
    loom__mem_series *se = &m->s[t->series];
    int64_t at_peak = t->live - t->since, nat_peak = t->nlive - t->nsince;
    if (t->alloc_bytes || t->nalloc) {
      loom__mem_top x = {t->op, t->alloc_bytes, t->nalloc};
      size_t cap = se->nby_alloc;
      if (LOOM__PUSH(se->by_alloc, se->nby_alloc, cap, x)) return -1;
    }
    if (at_peak > 0) {
      loom__mem_top x = {t->op, (uint64_t)at_peak, (uint64_t)nat_peak};
      size_t cap = se->nat_peak;
      if (LOOM__PUSH(se->at_peak, se->nat_peak, cap, x)) return -1;
    }
  }
  return 0;
}

int loom__mem_finish(loom__mem *m) {
  if (tops(m)) return -1;
  for (size_t i = 0; i < m->nbl; i++) {
    const blk *b = &m->bl[i];
    if (b->space == UINT32_MAX) continue;
    loom__mem_series *se = &m->s[m->sp[b->space].series];
    size_t cap = se->nleaks;
    if (LOOM__PUSH(se->leaks, se->nleaks, cap, b->b)) return -1;
    se->leak_bytes += b->b.bytes;
  }
  for (size_t i = 0; i < m->ns; i++) {
    loom__mem_series *se = &m->s[i];
    if (m->nb) bucket_open(m, i, m->t1); /* the level at the end carried to the last */
    if (se->nby_alloc > 1) qsort(se->by_alloc, se->nby_alloc, sizeof *se->by_alloc, cmp_top);
    if (se->nat_peak > 1) qsort(se->at_peak, se->nat_peak, sizeof *se->at_peak, cmp_top);
    if (se->nleaks > 1) qsort(se->leaks, se->nleaks, sizeof *se->leaks, cmp_block);
  }
  /* series sorted: their state (spaces, dirty lists, open buckets) is done
   * with; no event may follow */
  if (m->ns > 1) qsort(m->s, m->ns, sizeof *m->s, cmp_series);
  return 0;
}
