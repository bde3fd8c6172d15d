/*
 * collect.c - turns what a stopped session holds (host thread buffers,
 * backends' records, devices, resources, clocks, warnings) into a trace:
 * every timestamp converted to the session timeline, ranges matched, tracks
 * named, losses reported; then the common processing of trace/process.c.
 * The same for a ring-mode dump (ring.c) while recording goes on: the host
 * records are copies (loom__hostrec_ring_copy), the backends' records are
 * copied under their lock, and what the rings overwrote is reported: a range
 * whose begin was overwritten is dropped whole (its end with it), device
 * work whose launch was overwritten goes with it.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "record/record.h"

/* Where warnings of the trace being built go: the session's list (stop),
 * or a dump's own (a dump must not add to the session's).  Collection and
 * dumps never run at once (ring.c serializes them). */
static loom__msgs *dump_warn;

static void cwarn(loom_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cwarn(loom_session *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (dump_warn) loom__msgs_vadd(dump_warn, SIZE_MAX, LOOM_SEV_INFO, fmt, ap);
  else loom__session_vreport(s, LOOM_SEV_WARNING, fmt, ap);
  va_end(ap);
}

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
static void thread_label(char *buf, size_t n, pid_t tid, const char *name,
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
static void live_thread_name(pid_t tid, char *buf, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  FILE *f = fopen(path, "r");
  buf[0] = 0;
  if (!f) return;
  if (fgets(buf, (int)n, f)) buf[strcspn(buf, "\n")] = 0;
  fclose(f);
}

typedef struct open_range {
  int64_t ts;
  uint32_t name;
  uint64_t ext;
  uint32_t args_off, nargs; /* ops: their arguments in host_ctx.pargs */
} open_range;

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
  loom__rec_image *img;
  uint64_t raw_bad;          /* raw records cut short (cannot happen) */
  /* ring mode: ends whose begin was overwritten, records overwritten, and
   * the latest first-kept time of a ring that overwrote */
  uint64_t ring_cut, ring_over;
  int64_t ring_start;
} host_ctx;

/* Walks one thread's records in order, across chunks, up to its position
 * (chunks linked after the one it is in are not written yet).  skip: records
 * to pass at the start of the first chunk. */
typedef struct hr_cursor {
  loom__chunk *c;
  loom__hrec *r, *end, *stop;
  uint32_t skip;
} hr_cursor;

static loom__hrec *hr_next(hr_cursor *k) {
  while (k->c) {
    if (!k->r) {
      k->r = k->c->recs + (k->skip < k->c->cap ? k->skip : k->c->cap);
      k->skip = 0;
      k->end = k->c->recs + k->c->cap;
      if (k->stop >= k->c->recs && k->stop <= k->end) k->end = k->stop;
    }
    if (k->r < k->end) return k->r++;
    int last = k->stop >= k->c->recs && k->stop <= k->c->recs + k->c->cap;
    k->c = last ? NULL : k->c->next;
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

/* A RAW record (r) and the records carrying the rest of its bytes: the
 * formatted arguments go to the innermost open op (none: dropped). */
static int raw_record(host_ctx *h, hr_cursor *k, const loom__hrec *r, open_range *op) {
  uint32_t n = r->spare;
  unsigned char b[LOOM_RAW_MAX + sizeof(loom__hrec)];
  if (n > LOOM_RAW_MAX) n = 0; /* never written so */
  memcpy(b, &r->ts, 8);
  memcpy(b + 8, &r->a, 8);
  for (uint32_t off = LOOM__RAW_HEAD, i = 0; i < loom__raw_slots(n); i++, off += sizeof(loom__hrec)) {
    const loom__hrec *p = hr_next(k);
    if (!p) {
      h->raw_bad++;
      return 0;
    }
    memcpy(b + off, p, sizeof *p);
  }
  if (!op) return 0;
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
  for (uint32_t i = 0; i < count; i++) {
    if (LOOM__PUSH(h->pargs, h->npargs, h->cap_pargs, h->raw_args[from + i])) return -1;
    op->nargs++;
  }
  h->nraw_args = mark; /* a collision's arguments are not kept */
  return 0;
}

/* Kinds the session did not ask for are skipped (add_range returns 0,
 * add_point 1, so that callers attach arguments only to added events). */
static int add_range(host_ctx *h, uint32_t track, uint8_t kind, uint32_t cat,
                     const open_range *r, int64_t end, int unclosed) {
  if (!(h->s->kinds & LOOM_KIND_BIT(kind))) return 0;
  loom__ev e = {.ts = r->ts, .dur = end - r->ts, .external_id = r->ext,
                .name = r->name, .cat = cat, .track = track, .kind = kind,
                .ph = LOOM__PH_COMPLETE,
                .flags = unclosed ? LOOM__EV_UNCLOSED : 0};
  if (e.dur < 0) e.dur = 0;
  if (loom__trace_add_ev(h->t, &e)) return -1;
  for (uint32_t i = 0; i < r->nargs; i++)
    if (loom__trace_add_arg(h->t, &h->pargs[r->args_off + i])) return -1;
  return unclosed ? loom__trace_add_arg_int(h->t, "unclosed", 1) : 0;
}

static int add_point(host_ctx *h, uint32_t track, uint8_t kind, uint8_t ph,
                     uint32_t cat, uint32_t name, int64_t ts) {
  if (!(h->s->kinds & LOOM_KIND_BIT(kind))) return 1;
  loom__ev e = {.ts = ts, .name = name, .cat = cat, .track = track,
                .kind = kind, .ph = ph};
  return loom__trace_add_ev(h->t, &e);
}

static int pop_into(host_ctx *h, open_range *stk, size_t *n, uint32_t track,
                    uint8_t kind, uint32_t cat, int64_t end, int cut) {
  if (!*n) {
    if (cut) h->ring_cut++; /* its begin was overwritten */
    else h->unmatched++;
    return 0;
  }
  --*n;
  int rc = add_range(h, track, kind, cat, &stk[*n], end, 0);
  if (stk[*n].nargs) h->npargs = stk[*n].args_off; /* its arguments are done */
  return rc;
}

/* Converts one thread's records into events. */
static int host_thread(host_ctx *h, loom__tbuf *tb) {
  loom_trace *t = h->t;
  h->npargs = 0; /* the op-argument stack is per thread */
  char name[64], label[256];
  if (h->img->dead || atomic_load(&tb->exited)) snprintf(name, sizeof name, "%s", tb->name);
  else live_thread_name(tb->tid, name, sizeof name);
  thread_label(label, sizeof label, tb->tid, name, h->img);
  uint32_t track;
  if (loom__trace_track(t, h->pid, tb->tid, label, LOOM_DEVICE_HOST, &track)) return -1;
  open_range *ranges = NULL, *ops = NULL;
  size_t nr = 0, cr = 0, no = 0, co = 0;
  open_range step = {.ts = 0};
  int step_open = 0, rc = 0;
  uint64_t over = atomic_load(&tb->overwritten);
  hr_cursor k = {.c = tb->head, .stop = atomic_load_explicit(&tb->pos, memory_order_acquire),
                 .skip = over && tb->head ? tb->head->skip : 0};
  if (!k.stop) k.c = NULL; /* a chunk may be linked with nothing published in it */
  int first = 1;
  h->ring_over += over;
  for (loom__hrec *r; rc == 0 && (r = hr_next(&k));) {
    if (first && over) { /* where this ring's kept part begins */
      int64_t ts0 = loom__timeline_convert(&h->s->tl, h->dom, r->ts);
      if (ts0 > h->ring_start) h->ring_start = ts0;
    }
    first = 0;
    if (r->type == LOOM__HR_RAW) { /* its ts holds raw bytes */
      rc = raw_record(h, &k, r, no ? &ops[no - 1] : NULL);
      continue;
    }
    int64_t ts = loom__timeline_convert(&h->s->tl, h->dom, r->ts);
    open_range o = {.ts = ts};
    switch (r->type) {
    case LOOM__HR_PUSH:
      o.name = name_of(&h->nm, r->name, r->flags);
      rc = LOOM__PUSH(ranges, nr, cr, o);
      break;
    case LOOM__HR_POP:
      rc = pop_into(h, ranges, &nr, track, LOOM_KIND_USER_RANGE, h->c_user, ts, over != 0);
      break;
    case LOOM__HR_OP_BEGIN:
      o.name = name_of(&h->nm, r->name, r->flags);
      o.ext = r->a;
      o.args_off = (uint32_t)h->npargs;
      rc = LOOM__PUSH(ops, no, co, o);
      break;
    case LOOM__HR_ARG: { /* belongs to the op that began just before */
      if (!no) break;
      /* keys and string values are interned ids: resolved once per trace */
      loom__targ a = {.key = name_of(&h->nm, r->name, LOOM__HR_F_ID), .type = (uint8_t)r->spare};
      if (a.type == LOOM_ARG_STRING) a.v.s = name_of(&h->nm, r->a, LOOM__HR_F_ID);
      else memcpy(&a.v, &r->a, sizeof r->a);
      rc = LOOM__PUSH(h->pargs, h->npargs, h->cap_pargs, a);
      if (rc == 0) ops[no - 1].nargs++;
      break;
    }
    case LOOM__HR_OP_END:
      rc = pop_into(h, ops, &no, track, LOOM_KIND_CPU_OP, h->c_op, ts, over != 0);
      break;
    case LOOM__HR_INSTANT:
      rc = add_point(h, track, LOOM_KIND_INSTANT, LOOM__PH_INSTANT, h->c_instant,
                     name_of(&h->nm, r->name, r->flags), ts);
      rc = rc < 0 ? rc : 0;
      break;
    case LOOM__HR_COUNTER: {
      uint32_t nmid = name_of(&h->nm, r->name, r->flags);
      rc = add_point(h, track, LOOM_KIND_COUNTER, LOOM__PH_COUNTER, h->c_counter, nmid, ts);
      loom__targ a = {.key = nmid, .type = LOOM_ARG_DOUBLE};
      memcpy(&a.v.d, &r->a, sizeof a.v.d);
      if (rc == 0) rc = loom__trace_add_arg(t, &a);
      rc = rc < 0 ? rc : 0;
      break;
    }
    case LOOM__HR_STEP: {
      if (step_open) rc = add_range(h, track, LOOM_KIND_USER_RANGE, h->c_user, &step, ts, 0);
      step_open = 0;
      if (r->flags & LOOM__HR_F_STEP_END) break;
      char sn[48];
      snprintf(sn, sizeof sn, "ProfilerStep#%llu", (unsigned long long)r->a);
      step = (open_range){.ts = ts, .name = loom__trace_str(t, sn)};
      step_open = 1;
      break;
    }
    case LOOM__HR_BEGIN:
    case LOOM__HR_END: {
      async_mark m = {ts, r->a, r->type == LOOM__HR_BEGIN ? name_of(&h->nm, r->name, r->flags) : 0,
                      track, r->type == LOOM__HR_END, over != 0};
      rc = LOOM__PUSH(h->marks, h->nmarks, h->cap_marks, m);
      break;
    }
    default:
      break;
    }
  }
  /* Ranges still open at stop end there, flagged. */
  while (rc == 0 && nr) rc = add_range(h, track, LOOM_KIND_USER_RANGE, h->c_user, &ranges[--nr], t->end_ns, 1);
  while (rc == 0 && no) rc = add_range(h, track, LOOM_KIND_CPU_OP, h->c_op, &ops[--no], t->end_ns, 1);
  if (rc == 0 && step_open) rc = add_range(h, track, LOOM_KIND_USER_RANGE, h->c_user, &step, t->end_ns, 1);
  uint64_t dropped = atomic_load(&tb->dropped);
  if (rc == 0 && dropped) {
    char msg[160];
    snprintf(msg, sizeof msg, "loom: %llu records dropped (memory cap)", (unsigned long long)dropped);
    rc = add_point(h, track, LOOM_KIND_MARKER, LOOM__PH_INSTANT, h->c_marker,
                   loom__trace_str(t, msg), t->end_ns);
    if (rc == 0) rc = loom__trace_add_arg_int(t, "dropped", (int64_t)dropped);
    rc = rc < 0 ? rc : 0;
    t->dropped += dropped;
    cwarn(h->s, "thread %d: %llu host records dropped: the memory "
                       "cap (memory_cap=%llu bytes%s) was reached", (int)tb->tid,
                       (unsigned long long)dropped, (unsigned long long)h->s->cap_bytes,
                       h->s->cap_bytes == LOOM__DEFAULT_MEMORY_CAP ? ", the default" : "");
  }
  free(ranges);
  free(ops);
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

/* What a ring-mode trace reports about the overwritten part. */
typedef struct ring_info {
  uint64_t host_over, host_cut, bk_over, bk_cut;
  int64_t start; /* latest first-kept time of a ring that overwrote; 0 none */
} ring_info;

static int collect_host(loom_session *s, loom_trace *t, loom__rec_image *img, ring_info *ri) {
  host_ctx h = {.s = s, .t = t, .nm = {t, {0}, img}, .dom = img->dom, .pid = img->pid, .img = img};
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
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) rc = host_thread(&h, cp ? &cp[i].view : th[i]);
  if (rc == 0) rc = host_async(&h);
  for (size_t i = 0; cp && i < n; i++) free(cp[i].chunk);
  free(cp);
  ri->host_over = h.ring_over;
  ri->host_cut = h.ring_cut;
  ri->start = h.ring_start;
  if (h.unmatched)
    cwarn(s, "%llu range ends without a matching begin were ignored",
                       (unsigned long long)h.unmatched);
  if (!img->dead) free(th);
  free(h.marks);
  free(h.pargs);
  free(h.raws);
  free(h.raw_bytes);
  free(h.raw_args);
  free(h.fmt_buf);
  loom__map_free(&h.raw_by_hash);
  if (h.raw_bad)
    cwarn(s, "%llu raw op arguments were cut short and dropped",
                       (unsigned long long)h.raw_bad);
  loom__map_free(&h.nm.cache);
  if (!img->dead && !img->dump) loom__hostrec_release();
  return rc;
}

/* ---- backend records ----------------------------------------------------- */
static const char *default_cat(const loom_backend *b, const loom__drec *d,
                               char *buf, size_t n) {
  int host = d->device == LOOM_DEVICE_HOST;
  switch (d->kind) {
  case LOOM_KIND_KERNEL: return "kernel";
  case LOOM_KIND_MEMCPY: return "gpu_memcpy";
  case LOOM_KIND_MEMSET: return "gpu_memset";
  case LOOM_KIND_RUNTIME:
    if (b->ops.runtime_category) return b->ops.runtime_category;
    snprintf(buf, n, "%s_runtime", b->ops.device_type);
    return buf;
  case LOOM_KIND_DRIVER:
    if (b->ops.driver_category) return b->ops.driver_category;
    snprintf(buf, n, "%s_driver", b->ops.device_type);
    return buf;
  case LOOM_KIND_SYNC:
    snprintf(buf, n, "%s_sync", b->ops.device_type);
    return buf;
  case LOOM_KIND_USER_RANGE: return host ? "user_annotation" : "gpu_user_annotation";
  case LOOM_KIND_CPU_OP: return "cpu_op";
  case LOOM_KIND_INSTANT: return "cpu_instant_event";
  case LOOM_KIND_COUNTER: return "counter";
  case LOOM_KIND_COLLECTIVE: return "collective_comm";
  case LOOM_KIND_OVERHEAD: return "overhead";
  case LOOM_KIND_SAMPLE: return "cpu_sample";
  default: return "marker";
  }
}

static int copy_targs(loom_trace *t, const loom__targ *a, size_t n) {
  for (size_t i = 0; i < n; i++) {
    loom__targ x = a[i];
    x.key = loom__trace_str(t, loom__intern_get(a[i].key));
    if (x.type == LOOM_ARG_STRING) x.v.s = loom__trace_str(t, loom__intern_get(a[i].v.s));
    if (loom__trace_add_arg(t, &x)) return -1;
  }
  return 0;
}

/* Copies and fills that give their "bytes" get Kineto's "memory bandwidth
 * (GB/s)" (bytes per ns), the same way for every backend. */
static int transfer_bandwidth(loom_trace *t, const loom__targ *a, size_t n, const loom__ev *e) {
  if ((e->kind != LOOM_KIND_MEMCPY && e->kind != LOOM_KIND_MEMSET) || e->dur <= 0) return 0;
  static _Atomic uint32_t bytes_key;
  uint32_t key = atomic_load_explicit(&bytes_key, memory_order_relaxed);
  if (!key) atomic_store_explicit(&bytes_key, key = loom__intern("bytes", SIZE_MAX), memory_order_relaxed);
  for (size_t i = 0; i < n; i++) {
    if (a[i].key != key || (a[i].type != LOOM_ARG_UINT && a[i].type != LOOM_ARG_INT)) continue;
    double bytes = a[i].type == LOOM_ARG_UINT ? (double)a[i].v.u : (double)a[i].v.i;
    if (bytes <= 0) return 0;
    loom__targ bw = {.key = loom__trace_str(t, "memory bandwidth (GB/s)"), .type = LOOM_ARG_DOUBLE};
    bw.v.d = bytes / (double)e->dur;
    return loom__trace_add_arg(t, &bw);
  }
  return 0;
}

typedef struct bk_stats {
  uint64_t bad_ref, outside, negative, cut;
  int64_t first; /* earliest kept start (ring mode) */
} bk_stats;

/* launched: correlation ids of the backend's host calls inside the window;
 * device work they launched is kept even when it runs after the stop.  bs:
 * b's records (a dump's copy of them). */
static int backend_record(loom_session *s, loom_trace *t, loom_backend *b, loom__bsess *bs,
                          const loom__drec *d, int64_t pid, bk_stats *st,
                          const loom__map *launched) {
  if (!d->clock || d->clock > bs->nclocks) {
    st->bad_ref++;
    return 0;
  }
  int host = d->device == LOOM_DEVICE_HOST;
  uint32_t track;
  char label[256], tname[64];
  if (host) {
    long known = loom__trace_find_track(t, pid, d->resource);
    if (known >= 0) {
      track = (uint32_t)known;
    } else {
      live_thread_name((pid_t)d->resource, tname, sizeof tname);
      thread_label(label, sizeof label, (pid_t)d->resource, tname, NULL);
      if (loom__trace_track(t, pid, d->resource, label, LOOM_DEVICE_HOST, &track)) return -1;
    }
  } else {
    if (d->device >= s->ndevs || s->devs[d->device].b != b) {
      st->bad_ref++;
      return 0;
    }
    int64_t tid = 0;
    const char *rname = "default queue";
    if (d->resource < s->nres && s->res[d->resource].device == d->device) {
      tid = s->res[d->resource].native_id ? (int64_t)s->res[d->resource].native_id
                                          : (int64_t)d->resource + 1;
      rname = s->res[d->resource].name;
    }
    if (!*rname) {
      snprintf(label, sizeof label, "stream %lld", (long long)tid);
      rname = label;
    }
    if (loom__trace_track(t, d->device, tid, rname, d->device, &track)) return -1;
  }
  loom__clock *c = &bs->clocks[d->clock - 1];
  int64_t ts = loom__clock_convert(&s->tl, c, d->start);
  int64_t te = loom__clock_convert(&s->tl, c, d->end);
  if (te < ts) {
    st->negative++;
    te = ts;
  }
  if (te < t->start_ns ||
      (ts > t->end_ns && !(d->corr && !host && loom__map_get(launched, d->corr)))) {
    st->outside++;
    return 0;
  }
  /* A ring that overwrote: device work whose launching call is gone goes
   * with it (when the backend records its launches at all). */
  if (bs->overwritten && d->corr && !host && launched->n && !loom__map_get(launched, d->corr)) {
    st->cut++;
    return 0;
  }
  if (ts < st->first) st->first = ts;
  char buf[96];
  const char *cat = d->cat ? loom__intern_get(d->cat) : default_cat(b, d, buf, sizeof buf);
  uint8_t ph = d->kind == LOOM_KIND_INSTANT || d->kind == LOOM_KIND_MARKER ||
                       d->kind == LOOM_KIND_SAMPLE ? LOOM__PH_INSTANT
             : d->kind == LOOM_KIND_COUNTER ? LOOM__PH_COUNTER : LOOM__PH_COMPLETE;
  loom__ev e = {.ts = ts, .dur = ph == LOOM__PH_COMPLETE ? te - ts : 0,
                .correlation = d->corr, .external_id = d->ext,
                .name = loom__trace_str(t, loom__intern_get(d->name)),
                .cat = loom__trace_str(t, cat), .track = track, .kind = (uint8_t)d->kind,
                .ph = ph, .src = bs->src,
                .flags = (uint16_t)(d->roles << LOOM__EV_ROLE_SHIFT)};
  if (loom__trace_add_ev(t, &e)) return -1;
  /* A counter's arguments are its series: its device and queue are in its
   * track, not extra series. */
  if (!host && ph != LOOM__PH_COUNTER) {
    if (loom__trace_add_arg_int(t, "device", d->device) ||
        loom__trace_add_arg_int(t, "stream", t->tracks[track].tid))
      return -1;
  }
  /* a backend with no arguments at all has bs->args NULL: NULL + 0 is undefined */
  const loom__targ *args = d->nargs ? bs->args + d->args_off : NULL;
  if (copy_targs(t, args, d->nargs)) return -1;
  return transfer_bandwidth(t, args, d->nargs, &e);
}

static int collect_backend(loom_session *s, loom_trace *t, loom_backend *b, loom__bsess *bs,
                           int64_t pid, ring_info *ri) {
  for (size_t i = 0; i < bs->nclocks; i++) {
    loom__clock_finalize(&s->tl, &bs->clocks[i]);
    char why[512];
    if (loom__clock_problem(&bs->clocks[i], why, sizeof why))
      cwarn(s, "backend '%s': %s", b->ops.name, why);
  }
  bk_stats st = {0, 0, 0, 0, INT64_MAX};
  loom__map launched = {0};
  for (size_t i = 0; i < bs->nrecs; i++) {
    const loom__drec *d = &bs->recs[i];
    if (d->corr && d->device == LOOM_DEVICE_HOST && d->clock && d->clock <= bs->nclocks &&
        (d->kind == LOOM_KIND_RUNTIME || d->kind == LOOM_KIND_DRIVER)) {
      int64_t ts = loom__clock_convert(&s->tl, &bs->clocks[d->clock - 1], d->start);
      if (ts <= t->end_ns && loom__map_put(&launched, d->corr, 1)) return -1;
    }
  }
  int rc = 0;
  for (size_t i = 0; i < bs->nrecs && rc == 0; i++)
    rc = backend_record(s, t, b, bs, &bs->recs[i], pid, &st, &launched);
  loom__map_free(&launched);
  if (rc) return -1;
  if (st.bad_ref)
    cwarn(s, "backend '%s': %llu records named an unknown clock or "
                       "device and were dropped", b->ops.name, (unsigned long long)st.bad_ref);
  if (st.negative)
    cwarn(s, "backend '%s': %llu records ended before they started "
                       "(kept with zero duration)", b->ops.name, (unsigned long long)st.negative);
  if (st.outside)
    loom__log(LOOM_SEV_INFO, "backend '%s': %llu records outside the session window",
              b->ops.name, (unsigned long long)st.outside);
  if (bs->overwritten) {
    ri->bk_over += bs->overwritten;
    ri->bk_cut += st.cut;
    if (st.first != INT64_MAX && st.first > ri->start) ri->start = st.first;
  }
  /* Runtime threads may still count losses (emits refused after flush); a
   * dump's copy is its own. */
  int live = bs == b->bs;
  if (live) pthread_mutex_lock(&b->mu);
  uint64_t lost = bs->lost;
  char reasons[768] = "";
  size_t len = 0;
  for (size_t i = 0; i < sizeof bs->lost_by / sizeof bs->lost_by[0] && bs->lost_by[i].reason; i++)
    len += (size_t)snprintf(reasons + len, len < sizeof reasons ? sizeof reasons - len : 0,
                            "%s%llu: %s", i ? "; " : "", (unsigned long long)bs->lost_by[i].n,
                            bs->lost_by[i].reason);
  if (live) pthread_mutex_unlock(&b->mu);
  if (lost) {
    t->dropped += lost;
    cwarn(s, "backend '%s' lost %llu records (%s)", b->ops.name,
                       (unsigned long long)lost, reasons);
  }
  return 0;
}

static int add_devices(loom_session *s, loom_trace *t) {
  for (size_t i = 0; i < s->ndevs; i++) {
    const loom__sdev *d = &s->devs[i];
    if (!d->b) continue; /* its backend left the session */
    char pname[128];
    snprintf(pname, sizeof pname, "%s %zu", d->b->ops.device_type, i);
    if (loom__trace_add_proc(t, (int64_t)i, pname, d->name, (int32_t)(i + 1))) return -1;
    loom__dev dv = {(int64_t)i, loom__trace_str(t, d->name), loom__trace_str(t, d->vendor),
                    loom__trace_str(t, d->type), loom__trace_str(t, d->b->ops.device_type),
                    loom__trace_str(t, d->b->ops.name), (uint32_t)t->nargs, 0};
    /* Device properties are stored after the events' args: they are
     * addressed by offset, like event args. */
    for (size_t k = 0; k < d->nprops; k++) {
      loom__targ x = d->props[k];
      x.key = loom__trace_str(t, loom__intern_get(x.key));
      if (x.type == LOOM_ARG_STRING) x.v.s = loom__trace_str(t, loom__intern_get(x.v.s));
      if (LOOM__PUSH(t->args, t->nargs, t->cap_args, x)) return -1;
      dv.nargs++;
    }
    if (LOOM__PUSH(t->devs, t->ndevs, t->cap_devs, dv)) return -1;
  }
  return 0;
}

static void *memdup(const void *p, size_t n) {
  void *q = malloc(n);
  if (q) memcpy(q, p, n);
  return q;
}

/* A dump's copy of b's records, clocks and losses (taken under b->mu; the
 * loss reasons are shared: they live as long as the session). */
static loom__bsess *bsess_copy(loom_backend *b) {
  loom__bsess *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  int bad = 0;
  pthread_mutex_lock(&b->mu);
  loom__bsess *bs = b->bs;
  if (bs) {
    *c = *bs;
    c->recs = NULL, c->args = NULL, c->clocks = NULL;
    c->cap_recs = c->nrecs, c->cap_args = c->nargs, c->cap_clocks = c->nclocks;
    if (bs->nrecs && !(c->recs = memdup(bs->recs, bs->nrecs * sizeof *bs->recs))) bad = 1;
    if (bs->nargs && !(c->args = memdup(bs->args, bs->nargs * sizeof *bs->args))) bad = 1;
    if (bs->nclocks && !(c->clocks = calloc(bs->nclocks, sizeof *c->clocks))) bad = 1;
    for (size_t i = 0; !bad && i < bs->nclocks; i++) {
      c->clocks[i] = bs->clocks[i];
      c->clocks[i].name = NULL;
      c->clocks[i].cap_sync = bs->clocks[i].nsync;
      c->clocks[i].sync = bs->clocks[i].nsync
                              ? memdup(bs->clocks[i].sync, bs->clocks[i].nsync * sizeof(loom__sync))
                              : NULL;
      if (bs->clocks[i].nsync && !c->clocks[i].sync) bad = 1;
    }
  } else {
    bad = 1;
  }
  pthread_mutex_unlock(&b->mu);
  if (bad) {
    for (size_t i = 0; c->clocks && i < c->nclocks; i++) free(c->clocks[i].sync);
    free(c->clocks);
    free(c->recs);
    free(c->args);
    free(c);
    return NULL;
  }
  return c;
}

static void bsess_free_copy(loom__bsess *c) {
  if (!c) return;
  for (size_t i = 0; i < c->nclocks; i++) free(c->clocks[i].sync);
  free(c->clocks);
  free(c->recs);
  free(c->args);
  free(c);
}

/* The ring's part of a trace: metadata (ring_overwritten_records,
 * ring_window_start_ns) and one warning saying what was overwritten (added
 * with the others after it). */
static int ring_report(loom_session *s, loom_trace *t, const ring_info *ri, const char *reason) {
  char v[64], msg[512];
  uint64_t over = ri->host_over + ri->bk_over;
  int rc = 0;
  if (reason) rc = loom__trace_add_meta(t, "ring_dump_reason", reason);
  snprintf(v, sizeof v, "%llu", (unsigned long long)over);
  if (rc == 0) rc = loom__trace_add_meta(t, "ring_overwritten_records", v);
  int64_t start = over && ri->start ? ri->start : t->start_ns;
  snprintf(v, sizeof v, "%lld", (long long)start);
  if (rc == 0) rc = loom__trace_add_meta(t, "ring_window_start_ns", v);
  if (rc == 0 && over) {
    snprintf(msg, sizeof msg,
             "ring: %llu records overwritten (host %llu, backends %llu); the kept window "
             "starts %.6f s after the session start; %llu range ends whose begin was "
             "overwritten and %llu device records whose launch was overwritten were dropped",
             (unsigned long long)over, (unsigned long long)ri->host_over,
             (unsigned long long)ri->bk_over, (double)(start - t->start_ns) * 1e-9,
             (unsigned long long)ri->host_cut, (unsigned long long)ri->bk_cut);
    cwarn(s, "%s", msg); /* at stop printed too, as the session's warnings are */
  }
  return rc;
}

loom_status loom__session_collect(loom_session *s, loom_trace **out) {
  loom__rec_image img = {.pid = getpid(), .dom = loom__hostrec_domain()};
  return loom__collect_image(s, &img, out);
}

/* The trace of session s with img's host records: a stopped session's, a
 * dead process's, or (img->dump) the window a ring-mode session's rings hold
 * now, while it goes on recording. */
loom_status loom__collect_image(loom_session *s, loom__rec_image *img, loom_trace **out) {
  const char *reason = img->dump;
  int dump = reason != NULL;
  loom_trace *t = loom__trace_new();
  if (!t) return loom__fail(LOOM_ENOMEM, "out of memory building the trace");
  loom__msgs own = {.mu = PTHREAD_MUTEX_INITIALIZER};
  dump_warn = dump ? &own : NULL;
  /* Through the timeline so the test-only clock shift moves them too. */
  t->start_ns = loom__timeline_convert(&s->tl, LOOM_CLOCK_REALTIME,
                                       (uint64_t)s->tl.start[LOOM_CLOCK_REALTIME].real);
  uint64_t end = dump ? loom__clock_now(LOOM_CLOCK_REALTIME)
                      : (uint64_t)s->tl.stop[LOOM_CLOCK_REALTIME].real;
  t->end_ns = img->end_ns ? img->end_ns : loom__timeline_convert(&s->tl, LOOM_CLOCK_REALTIME, end);
  t->trace_name = loom__trace_str(t, s->name);
  t->window_end = 1;
  int64_t pid = img->pid;
  char comm[64];
  if (img->comm) snprintf(comm, sizeof comm, "%s", img->comm);
  else live_thread_name((pid_t)pid, comm, sizeof comm);
  ring_info ri = {0};
  int rc = loom__trace_add_proc(t, pid, comm[0] ? comm : "host", "CPU", 0);
  if (rc == 0 && s->host) rc = collect_host(s, t, img, &ri);
  if (rc == 0) {
    pthread_mutex_lock(&s->mu); /* backends may add devices meanwhile */
    rc = add_devices(s, t);
    pthread_mutex_unlock(&s->mu);
  }
  for (size_t i = 0; i < s->nbk && rc == 0; i++) {
    loom__bsess *bs = dump ? bsess_copy(s->bk[i]) : s->bk[i]->bs;
    if (dump && !bs) continue; /* out of memory: this backend is not in the dump */
    rc = collect_backend(s, t, s->bk[i], bs, pid, &ri);
    if (dump) bsess_free_copy(bs);
  }
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  if (rc == 0)
    rc = loom__trace_add_meta(t, "loom_version", loom_version_string()) ||
         loom__trace_add_meta(t, "host_name", host);
  if (rc == 0) rc = loom__session_meta(&s->opts, t); /* fork.c */
  if (rc == 0 && s->ring) rc = ring_report(s, t, &ri, reason);
  pthread_mutex_lock(&s->mu);
  if (rc == 0) rc = loom__kvs_to_trace(&s->meta, t);
  pthread_mutex_unlock(&s->mu);
  if (rc == 0 && !img->dead) rc = loom__meta_apply(t); /* meta.c: the program's own, last */
  pthread_mutex_lock(&s->warn.mu);
  for (size_t i = 0; i < s->warn.n && rc == 0; i++)
    rc = loom__trace_add_warning(t, s->warn.v[i]);
  pthread_mutex_unlock(&s->warn.mu);
  for (size_t i = 0; i < own.n && rc == 0; i++) rc = loom__trace_add_warning(t, own.v[i]);
  dump_warn = NULL;
  loom__msgs_free(&own);
  if (rc == 0) rc = loom__trace_process(t);
  if (rc != 0) {
    loom_trace_free(t);
    return loom__fail(LOOM_ENOMEM, "out of memory building the trace");
  }
  *out = t;
  return LOOM_OK;
}

loom_status loom__session_collect_dump(loom_session *s, const char *reason, loom_trace **out) {
  loom__rec_image img = {.pid = getpid(), .dom = loom__hostrec_domain(),
                         .dump = reason ? reason : "dump"};
  return loom__collect_image(s, &img, out);
}
