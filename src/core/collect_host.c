/*
 * collect_host.c - the host part of collection (collect.c): each thread's
 * buffer of host records (or a ring dump's copy of it) into trace events,
 * names resolved, ranges matched per thread, raw op arguments formatted,
 * async ranges paired, what a ring overwrote counted, allocations
 * (loom_memory_alloc/free) made memory events, and a window's or a ring
 * dump's trace started from the allocations live at its start.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect.h"

/* Resolves host record names (pointers or interner ids) to trace strings,
 * caching by pointer so a literal is hashed once per trace. */
typedef struct namer {
  loom_trace *t;
  loom__map cache;
  loom__rec_image *img;
} namer;

static uint32_t name_of(namer *nm, uint64_t name, uint16_t flags) {
  uint64_t key = (flags & LOOM__HR_F_ID) ? (name | (1ull << 63)) : name;
  if (!key) return 0;
  uint64_t *hit = loom__map_get(&nm->cache, key);
  if (hit) return (uint32_t)*hit;
  const char *s = nm->img->name ? nm->img->name(nm->img->ud, name, flags)
                 : (flags & LOOM__HR_F_ID) ? loom__intern_get((uint32_t)name)
                                           : (const char *)(uintptr_t)name;
  uint32_t id = loom__trace_str(nm->t, s ? s : "");
  loom__map_put(&nm->cache, key, id);
  return id;
}

/* Kineto's label; a name given with loom_thread_name wins over the OS's. */
void loom__thread_label(char *buf, size_t n, pid_t tid, const char *name,
                        const loom__rec_image *img) {
  const char *g = NULL;
  if (img && img->dead) { /* kept in the dead process's arena */
    g = img->thread_name ? img->thread_name(img->tn_ud, tid) : NULL;
  } else {
    uint32_t given = loom__thread_name((uint64_t)tid);
    g = given ? loom__intern_get(given) : NULL;
  }
  if (g && *g) name = g;
  snprintf(buf, n, "thread %d (%s)", (int)tid, name && *name ? name : "unnamed");
}

/* Reads the current name of a live thread of this process. */
void loom__live_thread_name(pid_t tid, char *buf, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  FILE *f = fopen(path, "r");
  buf[0] = 0;
  if (!f) return;
  if (fgets(buf, (int)n, f)) buf[strcspn(buf, "\n")] = 0;
  fclose(f);
}

/* A range, op or step open on a thread.  Its event is added when it begins
 * (an op's once its arguments are read), so each thread's events come in
 * the order of their starts, the order the stop's sort puts them in; its
 * duration is set when it ends. */
typedef struct open_range {
  int64_t ts;
  uint32_t name;
  uint64_t ext;
  uint32_t args_off, nargs; /* an op's arguments in host_ctx.pargs until its event is added */
  uint32_t ev;              /* its event, NO_EV: none (a kind not asked for) or not yet */
} open_range;

#define NO_EV UINT32_MAX

/* One thread's walk: its track, the ranges and ops open on it, its step. */
typedef struct thread_walk {
  uint32_t track;
  open_range *ranges, *ops;
  size_t nr, cr, no, co;
  open_range step;
  int step_open;
  int op_pending; /* the innermost op's event waits for its arguments */
  uint64_t over; /* records its ring overwrote */
} thread_walk;

typedef struct async_mark {
  int64_t ts;
  uint64_t id;
  uint32_t name, track;
  int is_end;
  int cut; /* on a ring that overwrote: an end alone lost its begin */
} async_mark;

typedef struct host_ctx {
  loom_session *s;
  loom_trace *t;
  namer nm;
  loom_clock_domain dom;
  int64_t pid;
  uint32_t c_user, c_op, c_instant, c_marker, c_counter;
  async_mark *marks;
  size_t nmarks, cap_marks;
  uint64_t unmatched;
  loom__targ *pargs;    /* arguments of the open ops (a stack, like the ops) */
  size_t npargs, cap_pargs;
  /* raw arguments (loom_op_begin_raw), formatted once per distinct bytes */
  loom__map raw_by_hash;     /* hash of (format, bytes) -> index + 1 in raws */
  struct raw_entry {
    loom_raw_format_fn fmt;
    uint32_t nraw, nargs;
    size_t bytes_off, args_off;
  } *raws;
  size_t nraws, cap_raws;
  unsigned char *raw_bytes;  /* the entries' bytes, back to back */
  size_t nraw_bytes, cap_raw_bytes;
  loom__targ *raw_args;      /* the entries' formatted arguments */
  size_t nraw_args, cap_raw_args;
  char *fmt_buf;             /* LOOM_RAW_FORMAT_BUF bytes for format() */
  loom__hrec *bounce;        /* hr_cursor's copies of cold chunks */
  size_t bounce_cap;
  loom__rec_image *img;
  uint64_t raw_bad;          /* raw records cut short (cannot happen) */
  /* ring mode: ends whose begin was overwritten, records overwritten, and
   * the latest first-kept time of a ring that overwrote */
  uint64_t ring_cut, ring_over;
  int64_t ring_start;
  /* memory: "[memory]"; with the ledger on (windows, ring mode), the
   * allocations in the trace (by mem_key) and the frees of allocations the
   * trace may lack (they carry the allocation's time) */
  uint32_t n_mem;
  int ledger;
  /* backends' records (LOOM__HR_BMEM): the backend of each producer
   * number, and the records left out for naming a device not theirs */
  loom_backend *bk_of_src[LOOM__BMEM_SRC_MAX + 1];
  uint64_t bmem_bad;
  /* backends' host calls (LOOM__HR_BCALL): their category by producer and
   * kind code (0: not yet looked up), the calls noted for the backends'
   * device work, and the records of no backend in the trace */
  uint32_t call_cat[LOOM__BMEM_SRC_MAX + 1][3];
  loom__host_calls *hc;
  uint64_t bcall_bad;
  loom__map allocs;
  struct pre_free {
    loom__mem_live m;
    uint32_t track;
    int64_t ts;
  } *pre;
  size_t npre, cap_pre;
} host_ctx;

