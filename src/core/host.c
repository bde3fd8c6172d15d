/*
 * host.c - the services table (loom_host) handed to backends, and
 * loom_host_get for plug-ins that find loom already loaded.
 *
 * Every service takes the backend handle; per-session data hangs off
 * b->bs, guarded by b->mu so that a record emitted from a runtime's callback
 * thread never races the session's teardown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/arena.h"
#include "core.h"
#include "record/record.h"

static loom_status svc_register(const loom_backend_ops *ops, const char *origin) {
  return loom__backend_register(ops, origin);
}

static loom_status svc_clock_declare(loom_backend *b, loom_clock_domain d,
                                     const char *name, loom_clock *out) {
  if (!b || !out || (unsigned)d > LOOM_CLOCK_DEVICE) return LOOM_EINVAL;
  loom_status st = LOOM_OK;
  pthread_mutex_lock(&b->mu);
  loom__bsess *bs = b->bs;
  loom__clock c = {.domain = d, .name = loom__strdup(name ? name : "")};
  if (!bs || bs->closed) st = LOOM_ESTATE;
  else if (LOOM__PUSH(bs->clocks, bs->nclocks, bs->cap_clocks, c) != 0) st = LOOM_ENOMEM;
  else *out = (loom_clock)bs->nclocks;
  if (st != LOOM_OK) free(c.name);
  else loom__bkarena_clock(b, bs, bs->nclocks - 1); /* for a salvage */
  if (st == LOOM_OK && d == loom__hostrec_domain() && !atomic_load(&b->rec_clock))
    atomic_store(&b->rec_clock, *out); /* host->memory's fast way takes it */
  pthread_mutex_unlock(&b->mu);
  return st;
}

static uint64_t svc_clock_now(loom_clock_domain d) { return loom__clock_now(d); }

/* The host recorder's clock (src/record/hostrec.c): its domain is decided
 * once per process, before the first read, so the two always agree. */
static uint64_t svc_recorder_now(loom_clock_domain *domain) {
  loom_clock_domain d = loom__hostrec_domain();
  if (domain) *domain = d;
  return loom__hostrec_now();
}

static loom_status svc_clock_sync(loom_backend *b, loom_clock clk, uint64_t dev,
                                  loom_clock_domain hd, uint64_t host_ts) {
  if (!b || hd >= LOOM_CLOCK_DEVICE) return LOOM_EINVAL;
  loom_status st = LOOM_OK;
  pthread_mutex_lock(&b->mu);
  loom__bsess *bs = b->bs;
  if (!bs || bs->closed) st = LOOM_ESTATE;
  else if (clk == 0 || clk > bs->nclocks || bs->clocks[clk - 1].domain != LOOM_CLOCK_DEVICE)
    st = LOOM_EINVAL;
  else {
    loom__clock *c = &bs->clocks[clk - 1];
    loom__sync sp = {dev, loom__timeline_convert(&bs->s->tl, hd, host_ts), hd, host_ts};
    if (LOOM__PUSH(c->sync, c->nsync, c->cap_sync, sp) != 0) st = LOOM_ENOMEM;
    else loom__bkarena_clock(b, bs, clk - 1);
  }
  pthread_mutex_unlock(&b->mu);
  return st;
}

/* The device clock clk of b's open session, or NULL (b->mu held). */
static loom__clock *device_clock(loom_backend *b, loom_clock clk) {
  loom__bsess *bs = b->bs;
  if (!bs || bs->closed || clk == 0 || clk > bs->nclocks) return NULL;
  loom__clock *c = &bs->clocks[clk - 1];
  return c->domain == LOOM_CLOCK_DEVICE ? c : NULL;
}

static loom_status svc_clock_set_rate(loom_backend *b, loom_clock clk, double ns_per_tick) {
  if (!b || !(ns_per_tick > 0) || ns_per_tick > 1e15) return LOOM_EINVAL;
  pthread_mutex_lock(&b->mu);
  loom__clock *c = device_clock(b, clk);
  if (c) {
    c->ns_per_tick = ns_per_tick;
    loom__bkarena_clock(b, b->bs, clk - 1);
  }
  loom_status st = c ? LOOM_OK : b->bs && !b->bs->closed ? LOOM_EINVAL : LOOM_ESTATE;
  pthread_mutex_unlock(&b->mu);
  return st;
}

