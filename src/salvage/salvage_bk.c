/*
 * salvage_bk.c - rebuilds, from a dead process's arena, what its backends
 * had handed to the core (records, arguments, clocks and sync points,
 * devices, resources, losses), the metadata it set with loom_meta_set and
 * the names it gave with loom_thread_name (bkarena.c, meta.c and hostrec.c
 * wrote them).  The backends become stand-ins that collect.c converts as it
 * does live ones; the records' strings are interned ids of the dead process,
 * re-interned here from the arena's copies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "salvage/salvage_bk.h"

static int valid(_Atomic uint32_t *w) { return atomic_load_explicit(w, memory_order_acquire) == 1; }

void loom__salvage_bk_take(loom__salvage_bk *k, uint32_t kind, void *body, uint64_t room) {
  int rc = 0;
  switch (kind) {
  case LOOM__AO_BK:
    if (room >= sizeof(loom__abk) && valid(&((loom__abk *)body)->valid))
      rc = LOOM__PUSH(k->bks, k->nbks, k->cap_bks, (loom__abk *)body);
    break;
  case LOOM__AO_CLK: {
    loom__aclk *c = body;
    if (room >= sizeof *c && valid(&c->valid) && c->nsync <= c->cap &&
        (room - sizeof *c) / sizeof(loom__async) >= c->cap)
      rc = LOOM__PUSH(k->clks, k->nclks, k->cap_clks, c);
    break;
  }
  case LOOM__AO_DEV: {
    loom__adev *d = body;
    if (room >= sizeof *d && valid(&d->valid) &&
        (room - sizeof *d) / sizeof(loom__targ) >= d->nprops)
      rc = LOOM__PUSH(k->devs, k->ndevs, k->cap_devs, d);
    break;
  }
  case LOOM__AO_RES:
    if (room >= sizeof(loom__ares) && valid(&((loom__ares *)body)->valid))
      rc = LOOM__PUSH(k->res, k->nres, k->cap_res, (loom__ares *)body);
    break;
  case LOOM__AO_KV: {
    loom__akv *a = body;
    uint64_t need = (uint64_t)a->klen + 1 + (a->vlen == UINT32_MAX ? 0 : (uint64_t)a->vlen + 1);
    if (room >= sizeof *a && valid(&a->valid) && need <= room - sizeof *a &&
        !a->s[a->klen] && (a->vlen == UINT32_MAX || !a->s[a->klen + 1 + a->vlen]))
      rc = LOOM__PUSH(k->kvs, k->nkvs, k->cap_kvs, a);
    break;
  }
  default:
    break;
  }
  if (rc) k->torn++;
}

/* This process's id of the dead one's string id. */
static uint32_t remap(loom__salvage_bk *k, uint32_t id) {
  if (!id) return 0;
  uint64_t *hit = loom__map_get(&k->ids, id);
  if (hit) return (uint32_t)(*hit - 1);
  char buf[96];
  const char *s = id < k->nstrs ? k->strs[id] : NULL;
  if (!s) {
    snprintf(buf, sizeof buf, "<string %u: not in loom's shared memory>", id);
    s = buf;
    k->unresolved++;
  }
  uint32_t mine = loom__intern(s, SIZE_MAX);
  (void)loom__map_put(&k->ids, id, (uint64_t)mine + 1);
  return mine;
}

static void remap_args(loom__salvage_bk *k, loom__targ *a, size_t n) {
  for (size_t i = 0; i < n; i++) {
    a[i].key = remap(k, a[i].key);
    if (a[i].type == LOOM_ARG_STRING) a[i].v.s = remap(k, a[i].v.s);
  }
}

static void term(char *s, size_t n) { s[n - 1] = 0; }