/* An allocation's identity across records and the ledger: where, on which
 * device, when (host ticks). */
static uint64_t mem_key(uint64_t addr, int32_t dev, uint64_t ticks) {
  uint64_t k = loom__hash_u64(addr ^ loom__hash_u64(ticks ^ ((uint64_t)(uint32_t)dev << 32)));
  return k ? k : 1;
}

/* Walks one thread's records in order, across chunks, up to its position
 * (chunks linked after the one it is in are not written yet).  skip: records
 * to pass at the start of the first chunk. */
typedef struct hr_cursor {
  loom__chunk *c;
  loom__hrec *r, *end, *stop;
  uint32_t skip;
  int last;             /* c is the one stop is in */
  /* a staged thread's chunks before its tail were written by the kernel
   * (hostrec.c): read through a copy the kernel makes too, into the
   * context's buffer (NULL: read in place) */
  struct host_ctx *h;
} hr_cursor;

/* Points the cursor at the records of k->c it walks (a copy for a cold
 * chunk when one can be had). */
static void hr_enter(hr_cursor *k) {
  loom__chunk *c = k->c;
  k->r = c->recs + (k->skip < c->cap ? k->skip : c->cap);
  k->skip = 0;
  k->end = c->recs + c->cap;
  k->last = k->stop >= c->recs && k->stop <= k->end;
  if (k->last) k->end = k->stop;
  size_t n = (size_t)(k->end - k->r);
  /* the tail was written by its owner; a few records cost less than a call */
  host_ctx *h = k->h;
  if (!h || !c->next || n < 256 ||
      loom__grow((void **)&h->bounce, &h->bounce_cap, n, sizeof *h->bounce))
    return;
  loom__copy_from_cold(h->bounce, k->r, n * sizeof *k->r);
  k->r = h->bounce;
  k->end = h->bounce + n;
}

static loom__hrec *hr_next(hr_cursor *k) {
  while (k->c) {
    if (!k->r) hr_enter(k);
    if (k->r < k->end) return k->r++;
    k->c = k->last ? NULL : k->c->next;
    k->r = NULL;
  }
  return NULL;
}

#define RAW_MAX_ARGS 16

/* Formats raw bytes into trace arguments, appended to h->raw_args; returns
 * the count or -1 (out of memory). */
static int raw_format(host_ctx *h, loom_raw_format_fn fmt, const unsigned char *b, uint32_t n) {
  if (!h->fmt_buf && !(h->fmt_buf = malloc(LOOM_RAW_FORMAT_BUF))) return -1;
  loom_arg out[RAW_MAX_ARGS];
  uint32_t k = fmt(b, n, h->fmt_buf, LOOM_RAW_FORMAT_BUF, out, RAW_MAX_ARGS);
  if (k > RAW_MAX_ARGS) k = RAW_MAX_ARGS;
  int added = 0;
  for (uint32_t i = 0; i < k; i++) {
    loom__targ a = {.key = loom__trace_str(h->t, out[i].key ? out[i].key : "?"),
                    .type = (uint8_t)out[i].type};
    switch (out[i].type) {
    case LOOM_ARG_INT: a.v.i = out[i].v.i; break;
    case LOOM_ARG_UINT: a.v.u = out[i].v.u; break;
    case LOOM_ARG_DOUBLE: a.v.d = out[i].v.d; break;
    case LOOM_ARG_STRING: a.v.s = loom__trace_str(h->t, out[i].v.s ? out[i].v.s : ""); break;
    default: continue;
    }
    if (!a.key || (a.type == LOOM_ARG_STRING && !a.v.s) ||
        LOOM__PUSH(h->raw_args, h->nraw_args, h->cap_raw_args, a))
      return -1;
    added++;
  }
  return added;
}

static int op_arg(host_ctx *h, thread_walk *w, const loom__targ *a);

/* A RAW record (r) and the records carrying the rest of its bytes: the
 * formatted arguments go to the innermost open op (none: dropped). */