static loom_status svc_clock_auto_sync(loom_backend *b, loom_clock clk,
                                       uint64_t (*read)(loom_backend *, void *),
                                       void *ctx, loom_clock_domain hd) {
  if (!b || !read || hd >= LOOM_CLOCK_DEVICE) return LOOM_EINVAL;
  pthread_mutex_lock(&b->mu);
  loom__clock *c = device_clock(b, clk);
  if (c) {
    c->auto_read = read;
    c->auto_ctx = ctx;
    c->auto_domain = hd;
  }
  loom_status st = c ? LOOM_OK : b->bs && !b->bs->closed ? LOOM_EINVAL : LOOM_ESTATE;
  int started = c && b->bs->started;
  pthread_mutex_unlock(&b->mu);
  /* Asked for while recording: a first point now, not only at stop. */
  if (started) loom__clock_auto_sync_all(b);
  return st;
}

static size_t auto_sync_some(loom_backend *b, size_t from);

void loom__clock_auto_sync_all(loom_backend *b) {
  /* 16 clocks at a time, as many times as the backend has them */
  for (size_t from = 0; (from = auto_sync_some(b, from)) != 0;) {}
}

static size_t auto_sync_some(loom_backend *b, size_t from) {
  enum { MAX = 16 };
  struct { loom_clock clk; uint64_t (*read)(loom_backend *, void *); void *ctx;
           loom_clock_domain hd; } todo[MAX];
  size_t n = 0, i = from;
  pthread_mutex_lock(&b->mu);
  loom__bsess *bs = b->bs;
  for (; bs && !bs->closed && i < bs->nclocks && n < MAX; i++)
    if (bs->clocks[i].auto_read)
      todo[n++] = (__typeof__(todo[0])){(loom_clock)(i + 1), bs->clocks[i].auto_read,
                                        bs->clocks[i].auto_ctx, bs->clocks[i].auto_domain};
  size_t more = bs && !bs->closed && i < bs->nclocks ? i : 0; /* where the next batch starts */
  pthread_mutex_unlock(&b->mu);
  /* read() runs unlocked: it may call host services.  The host domain is
   * read on both sides of it and the midpoint taken; of a few readings the
   * one with the narrowest bracket is kept, so a preemption or a slow read
   * does not become a clock error (the same rule as a ping-pong's smallest
   * round trip). */
  enum { TRIES = 7 };
  for (size_t j = 0; j < n; j++) {
    uint64_t best_dev = 0, best_host = 0, best_width = UINT64_MAX;
    for (int k = 0; k < TRIES; k++) {
      uint64_t h0 = loom__clock_now(todo[j].hd);
      uint64_t dev = todo[j].read(b, todo[j].ctx);
      uint64_t h1 = loom__clock_now(todo[j].hd);
      if (h1 - h0 < best_width)
        best_width = h1 - h0, best_dev = dev, best_host = h0 + (h1 - h0) / 2;
    }
    svc_clock_sync(b, todo[j].clk, best_dev, todo[j].hd, best_host);
  }
  return more;
}

static loom_status svc_meta_set(loom_backend *b, const char *key, const char *value) {
  if (!b || !key || !*key || !value) return LOOM_EINVAL;
  pthread_mutex_lock(&b->mu);
  struct loom_session *s = b->bs && !b->bs->closed ? b->bs->s : NULL;
  int rc = s ? loom__session_meta_set(s, key, value) : 0;
  pthread_mutex_unlock(&b->mu);
  return !s ? LOOM_ESTATE : rc ? LOOM_ENOMEM : LOOM_OK;
}

static int64_t svc_to_epoch(loom_backend *b, loom_clock clk, uint64_t ts) {
  int64_t r = (int64_t)ts;
  if (!b) return r;
  pthread_mutex_lock(&b->mu);
  loom__bsess *bs = b->bs;
  if (bs && clk && clk <= bs->nclocks) {
    loom__clock *c = &bs->clocks[clk - 1];
    loom__clock_finalize(&bs->s->tl, c);
    r = loom__clock_convert(&bs->s->tl, c, ts);
  }
  pthread_mutex_unlock(&b->mu);
  return r;
}

static loom_string_id svc_intern(loom_backend *b, const char *s, size_t len) {
  (void)b;
  return loom__intern(s, len);
}

/* Locks b and returns its session while it still accepts devices (not yet
 * flushed), or unlocks and returns NULL.  Holding b->mu across the change
 * means the session cannot close (and be collected) in the middle of it;
 * the lock order is b->mu, then s->mu. */
