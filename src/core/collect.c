/*
 * collect.c - turns what a stopped session holds (host thread buffers,
 * backends' records, devices, resources, clocks, warnings) into a trace:
 * every timestamp converted to the session timeline, ranges matched, tracks
 * named, losses reported; then the common processing of trace/process.c.
 * The same for a ring-mode dump (ring.c) while recording goes on: the host
 * records are copies (loom__hostrec_ring_copy), the backends' records are
 * copied under their lock, and what the rings overwrote is reported: a range
 * whose begin was overwritten is dropped whole (its end with it), device
 * work whose launch was overwritten goes with it.  The host threads'
 * records are collect_host.c's.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect.h"
#include "core.h"
#include "record/record.h"

/* Where warnings of the trace being built go: the session's list (stop),
 * or a dump's own (a dump must not add to the session's).  Collection and
 * dumps never run at once (ring.c serializes them). */
static loom__msgs *dump_warn;

void loom__collect_warn(loom_session *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (dump_warn) loom__msgs_vadd(dump_warn, SIZE_MAX, LOOM_SEV_INFO, fmt, ap);
  else loom__session_vreport(s, LOOM_SEV_WARNING, fmt, ap);
  va_end(ap);
}

/* ---- backend records ----------------------------------------------------- */
const char *loom__bk_category(const loom_backend *b, uint16_t kind, int host, char *buf,
                              size_t n) {
  switch (kind) {
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
  case LOOM_KIND_INSTANT:
  case LOOM_KIND_MEMORY: return "cpu_instant_event";
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
  if (!key)
    atomic_store_explicit(&bytes_key, key = loom__intern("bytes", SIZE_MAX),
                          memory_order_relaxed);
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

/* A memory record's arguments as the trace model has them (trace.h): "device"
 * an int (the device's pid in the trace, which is its index), "memory_kind"
 * always there ("device" with a device, else "host" when the backend gave
 * none); the rest as given. */
static int memory_args(loom_trace *t, const loom__targ *a, size_t n) {
  static _Atomic uint32_t keys[2];
  if (!atomic_load_explicit(&keys[1], memory_order_relaxed)) {
    atomic_store(&keys[0], loom__intern("device", SIZE_MAX));
    atomic_store(&keys[1], loom__intern("memory_kind", SIZE_MAX));
  }
  uint32_t kdev = atomic_load(&keys[0]), kkind = atomic_load(&keys[1]);
  int dev = 0, kind = 0;
  for (size_t i = 0; i < n; i++) {
    loom__targ x = a[i];
    if (x.key == kdev && x.type == LOOM_ARG_UINT) x.type = LOOM_ARG_INT; /* same bits */
    dev |= x.key == kdev;
    kind |= x.key == kkind;
    if (copy_targs(t, &x, 1)) return -1;
  }
  if (kind) return 0;
  loom__targ k = {.key = loom__trace_str(t, "memory_kind"), .type = LOOM_ARG_STRING,
                  .v.s = loom__trace_str(t, dev ? "device" : "host")};
  return loom__trace_add_arg(t, &k);
}

/* 1 when memory record d names no device or one of b's (a salvaged
 * backend's records were not checked at emit). */
static int memory_device_ok(loom_session *s, const loom_backend *b, const loom__bsess *bs,
                            const loom__drec *d) {
  uint32_t kdev = loom__intern("device", SIZE_MAX);
  for (size_t i = 0; i < d->nargs; i++) {
    const loom__targ *a = &bs->args[d->args_off + i];
    if (a->key == kdev)
      return (a->type == LOOM_ARG_UINT || a->type == LOOM_ARG_INT) && a->v.u < s->ndevs &&
             s->devs[a->v.u].b == b;
  }
  return 1;
}

typedef struct bk_stats {
  uint64_t bad_ref, outside, negative, cut;
  int64_t first; /* earliest kept start (ring mode) */
} bk_stats;

/* The track of backend record d: its host thread's, or its device queue's
 * (named after the queue, else "stream N").  1 with *track set, 0 when d
 * names a device that is not its backend's (counted), -1 out of memory. */
static int record_track(loom_session *s, loom_trace *t, loom_backend *b, const loom__drec *d,
                        int64_t pid, bk_stats *st, uint32_t *track) {
  char label[256], tname[64];
  if (d->device == LOOM_DEVICE_HOST) {
    long known = loom__trace_find_track(t, pid, d->resource);
    if (known >= 0) {
      *track = (uint32_t)known;
      return 1;
    }
    loom__live_thread_name((pid_t)d->resource, tname, sizeof tname);
    loom__thread_label(label, sizeof label, (pid_t)d->resource, tname, NULL);
    return loom__trace_track(t, pid, d->resource, label, LOOM_DEVICE_HOST, track) ? -1 : 1;
  }
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
  return loom__trace_track(t, d->device, tid, rname, d->device, track) ? -1 : 1;
}

/* The calls of one backend inside the window: the ones it emitted (own)
 * and the ones that came as host records (hc, under its producer number). */
typedef struct launch_set {
  loom__map own;
  const loom__host_calls *hc;
  uint16_t src;
} launch_set;

static int launched_by(const launch_set *l, uint64_t corr) {
  if (loom__map_get(&l->own, corr)) return 1;
  const uint64_t *v = l->src <= LOOM__BMEM_SRC_MAX ? loom__map_get(&l->hc->corr, corr) : NULL;
  return v && (*v >> l->src & 1);
}

static int records_launches(const launch_set *l) {
  return l->own.n || (l->src <= LOOM__BMEM_SRC_MAX && l->hc->n[l->src]);
}

/* d's start and end in epoch ns; 0 when it is not kept: outside the window
 * (device work launched inside it is kept), or, in a ring that overwrote,
 * device work whose launching call is gone (when the backend records its
 * launches at all). */
static int record_times(loom_session *s, const loom_trace *t, const loom__bsess *bs,
                        const loom__drec *d, bk_stats *st, const launch_set *launched,
                        int64_t *ts, int64_t *te) {
  int host = d->device == LOOM_DEVICE_HOST;
  loom__clock *c = &bs->clocks[d->clock - 1];
  *ts = loom__clock_convert(&s->tl, c, d->start);
  *te = loom__clock_convert(&s->tl, c, d->end);
  if (*te < *ts) {
    st->negative++;
    *te = *ts;
  }
  if (*te < t->start_ns ||
      (*ts > t->end_ns && !(d->corr && !host && launched_by(launched, d->corr)))) {
    st->outside++;
    return 0;
  }
  if (bs->overwritten && d->corr && !host && records_launches(launched) &&
      !launched_by(launched, d->corr)) {
    st->cut++;
    return 0;
  }
  if (*ts < st->first) st->first = *ts;
  return 1;
}

/* The event of d on track, with its arguments: device work also gets its
 * device and stream (a counter's arguments are its series: its device and
 * queue are in its track, not extra series). */
static int record_event(loom_trace *t, loom_backend *b, const loom__bsess *bs,
                        const loom__drec *d, uint32_t track, int64_t ts, int64_t te) {
  char buf[96];
  const char *cat = d->cat ? loom__intern_get(d->cat)
                           : loom__bk_category(b, d->kind, d->device == LOOM_DEVICE_HOST, buf,
                                               sizeof buf);
  uint8_t ph = d->kind == LOOM_KIND_INSTANT || d->kind == LOOM_KIND_MARKER ||
                       d->kind == LOOM_KIND_SAMPLE || d->kind == LOOM_KIND_MEMORY
                   ? LOOM__PH_INSTANT
             : d->kind == LOOM_KIND_COUNTER ? LOOM__PH_COUNTER : LOOM__PH_COMPLETE;
  loom__ev e = {.ts = ts, .dur = ph == LOOM__PH_COMPLETE ? te - ts : 0,
                .correlation = d->corr, .external_id = d->ext,
                .name = loom__trace_str(t, loom__intern_get(d->name)),
                .cat = loom__trace_str(t, cat), .track = track, .kind = (uint8_t)d->kind,
                .ph = ph, .src = bs->src,
                .flags = (uint16_t)(d->roles << LOOM__EV_ROLE_SHIFT)};
  if (loom__trace_add_ev(t, &e)) return -1;
  if (d->device != LOOM_DEVICE_HOST && ph != LOOM__PH_COUNTER) {
    if (loom__trace_add_arg_int(t, "device", d->device) ||
        loom__trace_add_arg_int(t, "stream", t->tracks[track].tid))
      return -1;
  }
  /* a backend with no arguments at all has bs->args NULL: NULL + 0 is undefined */
  const loom__targ *args = d->nargs ? bs->args + d->args_off : NULL;
  if (d->kind == LOOM_KIND_MEMORY) return memory_args(t, args, d->nargs);
  if (copy_targs(t, args, d->nargs)) return -1;
  return transfer_bandwidth(t, args, d->nargs, &e);
}

/* launched: correlation ids of the backend's host calls inside the window;
 * device work they launched is kept even when it runs after the stop.  bs:
 * b's records (a dump's copy of them). */
static int backend_record(loom_session *s, loom_trace *t, loom_backend *b, loom__bsess *bs,
                          const loom__drec *d, int64_t pid, bk_stats *st,
                          const launch_set *launched) {
  if (!d->clock || d->clock > bs->nclocks) {
    st->bad_ref++;
    return 0;
  }
  if (d->kind == LOOM_KIND_MEMORY && !memory_device_ok(s, b, bs, d)) {
    st->bad_ref++;
    return 0;
  }
  uint32_t track;
  int64_t ts, te;
  int rc = record_track(s, t, b, d, pid, st, &track);
  if (rc <= 0) return rc;
  if (!record_times(s, t, bs, d, st, launched, &ts, &te)) return 0;
  return record_event(t, b, bs, d, track, ts, te);
}

/* Ring mode: the allocations the ring dropped and no record freed
 * (memring.c) are live where the backend's kept records begin (first), or
 * at the trace's start: there, flagged live_at_start with their time. */
static int gone_memory(loom_session *s, loom_trace *t, loom_backend *b, loom__bsess *bs,
                       int64_t pid, bk_stats *st, int64_t first) {
  for (size_t i = 0; i < bs->ngone; i++) {
    const loom__bmem *m = &bs->gone_mem[i];
    uint32_t track;
    if (!m->d.clock || m->d.clock > bs->nclocks) continue;
    int rc = record_track(s, t, b, &m->d, pid, st, &track);
    if (rc < 0) return -1;
    if (!rc) continue;
    int64_t at = loom__clock_convert(&s->tl, &bs->clocks[m->d.clock - 1], m->d.start);
    loom__ev e = {.ts = first < at ? at : first, .external_id = m->d.ext,
                  .name = loom__trace_str(t, loom__intern_get(m->d.name)),
                  .cat = loom__trace_str(t, "cpu_instant_event"), .track = track,
                  .kind = LOOM_KIND_MEMORY, .ph = LOOM__PH_INSTANT, .src = bs->src,
                  .flags = (uint16_t)(m->d.roles << LOOM__EV_ROLE_SHIFT)};
    if (loom__trace_add_ev(t, &e) || memory_args(t, m->args, m->d.nargs) ||
        loom__trace_add_arg_int(t, "live_at_start", 1) ||
        loom__trace_add_arg_int(t, "allocated_at_ns", at))
      return -1;
  }
  return 0;
}

static int collect_backend(loom_session *s, loom_trace *t, loom_backend *b, loom__bsess *bs,
                           int64_t pid, loom__ring_info *ri, const loom__host_calls *hc) {
  for (size_t i = 0; i < bs->nclocks; i++) {
    loom__clock_finalize(&s->tl, &bs->clocks[i]);
    char why[512];
    if (loom__clock_problem(&bs->clocks[i], why, sizeof why))
      loom__collect_warn(s, "backend '%s': %s", b->ops.name, why);
  }
  bk_stats st = {0, 0, 0, 0, INT64_MAX};
  launch_set launched = {.hc = hc, .src = bs->src};
  for (size_t i = 0; i < bs->nrecs; i++) {
    const loom__drec *d = &bs->recs[i];
    if (d->corr && d->device == LOOM_DEVICE_HOST && d->clock && d->clock <= bs->nclocks &&
        (d->kind == LOOM_KIND_RUNTIME || d->kind == LOOM_KIND_DRIVER)) {
      int64_t ts = loom__clock_convert(&s->tl, &bs->clocks[d->clock - 1], d->start);
      if (ts <= t->end_ns && loom__map_put(&launched.own, d->corr, 1)) return -1;
    }
  }
  int rc = 0;
  for (size_t i = 0; i < bs->nrecs && rc == 0; i++)
    rc = backend_record(s, t, b, bs, &bs->recs[i], pid, &st, &launched);
  loom__map_free(&launched.own);
  if (rc == 0 && bs->ngone)
    rc = gone_memory(s, t, b, bs, pid, &st, st.first != INT64_MAX ? st.first : t->start_ns);
  if (rc) return -1;
  if (st.bad_ref)
    loom__collect_warn(s, "backend '%s': %llu records named an unknown clock or "
                       "device and were dropped", b->ops.name, (unsigned long long)st.bad_ref);
  if (st.negative)
    loom__collect_warn(s, "backend '%s': %llu records ended before they started "
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
    loom__collect_warn(s, "backend '%s' lost %llu records (%s)", b->ops.name,
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
      if (LOOM__PUSH_BIG(t->args, t->nargs, t->cap_args, x)) return -1;
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
    if (loom__bmem_copy(c, bs)) bad = 1;
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
    loom__bmem_free(c);
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
  loom__bmem_free(c);
  for (size_t i = 0; i < c->nclocks; i++) free(c->clocks[i].sync);
  free(c->clocks);
  free(c->recs);
  free(c->args);
  free(c);
}

/* The ring's part of a trace: metadata (ring_overwritten_records,
 * ring_window_start_ns) and one warning saying what was overwritten (added
 * with the others after it). */
static int ring_report(loom_session *s, loom_trace *t, const loom__ring_info *ri,
                       const char *reason) {
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
    loom__collect_warn(s, "%s", msg); /* at stop printed too, as the session's warnings are */
  }
  return rc;
}

loom_status loom__session_collect(loom_session *s, loom_trace **out) {
  loom__rec_image img = {.pid = getpid(), .dom = loom__hostrec_domain()};
  return loom__collect_image(s, &img, out);
}

/* The trace's frame: its window (through the timeline so the test-only
 * clock shift moves it too), its name, the process. */
static int trace_frame(loom_session *s, loom_trace *t, const loom__rec_image *img) {
  t->start_ns = loom__timeline_convert(&s->tl, LOOM_CLOCK_REALTIME,
                                       (uint64_t)s->tl.start[LOOM_CLOCK_REALTIME].real);
  uint64_t end = img->dump ? loom__clock_now(LOOM_CLOCK_REALTIME)
                           : (uint64_t)s->tl.stop[LOOM_CLOCK_REALTIME].real;
  t->end_ns = img->end_ns ? img->end_ns
                          : loom__timeline_convert(&s->tl, LOOM_CLOCK_REALTIME, end);
  t->trace_name = loom__trace_str(t, s->name);
  t->window_end = 1;
  char comm[64];
  if (img->comm) snprintf(comm, sizeof comm, "%s", img->comm);
  else loom__live_thread_name((pid_t)img->pid, comm, sizeof comm);
  return loom__trace_add_proc(t, img->pid, comm[0] ? comm : "host", "CPU", 0);
}

/* The records: host threads, devices, every backend's (a dump reads a copy
 * of each backend's records, or none at all when the copy fails). */
static int trace_records(loom_session *s, loom_trace *t, loom__rec_image *img,
                         loom__ring_info *ri) {
  loom__host_calls hc = {0};
  int rc = s->host ? loom__collect_host(s, t, img, ri, &hc) : 0;
  if (rc == 0) {
    pthread_mutex_lock(&s->mu); /* backends may add devices meanwhile */
    rc = add_devices(s, t);
    pthread_mutex_unlock(&s->mu);
  }
  int dump = img->dump != NULL;
  for (size_t i = 0; i < s->nbk && rc == 0; i++) {
    loom__bsess *bs = dump ? bsess_copy(s->bk[i]) : s->bk[i]->bs;
    if (dump && !bs) {
      rc = -1; /* no dump rather than one without this backend */
      break;
    }
    rc = collect_backend(s, t, s->bk[i], bs, img->pid, ri, &hc);
    if (dump) bsess_free_copy(bs);
  }
  loom__map_free(&hc.corr);
  return rc;
}

/* Where real time changed its rate during the session (base/clock.h): how
 * many knots bend the host clock's map, and a warning where the log lost
 * some (their stretch mapped by the line through its ends). */
static int clock_labels(loom_session *s, loom_trace *t) {
  char v[32];
  uint64_t n = loom__timeline_nknots(&s->tl);
  snprintf(v, sizeof v, "%llu", (unsigned long long)n);
  int rc = n ? loom__trace_add_meta(t, "clock_knots", v) : 0;
  if (rc == 0 && s->tl.knots_lost)
    rc = loom__trace_add_warning(t, "clock: real time changed its rate more often than the "
                                    "log of its changes holds; before the changes kept, host "
                                    "times are mapped to real time by a straight line and may "
                                    "be off by up to the daemon's slew over that stretch");
  return rc;
}

/* Metadata (loom's, the session's options, meta_set's, the program's own
 * last) and the warnings: the session's, then the collection's own. */
static int trace_labels(loom_session *s, loom_trace *t, const loom__rec_image *img,
                        const loom__ring_info *ri, const loom__msgs *own) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  int rc = loom__trace_add_meta(t, "loom_version", loom_version_string()) ||
           loom__trace_add_meta(t, "host_name", host) || clock_labels(s, t);
  if (rc == 0) rc = loom__session_meta(&s->opts, t); /* session_meta.c */
  if (rc == 0 && s->ring) rc = ring_report(s, t, ri, img->dump);
  pthread_mutex_lock(&s->mu);
  if (rc == 0) rc = loom__kvs_to_trace(&s->meta, t);
  pthread_mutex_unlock(&s->mu);
  if (rc == 0 && !img->dead) rc = loom__meta_apply(t); /* meta.c: the program's own, last */
  pthread_mutex_lock(&s->warn.mu);
  for (size_t i = 0; i < s->warn.n && rc == 0; i++)
    rc = loom__trace_add_warning(t, s->warn.v[i]);
  pthread_mutex_unlock(&s->warn.mu);
  for (size_t i = 0; i < own->n && rc == 0; i++) rc = loom__trace_add_warning(t, own->v[i]);
  if (rc == 0) rc = loom__trace_bad_warnings(t, "the session"); /* arguments past the limit */
  return rc;
}

/* The trace of session s with img's host records: a stopped session's, a
 * dead process's, or (img->dump) the window a ring-mode session's rings hold
 * now, while it goes on recording. */
loom_status loom__collect_image(loom_session *s, loom__rec_image *img, loom_trace **out) {
  loom_trace *t = loom__trace_new();
  if (!t) return loom__fail(LOOM_ENOMEM, "out of memory building the trace");
  loom__msgs own = {.mu = PTHREAD_MUTEX_INITIALIZER};
  dump_warn = img->dump ? &own : NULL;
  loom__ring_info ri = {0};
  int rc = trace_frame(s, t, img);
  if (rc == 0) rc = trace_records(s, t, img, &ri);
  if (rc == 0) rc = trace_labels(s, t, img, &ri, &own);
  dump_warn = NULL;
  loom__msgs_free(&own);
  if (rc == 0 && t->strs.oom) rc = -1; /* a name lost to a failed allocation */
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