static int raw_record(host_ctx *h, hr_cursor *k, const loom__hrec *rec, thread_walk *w) {
  const loom__hrec r[1] = {*rec}; /* hr_next may reuse the memory it is in */
  uint32_t n = r->spare;
  unsigned char b[LOOM_RAW_MAX + sizeof(loom__hrec)];
  if (n > LOOM_RAW_MAX) n = 0; /* never written so */
  memcpy(b, &r->ts, 8);
  memcpy(b + 8, &r->a, 8);
  for (uint32_t off = LOOM__RAW_HEAD, i = 0; i < loom__raw_slots(n);
       i++, off += sizeof(loom__hrec)) {
    const loom__hrec *p = hr_next(k);
    if (!p) {
      h->raw_bad++;
      return 0;
    }
    memcpy(b + off, p, sizeof *p);
  }
  if (!w->no) return 0;
  if (h->img->dead) { /* its format function was in the dead process */
    h->img->raw_unformatted++;
    return 0;
  }
  loom_raw_format_fn fmt = (loom_raw_format_fn)(uintptr_t)r->name;
  uint64_t key = loom__hash_words(b, n) ^ loom__hash_u64((uint64_t)(uintptr_t)r->name);
  if (!key) key = 1;
  uint64_t *hit = loom__map_get(&h->raw_by_hash, key);
  struct raw_entry *e = hit ? &h->raws[*hit - 1] : NULL;
  size_t from, mark = h->nraw_args;
  uint32_t count;
  if (e && e->fmt == fmt && e->nraw == n && (!n || !memcmp(h->raw_bytes + e->bytes_off, b, n))) {
    from = e->args_off, count = e->nargs; /* formatted before */
  } else {
    int c = raw_format(h, fmt, b, n);
    if (c < 0) return -1;
    from = mark, count = (uint32_t)c;
    if (!e) { /* remember it (on a 64-bit hash collision, the first one stays) */
      struct raw_entry ne = {fmt, n, count, h->nraw_bytes, from};
      if (loom__grow((void **)&h->raw_bytes, &h->cap_raw_bytes, h->nraw_bytes + n, 1)) return -1;
      if (n) memcpy(h->raw_bytes + h->nraw_bytes, b, n);
      h->nraw_bytes += n;
      if (LOOM__PUSH(h->raws, h->nraws, h->cap_raws, ne) ||
          loom__map_put(&h->raw_by_hash, key, h->nraws))
        return -1;
      mark = h->nraw_args;
    }
  }
  int rc = 0;
  for (uint32_t i = 0; i < count && rc == 0; i++) rc = op_arg(h, w, &h->raw_args[from + i]);
  h->nraw_args = mark; /* a collision's arguments are not kept */
  return rc;
}

/* Range r begins: its event, with the arguments it has on h->pargs (taken
 * off), its duration set by close_event.  Kinds the session did not ask for
 * are skipped (open_event returns 0, add_point 1, so that callers attach
 * arguments only to added events). */
static int open_event(host_ctx *h, uint32_t track, uint8_t kind, uint32_t cat, open_range *r) {
  r->ev = NO_EV;
  if (h->s->kinds & LOOM_KIND_BIT(kind)) {
    loom__ev e = {.ts = r->ts, .external_id = r->ext, .name = r->name, .cat = cat,
                  .track = track, .kind = kind, .ph = LOOM__PH_COMPLETE};
    if (loom__trace_add_ev(h->t, &e)) return -1;
    r->ev = (uint32_t)(h->t->nev - 1);
    for (uint32_t i = 0; i < r->nargs; i++)
      if (loom__trace_add_arg(h->t, &h->pargs[r->args_off + i])) return -1;
  }
  if (r->nargs) h->npargs = r->args_off;
  r->nargs = 0;
  return 0;
}

/* Range r ends at end; unclosed: open at stop, flagged and marked. */
static int close_event(host_ctx *h, const open_range *r, int64_t end, int unclosed) {
  if (r->ev == NO_EV) return 0;
  loom__ev *e = &h->t->ev[r->ev];
  e->dur = end > r->ts ? end - r->ts : 0;
  if (!unclosed) return 0;
  e->flags |= LOOM__EV_UNCLOSED;
  loom__targ a = {.key = loom__trace_str(h->t, "unclosed"), .type = LOOM_ARG_INT, .v.i = 1};
  return loom__trace_add_arg_to(h->t, r->ev, &a);
}

static int add_point(host_ctx *h, uint32_t track, uint8_t kind, uint8_t ph,
                     uint32_t cat, uint32_t name, int64_t ts) {
  if (!(h->s->kinds & LOOM_KIND_BIT(kind))) return 1;
  loom__ev e = {.ts = ts, .name = name, .cat = cat, .track = track,
                .kind = kind, .ph = ph};
  return loom__trace_add_ev(h->t, &e);
}

static int pop_into(host_ctx *h, open_range *stk, size_t *n, int64_t end, int cut) {
  if (!*n) {
    if (cut) h->ring_cut++; /* its begin was overwritten */
    else h->unmatched++;
    return 0;
  }
  --*n;
  return close_event(h, &stk[*n], end, 0);
}

/* Names the thread (its name at exit, a dead process's, or a live one's
 * now) and adds its track. */