static struct loom_session *lock_open_session(loom_backend *b) {
  pthread_mutex_lock(&b->mu);
  struct loom_session *s = b->bs && !b->bs->closed ? b->bs->s : NULL;
  if (!s) pthread_mutex_unlock(&b->mu);
  return s;
}

/* A string of a record (its category, an argument's key or text value) as an
 * interned id.  Backends pass the same few strings on every record (an
 * annotation domain's name, literal keys, a kernel's name kept per kernel),
 * so a per-thread cache by pointer saves the interner's global lock; a hit
 * is checked against the interned copy, so a caller that reuses a buffer
 * for other text stays exact.  The literals of one record lie a few bytes
 * apart: the slot comes from a multiplicative hash of the whole pointer,
 * and each pointer may sit in either of two slots (a miss costs two locks:
 * "addr" and "bytes" sharing a slot made every memory record miss). */
#define STR_SLOTS 128
static __thread struct str_slot { /* dynamic TLS model: see hostrec.c */
  const char *ptr, *str;
  uint32_t id;
} str_cache[STR_SLOTS];

static uint32_t intern_cached(const char *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
  struct str_slot *c = str_cache, *a = &c[h >> 57], *b = &c[(h >> 57) ^ 1];
  if (a->ptr == p && !strcmp(a->str, p)) return a->id;
  if (b->ptr == p && !strcmp(b->str, p)) return b->id;
  uint32_t id = loom__intern(p, SIZE_MAX);
  const char *str = id ? loom__intern_get(id) : NULL;
  if (str) { /* the newest in a, the one it displaces in b */
    *b = *a;
    *a = (struct str_slot){p, str, id};
  }
  return id;
}

/* One argument in the trace's form (strings interned) into *a; -1 for a
 * type loom does not know (left out). */
static int convert_arg(const loom_arg *in, loom__targ *a) {
  *a = (loom__targ){.key = intern_cached(in->key ? in->key : "?"), .type = (uint8_t)in->type};
  switch (in->type) {
  case LOOM_ARG_INT: a->v.i = in->v.i; return 0;
  case LOOM_ARG_UINT: a->v.u = in->v.u; return 0;
  case LOOM_ARG_DOUBLE: a->v.d = in->v.d; return 0;
  case LOOM_ARG_STRING: a->v.s = intern_cached(in->v.s ? in->v.s : ""); return 0;
  default: return -1;
  }
}

/* Copies args into dst (strings interned). */
static int copy_args(loom__targ **dst, size_t *n, size_t *cap,
                     const loom_arg *args, size_t nargs) {
  for (size_t i = 0; i < nargs; i++) {
    loom__targ a;
    if (convert_arg(&args[i], &a) == 0 && LOOM__PUSH(*dst, *n, *cap, a) != 0) return -1;
  }
  return 0;
}

/* Marks device index i as b's (b->mu held).  Out of memory: not marked, so
 * its memory records are refused (named, counted), never wrongly taken. */
static void own_device(loom__bsess *bs, uint32_t i) {
  size_t w = i / 64, n = bs->ndevbits;
  if (w >= n && loom__grow((void **)&bs->devbits, &bs->ndevbits, w + 1, sizeof *bs->devbits))
    return;
  if (bs->ndevbits > n) memset(bs->devbits + n, 0, (bs->ndevbits - n) * sizeof *bs->devbits);
  bs->devbits[w] |= 1ull << (i % 64);
}

static int owns_device(const loom__bsess *bs, uint64_t i) {
  return i / 64 < bs->ndevbits && (bs->devbits[i / 64] >> (i % 64) & 1);
}

static loom_status svc_device_add(loom_backend *b, const loom_device_info *info,
                                  uint32_t *out) {
  if (!b || !info || !out || info->struct_size < offsetof(loom_device_info, props))
    return LOOM_EINVAL;
  struct loom_session *s = lock_open_session(b);
  if (!s) return LOOM_ESTATE;
  loom__sdev d = {b, loom__strdup(info->name ? info->name : "device"),
                  loom__strdup(info->vendor ? info->vendor : ""),
                  loom__strdup(info->type ? info->type : ""), NULL, 0, NULL};
  size_t cap = 0;
  const loom_arg *props = info->struct_size >= sizeof *info ? info->props : NULL;
  loom_status st = LOOM_OK;
  pthread_mutex_lock(&s->mu);
  if (!d.name || !d.vendor || !d.type ||
      copy_args(&d.props, &d.nprops, &cap, props, props ? info->nprops : 0) ||
      LOOM__PUSH(s->devs, s->ndevs, s->cap_devs, d) != 0) {
    free(d.name);
    free(d.vendor);
    free(d.type);
    free(d.props);
    st = LOOM_ENOMEM;
  } else {
    *out = (uint32_t)(s->ndevs - 1);
    s->devs[*out].arena =
        loom__bkarena_device(loom__bkarena_serial(b, b->bs), *out, &s->devs[*out]);
    own_device(b->bs, *out);
  }
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_unlock(&b->mu);
  return st;
}