/* The newest copy of each of the backend's clocks. */
static int build_clocks(loom__salvage_bk *k, loom__bsess *bs, uint64_t serial) {
  size_t n = 0;
  for (size_t i = 0; i < k->nclks; i++)
    if (k->clks[i]->bk == serial && k->clks[i]->index < 4096 && k->clks[i]->index + 1u > n)
      n = k->clks[i]->index + 1u;
  if (!n) return 0;
  if (!(bs->clocks = calloc(n, sizeof *bs->clocks))) return -1;
  bs->nclocks = bs->cap_clocks = n;
  uint64_t *seq = calloc(n, sizeof *seq);
  if (!seq) return -1;
  for (size_t i = 0; i < n; i++) bs->clocks[i].domain = LOOM_CLOCK_DEVICE; /* none kept: no sync */
  int rc = 0;
  for (size_t i = 0; i < k->nclks && rc == 0; i++) {
    loom__aclk *a = k->clks[i];
    if (a->bk != serial || a->index >= n || a->seq < seq[a->index]) continue;
    seq[a->index] = a->seq;
    loom__clock *c = &bs->clocks[a->index];
    free(c->sync);
    free(c->name);
    term(a->name, sizeof a->name);
    *c = (loom__clock){.domain = a->domain <= LOOM_CLOCK_DEVICE ? (loom_clock_domain)a->domain
                                                                 : LOOM_CLOCK_DEVICE,
                       .name = loom__strdup(a->name)};
    uint64_t bits = atomic_load(&a->rate_bits);
    memcpy(&c->ns_per_tick, &bits, sizeof bits);
    uint32_t ns = atomic_load_explicit(&a->nsync, memory_order_acquire);
    if (ns && !(c->sync = calloc(ns, sizeof *c->sync))) rc = -1;
    for (uint32_t p = 0; rc == 0 && p < ns; p++)
      c->sync[p] = (loom__sync){a->sync[p].dev, a->sync[p].epoch,
                                (loom_clock_domain)(a->sync[p].host_domain < LOOM_CLOCK_DEVICE
                                                        ? a->sync[p].host_domain : 0),
                                a->sync[p].host_ts};
    if (rc == 0) c->nsync = c->cap_sync = ns;
  }
  free(seq);
  return rc;
}

/* The records of the current view, copied (the arena's stay as they were). */
static int build_records(loom__salvage_bk *k, loom__bsess *bs, loom__abk *a, loom__salvage_bk_tr tr,
                         const void *ctx) {
  uint32_t cur = atomic_load_explicit(&a->view, memory_order_acquire) & 1;
  loom__abk_view *v = &a->v[cur];
  uint64_t nr = atomic_load_explicit(&v->nrecs, memory_order_acquire);
  uint64_t na = atomic_load_explicit(&v->nargs, memory_order_acquire);
  if (atomic_load(&a->moving)) nr = 0; /* died while a ring moved them: counted */
  const loom__drec *r = nr ? tr(ctx, v->recs, nr * sizeof *r) : NULL;
  const loom__targ *g = na ? tr(ctx, v->args, na * sizeof *g) : NULL;
  if ((nr && !r) || (na && !g)) {
    k->torn++;
    return 0;
  }
  if (nr && !(bs->recs = malloc(nr * sizeof *bs->recs))) return -1;
  if (na && !(bs->args = malloc(na * sizeof *bs->args))) return -1;
  for (uint64_t i = 0; i < nr; i++) {
    if ((uint64_t)r[i].args_off + r[i].nargs > na) { /* cannot be: left out, counted */
      k->torn++;
      continue;
    }
    loom__drec d = r[i];
    d.name = remap(k, d.name);
    d.cat = remap(k, d.cat);
    bs->recs[bs->nrecs++] = d;
  }
  if (na) memcpy(bs->args, g, na * sizeof *g);
  bs->nargs = bs->cap_args = na;
  bs->cap_recs = bs->nrecs;
  remap_args(k, bs->args, bs->nargs);
  return 0;
}

static int add_lost(loom__bsess *bs, uint64_t n, const char *reason) {
  if (!n) return 0;
  size_t i = 0, max = sizeof bs->lost_by / sizeof bs->lost_by[0];
  while (i < max && bs->lost_by[i].reason) i++;
  if (i == max) i = max - 1;
  else if (!(bs->lost_by[i].reason = loom__strdup(reason))) return -1;
  bs->lost_by[i].n += n;
  bs->lost += n;
  return 0;
}

static int build_backend(loom__salvage_bk *k, loom_session *s, loom__abk *a, loom__salvage_bk_tr tr,
                         const void *ctx) {
  loom_backend *b = calloc(1, sizeof *b);
  loom__bsess *bs = b ? calloc(1, sizeof *bs) : NULL;
  if (!bs || LOOM__PUSH(k->fake, k->nfake, k->cap_fake, b)) {
    free(b);
    free(bs);
    return -1;
  }
  term(a->name, sizeof a->name);
  term(a->device_type, sizeof a->device_type);
  term(a->runtime_cat, sizeof a->runtime_cat);
  term(a->driver_cat, sizeof a->driver_cat);
  b->ops = (loom_backend_ops){.struct_size = sizeof b->ops, .abi_major = LOOM_ABI_MAJOR,
                              .abi_minor = LOOM_ABI_MINOR, .name = a->name,
                              .device_type = a->device_type,
                              .runtime_category = a->runtime_cat[0] ? a->runtime_cat : NULL,
                              .driver_category = a->driver_cat[0] ? a->driver_cat : NULL};
  pthread_mutex_init(&b->mu, NULL);
  b->bs = bs;
  b->index = a->serial; /* matched by devices below */
  bs->s = s;
  bs->src = (uint16_t)a->src;
  bs->kinds = LOOM_KINDS_ALL;
  bs->closed = 1;
  bs->overwritten = atomic_load(&a->overwritten);
  for (size_t i = 0; i < sizeof a->lost_by / sizeof a->lost_by[0]; i++) {
    uint64_t n = atomic_load_explicit(&a->lost_by[i].n, memory_order_acquire);
    term(a->lost_by[i].reason, sizeof a->lost_by[i].reason);
    if (n && add_lost(bs, n, a->lost_by[i].reason[0] ? a->lost_by[i].reason : "no reason given"))
      return -1;
  }
  if (add_lost(bs, atomic_load(&a->held), "they were in the process's memory when it died "
               "(loom's shared memory could not grow)") ||
      add_lost(bs, atomic_load(&a->moving), "the process died while ring mode moved them"))
    return -1;
  if (build_records(k, bs, a, tr, ctx) || build_clocks(k, bs, a->serial)) return -1;
  return LOOM__PUSH(s->bk, s->nbk, s->cap_bk, b);
}