static int thread_track(host_ctx *h, loom__tbuf *tb, uint32_t *track) {
  char name[64], label[256];
  if (h->img->dead || atomic_load(&tb->exited)) snprintf(name, sizeof name, "%s", tb->name);
  else loom__live_thread_name(tb->tid, name, sizeof name);
  loom__thread_label(label, sizeof label, tb->tid, name, h->img);
  return loom__trace_track(h->t, h->pid, tb->tid, label, LOOM_DEVICE_HOST, track);
}

/* Records that open or close a range or an op, or belong to the op open. */
static int is_nesting(uint16_t type) {
  return type == LOOM__HR_PUSH || type == LOOM__HR_POP || type == LOOM__HR_OP_BEGIN ||
         type == LOOM__HR_ARG || type == LOOM__HR_OP_END;
}

/* The innermost op's event, once the records of its arguments are read
 * (any other record, or none left). */
static int op_event(host_ctx *h, thread_walk *w) {
  if (!w->op_pending) return 0;
  w->op_pending = 0;
  return open_event(h, w->track, LOOM_KIND_CPU_OP, h->c_op, &w->ops[w->no - 1]);
}

/* An argument of the innermost op: kept for its event, or added to it when
 * it has one already (an argument after another record: never written so). */
static int op_arg(host_ctx *h, thread_walk *w, const loom__targ *a) {
  if (!w->no) return 0;
  open_range *o = &w->ops[w->no - 1];
  if (!w->op_pending) return o->ev == NO_EV ? 0 : loom__trace_add_arg_to(h->t, o->ev, a);
  if (LOOM__PUSH(h->pargs, h->npargs, h->cap_pargs, *a)) return -1;
  o->nargs++;
  return 0;
}

/* An op opened, with its inline first argument (LOOM__HR_F_ARG0). */
static int op_begin(host_ctx *h, thread_walk *w, const loom__hrec *r, open_range *o) {
  int inl = (r->flags & (LOOM__HR_F_ID | LOOM__HR_F_ARG0)) == (LOOM__HR_F_ID | LOOM__HR_F_ARG0);
  o->name = name_of(&h->nm, inl ? (uint32_t)r->name : r->name, r->flags);
  o->ext = r->a;
  o->args_off = (uint32_t)h->npargs;
  if (inl) {
    loom__targ a = {.key = name_of(&h->nm, r->name >> 32, LOOM__HR_F_ID), .type = LOOM_ARG_INT};
    a.v.i = (int64_t)r->spare;
    if (LOOM__PUSH(h->pargs, h->npargs, h->cap_pargs, a)) return -1;
    o->nargs = 1;
  }
  if (LOOM__PUSH(w->ops, w->no, w->co, *o)) return -1;
  w->op_pending = 1;
  return 0;
}

/* One of those: 0, or -1 out of memory. */
static int nesting_record(host_ctx *h, thread_walk *w, const loom__hrec *r, int64_t ts) {
  open_range o = {.ts = ts};
  switch (r->type) {
  case LOOM__HR_PUSH:
    o.name = name_of(&h->nm, r->name, r->flags);
    if (open_event(h, w->track, LOOM_KIND_USER_RANGE, h->c_user, &o)) return -1;
    return LOOM__PUSH(w->ranges, w->nr, w->cr, o);
  case LOOM__HR_POP: return pop_into(h, w->ranges, &w->nr, ts, w->over != 0);
  case LOOM__HR_OP_BEGIN: return op_begin(h, w, r, &o);
  case LOOM__HR_ARG: { /* belongs to the op that began just before */
    if (!w->no) return 0;
    /* keys and string values are interned ids: resolved once per trace */
    loom__targ a = {.key = name_of(&h->nm, r->name, LOOM__HR_F_ID), .type = (uint8_t)r->spare};
    if (a.type == LOOM_ARG_STRING) a.v.s = name_of(&h->nm, r->a, LOOM__HR_F_ID);
    else memcpy(&a.v, &r->a, sizeof r->a);
    return op_arg(h, w, &a);
  }
  case LOOM__HR_OP_END: return pop_into(h, w->ops, &w->no, ts, w->over != 0);
  default:
    return 0;
  }
}

/* Instants, counters, steps, async begins and ends; other types are
 * skipped.  0, or -1 out of memory. */
