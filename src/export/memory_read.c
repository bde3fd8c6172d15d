/*
 * memory_read.c - Kineto's [memory] instant read back into the model's
 * memory event (memory.h, docs/formats.md "Memory"): loom's own, whose
 * running totals are derived and left out, and PyTorch's (written with
 * profile_memory=True), whose totals are its allocator's and are kept.
 */
#include <stdlib.h>
#include <string.h>

#include "export/memory.h"

int loom__memread_init(loom__memread *r, loom_trace *t) {
  const char *s[] = {"[memory]", LOOM__MEM_COUNTER_CAT, "Addr", "Bytes", "Total Allocated",
                     "Total Reserved", "Device Type", "Device Id", "loom_call",
                     "loom_memory_kind", "loom_unknown_free", "loom_cat", "reserved", "addr",
                     "bytes", "device", "memory_kind", "host", "pool"};
  uint32_t *d[] = {&r->name, &r->counter_cat, &r->k_addr, &r->k_bytes, &r->k_talloc, &r->k_tres,
                   &r->k_dtype, &r->k_did, &r->k_call, &r->k_kind, &r->k_unknown, &r->k_cat,
                   &r->k_reserved, &r->m_addr, &r->m_bytes, &r->m_device, &r->m_kind,
                   &r->v_host, &r->v_pool};
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    if (!(*d[i] = loom__trace_str(t, s[i]))) return -1;
  return 0;
}

/* Where each argument the mapping reads is (-1: absent); odd: one of
 * Kineto's integers is not one (a string, a fraction, a negative address),
 * so the event is left as the instant it is (written back as read). */
typedef struct found {
  long addr, bytes, talloc, tres, dtype, did, call, kind, unknown, cat, reserved;
  int odd;
} found;

static int integer(const loom__targ *a) {
  return a->type == LOOM_ARG_UINT || a->type == LOOM_ARG_INT;
}

static void find_args(const loom__memread *r, const loom__targ *a, size_t n, found *f) {
  memset(f, 0xff, sizeof *f);
  f->odd = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t k = a[i].key;
    int str = a[i].type == LOOM_ARG_STRING && !a[i].json;
    long *at = k == r->k_addr ? &f->addr : k == r->k_bytes ? &f->bytes
             : k == r->k_talloc ? &f->talloc : k == r->k_tres ? &f->tres
             : k == r->k_dtype ? &f->dtype : k == r->k_did ? &f->did
             : k == r->k_call && str ? &f->call : k == r->k_kind && str ? &f->kind
             : k == r->k_unknown ? &f->unknown : k == r->k_cat && str ? &f->cat
             : k == r->k_reserved ? &f->reserved : NULL;
    if (!at || *at >= 0) continue;
    *at = (long)i;
    if ((at == &f->addr || at == &f->bytes || at == &f->dtype || at == &f->did) && !integer(&a[i]))
      f->odd = 1;
    if (at == &f->addr && a[i].type == LOOM_ARG_INT && a[i].v.i < 0) f->odd = 1;
  }
}

static int64_t num_i(const loom__targ *a) {
  return a->v.i; /* an integer (find_args): a uint as its bits */
}

/* Whether argument i is left out of the model's other arguments: what the
 * mapping made fields or model arguments of, and the derived figures. */
static int dropped(const found *f, long i, int foreign, int tres_moved) {
  if (i == f->addr || i == f->bytes || i == f->call || i == f->kind || i == f->unknown ||
      i == f->cat)
    return 1;
  if (i == f->talloc) return !foreign;
  if (i == f->tres) return !foreign || tres_moved;
  if (i == f->reserved) return !foreign; /* moved after memory_kind */
  return 0;
}

static loom__targ targ_u(uint32_t key, uint64_t v) {
  loom__targ a = {.key = key, .type = LOOM_ARG_UINT};
  a.v.u = v;
  return a;
}

/* The model's arguments of the event: addr, bytes, device (a device's
 * memory), memory_kind, reserved (when given), then the rest as read. */
static int rewrite(const loom__memread *r, const found *f, loom__targ *a, size_t n,
                   loom__targ *out, size_t *nout) {
  int foreign = f->kind < 0;
  int64_t dtype = f->dtype >= 0 ? num_i(&a[f->dtype]) : 0;
  int64_t did = f->did >= 0 ? num_i(&a[f->did]) : -1;
  int has_device = dtype != 0;
  int64_t bytes = num_i(&a[f->bytes]);
  size_t k = 0;
  out[k++] = targ_u(r->m_addr, a[f->addr].v.u);
  out[k++] = targ_u(r->m_bytes, a[f->bytes].type == LOOM_ARG_UINT ? a[f->bytes].v.u
                                : bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes);
  if (has_device) out[k++] = (loom__targ){.key = r->m_device, .type = LOOM_ARG_INT, .v.i = did};
  out[k] = (loom__targ){.key = r->m_kind, .type = LOOM_ARG_STRING};
  out[k++].v.s = !foreign ? a[f->kind].v.s : has_device ? r->v_pool : r->v_host;
  if (!foreign && f->reserved >= 0) { /* a uint in the model, whatever JSON made of it */
    out[k] = a[f->reserved];
    if (out[k].type == LOOM_ARG_INT && out[k].v.i >= 0) out[k].type = LOOM_ARG_UINT;
    k++;
  }
  /* a device's Total Reserved is its pool's reserved (a count of bytes) */
  int tres_moved = foreign && has_device && f->tres >= 0 && integer(&a[f->tres]) &&
                   (a[f->tres].type == LOOM_ARG_UINT || a[f->tres].v.i >= 0);
  if (tres_moved) out[k++] = targ_u(r->k_reserved, a[f->tres].v.u);
  for (size_t i = 0; i < n; i++) {
    if (dropped(f, (long)i, foreign, tres_moved)) continue;
    if ((long)i == f->dtype && (dtype == 0 || dtype == 1)) continue; /* the writer's own */
    if ((long)i == f->did && (has_device || did == -1)) continue;
    out[k++] = a[i];
  }
  *nout = k;
  return 0;
}

int loom__memread_event(const loom__memread *r, loom__ev *e, loom__targ **args, size_t *nargs,
                        size_t *cap) {
  found f;
  loom__targ *a = *args;
  find_args(r, a, *nargs, &f);
  if (f.addr < 0 || f.bytes < 0 || f.odd) return 0;
  int64_t bytes = num_i(&a[f.bytes]);
  unsigned roles = LOOM__EV_ROLE_OF(e);
  if (!(roles & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE)))
    roles |= bytes < 0 && a[f.bytes].type != LOOM_ARG_UINT ? LOOM_RECORD_F_FREE
                                                          : LOOM_RECORD_F_ALLOC;
  e->flags = (uint16_t)((e->flags & ~LOOM__EV_ROLES) | roles << LOOM__EV_ROLE_SHIFT);
  e->kind = LOOM_KIND_MEMORY;
  e->ph = LOOM__PH_INSTANT;
  e->dur = 0;
  if (f.call >= 0) e->name = a[f.call].v.s;
  if (f.cat >= 0) e->cat = a[f.cat].v.s;
  loom__targ *out = malloc((*nargs + 3) * sizeof *out);
  if (!out) return -1;
  size_t n;
  rewrite(r, &f, a, *nargs, out, &n);
  if (n > *cap && loom__grow((void **)args, cap, n, sizeof **args)) {
    free(out);
    return -1;
  }
  memcpy(*args, out, n * sizeof *out);
  *nargs = n;
  free(out);
  return 0;
}