static loom_status svc_resource_add(loom_backend *b, uint32_t device,
                                    const char *name, uint64_t native_id,
                                    uint32_t *out) {
  if (!b || !out) return LOOM_EINVAL;
  struct loom_session *s = lock_open_session(b);
  if (!s) return LOOM_ESTATE;
  loom_status st = LOOM_OK;
  pthread_mutex_lock(&s->mu);
  if (device >= s->ndevs || s->devs[device].b != b) {
    st = LOOM_EINVAL;
  } else {
    loom__sres r = {device, loom__strdup(name ? name : ""), native_id, NULL};
    if (!r.name || LOOM__PUSH(s->res, s->nres, s->cap_res, r) != 0) {
      free(r.name);
      st = LOOM_ENOMEM;
    } else {
      *out = (uint32_t)(s->nres - 1);
      s->res[*out].arena =
          loom__bkarena_resource(loom__bkarena_serial(b, b->bs), *out, &s->res[*out]);
    }
  }
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_unlock(&b->mu);
  return st;
}

static void lost_locked(loom_backend *b, loom__bsess *bs, uint64_t n, const char *reason) {
  bs->lost += n;
  if (!reason) reason = "no reason given";
  size_t i = 0, max = sizeof bs->lost_by / sizeof bs->lost_by[0];
  while (i < max && bs->lost_by[i].reason && strcmp(bs->lost_by[i].reason, reason)) i++;
  if (i == max) { /* past the slots: counted with the last one, which says so */
    static const char more[] = " and other reasons";
    char *last = bs->lost_by[--i].reason;
    size_t l = strlen(last), m = sizeof more - 1;
    char *joined = l >= m && !strcmp(last + l - m, more) ? NULL : malloc(l + m + 1);
    if (joined) {
      memcpy(joined, last, l);
      memcpy(joined + l, more, m + 1);
      free(last);
      bs->lost_by[i].reason = joined;
    }
  } else if (!bs->lost_by[i].reason) {
    bs->lost_by[i].reason = loom__strdup(reason);
  }
  bs->lost_by[i].n += n;
  loom__bkarena_lost(b, bs); /* a salvage says them too */
}

/* Ring mode: drops the backend's oldest records (a quarter of the ring at
 * least, so that the move is paid once per many records) until need more
 * bytes fit; they count as overwritten.  Records are in emission order and
 * each one's arguments follow the previous one's (b->mu held). */
static void ring_make_room(loom__bsess *bs, uint64_t need) {
  uint64_t cap = bs->s->ring_bk_bytes, goal = cap - cap / 4;
  goal = need < goal ? goal - need : 0;
  size_t k = 0, a = 0;
  uint64_t freed = 0;
  while (k < bs->nrecs && bs->bytes - freed > goal) {
    uint64_t sz = sizeof(loom__drec) + (uint64_t)bs->recs[k].nargs * sizeof(loom__targ);
    freed += sz;
    a += bs->recs[k].nargs;
    k++;
  }
  if (!k) return;
  loom__bmem_fold(bs, k); /* a dump starts from the memory they leave live */
  if (!loom__bkarena_drop_oldest(bs, k, a)) { /* heap arrays: moved in place */
    memmove(bs->recs, bs->recs + k, (bs->nrecs - k) * sizeof *bs->recs);
    bs->nrecs -= k;
    memmove(bs->args, bs->args + a, (bs->nargs - a) * sizeof *bs->args);
    bs->nargs -= a;
    for (size_t i = 0; i < bs->nrecs; i++) bs->recs[i].args_off -= (uint32_t)a;
  }
  bs->bytes -= freed;
  bs->overwritten += k;
  loom__bkarena_ring_state(bs);
}

/* The reserved argument keys and memory kinds of plugin.h, interned once:
 * a memory record is checked by comparing ids, no string compared. */
enum { R_ADDR, R_BYTES, R_DEVICE, R_MKIND, R_HOST, R_PINNED, R_SHARED, R_POOL, R_N };
static uint32_t rid[R_N];
static int rid_ok; /* all interned (else memory records take the raw check) */
static pthread_once_t rid_once = PTHREAD_ONCE_INIT;