static int point_record(host_ctx *h, thread_walk *w, const loom__hrec *r, int64_t ts) {
  int rc = 0;
  switch (r->type) {
  case LOOM__HR_INSTANT:
    rc = add_point(h, w->track, LOOM_KIND_INSTANT, LOOM__PH_INSTANT, h->c_instant,
                   name_of(&h->nm, r->name, r->flags), ts);
    return rc < 0 ? rc : 0;
  case LOOM__HR_COUNTER: {
    uint32_t nmid = name_of(&h->nm, r->name, r->flags);
    rc = add_point(h, w->track, LOOM_KIND_COUNTER, LOOM__PH_COUNTER, h->c_counter, nmid, ts);
    loom__targ a = {.key = nmid, .type = LOOM_ARG_DOUBLE};
    memcpy(&a.v.d, &r->a, sizeof a.v.d);
    if (rc == 0) rc = loom__trace_add_arg(h->t, &a);
    return rc < 0 ? rc : 0;
  }
  case LOOM__HR_STEP: {
    if (w->step_open) rc = close_event(h, &w->step, ts, 0);
    w->step_open = 0;
    if (rc || (r->flags & LOOM__HR_F_STEP_END)) return rc;
    char sn[48];
    snprintf(sn, sizeof sn, "ProfilerStep#%llu", (unsigned long long)r->a);
    w->step = (open_range){.ts = ts, .name = loom__trace_str(h->t, sn)};
    w->step_open = 1;
    return open_event(h, w->track, LOOM_KIND_USER_RANGE, h->c_user, &w->step);
  }
  case LOOM__HR_BEGIN:
  case LOOM__HR_END: {
    async_mark m = {ts, r->a, r->type == LOOM__HR_BEGIN ? name_of(&h->nm, r->name, r->flags) : 0,
                    w->track, r->type == LOOM__HR_END, w->over != 0};
    return LOOM__PUSH(h->marks, h->nmarks, h->cap_marks, m);
  }
  default:
    return 0;
  }
}

/* ---- memory ------------------------------------------------------------------ */
static const char *const mem_kind_names[LOOM_MEMORY_KIND_COUNT_] = {
    "host", "device", "host_pinned", "shared", "pool"};

/* A backend's record m (m->src set) is kept: its backend is in the trace,
 * records memory, and owns the device m names (else counted). */
static int bmem_kept(host_ctx *h, const loom__mem_live *m) {
  loom_backend *b = m->src <= LOOM__BMEM_SRC_MAX ? h->bk_of_src[m->src] : NULL;
  int32_t dev = loom__mem_bkdev_device(m->device);
  if (!b) return 0;
  if (dev >= 0 && ((size_t)dev >= h->s->ndevs || h->s->devs[dev].b != b)) {
    h->bmem_bad++;
    return 0;
  }
  return 1;
}

/* The memory event of m on track (trace.h's model); live_at: for an
 * allocation made before the trace's start, its time (then flagged
 * "live_at_start"), else 0.  A backend's (m->src) is named after its call
 * and is its backend's (src).  0, or -1 out of memory. */
static int mem_event(host_ctx *h, uint32_t track, int64_t ts, uint64_t ext, int is_free,
                     const loom__mem_live *m, int64_t live_at) {
  if (!(h->s->kinds & LOOM_KIND_BIT(LOOM_KIND_MEMORY))) return 0;
  if (m->src && !bmem_kept(h, m)) return 0;
  loom_trace *t = h->t;
  unsigned role = is_free ? LOOM_RECORD_F_FREE : LOOM_RECORD_F_ALLOC;
  loom__ev e = {.ts = ts, .external_id = ext,
                .name = m->src ? name_of(&h->nm, m->name, LOOM__HR_F_ID) : h->n_mem,
                .cat = h->c_instant, .track = track, .kind = LOOM_KIND_MEMORY,
                .ph = LOOM__PH_INSTANT, .src = m->src,
                .flags = (uint16_t)(role << LOOM__EV_ROLE_SHIFT)};
  uint32_t kind = LOOM__MEM_KIND(m->kind), heap1 = LOOM__MEM_HEAP1(m->kind);
  if (kind >= LOOM_MEMORY_KIND_COUNT_) kind = LOOM_MEMORY_HOST;
  int32_t dev = m->src ? loom__mem_bkdev_device(m->device) : m->device;
  loom__targ a = {.key = loom__trace_str(t, "addr"), .type = LOOM_ARG_UINT, .v.u = m->addr};
  int rc = loom__trace_add_ev(t, &e) || loom__trace_add_arg(t, &a);
  if (rc == 0 && (m->bytes || !is_free)) {
    a = (loom__targ){.key = loom__trace_str(t, "bytes"), .type = LOOM_ARG_UINT, .v.u = m->bytes};
    rc = loom__trace_add_arg(t, &a);
  }
  if (rc == 0 && dev >= 0) rc = loom__trace_add_arg_int(t, "device", dev);
  if (rc == 0) {
    a = (loom__targ){.key = loom__trace_str(t, "memory_kind"), .type = LOOM_ARG_STRING,
                     .v.s = loom__trace_str(t, mem_kind_names[kind])};
    rc = loom__trace_add_arg(t, &a);
  }
  if (rc == 0 && (m->reserved || kind == LOOM_MEMORY_POOL)) {
    a = (loom__targ){.key = loom__trace_str(t, "reserved"), .type = LOOM_ARG_UINT,
                     .v.u = m->reserved};
    rc = loom__trace_add_arg(t, &a);
  }
  if (rc == 0 && heap1) {
    a = (loom__targ){.key = loom__trace_str(t, "heap"), .type = LOOM_ARG_UINT, .v.u = heap1 - 1};
    rc = loom__trace_add_arg(t, &a);
  }
  if (rc == 0 && live_at)
    rc = loom__trace_add_arg_int(t, "live_at_start", 1) ||
         loom__trace_add_arg_int(t, "allocated_at_ns", live_at);
  return rc ? -1 : 0;
}

