/*
 * memory.c - memory events in the file formats (memory.h): an event's
 * arguments, the running totals per device and per series (device and
 * memory kind) that the writers add, in time order, from the trace layer's
 * accounting (trace/memory.h), and Kineto's [memory] instant turned back
 * into the model's memory event by the JSON reader.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/memory.h"

static uint32_t find(const loom_trace *t, const char *s) {
  return loom__strtab_find(&t->strs, s, strlen(s));
}

void loom__memkeys_find(loom__memkeys *k, const loom_trace *t) {
  k->addr = find(t, "addr");
  k->bytes = find(t, "bytes");
  k->device = find(t, "device");
  k->kind = find(t, "memory_kind");
  k->reserved = find(t, "reserved");
  k->total_alloc = find(t, "Total Allocated");
  k->total_res = find(t, "Total Reserved");
  k->dev_type = find(t, "Device Type");
  k->dev_id = find(t, "Device Id");
  k->v_device = find(t, "device");
  k->v_host = find(t, "host");
}

int loom__memkeys_mapped(const loom__memkeys *k, uint32_t key, int foreign) {
  if (!key) return 0;
  return key == k->addr || key == k->bytes || key == k->device || key == k->kind ||
         key == k->total_alloc || key == k->total_res || key == k->dev_type ||
         key == k->dev_id || (foreign && key == k->reserved);
}

/* A count from a number argument (a double in range, else its nearest). */
static uint64_t num_u(const loom__targ *a) {
  if (a->type != LOOM_ARG_DOUBLE) return a->v.u;
  double d = a->v.d;
  return !(d > 0) ? 0 : d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
}

void loom__memev_of(const loom__memkeys *k, const loom__ev *e, const loom__targ *args,
                    loom__memev *m) {
  memset(m, 0, sizeof *m);
  m->is_free = (LOOM__EV_ROLE_OF(e) & LOOM_RECORD_F_FREE) != 0;
  for (uint16_t i = 0; i < e->nargs; i++) {
    const loom__targ *a = &args[i];
    int num = a->type != LOOM_ARG_STRING;
    if (!a->key) continue;
    if (a->key == k->addr && num) m->addr = num_u(a);
    else if (a->key == k->bytes && num) m->bytes = num_u(a), m->has_bytes = 1;
    else if (a->key == k->device && (a->type == LOOM_ARG_INT || a->type == LOOM_ARG_UINT))
      m->device = a->v.i, m->has_device = 1;
    else if (a->key == k->kind && !num) m->kind = a->v.s;
    else if (a->key == k->reserved && num) m->reserved = num_u(a), m->has_reserved = 1;
    else if (a->key == k->total_alloc) m->total_alloc = a;
    else if (a->key == k->total_res) m->total_res = a;
    else if (a->key == k->dev_type) m->dev_type = a;
    else if (a->key == k->dev_id) m->dev_id = a;
  }
}

const char *loom__memev_kind(const loom_trace *t, const loom__memev *m) {
  if (m->kind) return loom__trace_cstr(t, m->kind);
  return m->has_device ? "device" : "host";
}

/* ---- running totals: the trace layer's accounting ---------------------- */
/* The series' name, once: counters are written under it. */
static void series_name(loom__memseries *s, const loom_trace *t, const loom__mem_ev *m) {
  const char *kind = loom__mem_kind_name(t, m->device, m->kind);
  if (m->device != LOOM__MEM_HOST)
    snprintf(s->name, sizeof s->name, "Memory (device %lld, %.40s)", (long long)m->device,
             kind);
  else if (!m->kind)
    snprintf(s->name, sizeof s->name, "Memory (host)");
  else
    snprintf(s->name, sizeof s->name, "Memory (host, %.40s)", kind);
}