static void rid_init(void) {
  static const char *const names[R_N] = {"addr", "bytes", "device", "memory_kind",
                                         "host", "host_pinned", "shared", "pool"};
  rid_ok = 1;
  for (int i = 0; i < R_N; i++) rid_ok &= (rid[i] = loom__intern(names[i], SIZE_MAX)) != 0;
}

static const char *const bad_kind = "memory record refused: \"memory_kind\" is not host, "
                                    "device, host_pinned, shared or pool";

/* What is wrong with the marks of memory record r, or NULL. */
static const char *memory_marks(const loom_backend *b, const loom_record *r) {
  if (b->ops.abi_major == 1 && b->ops.abi_minor < 5)
    return "memory record refused: LOOM_KIND_MEMORY needs plug-in ABI 1.5";
  unsigned m = r->flags & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE);
  if (m != LOOM_RECORD_F_ALLOC && m != LOOM_RECORD_F_FREE)
    return "memory record refused: it needs exactly one of LOOM_RECORD_F_ALLOC and _FREE";
  return NULL;
}

/* What is wrong with memory record r (LOOM_KIND_MEMORY, plugin.h) whose n
 * arguments t were converted whole (strings interned), or NULL: one mark of
 * the two, "addr", "bytes" on an allocation, a "device" that is one of b's
 * devices (bs->devbits: b->mu held, no other lock), "memory_kind" a known
 * name.  A key loom could not intern (0) is no reserved key. */
static const char *memory_problem(const loom_backend *b, const loom__bsess *bs,
                                  const loom_record *r, const loom__targ *t, size_t n) {
  const char *why = memory_marks(b, r);
  if (why) return why;
  int addr = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    const loom__targ *a = &t[i];
    int num = a->type == LOOM_ARG_UINT || (a->type == LOOM_ARG_INT && a->v.i >= 0);
    if (!a->key) continue;
    if (a->key == rid[R_ADDR]) {
      if (!num) return "memory record refused: \"addr\" is not an unsigned integer";
      addr = 1;
    } else if (a->key == rid[R_BYTES]) {
      if (!num) return "memory record refused: \"bytes\" is not an unsigned integer";
      bytes = 1;
    } else if (a->key == rid[R_DEVICE]) {
      if (!num || !owns_device(bs, a->v.u))
        return "memory record refused: \"device\" is not one of the backend's devices";
    } else if (a->key == rid[R_MKIND]) {
      uint32_t v = a->type == LOOM_ARG_STRING ? a->v.s : 0;
      if (!v || (v != rid[R_HOST] && v != rid[R_DEVICE] && v != rid[R_PINNED] &&
                 v != rid[R_SHARED] && v != rid[R_POOL]))
        return bad_kind;
    }
  }
  if (!addr) return "memory record refused: it has no \"addr\"";
  if ((r->flags & LOOM_RECORD_F_ALLOC) && !bytes)
    return "memory record refused: an allocation without \"bytes\"";
  return NULL;
}

/* Converts args into t (strings interned): the count kept.  *odd: one was
 * left out (a type loom does not know) or a string could not be interned,
 * so a memory record is checked on args themselves (memory_problem_raw). */
static size_t convert_args(loom__targ *t, const loom_arg *args, size_t nargs, int *odd) {
  size_t n = 0;
  for (size_t i = 0; i < nargs; i++) {
    loom__targ a;
    if (convert_arg(&args[i], &a)) {
      *odd = 1;
      continue;
    }
    if (!a.key || (a.type == LOOM_ARG_STRING && !a.v.s)) *odd = 1;
    t[n++] = a;
  }
  return n;
}

/* memory_problem on the arguments as the backend gave them (strings
 * compared): for the rare record convert_args could not take whole. */