/* A MEM record (and the MEMX before it, in *x when it was one): its event;
 * with the ledger on, an allocation is remembered and a free of one made
 * before is kept for live_at_start. */
static int mem_record(host_ctx *h, thread_walk *w, const loom__hrec *r, int64_t ts,
                      const loom__hrec *x, pid_t tid) {
  int is_free = (r->flags & LOOM__HR_F_FREE) != 0;
  loom__mem_live m = {.addr = r->name, .bytes = r->a, .device = (int32_t)r->spare,
                      .kind = (r->flags >> LOOM__HR_MEM_KIND_SHIFT) & 7u, .tid = (uint32_t)tid};
  if (r->type == LOOM__HR_BMEM) { /* a backend's (record.h) */
    m.bytes = r->a & LOOM__BMEM_BYTES_MAX;
    m.src = (uint16_t)((r->flags >> LOOM__HR_BMEM_SRC_SHIFT) & LOOM__BMEM_SRC_MAX);
    m.device = loom__mem_bkdev(m.src, (uint32_t)(r->a >> 48));
    m.name = r->spare;
    uint32_t heap1 = (r->flags >> LOOM__HR_BMEM_HEAP_SHIFT) & LOOM__BMEM_HEAP_MAX;
    m.kind = (uint16_t)(m.kind | heap1 << 8);
  } else if (m.device < 0) {
    m.device = -1;
  }
  if (x && x->name == r->name) m.reserved = x->a, m.ts = x->ts;
  uint64_t ext = w->no ? w->ops[w->no - 1].ext : 0;
  if (h->ledger && !is_free && loom__map_put(&h->allocs, mem_key(m.addr, m.device, r->ts), 1))
    return -1;
  if (h->ledger && is_free && m.ts) {
    struct pre_free p = {m, w->track, ts};
    if (m.src && x->spare) p.m.name = x->spare; /* the allocation's call (a backend's) */
    if (LOOM__PUSH(h->pre, h->npre, h->cap_pre, p)) return -1;
  }
  return mem_event(h, w->track, ts, ext, is_free, &m, 0);
}

/* ---- backends' host calls -------------------------------------------------- */
static const uint16_t call_kinds[3] = {LOOM_KIND_RUNTIME, LOOM_KIND_DRIVER, LOOM_KIND_SYNC};

/* A BCALL record (host->call): the event emit's record would have made, on
 * the thread's track; its correlation noted for the device work it
 * launched.  0, or -1 out of memory. */
static int call_record(host_ctx *h, const thread_walk *w, const loom__hrec *r, int64_t ts) {
  uint32_t src = (r->flags >> LOOM__HR_BMEM_SRC_SHIFT) & LOOM__BMEM_SRC_MAX;
  uint32_t code = (r->flags >> LOOM__HR_BCALL_KIND_SHIFT) & 3u;
  loom_backend *b = h->bk_of_src[src];
  if (!b || code > 2) {
    h->bcall_bad++;
    return 0;
  }
  if (!h->call_cat[src][code]) {
    char buf[96];
    h->call_cat[src][code] =
        loom__trace_str(h->t, loom__bk_category(b, call_kinds[code], 1, buf, sizeof buf));
  }
  int64_t te = loom__timeline_convert(&h->s->tl, h->dom, r->a);
  loom__ev e = {.ts = ts, .dur = te > ts ? te - ts : 0, .correlation = r->name,
                .name = name_of(&h->nm, r->spare, LOOM__HR_F_ID),
                .cat = h->call_cat[src][code], .track = w->track,
                .kind = (uint8_t)call_kinds[code], .ph = LOOM__PH_COMPLETE, .src = (uint16_t)src,
                .flags = (uint16_t)((r->flags & LOOM__HR_BCALL_ROLES) << LOOM__EV_ROLE_SHIFT)};
  if (loom__trace_add_ev(h->t, &e)) return -1;
  h->hc->n[src]++;
  if (!r->name || ts > h->t->end_ns) return 0;
  uint64_t *v = loom__map_get(&h->hc->corr, r->name);
  if (v) {
    *v |= 1ull << src;
    return 0;
  }
  return loom__map_put(&h->hc->corr, r->name, 1ull << src) ? -1 : 0;
}

/* The track of thread tid of this process, made when the trace has none. */
static int tid_track(host_ctx *h, uint32_t tid, uint32_t *track) {
  long k = loom__trace_find_track(h->t, h->pid, tid);
  if (k >= 0) {
    *track = (uint32_t)k;
    return 0;
  }
  char name[64], label[256];
  loom__live_thread_name((pid_t)tid, name, sizeof name);
  loom__thread_label(label, sizeof label, (pid_t)tid, name, h->img);
  return loom__trace_track(h->t, h->pid, tid, label, LOOM_DEVICE_HOST, track);
}

/* m was allocated before start and lives on at it (or until its free at
 * free_ts, when that came first): an allocation at the start, unless the
 * trace holds its own record. */