int loom__memacc_add(loom__memacc *a, const loom_trace *t, const loom__ev *e,
                     const loom__targ *args, loom__memstate *out) {
  if (!a->m && !(a->m = loom__mem_new(0, 1, 0))) return -1;
  loom__mem_keys_find(&a->keys, t);
  loom__mem_ev m;
  loom__mem_read(&a->keys, e, args, &m);
  if (m.device == LOOM__MEM_HOST) m.pid = t->tracks[e->track].pid; /* each process's own */
  loom__mem_after af;
  long si = loom__mem_add(a->m, &m, &af);
  if (si < 0) return -1;
  if ((size_t)si == a->nseries) {
    loom__memseries s = {.pid = m.device == LOOM__MEM_HOST ? m.pid : m.device};
    series_name(&s, t, &m);
    if (LOOM__PUSH(a->series, a->nseries, a->cap_series, s)) return -1;
  }
  memset(out, 0, sizeof *out);
  out->series = (uint32_t)si;
  out->bytes = m.bytes ? m.bytes : af.bytes; /* as the event said, else its allocation's */
  out->unknown = af.unknown;
  out->counted = !af.unknown || (m.flags & LOOM__MEM_HAS_RESERVED);
  out->total_alloc = af.dev_in_use, out->total_res = af.dev_reserved;
  out->in_use = af.in_use, out->reserved = af.reserved;
  out->has_reserved = af.has_reserved;
  return 0;
}

void loom__memacc_free(loom__memacc *a) {
  loom__mem_free(a->m);
  free(a->series);
  memset(a, 0, sizeof *a);
}

/* ---- a whole trace, in time order -------------------------------------- */
/* Slots of p->ev by time (ties: pid, tid, index). */
static int cmp_time(const void *pa, const void *pb, void *ctx) {
  const loom__memplan *p = ((const void **)ctx)[0];
  const loom_trace *t = ((const void **)ctx)[1];
  uint32_t ia = p->ev[*(const uint32_t *)pa], ib = p->ev[*(const uint32_t *)pb];
  const loom__ev *a = &t->ev[ia], *b = &t->ev[ib];
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  const loom__track *x = &t->tracks[a->track], *y = &t->tracks[b->track];
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return ia < ib ? -1 : ia > ib;
}

/* The slots in time order; NULL in *order when the events already are. */
static int time_order(loom__memplan *p, const loom_trace *t, uint32_t **order) {
  *order = NULL;
  const void *ctx[2] = {p, t};
  for (size_t i = 1; i < p->n; i++) {
    uint32_t a = (uint32_t)i - 1, b = (uint32_t)i;
    if (cmp_time(&a, &b, ctx) <= 0) continue;
    if (!(*order = malloc(p->n * sizeof **order))) return -1;
    for (size_t k = 0; k < p->n; k++) (*order)[k] = (uint32_t)k;
    qsort_r(*order, p->n, sizeof **order, cmp_time, ctx);
    return 0;
  }
  return 0;
}

int loom__memplan_build(loom__memplan *p, const loom_trace *t) {
  memset(p, 0, sizeof *p);
  loom__memkeys_find(&p->keys, t);
  for (size_t i = 0; i < t->nev; i++) p->n += t->ev[i].kind == LOOM_KIND_MEMORY;
  if (!p->n) return 0;
  p->ev = malloc(p->n * sizeof *p->ev);
  p->st = malloc(p->n * sizeof *p->st);
  if (!p->ev || !p->st) return -1;
  for (size_t i = 0, k = 0; i < t->nev; i++)
    if (t->ev[i].kind == LOOM_KIND_MEMORY) p->ev[k++] = (uint32_t)i;
  uint32_t *order;
  if (time_order(p, t, &order)) return -1;
  int rc = 0;
  for (size_t i = 0; !rc && i < p->n; i++) {
    size_t slot = order ? order[i] : i;
    const loom__ev *e = &t->ev[p->ev[slot]];
    rc = loom__memacc_add(&p->acc, t, e, e->nargs ? t->args + e->args_off : NULL, &p->st[slot]);
  }
  free(order);
  return rc;
}

const loom__memstate *loom__memplan_get(loom__memplan *p, uint32_t ev) {
  if (p->at < p->n && p->ev[p->at] == ev) return &p->st[p->at++];
  size_t lo = 0, hi = p->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p->ev[mid] < ev) lo = mid + 1;
    else hi = mid;
  }
  if (lo >= p->n || p->ev[lo] != ev) return NULL;
  p->at = lo + 1;
  return &p->st[lo];
}

void loom__memplan_free(loom__memplan *p) {
  free(p->ev);
  free(p->st);
  loom__memacc_free(&p->acc);
  memset(p, 0, sizeof *p);
}