static const char *memory_problem_raw(const loom_backend *b, const loom__bsess *bs,
                                      const loom_record *r, const loom_arg *args, size_t n) {
  static const char *const kinds[] = {"host", "device", "host_pinned", "shared", "pool"};
  const char *why = memory_marks(b, r);
  if (why) return why;
  int addr = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    const loom_arg *a = &args[i];
    if (!a->key) continue;
    int num = a->type == LOOM_ARG_UINT || (a->type == LOOM_ARG_INT && a->v.i >= 0);
    uint64_t v = a->type == LOOM_ARG_UINT ? a->v.u : (uint64_t)a->v.i;
    if (!strcmp(a->key, "addr")) {
      if (!num) return "memory record refused: \"addr\" is not an unsigned integer";
      addr = 1;
    } else if (!strcmp(a->key, "bytes")) {
      if (!num) return "memory record refused: \"bytes\" is not an unsigned integer";
      bytes = 1;
    } else if (!strcmp(a->key, "device")) {
      if (!num || !owns_device(bs, v))
        return "memory record refused: \"device\" is not one of the backend's devices";
    } else if (!strcmp(a->key, "memory_kind")) {
      size_t k = 0;
      while (a->type == LOOM_ARG_STRING && a->v.s && k < 5 && strcmp(a->v.s, kinds[k])) k++;
      if (a->type != LOOM_ARG_STRING || k == 5) return bad_kind;
    }
  }
  if (!addr) return "memory record refused: it has no \"addr\"";
  if ((r->flags & LOOM_RECORD_F_ALLOC) && !bytes)
    return "memory record refused: an allocation without \"bytes\"";
  return NULL;
}

/* Appends r with its n converted arguments t (b->mu held, bs open). */
static loom_status append(loom_backend *b, loom__bsess *bs, const loom_record *r,
                          const loom__targ *t, size_t n) {
  const char *cat = r->struct_size >= offsetof(loom_record, args) ? r->category : NULL;
  loom__drec d = {r->start, r->end, r->correlation, r->external_id, r->name,
                  cat ? intern_cached(cat) : 0, r->clock, r->device,
                  r->resource, /* or, the same bytes, a host record's tid */
                  0, (uint16_t)n, r->kind, 0};
  /* Marks exist from ABI 1.1 on; bits loom does not know are not kept. */
  if (b->ops.abi_minor >= 1 || b->ops.abi_major > 1)
    d.roles = (uint16_t)(r->flags & LOOM__ROLE_ALL);
  if (d.device == LOOM_DEVICE_HOST && !d.resource) d.resource = loom__tid();
  uint64_t need = sizeof d + n * sizeof(loom__targ);
  struct loom_session *s = bs->s;
  if (s->ring && bs->bytes + need > s->ring_bk_bytes) ring_make_room(bs, need);
  d.args_off = (uint32_t)bs->nargs;
  if (bs->bytes + need > s->bk_cap) { /* per backend */
    lost_locked(b, bs, 1, "backend memory cap (backend_memory_cap) reached");
    return LOOM_ENOMEM;
  }
  if (loom__bkarena_reserve(b, bs, n)) { /* room first: nothing below moves */
    lost_locked(b, bs, 1, "out of memory");
    return LOOM_ENOMEM;
  }
  if (n) memcpy(bs->args + bs->nargs, t, n * sizeof *t);
  bs->nargs += n;
  bs->recs[bs->nrecs++] = d;
  bs->bytes += need;
  loom__bkarena_publish(b, bs); /* whole: readable by a salvage */
  return LOOM_OK;
}

/* Arguments are converted into a buffer on the stack (a heap one past
 * LOCAL_ARGS), checked there when the record is a memory record, then
 * copied once into the backend's arrays. */
#define LOCAL_ARGS 16

static loom_status svc_emit(loom_backend *b, const loom_record *r) {
  if (!b || !r || r->struct_size < offsetof(loom_record, category)) return LOOM_EINVAL;
  if (r->kind >= LOOM_KIND_COUNT_) return LOOM_EINVAL;
  const loom_arg *args = r->struct_size >= sizeof *r ? r->args : NULL;
  size_t nin = args ? r->nargs : 0;
  loom__targ local[LOCAL_ARGS], *t = nin <= LOCAL_ARGS ? local : malloc(nin * sizeof *t);
  if (r->kind == LOOM_KIND_MEMORY) pthread_once(&rid_once, rid_init);
  loom_status st = LOOM_OK;
  pthread_mutex_lock(&b->mu);
  loom__bsess *bs = b->bs;
  int mem = r->kind == LOOM_KIND_MEMORY, odd = 0;
  if (!bs) {
    st = LOOM_ESTATE;
  } else if (bs->closed) {
    lost_locked(b, bs, 1, "records emitted after the backend was flushed");
    st = LOOM_ESTATE;
  } else if (!t) {
    lost_locked(b, bs, 1, "out of memory");
    st = LOOM_ENOMEM;
  } else if (mem || (bs->kinds & LOOM_KIND_BIT(r->kind))) {
    size_t n = convert_args(t, args, nin, &odd);
    const char *why = !mem ? NULL : odd || !rid_ok ? memory_problem_raw(b, bs, r, args, nin)
                                        : memory_problem(b, bs, r, t, n);
    if (why) {
      lost_locked(b, bs, 1, why); /* named in the trace's warnings, counted */
      st = LOOM_EINVAL;
    } else if (bs->kinds & LOOM_KIND_BIT(r->kind)) {
      st = append(b, bs, r, t, n);
    }
  }
  pthread_mutex_unlock(&b->mu);
  if (t != local) free(t);
  return st;
}