static int live_one(host_ctx *h, const loom__mem_live *m, uint32_t track, int64_t start,
                    int64_t free_ts) {
  if (loom__map_get(&h->allocs, mem_key(m->addr, m->device, m->ts))) return 0;
  int64_t at = loom__timeline_convert(&h->s->tl, h->dom, m->ts);
  if (at >= start) return 0; /* made inside: its record was dropped (counted) */
  if (loom__map_put(&h->allocs, mem_key(m->addr, m->device, m->ts), 1)) return -1;
  return mem_event(h, track, free_ts < start ? free_ts : start, 0, 0, m, at);
}

/* A window or a ring dump (the ledger is on) starts from what was live at
 * its start: the allocations made before it that its frees free, and those
 * the ledger holds live now. */
static int live_at_start(host_ctx *h) {
  int64_t start = h->t->start_ns > h->ring_start ? h->t->start_ns : h->ring_start;
  int rc = 0;
  for (size_t i = 0; i < h->npre && rc == 0; i++)
    rc = live_one(h, &h->pre[i].m, h->pre[i].track, start, h->pre[i].ts);
  size_t n = 0;
  loom__mem_live *v = rc ? NULL : loom__memledger_snapshot(&n);
  if (n == SIZE_MAX) return -1;
  for (size_t i = 0; i < n && rc == 0; i++) {
    uint32_t track;
    rc = tid_track(h, v[i].tid, &track);
    if (rc == 0) rc = live_one(h, &v[i], track, start, INT64_MAX);
  }
  free(v);
  return rc;
}

/* The step, ranges and ops still open at stop end there, flagged (the
 * outer ones marked first). */
static int close_open(host_ctx *h, thread_walk *w) {
  int64_t end = h->t->end_ns;
  int rc = op_event(h, w);
  if (rc == 0 && w->step_open) rc = close_event(h, &w->step, end, 1);
  for (size_t i = 0; rc == 0 && i < w->nr; i++) rc = close_event(h, &w->ranges[i], end, 1);
  for (size_t i = 0; rc == 0 && i < w->no; i++) rc = close_event(h, &w->ops[i], end, 1);
  w->step_open = 0;
  w->nr = w->no = 0;
  return rc;
}

/* The records the memory cap dropped on the thread: a marker at the end of
 * its track, the trace's dropped count, a warning. */
static int dropped_marker(host_ctx *h, loom__tbuf *tb, uint32_t track) {
  loom_trace *t = h->t;
  uint64_t dropped = atomic_load(&tb->dropped);
  if (!dropped) return 0;
  char msg[160];
  snprintf(msg, sizeof msg, "loom: %llu records dropped (memory cap)", (unsigned long long)dropped);
  int rc = add_point(h, track, LOOM_KIND_MARKER, LOOM__PH_INSTANT, h->c_marker,
                     loom__trace_str(t, msg), t->end_ns);
  if (rc == 0) rc = loom__trace_add_arg_int(t, "dropped", (int64_t)dropped);
  rc = rc < 0 ? rc : 0;
  t->dropped += dropped;
  loom__collect_warn(h->s, "thread %d: %llu host records dropped: the memory "
                     "cap (memory_cap=%llu bytes%s) was reached", (int)tb->tid,
                     (unsigned long long)dropped, (unsigned long long)h->s->cap_bytes,
                     h->s->cap_bytes == LOOM__DEFAULT_MEMORY_CAP ? ", the default" : "");
  return rc;
}

/* Converts one thread's records into events. */
static int host_thread(host_ctx *h, loom__tbuf *tb) {
  h->npargs = 0; /* the op-argument stack is per thread */
  thread_walk w = {.over = atomic_load(&tb->overwritten)};
  if (thread_track(h, tb, &w.track)) return -1;
  int rc = 0;
  hr_cursor k = {.c = tb->head, .stop = atomic_load_explicit(&tb->pos, memory_order_acquire),
                 .skip = w.over && tb->head ? tb->head->skip : 0};
  if (!k.stop) k.c = NULL; /* a chunk may be linked with nothing published in it */
  if (tb->staged && !h->img->dead) k.h = h; /* the dead one's were read once already */
  int first = 1;
  loom__hrec memx = {0};
  h->ring_over += w.over;
  for (loom__hrec *r; rc == 0 && (r = hr_next(&k));) {
    if (first && w.over) { /* where this ring's kept part begins */
      int64_t ts0 = loom__timeline_convert(&h->s->tl, h->dom, r->ts);
      if (ts0 > h->ring_start) h->ring_start = ts0;
    }
    first = 0;
    if (r->type == LOOM__HR_RAW) { /* its ts holds raw bytes */
      rc = raw_record(h, &k, r, &w);
      continue;
    }
    if (r->type != LOOM__HR_ARG && (rc = op_event(h, &w)) != 0) break;
    if (r->type == LOOM__HR_MEMX) { /* for the MEM record after it */
      memx = *r;
      continue;
    }
    int64_t ts = loom__timeline_convert(&h->s->tl, h->dom, r->ts);
    if (r->type == LOOM__HR_MEM || r->type == LOOM__HR_BMEM)
      rc = mem_record(h, &w, r, ts, memx.type ? &memx : NULL, tb->tid);
    else if (r->type == LOOM__HR_BCALL) rc = call_record(h, &w, r, ts);
    else rc = is_nesting(r->type) ? nesting_record(h, &w, r, ts) : point_record(h, &w, r, ts);
    memx.type = 0;
  }
  if (rc == 0) rc = close_open(h, &w);
  if (rc == 0) rc = dropped_marker(h, tb, w.track);
  free(w.ranges);
  free(w.ops);
  return rc;
}