static loom_backend *backend_of(const loom__salvage_bk *k, uint64_t serial) {
  for (size_t i = 0; i < k->nfake; i++)
    if (k->fake[i]->index == serial) return k->fake[i];
  return NULL;
}

static int build_devices(loom__salvage_bk *k, loom_session *s) {
  size_t nd = 0, nr = 0;
  for (size_t i = 0; i < k->ndevs; i++)
    if (k->devs[i]->index < 65536 && k->devs[i]->index + 1u > nd) nd = k->devs[i]->index + 1u;
  for (size_t i = 0; i < k->nres; i++)
    if (k->res[i]->index < (1u << 20) && k->res[i]->index + 1u > nr) nr = k->res[i]->index + 1u;
  if ((nd && !(s->devs = calloc(nd, sizeof *s->devs))) ||
      (nr && !(s->res = calloc(nr, sizeof *s->res))))
    return -1;
  s->ndevs = s->cap_devs = nd;
  s->nres = s->cap_res = nr;
  for (size_t i = 0; i < nr; i++) s->res[i].device = UINT32_MAX; /* none kept */
  for (size_t i = 0; i < k->ndevs; i++) {
    loom__adev *a = k->devs[i];
    if (a->index >= nd) continue;
    loom__sdev *d = &s->devs[a->index];
    if (d->name) continue; /* two copies of one: cannot be, the first wins */
    term(a->name, sizeof a->name);
    term(a->vendor, sizeof a->vendor);
    term(a->type, sizeof a->type);
    d->b = backend_of(k, a->bk); /* NULL: its backend had left the session */
    if (!(d->name = loom__strdup(a->name)) || !(d->vendor = loom__strdup(a->vendor)) ||
        !(d->type = loom__strdup(a->type)))
      return -1;
    if (a->nprops && !(d->props = malloc(a->nprops * sizeof *d->props))) return -1;
    if (a->nprops) memcpy(d->props, a->props, a->nprops * sizeof *d->props);
    d->nprops = a->nprops;
    remap_args(k, d->props, d->nprops);
  }
  for (size_t i = 0; i < k->nres; i++) {
    loom__ares *a = k->res[i];
    if (a->index >= nr) continue;
    free(s->res[a->index].name); /* two copies of one: cannot be, the last wins */
    term(a->name, sizeof a->name);
    s->res[a->index] = (loom__sres){a->device, loom__strdup(a->name), a->native_id, NULL};
    if (!s->res[a->index].name) return -1;
  }
  return 0;
}

/* The latest copy of each metadata key (removed ones end it). */
static int build_meta(loom__salvage_bk *k, loom_session *s) {
  for (size_t i = 0; i < k->nkvs; i++) {
    loom__akv *a = k->kvs[i];
    if (a->what != LOOM__AKV_META || a->vlen == UINT32_MAX) continue;
    int latest = 1;
    for (size_t j = 0; j < k->nkvs && latest; j++)
      if (k->kvs[j]->what == LOOM__AKV_META && k->kvs[j]->seq > a->seq &&
          !strcmp(k->kvs[j]->s, a->s))
        latest = 0;
    if (latest && loom__kvs_set(&s->meta, a->s, a->s + a->klen + 1)) return -1;
  }
  return 0;
}

const char *loom__salvage_bk_thread_name(void *ud, int64_t tid) {
  loom__salvage_bk *k = ud;
  const loom__akv *best = NULL;
  for (size_t i = 0; i < k->nkvs; i++)
    if (k->kvs[i]->what == LOOM__AKV_THREAD && k->kvs[i]->tid == (uint64_t)tid &&
        (!best || k->kvs[i]->seq > best->seq))
      best = k->kvs[i];
  return best && best->vlen != UINT32_MAX ? best->s + best->klen + 1 : NULL;
}