/* host->memory's slow way: the record as emit takes it. */
static loom_status memory_emit(loom_backend *b, const loom_memory_event *m) {
  static const char *const kinds[LOOM_MEMORY_KIND_COUNT_] = {"host", "device", "host_pinned",
                                                             "shared", "pool"};
  loom_arg a[6];
  uint32_t n = 0;
  a[n++] = (loom_arg){.key = "addr", .type = LOOM_ARG_UINT, .v.u = m->addr};
  if (m->bytes || !(m->flags & LOOM_RECORD_F_FREE))
    a[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = m->bytes};
  if (m->device != LOOM_DEVICE_HOST)
    a[n++] = (loom_arg){.key = "device", .type = LOOM_ARG_UINT, .v.u = m->device};
  a[n++] = (loom_arg){.key = "memory_kind", .type = LOOM_ARG_STRING,
                      .v.s = m->kind < LOOM_MEMORY_KIND_COUNT_ ? kinds[m->kind] : "?"};
  if (m->reserved)
    a[n++] = (loom_arg){.key = "reserved", .type = LOOM_ARG_UINT, .v.u = m->reserved};
  if (m->heap) a[n++] = (loom_arg){.key = "heap", .type = LOOM_ARG_UINT, .v.u = m->heap - 1};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY, .flags = m->flags,
                   .clock = m->clock, .device = LOOM_DEVICE_HOST, .start = m->ts, .end = m->ts,
                   .name = m->name, .nargs = n, .args = a};
  return svc_emit(b, &r);
}

/* The fast way when b's session records the host and m fits a host record
 * (record.h, LOOM__HR_BMEM); else emit's. */
static loom_status svc_memory(loom_backend *b, const loom_memory_event *m) {
  if (!b || !m || m->struct_size < offsetof(loom_memory_event, reserved) + sizeof m->reserved)
    return LOOM_EINVAL;
  uint32_t src = atomic_load_explicit(&b->mem_src, memory_order_relaxed);
  unsigned role = m->flags & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE);
  if (LOOM__LIKELY(src && m->clock && m->flags == role &&
                   (role == LOOM_RECORD_F_ALLOC || role == LOOM_RECORD_F_FREE) &&
                   m->clock == atomic_load_explicit(&b->rec_clock, memory_order_relaxed) &&
                   m->kind < LOOM_MEMORY_KIND_COUNT_ && m->bytes <= LOOM__BMEM_BYTES_MAX &&
                   m->heap <= LOOM__BMEM_HEAP_MAX &&
                   (m->device == LOOM_DEVICE_HOST || m->device < LOOM__BMEM_HOST_DEV))) {
    uint32_t dev16 = m->device == LOOM_DEVICE_HOST ? LOOM__BMEM_HOST_DEV : m->device;
    loom__mem_live e = {.addr = m->addr, .bytes = m->bytes, .reserved = m->reserved, .ts = m->ts,
                        .device = loom__mem_bkdev(src, dev16),
                        .kind = (uint16_t)(m->kind | m->heap << 8),
                        .src = (uint16_t)src, .name = m->name};
    if (loom__hostrec_bk_memory(&e, role == LOOM_RECORD_F_FREE)) return LOOM_OK;
  }
  return memory_emit(b, m);
}

/* host->call's fast way: r fits a BCALL host record (record.h) and the
 * session records the host and keeps r's kind; else emit's. */