static int cmp_mark(const void *pa, const void *pb) {
  const async_mark *a = pa, *b = pb;
  if (a->id != b->id) return a->id < b->id ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return a->is_end - b->is_end;
}

/* Matches begin/end pairs by id (they may be on different threads). */
static int host_async(host_ctx *h) {
  if (h->nmarks) qsort(h->marks, h->nmarks, sizeof *h->marks, cmp_mark);
  int rc = 0;
  for (size_t i = 0; i < h->nmarks && rc == 0; i++) {
    async_mark *b = &h->marks[i];
    if (b->is_end) {
      if (b->cut) h->ring_cut++;
      else h->unmatched++;
      continue;
    }
    int64_t end = h->t->end_ns;
    int closed = i + 1 < h->nmarks && h->marks[i + 1].id == b->id && h->marks[i + 1].is_end;
    if (closed) end = h->marks[++i].ts;
    loom__ev e = {.ts = b->ts, .dur = end - b->ts, .correlation = b->id,
                  .name = b->name, .cat = h->c_user, .track = b->track,
                  .kind = LOOM_KIND_USER_RANGE, .ph = LOOM__PH_ASYNC,
                  .flags = closed ? 0 : LOOM__EV_UNCLOSED};
    rc = loom__trace_add_ev(h->t, &e);
    if (rc == 0 && !closed) rc = loom__trace_add_arg_int(h->t, "unclosed", 1);
  }
  return rc;
}

/* The backends of the trace by producer number (their BMEM records'). */
static void bk_sources(host_ctx *h) {
  for (size_t i = 0; i < h->s->nbk; i++) {
    loom_backend *b = h->s->bk[i];
    pthread_mutex_lock(&b->mu);
    uint32_t src = b->bs ? b->bs->src : 0;
    pthread_mutex_unlock(&b->mu);
    if (src && src <= LOOM__BMEM_SRC_MAX) h->bk_of_src[src] = b;
  }
}

int loom__collect_host(loom_session *s, loom_trace *t, loom__rec_image *img, loom__ring_info *ri,
                       loom__host_calls *hc) {
  host_ctx h = {.s = s, .t = t, .nm = {t, {0}, img}, .dom = img->dom, .pid = img->pid, .img = img,
                .hc = hc};
  h.c_user = loom__trace_str(t, "user_annotation");
  h.c_op = loom__trace_str(t, "cpu_op");
  h.c_instant = loom__trace_str(t, "cpu_instant_event");
  h.c_marker = loom__trace_str(t, "marker");
  h.c_counter = loom__trace_str(t, "counter");
  size_t n = img->nthreads;
  loom__tbuf **th = NULL;
  loom__ring_copy *cp = NULL;
  if (img->dump) cp = loom__hostrec_ring_copy(&n);
  else th = img->dead ? img->threads : loom__hostrec_threads(&n);
  int rc = n == SIZE_MAX ? -1 : 0; /* out of memory: no trace rather than a part */
  h.n_mem = loom__trace_str(t, "[memory]");
  h.ledger = (s->windows || s->ring) && !img->dead;
  bk_sources(&h);
  for (size_t i = 0; i < n && rc == 0; i++) rc = host_thread(&h, cp ? &cp[i].view : th[i]);
  if (rc == 0) rc = host_async(&h);
  if (rc == 0 && h.ledger) rc = live_at_start(&h);
  loom__map_free(&h.allocs);
  free(h.pre);
  for (size_t i = 0; cp && i < n; i++) free(cp[i].chunk);
  free(cp);
  ri->host_over = h.ring_over;
  ri->host_cut = h.ring_cut;
  ri->start = h.ring_start;
  if (h.bmem_bad)
    loom__collect_warn(s, "%llu memory records of backends named a device that is not "
                       "their backend's: left out", (unsigned long long)h.bmem_bad);
  if (h.bcall_bad)
    loom__collect_warn(s, "%llu host call records named a backend that is not in the trace: "
                       "left out", (unsigned long long)h.bcall_bad);
  if (h.unmatched)
    loom__collect_warn(s, "%llu range ends without a matching begin were ignored",
                       (unsigned long long)h.unmatched);
  if (!img->dead) free(th);
  free(h.marks);
  free(h.pargs);
  free(h.raws);
  free(h.raw_bytes);
  free(h.raw_args);
  free(h.fmt_buf);
  free(h.bounce);
  loom__map_free(&h.raw_by_hash);
  if (h.raw_bad)
    loom__collect_warn(s, "%llu raw op arguments were cut short and dropped",
                       (unsigned long long)h.raw_bad);
  loom__map_free(&h.nm.cache);
  if (!img->dead && !img->dump) loom__hostrec_release();
  return rc;
}
