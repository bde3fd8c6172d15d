/*
 * objects.c - the Level Zero backend's devices, queues, lists, kernels and
 * own event pools, and the device records read from completed commands
 * (kernel timestamps extended and converted with the device's clock).
 */
#include "backend.h"

/* ---- devices --------------------------------------------------------------- */
xdev devs[16];
size_t ndevs;

/* ---- objects: queues, lists, kernels, own event pools --------------------- */
obj *objs;
size_t nobjs;
static size_t cap_objs;
static uint64_t serial;

static kinfo *kernels;
static size_t nkernels, cap_kernels;

mypool *pools[16];
size_t npools;

obj *find_obj(void *h) {
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].h == h) return &objs[i];
  return NULL;
}
obj *add_obj(void *h, int type, ze_device_handle_t d, ze_context_handle_t c) {
  obj *o = find_obj(h);
  if (!o) {
    if (nobjs == cap_objs) {
      size_t nc = cap_objs ? cap_objs * 2 : 32;
      obj *p = realloc(objs, nc * sizeof *p);
      if (!p) return NULL;
      objs = p, cap_objs = nc;
    }
    o = &objs[nobjs++];
  } else {
    free(o->c);
  }
  memset(o, 0, sizeof *o);
  o->h = h, o->type = type, o->dev = d, o->ctx = c, o->native = ++serial;
  return o;
}
int push_cmd(obj *o, const cmd *c) {
  if (o->n == o->cap) {
    size_t nc = o->cap ? o->cap * 2 : 64;
    cmd *p = realloc(o->c, nc * sizeof *p);
    if (!p) return -1;
    o->c = p, o->cap = nc;
  }
  o->c[o->n++] = *c;
  return 0;
}
kinfo *find_kernel(ze_kernel_handle_t k) {
  for (size_t i = 0; i < nkernels; i++)
    if (kernels[i].h == k) return &kernels[i];
  if (nkernels == cap_kernels) {
    size_t nc = cap_kernels ? cap_kernels * 2 : 32;
    kinfo *p = realloc(kernels, nc * sizeof *p);
    if (!p) return NULL;
    kernels = p, cap_kernels = nc;
  }
  kinfo *ki = &kernels[nkernels++];
  memset(ki, 0, sizeof *ki);
  ki->h = k;
  ki->gs[0] = ki->gs[1] = ki->gs[2] = 1;
  return ki;
}
xdev *find_dev(ze_device_handle_t d) {
  for (size_t i = 0; i < ndevs; i++)
    if (devs[i].h == d) return &devs[i];
  return NULL;
}

/* An event of the backend's own timestamp pool for ctx (mu held). */
ze_event_handle_t own_event(ze_context_handle_t ctx) {
  mypool *p = NULL;
  for (size_t i = 0; i < npools; i++)
    if (pools[i]->ctx == ctx) p = pools[i];
  if (!p) {
    if (npools == 16 || !(p = calloc(1, sizeof *p))) return NULL;
    ze_event_pool_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                               .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE |
                                        ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP,
                               .count = POOL_EVENTS};
    busy++;
    ze_result_t r = ze.zeEventPoolCreate(ctx, &pd, 0, NULL, &p->pool);
    busy--;
    if (r != ZE_RESULT_SUCCESS) {
      free(p);
      return NULL;
    }
    p->ctx = ctx;
    pools[npools++] = p;
  }
  for (uint32_t i = 0; i < POOL_EVENTS; i++) {
    if (p->used[i]) continue;
    if (!p->ev[i]) {
      ze_event_desc_t ed = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC, .index = i,
                            .signal = ZE_EVENT_SCOPE_FLAG_HOST, .wait = ZE_EVENT_SCOPE_FLAG_HOST};
      busy++;
      ze_result_t r = ze.zeEventCreate(p->pool, &ed, &p->ev[i]);
      busy--;
      if (r != ZE_RESULT_SUCCESS) return NULL;
    }
    p->used[i] = 1;
    return p->ev[i];
  }
  return NULL;
}
void release_own(ze_event_handle_t e) {
  for (size_t i = 0; i < npools; i++)
    for (uint32_t k = 0; k < POOL_EVENTS; k++)
      if (pools[i]->ev[k] == e) {
        busy++;
        ze.zeEventHostReset(e);
        busy--;
        pools[i]->used[k] = 0;
        return;
      }
}

/* ---- device records ------------------------------------------------------- */
void sync_point(xdev *d) {
  uint64_t hts = 0, dts = 0;
  busy++;
  ze_result_t r = ze.zeDeviceGetGlobalTimestamps(d->h, &hts, &dts);
  busy--;
  if (r != ZE_RESULT_SUCCESS) {
    ze_host->report(ze_self, LOOM_SEV_WARNING, "zeDeviceGetGlobalTimestamps failed: %s",
                    result_name(r));
    return;
  }
  dts &= d->gmask;
  d->sync_ticks = dts, d->sync_raw = hts;
  /* The host side of the pair is CLOCK_MONOTONIC_RAW ns (as the driver reads it). */
  ze_host->clock_sync(ze_self, d->clk, (uint64_t)((double)dts * d->ns_per_tick),
                      LOOM_CLOCK_MONOTONIC_RAW, hts);
}