static loom_status svc_call(loom_backend *b, const loom_record *r) {
  if (!b || !r || r->struct_size < offsetof(loom_record, category)) return LOOM_EINVAL;
  uint32_t src = atomic_load_explicit(&b->mem_src, memory_order_relaxed);
  uint32_t code = r->kind == LOOM_KIND_RUNTIME ? 0 : r->kind == LOOM_KIND_DRIVER ? 1
                : r->kind == LOOM_KIND_SYNC ? 2 : 3;
  const char *cat = r->struct_size >= offsetof(loom_record, args) ? r->category : NULL;
  int plain = !cat && !(r->struct_size >= sizeof *r && r->args && r->nargs);
  if (LOOM__LIKELY(src && code < 3 && plain && r->device == LOOM_DEVICE_HOST && !r->tid &&
                   !r->external_id && !(r->flags & ~LOOM__HR_BCALL_ROLES) &&
                   r->end >= r->start && r->clock &&
                   r->clock == atomic_load_explicit(&b->rec_clock, memory_order_relaxed) &&
                   (atomic_load_explicit(&b->call_kinds, memory_order_relaxed) &
                    LOOM_KIND_BIT(r->kind)))) {
    uint16_t fl = (uint16_t)(r->flags | code << LOOM__HR_BCALL_KIND_SHIFT |
                             src << LOOM__HR_BMEM_SRC_SHIFT);
    if (loom__hostrec_bk_call(fl, r->name, r->start, r->end, r->correlation)) return LOOM_OK;
  }
  return svc_emit(b, r);
}

static void svc_count_lost(loom_backend *b, uint64_t n, const char *reason) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  int in_session = b->bs != NULL;
  if (in_session) lost_locked(b, b->bs, n, reason);
  pthread_mutex_unlock(&b->mu);
  if (!in_session)
    loom__warn_pending("backend '%s' lost %llu records outside a session: %s",
                       b->ops.name, (unsigned long long)n, reason ? reason : "");
}

static void session_report(struct loom_session *s, loom_severity sev,
                           const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom__session_vreport(s, sev, fmt, ap);
  va_end(ap);
}

static void svc_vreport(loom_backend *b, loom_severity sev, const char *fmt,
                        va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
  const char *name = b ? b->ops.name : "?";
  if (sev < LOOM_SEV_WARNING) {
    loom__log(sev, "backend '%s': %s", name, msg);
    return;
  }
  if (sev > LOOM_SEV_ERROR) sev = LOOM_SEV_ERROR;
  struct loom_session *s = NULL;
  if (b) {
    pthread_mutex_lock(&b->mu);
    s = b->bs ? b->bs->s : NULL;
    pthread_mutex_unlock(&b->mu);
  }
  const char *lvl = sev == LOOM_SEV_ERROR ? "error" : "warning";
  if (s) session_report(s, sev, "backend '%s' %s: %s", name, lvl, msg);
  else loom__warn_pending("backend '%s' %s: %s", name, lvl, msg);
}

static void svc_report(loom_backend *b, loom_severity sev, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  svc_vreport(b, sev, fmt, ap);
  va_end(ap);
}

static const char *svc_config_get(loom_backend *b, const char *key) {
  const loom__opts *o = NULL;
  if (b) {
    pthread_mutex_lock(&b->mu);
    if (b->bs) o = &b->bs->s->opts;
    pthread_mutex_unlock(&b->mu);
  }
  return loom__opts_get(o, key);
}

static uint64_t svc_external_current(void) { return loom_op_current(); }
static uint32_t svc_thread_id(void) { return loom__tid(); }
static void *svc_state(loom_backend *b) { return b ? b->state : NULL; }

static const loom_host host_table = {
    .struct_size = sizeof(loom_host),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .backend_register = svc_register,
    .clock_declare = svc_clock_declare,
    .clock_sync = svc_clock_sync,
    .clock_now = svc_clock_now,
    .clock_to_epoch_ns = svc_to_epoch,
    .intern = svc_intern,
    .device_add = svc_device_add,
    .resource_add = svc_resource_add,
    .emit = svc_emit,
    .count_lost = svc_count_lost,
    .report = svc_report,
    .vreport = svc_vreport,
    .config_get = svc_config_get,
    .external_id_current = svc_external_current,
    .thread_id = svc_thread_id,
    .state = svc_state,
    .clock_set_rate = svc_clock_set_rate,
    .clock_auto_sync = svc_clock_auto_sync,
    .meta_set = svc_meta_set,
    .recorder_now = svc_recorder_now,
    .memory = svc_memory,
    .call = svc_call,
};

const loom_host *loom__host(void) { return &host_table; }

LOOM_EXTERN const loom_host *loom_host_get(uint16_t abi_major) {
  if (abi_major != LOOM_ABI_MAJOR) {
    loom__warn_pending("a plug-in asked for loom ABI %u, this loom speaks ABI %d.%d; "
                       "it was not attached", (unsigned)abi_major, LOOM_ABI_MAJOR,
                       LOOM_ABI_MINOR);
    return NULL;
  }
  return &host_table;
}
