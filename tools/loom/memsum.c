/*
 * memsum.c - the memory part of `loom record`'s summary of a process whose
 * trace it rebuilt (a program the OOM killer or RLIMIT_AS ended): the peak
 * of the bytes live on the host and on each device, when it was, and the
 * ops that held the most at that moment.  Read from the trace written,
 * through the public trace API (loom.h): memory events are those marked
 * alloc or free, matched by "addr" (and "device") in time order; a free of
 * an address never seen allocated counts nothing.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loom/loom.h"
#include "loom/plugin.h"

typedef struct mev {
  int64_t ts;
  uint64_t addr, bytes, ext;
  int64_t device; /* -1: host */
  int is_free;
} mev;

typedef struct slot {
  uint64_t addr, bytes, ext;
  int64_t device;
  int used;
} slot;

/* A small open-addressing table of live allocations (cap a power of 2). */
typedef struct live {
  slot *s;
  size_t cap;
} live;

static slot *live_find(live *l, uint64_t addr, int64_t dev) {
  uint64_t h = (addr ^ ((uint64_t)dev << 40)) * 0x9E3779B97F4A7C15ull;
  for (size_t i = (size_t)(h >> 20) & (l->cap - 1);; i = (i + 1) & (l->cap - 1))
    if (!l->s[i].used || (l->s[i].addr == addr && l->s[i].device == dev)) return &l->s[i];
}

static int cmp_ts(const void *a, const void *b) {
  const mev *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static uint64_t arg_u(const loom_arg *a, size_t n, const char *key, int *has) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(a[i].key, key) && (a[i].type == LOOM_ARG_UINT || a[i].type == LOOM_ARG_INT)) {
      *has = 1;
      return a[i].v.u;
    }
  *has = 0;
  return 0;
}

/* The trace's memory events in time order (NULL: none, or out of memory). */
static mev *read_events(const loom_trace *t, size_t *n) {
  size_t nev = loom_trace_event_count(t), k = 0;
  mev *v = malloc((nev + 1) * sizeof *v);
  for (size_t i = 0; v && i < nev; i++) {
    loom_event_view e = {.struct_size = sizeof e};
    loom_arg a[16];
    if (loom_trace_event(t, i, &e) != LOOM_OK ||
        !(e.roles & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE)))
      continue;
    size_t na = loom_trace_event_args(t, i, a, 16);
    na = na < 16 ? na : 16;
    int has_addr, has_bytes, has_dev;
    mev m = {.ts = e.start_ns, .addr = arg_u(a, na, "addr", &has_addr), .ext = e.external_id,
             .bytes = arg_u(a, na, "bytes", &has_bytes),
             .device = (int64_t)arg_u(a, na, "device", &has_dev),
             .is_free = (e.roles & LOOM_RECORD_F_FREE) != 0};
    if (!has_dev) m.device = -1;
    if (has_addr) v[k++] = m;
  }
  if (v) qsort(v, k, sizeof *v, cmp_ts);
  *n = k;
  return v;
}

/* Replays v[0..upto) for device dev into l; *peak_at: the index after
 * which the live bytes were highest; returns that peak. */
static uint64_t replay(const mev *v, size_t upto, int64_t dev, live *l, size_t *peak_at) {
  memset(l->s, 0, l->cap * sizeof *l->s);
  uint64_t cur = 0, peak = 0;
  for (size_t i = 0; i < upto; i++) {
    if (v[i].device != dev) continue;
    slot *s = live_find(l, v[i].addr, dev);
    if (v[i].is_free) {
      if (!s->used) continue;
      cur -= s->bytes;
      s->used = 0; /* a tombstone-free table: rebuild the probe chain after it */
      for (size_t j = (size_t)(s - l->s + 1) & (l->cap - 1); l->s[j].used;
           j = (j + 1) & (l->cap - 1)) {
        slot x = l->s[j];
        l->s[j].used = 0;
        *live_find(l, x.addr, x.device) = x;
      }
      continue;
    }
    if (s->used) cur -= s->bytes; /* allocated again without a free */
    *s = (slot){v[i].addr, v[i].bytes, v[i].ext, dev, 1};
    cur += v[i].bytes;
    if (cur > peak) peak = cur, *peak_at = i + 1;
  }
  return peak;
}

static const char *op_name(const loom_trace *t, uint64_t ext) {
  for (size_t i = 0; ext && i < loom_trace_event_count(t); i++) {
    loom_event_view e = {.struct_size = sizeof e};
    if (loom_trace_event(t, i, &e) == LOOM_OK && e.kind == LOOM_KIND_CPU_OP &&
        e.external_id == ext)
      return e.name;
  }
  return NULL;
}

static int cmp_ext(const void *a, const void *b) {
  const slot *x = a, *y = b;
  return x->ext < y->ext ? -1 : x->ext > y->ext;
}

/* The ops holding most at the peak (live in l, which this reorders), into
 * out. */
static void top_holders(const loom_trace *t, live *l, char *out, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < l->cap; i++)
    if (l->s[i].used) l->s[k++] = l->s[i];
  qsort(l->s, k, sizeof *l->s, cmp_ext);
  struct holder { uint64_t ext, bytes; } top[3] = {{0, 0}, {0, 0}, {0, 0}};
  for (size_t i = 0; i < k;) {
    struct holder h = {l->s[i].ext, 0};
    for (; i < k && l->s[i].ext == h.ext; i++) h.bytes += l->s[i].bytes;
    for (int j = 0; j < 3; j++)
      if (h.bytes > top[j].bytes) {
        struct holder x = top[j];
        top[j] = h;
        h = x;
      }
  }
  size_t len = 0;
  out[0] = 0;
  for (int j = 0; j < 3 && top[j].bytes && len < n; j++) {
    const char *name = top[j].ext ? op_name(t, top[j].ext) : NULL;
    char nm[160];
    if (name) snprintf(nm, sizeof nm, "op '%s'", name);
    else snprintf(nm, sizeof nm, "outside any op");
    len += (size_t)snprintf(out + len, n - len, "%s%s %.1f MiB", j ? ", " : "", nm,
                            (double)top[j].bytes / 1048576.0);
  }
}

void record_memory_summary(const char *trace, char *out, size_t n) {
  out[0] = 0;
  loom_trace *t = NULL;
  if (loom_trace_load(trace, &t) != LOOM_OK) return;
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  size_t nm = 0, cap = 16;
  mev *v = read_events(t, &nm);
  while (cap < 2 * nm) cap *= 2;
  live l = {calloc(cap, sizeof(slot)), cap};
  size_t len = 0;
  for (int64_t dev = -1; v && l.s && nm && dev < 64 && len < n; dev++) {
    size_t at = 0, again = 0;
    uint64_t peak = replay(v, nm, dev, &l, &at);
    if (!peak) continue;
    replay(v, at, dev, &l, &again); /* what was live at the peak */
    char where[32], who[512];
    if (dev < 0) snprintf(where, sizeof where, "host");
    else snprintf(where, sizeof where, "device %lld", (long long)dev);
    top_holders(t, &l, who, sizeof who);
    len += (size_t)snprintf(out + len, n - len, "%s%s memory peak %.1f MiB at %.3f s (%s)",
                            len ? "; " : ", ", where, (double)peak / 1048576.0,
                            (double)(v[at - 1].ts - sum.start_ns) * 1e-9, who);
  }
  free(l.s);
  free(v);
  loom_trace_free(t);
}