/* A kernel timestamp (kernelTimestampValidBits) as full device ticks: the
 * value with those low bits nearest the device time estimated now. */
static uint64_t extend(const xdev *d, uint64_t k) {
  uint64_t est = d->sync_ticks + (uint64_t)((double)(raw_now() - d->sync_raw) / d->ns_per_tick);
  uint64_t m = d->kmask, half = (m >> 1) + 1;
  uint64_t full = (est & ~m) | (k & m);
  if (m == UINT64_MAX) return k;
  if (full > est + half) full -= m + 1;
  else if (full + half < est) full += m + 1;
  return full;
}

static uint32_t session_resource(obj *o, unsigned g, xdev *d) {
  if (o->gen != g) {
    char name[64];
    snprintf(name, sizeof name, "%s %llu", o->type == OBJ_IMM ? "immediate list" : "command queue",
             (unsigned long long)o->native);
    if (ze_host->resource_add(ze_self, d->index, name, o->native, &o->res) != LOOM_OK)
      return UINT32_MAX;
    o->gen = g;
  }
  return o->res;
}

static void emit_cmd(obj *o, const cmd *c, const ze_kernel_timestamp_result_t *ts) {
  unsigned g = atomic_load(&gen);
  xdev *d = find_dev(o->dev);
  if (!d || d->gen != g) {
    ze_host->count_lost(ze_self, 1, "a command on a device the backend does not know");
    return;
  }
  uint32_t res = session_resource(o, g, d);
  uint64_t s = extend(d, ts->global.kernelStart);
  uint64_t e = s + ((ts->global.kernelEnd - ts->global.kernelStart) & d->kmask);
  uint64_t sn = (uint64_t)((double)s * d->ns_per_tick), en = (uint64_t)((double)e * d->ns_per_tick);
  loom_arg args[4];
  uint32_t n = 0;
  char gc[64], gs[64];
  if (c->kind == LOOM_KIND_KERNEL) {
    snprintf(gc, sizeof gc, "[%u, %u, %u]", c->gc[0], c->gc[1], c->gc[2]);
    snprintf(gs, sizeof gs, "[%u, %u, %u]", c->gs[0], c->gs[1], c->gs[2]);
    args[n++] = (loom_arg){.key = "group count", .type = LOOM_ARG_STRING, .v.s = gc};
    args[n++] = (loom_arg){.key = "group size", .type = LOOM_ARG_STRING, .v.s = gs};
  } else if (c->kind != LOOM_KIND_SYNC) {
    args[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = c->bytes};
    if (c->dir) args[n++] = (loom_arg){.key = "direction", .type = LOOM_ARG_STRING, .v.s = c->dir};
  }
  loom_record r = {.struct_size = sizeof r, .kind = c->kind, .clock = d->clk, .device = d->index,
                   .resource = res, .start = sn, .end = en, .name = c->name,
                   .correlation = c->corr, .nargs = n, .args = n ? args : NULL};
  ze_host->emit(ze_self, &r);
}

/* Reads, emits and drops completed pending commands of o (mu held).  With
 * wait_until (MONOTONIC_RAW ns) it waits for incomplete ones until then;
 * returns how many are left. */
size_t harvest(obj *o, uint64_t wait_until) {
  size_t i = 0;
  unsigned g = atomic_load(&gen);
  while (i < o->n) {
    cmd *c = &o->c[i];
    busy++;
    ze_result_t st = ze.zeEventQueryStatus(c->ev);
    busy--;
    if (st == ZE_RESULT_NOT_READY) {
      if (wait_until && raw_now() < wait_until) {
        struct timespec ms = {0, 100000};
        nanosleep(&ms, NULL);
        continue;
      }
      i++;
      continue;
    }
    if (c->gen == g) {
      ze_kernel_timestamp_result_t ts;
      busy++;
      ze_result_t r = st == ZE_RESULT_SUCCESS ? ze.zeEventQueryKernelTimestamp(c->ev, &ts) : st;
      busy--;
      if (r == ZE_RESULT_SUCCESS) emit_cmd(o, c, &ts);
      else ze_host->count_lost(ze_self, 1, "the driver gave no kernel timestamps for a command "
                            "(an event pool created before tracing, without timestamps?)");
    }
    if (c->mine && o->type == OBJ_IMM) release_own(c->ev);
    else if (c->mine) {
      busy++;
      ze.zeEventHostReset(c->ev); /* its list may run again */
      busy--;
    }
    o->c[i] = o->c[--o->n];
  }
  return o->n;
}
void harvest_all(uint64_t wait_until) {
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].type != OBJ_LIST) harvest(&objs[i], wait_until);
}

uint32_t device_index(ze_device_handle_t h) {
  if (!h) return LOOM_DEVICE_HOST;
  pthread_mutex_lock(&mu);
  xdev *d = find_dev(h);
  uint32_t i = d && d->gen == atomic_load(&gen) ? d->index : LOOM_DEVICE_HOST;
  pthread_mutex_unlock(&mu);
  return i;
}