int loom__salvage_bk_build(loom__salvage_bk *k, loom_session *s, loom__salvage_bk_tr tr,
                           const void *ctx, const char **strs, size_t nstrs) {
  k->strs = strs;
  k->nstrs = nstrs;
  for (size_t i = 0; i < k->nbks; i++)
    if (build_backend(k, s, k->bks[i], tr, ctx)) return -1;
  return build_devices(k, s) || build_meta(k, s) ? -1 : 0;
}

/* 1 when type is an element of the list "a,b,c". */
static int listed(const char *list, const char *type) {
  size_t tl = strlen(type);
  for (const char *p = list; *p;) {
    size_t l = strcspn(p, ",");
    if (l == tl && !strncmp(p, type, l)) return 1;
    p += l;
    if (*p) p++;
  }
  return 0;
}

/* A backend that handed nothing, lost nothing and declared no device: a
 * runtime the program never used (loom record enables OpenCL, Vulkan, MPI
 * wherever they are installed), not worth a warning per process unless the
 * user asked for its device type. */
static int unused(const loom__salvage_bk *k, const loom_backend *b, const char *quiet) {
  if (!quiet || b->bs->nrecs || b->bs->lost || listed(quiet, b->ops.device_type)) return 0;
  for (size_t i = 0; i < k->ndevs; i++)
    if (k->devs[i]->bk == b->index) return 0; /* index: its serial (make_backend) */
  return 1;
}

int loom__salvage_bk_report(loom__salvage_bk *k, loom_trace *t, const char *quiet, char *sum,
                            size_t n, uint64_t *lost, uint64_t *kept) {
  size_t len = 0;
  sum[0] = 0;
  for (size_t i = 0; i < k->nfake; i++) {
    loom_backend *b = k->fake[i];
    loom__bsess *bs = b->bs;
    if (!bs->nrecs && !bs->lost && !strcmp(b->ops.device_type, "cpu"))
      continue; /* host annotations are handed over as made: the program made none */
    if (unused(k, b, quiet)) continue;
    if (!bs->nrecs && !bs->lost) { /* a device backend that had handed loom nothing */
      char w[600];
      snprintf(w, sizeof w, "backend '%s' (device type %s) had handed no records to loom when the "
               "process died: whatever it still held in its own buffers is lost (CPU sampling, "
               "for one, unwinds and names its samples only at the session's end, so a killed "
               "program keeps none)", b->ops.name, b->ops.device_type);
      loom__log(LOOM_SEV_WARNING, "%s", w);
      if (loom__trace_add_warning(t, w)) return -1;
      if (len < n)
        len += (size_t)snprintf(sum + len, n - len, ", backend '%s' nothing kept", b->ops.name);
      continue;
    }
    uint64_t dev = 0;
    for (size_t r = 0; r < bs->nrecs; r++) dev += bs->recs[r].device != LOOM_DEVICE_HOST;
    char w[512];
    snprintf(w, sizeof w, "backend '%s': %zu records it had handed to loom were rebuilt from "
             "shared memory (%llu of device work), %llu lost%s; device work still in the "
             "runtime's buffers at death is lost too (not known to loom, not counted)",
             b->ops.name, bs->nrecs, (unsigned long long)dev, (unsigned long long)bs->lost,
             bs->lost ? " (see its loss warning)" : "");
    loom__log(LOOM_SEV_WARNING, "%s", w);
    if (loom__trace_add_warning(t, w)) return -1;
    *kept += bs->nrecs;
    *lost += bs->lost;
    if (len < n)
      len += (size_t)snprintf(sum + len, n - len, ", backend '%s' %zu records kept and %llu lost",
                              b->ops.name, bs->nrecs, (unsigned long long)bs->lost);
  }
  return 0;
}

void loom__salvage_bk_free(loom__salvage_bk *k, loom_session *s) {
  for (size_t i = 0; i < k->nfake; i++) {
    loom__bsess_free(k->fake[i]->bs);
    pthread_mutex_destroy(&k->fake[i]->mu);
    free(k->fake[i]);
  }
  free(k->fake);
  if (s) {
    free(s->bk);
    for (size_t i = 0; i < s->ndevs; i++) {
      free(s->devs[i].name);
      free(s->devs[i].vendor);
      free(s->devs[i].type);
      free(s->devs[i].props);
    }
    free(s->devs);
    for (size_t i = 0; i < s->nres; i++) free(s->res[i].name);
    free(s->res);
    loom__kvs_free(&s->meta);
  }
  free(k->bks);
  free(k->clks);
  free(k->devs);
  free(k->res);
  free(k->kvs);
  loom__map_free(&k->ids);
}
