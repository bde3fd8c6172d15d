/*
 * merge.c - loom_merge(): several traces (one per process or rank) into one
 * timeline (docs/multirank.md, "Merging").
 *
 * It streams, in bounded memory.  Each input is read once by the streaming
 * readers, which keep only processes, tracks, metadata and strings; its
 * events (strings already the output's) go to the external sort
 * (util/xsort.h), cut at the end of each input so that its runs never mix
 * inputs, and its clock_sync points are collected on the way.  Once every
 * input is read and checked (a trace, a rank seen once), the inputs are
 * ordered by rank, related in time to the reference (lowest rank,
 * align.c), and the sort merges its runs by shifted times straight into
 * the streaming JSON writer: pids kept unless taken, ids made unique per
 * input, names and metadata per schema, messages matched into flows on the
 * way (messages.c).  Nothing is written unless every input was read.  A
 * .pftrace output is written from a temporary merged JSON (the protobuf
 * writer needs the whole trace).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "export/formats.h"
#include "merge/merge.h"
#include "util/util.h"
#include "util/xsort.h"

/* Ids of input k live in their own range (Perfetto links correlation and
 * flow ids across processes otherwise, issue #978); input 0 keeps its own. */
#define ID_SHIFT 40
#define DEFAULT_SORT_MEMORY (256ull << 20)

static int cmp_order(const void *pa, const void *pb) {
  const loom__minput *a = *(loom__minput *const *)pa, *b = *(loom__minput *const *)pb;
  if ((a->rank < 0) != (b->rank < 0)) return a->rank < 0 ? 1 : -1;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return a->order < b->order ? -1 : a->order > b->order;
}

/* ---- the sort's records ---------------------------------------------------- */
static size_t mrec_size(const void *p) {
  const loom__mrec *r = p;
  return sizeof *r + r->e.nargs * sizeof(loom__targ);
}

/* Within an input (a run never mixes inputs): start, longer first, reading order. */
static int cmp_read(const void *pa, const void *pb, const void *ctx) {
  const loom__mrec *a = pa, *b = pb;
  if (a->e.ts != b->e.ts) return a->e.ts < b->e.ts ? -1 : 1;
  if (a->e.dur != b->e.dur) return a->e.dur > b->e.dur ? -1 : 1; /* parents first */
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static const loom__xsort_ops mrec_order = {.rec_size = sizeof(loom__mrec), .size = mrec_size,
                                           .mean_size = sizeof(loom__mrec) + 2 * sizeof(loom__targ),
                                           .cmp = cmp_read};

/* The sort's failure as the merge's: memory, or its temporary file. */
static loom_status sort_failed(loom__xsort *s) {
  const char *why = loom__xsort_error(s);
  if (loom__xsort_out_of_memory(s)) return loom__fail(LOOM_ENOMEM, "loom merge: %s", why);
  return loom__fail(LOOM_EIO, "loom merge: %s", why);
}

/* ---- reading: every input once, into the sort --------------------------- */
typedef struct reading {
  loom__xsort *s;
  loom_trace *out;
  loom__minput *in;
  uint32_t idx;
  uint64_t *seq;
  uint32_t sync_name, k_off, k_rtt; /* the input's ids, 0 until seen */
  size_t strs_seen;                 /* input strings when they were looked up */
  uint32_t *smap;                   /* input string id -> output id (0: not yet) */
  size_t cap_smap;
  loom__targ *abuf;
  size_t cap_abuf;
  int failed;                       /* the sort failed: its message is kept */
  char err[512];
} reading;

static uint32_t tr(reading *r, const loom_trace *t, uint32_t id) {
  if (!id) return 0;
  if (id >= r->cap_smap) {
    size_t old = r->cap_smap, need = (size_t)id + 1;
    if (loom__grow((void **)&r->smap, &r->cap_smap, need, sizeof *r->smap)) return UINT32_MAX;
    memset(r->smap + old, 0, (r->cap_smap - old) * sizeof *r->smap);
  }
  if (!r->smap[id]) r->smap[id] = loom__trace_str(r->out, loom__trace_cstr(t, id));
  return r->smap[id] ? r->smap[id] : UINT32_MAX;
}

static int arg_i64(const loom_trace *t, const loom__ev *e, const loom__targ *args, uint32_t key,
                   int64_t *v) {
  const loom__targ *a = loom__arg_of(e, args, key);
  if (!a) return 0;
  if (a->type == LOOM_ARG_INT || a->type == LOOM_ARG_UINT) *v = a->v.i;
  else if (a->type == LOOM_ARG_DOUBLE) *v = (int64_t)a->v.d;
  else if (a->type == LOOM_ARG_STRING) *v = strtoll(loom__trace_cstr(t, a->v.s), NULL, 10);
  else return 0;
  return 1;
}

/* A clock_sync point (docs/multirank.md): offset_ns and rtt_ns. */
static int sync_point(reading *r, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  if (r->strs_seen != t->strs.n && !r->sync_name) {
    r->strs_seen = t->strs.n;
    r->sync_name = loom__strtab_find(&t->strs, "clock_sync", 10);
  }
  if (!r->sync_name || e->name != r->sync_name) return 0;
  if (!r->k_off) r->k_off = loom__strtab_find(&t->strs, "offset_ns", 9);
  if (!r->k_rtt) r->k_rtt = loom__strtab_find(&t->strs, "rtt_ns", 6);
  loom__cpoint p = {e->ts, 0, 0};
  if (!arg_i64(t, e, args, r->k_off, &p.off)) return 0;
  arg_i64(t, e, args, r->k_rtt, &p.rtt);
  return LOOM__PUSH(r->in->pts, r->in->npts, r->in->cap_pts, p);
}

static int add_rec(reading *r, const loom__ev *e, const loom__targ *args) {
  loom__mrec *m = loom__xsort_add(r->s, e->ts, sizeof *m + e->nargs * sizeof *args);
  if (m) {
    m->seq = (*r->seq)++;
    m->input = r->idx;
    m->e = *e;
    if (e->nargs && args) memcpy(m + 1, args, e->nargs * sizeof *args);
    return 0;
  }
  sort_failed(r->s);
  snprintf(r->err, sizeof r->err, "%s", loom_last_error());
  r->failed = 1;
  return -1;
}

static int on_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  reading *r = ctx;
  loom__minput *in = r->in;
  if (sync_point(r, t, e, args)) return -1;
  if (!in->nev || e->ts < in->min_ts) in->min_ts = e->ts;
  if (!in->nev || e->ts + e->dur > in->max_end) in->max_end = e->ts + e->dur;
  in->nev++;
  loom__ev x = *e;
  x.name = tr(r, t, e->name), x.cat = tr(r, t, e->cat);
  if (e->nargs > r->cap_abuf &&
      loom__grow((void **)&r->abuf, &r->cap_abuf, e->nargs, sizeof *r->abuf))
    return -1;
  for (uint16_t i = 0; i < e->nargs; i++) {
    loom__targ a = args[i];
    a.key = tr(r, t, a.key);
    if (a.type == LOOM_ARG_STRING) a.v.s = tr(r, t, a.v.s);
    if (a.key == UINT32_MAX || (a.type == LOOM_ARG_STRING && a.v.s == UINT32_MAX)) return -1;
    r->abuf[i] = a;
  }
  if (x.name == UINT32_MAX || x.cat == UINT32_MAX) return -1;
  return add_rec(r, &x, r->abuf);
}

static int on_flow(void *ctx, const loom_trace *t, uint64_t id, int64_t ts, uint32_t track, char ph,
                   int bind_enclosing, uint32_t name, uint32_t cat) {
  reading *r = ctx;
  loom__ev x = {.ts = ts,
                .correlation = id,
                .track = track,
                .ph = (uint8_t)ph,
                .kind = (uint8_t)(bind_enclosing != 0),
                .name = tr(r, t, name),
                .cat = tr(r, t, cat)};
  if (x.name == UINT32_MAX || x.cat == UINT32_MAX) return -1;
  return add_rec(r, &x, NULL);
}

static loom_status read_input(reading *r, loom__minput *in, uint32_t i, int last) {
  r->in = in;
  r->idx = i;
  r->sync_name = r->k_off = r->k_rtt = 0;
  r->strs_seen = 0;
  if (r->smap) memset(r->smap, 0, r->cap_smap * sizeof *r->smap);
  loom__sink sink = {
      .event = on_event, .ctx = r, .all_args = 1}; /* every argument: they are written out */
  loom__flow_sink fs = {on_flow, r};
  loom_status st = loom__trace_stream_flows(in->path, &sink, &fs, &in->t);
  if (r->failed) return loom__fail(LOOM_EIO, "%s", r->err);
  if (st != LOOM_OK) return st; /* the reader's message names the file */
  int64_t base = in->t->base_ns;
  for (size_t k = 0; k < in->npts; k++) in->pts[k].ts += base;
  in->min_ts += base;
  in->max_end += base;
  if (!last && loom__xsort_cut(r->s)) return sort_failed(r->s); /* runs never mix inputs */
  return LOOM_OK;
}

static loom_status read_all(const loom_merge_config *cfg, loom__minput *in, loom__xsort *s,
                            loom_trace *out) {
  uint64_t seq = 0;
  reading r = {.s = s, .out = out, .seq = &seq};
  loom_status st = LOOM_OK;
  for (uint32_t i = 0; i < cfg->ninputs && st == LOOM_OK; i++) {
    in[i].path = cfg->inputs[i];
    in[i].order = i;
    in[i].rank = -1;
    if (!in[i].path) {
      st = loom__fail(LOOM_EINVAL, "loom merge: input %u is NULL", i);
      break;
    }
    st = read_input(&r, &in[i], i, i + 1 == cfg->ninputs);
    if (st != LOOM_OK) break;
    const char *rk = loom__meta_get(in[i].t, "rank");
    char *end;
    if (rk && *rk) {
      long v = strtol(rk, &end, 10);
      if (*end || v < 0) {
        st = loom__fail(LOOM_EFORMAT, "%s: metadata rank '%s' is not a rank", in[i].path, rk);
        break;
      }
      in[i].rank = v;
    }
    for (uint32_t j = 0; j < i; j++)
      if (in[j].rank >= 0 && in[j].rank == in[i].rank)
        st = loom__fail(LOOM_EINVAL, "loom merge: rank %ld appears twice: %s and %s", in[i].rank,
                        in[j].path, in[i].path);
  }
  free(r.smap);
  free(r.abuf);
  return st;
}

/* ---- the output's processes, tracks and metadata ------------------------ */
typedef struct merger {
  loom_trace *out;
  loom__map used_pids;  /* output pid key -> 1 */
  loom__map rank_of;    /* output pid key -> rank */
  int64_t next_pid;
  uint64_t renumbered;
} merger;

static int is_device_pid(const loom_trace *t, int64_t pid) {
  for (size_t i = 0; i < t->ndevs; i++)
    if (t->devs[i].pid == pid) return 1;
  return 0;
}

static uint32_t xs(loom_trace *out, const loom_trace *in, uint32_t id) {
  return id ? loom__trace_str(out, loom__trace_cstr(in, id)) : 0;
}

/* An input written by a process image that then exec'd another program
 * (metadata loom_exec_image, set by loom-preload): the same process as the
 * input of the image after it, so its pid is not renumbered. */
static int exec_image(const loom_trace *t) {
  for (size_t i = 0; i < t->nmeta; i++)
    if (!strcmp(loom__trace_cstr(t, t->meta[i].key), "loom_exec_image")) return 1;
  return 0;
}

/* The output pid of pid in input `in`, taking a fresh one when another
 * input holds it (but for an image before an exec); in->pmap remembers the
 * choice. */
static int64_t map_pid(merger *m, loom__minput *in, int64_t pid) {
  uint64_t *got = loom__map_get(&in->pmap, LOOM__PID_KEY(pid));
  if (got) return (int64_t)*got;
  int64_t o = pid;
  if (loom__map_get(&m->used_pids, LOOM__PID_KEY(pid)) && !exec_image(in->t)) {
    while (loom__map_get(&m->used_pids, LOOM__PID_KEY(m->next_pid))) m->next_pid++;
    o = m->next_pid++;
    char msg[1200];
    snprintf(msg, sizeof msg, "%s: pid %lld also in another input: renumbered %lld", in->path,
             (long long)pid, (long long)o);
    loom__log(LOOM_SEV_WARNING, "%s", msg);
    if (loom__trace_add_warning(m->out, msg)) return INT64_MIN;
    m->renumbered++;
  }
  if (loom__map_put(&m->used_pids, LOOM__PID_KEY(o), 1) ||
      loom__map_put(&in->pmap, LOOM__PID_KEY(pid), (uint64_t)o))
    return INT64_MIN;
  if (in->rank >= 0 && loom__map_put(&m->rank_of, LOOM__PID_KEY(o), (uint64_t)in->rank))
    return INT64_MIN;
  return o;
}

static int add_meta_fmt(loom_trace *t, const char *key, const char *fmt, long long v) {
  char b[64];
  snprintf(b, sizeof b, fmt, v);
  return loom__trace_add_meta(t, key, b);
}

/* Per-input metadata under "ranks/<k>/", the reference's also at the top. */
static int copy_meta(loom_trace *out, const loom__minput *in, size_t k) {
  const loom_trace *t = in->t;
  char key[512];
  for (size_t i = 0; i < t->nmeta; i++) {
    const char *kk = loom__trace_cstr(t, t->meta[i].key),
               *vv = loom__trace_cstr(t, t->meta[i].value);
    size_t need = strlen(kk) + 32; /* "ranks/" + 20 digits + "/" */
    char *long_key = need > sizeof key ? malloc(need) : NULL, *kp = long_key ? long_key : key;
    if (need > sizeof key && !long_key) return -1;
    snprintf(kp, long_key ? need : sizeof key, "ranks/%zu/%s", k, kk);
    int rc = loom__trace_add_meta(out, kp, vv);
    free(long_key);
    if (rc) return -1;
    if (k == 0 && strncmp(kk, "ranks/", 6) && loom__trace_add_meta(out, kk, vv)) return -1;
  }
  snprintf(key, sizeof key, "ranks/%zu/source", k);
  if (loom__trace_add_meta(out, key, in->path)) return -1;
  snprintf(key, sizeof key, "ranks/%zu/clock_offset_ns", k);
  if (add_meta_fmt(out, key, "%lld", in->aligned ? (long long)in->off0 : 0)) return -1;
  snprintf(key, sizeof key, "ranks/%zu/clock_error_ns", k);
  if (add_meta_fmt(out, key, "%lld", (long long)in->err_ns)) return -1;
  snprintf(key, sizeof key, "ranks/%zu/clock_drift_ppb", k);
  if (add_meta_fmt(out, key, "%lld", (long long)(in->slope * 1e9))) return -1;
  snprintf(key, sizeof key, "ranks/%zu/clock_points", k);
  if (add_meta_fmt(out, key, "%lld", in->aligned ? in->npoints : -1)) return -1;
  return 0;
}

static void process_name(char *b, size_t n, const loom__minput *in, const char *old, int64_t pid) {
  const char *cmd = loom__meta_get(in->t, "command_line");
  if (!cmd || !*cmd) cmd = old && *old ? old : in->path;
  if (in->rank >= 0) snprintf(b, n, "rank %ld: %s (pid %lld)", in->rank, cmd, (long long)pid);
  else snprintf(b, n, "%s (pid %lld)", cmd, (long long)pid);
}

static int copy_procs(merger *m, loom__minput *in, int32_t sort) {
  loom_trace *out = m->out, *t = in->t;
  for (size_t i = 0; i < t->nprocs; i++) {
    const loom__proc *p = &t->procs[i];
    int64_t o = map_pid(m, in, p->pid);
    if (o == INT64_MIN) return -1;
    char name[1400];
    const char *old = loom__trace_cstr(t, p->name);
    if (is_device_pid(t, p->pid)) {
      if (in->rank >= 0) snprintf(name, sizeof name, "rank %ld: %s", in->rank, old);
      else snprintf(name, sizeof name, "%s", old);
    } else {
      process_name(name, sizeof name, in, old, p->pid);
    }
    if (loom__trace_add_proc(out, o, name, p->labels ? loom__trace_cstr(t, p->labels) : NULL, sort))
      return -1;
  }
  for (size_t i = 0; i < t->ndevs; i++) {
    loom__dev d = t->devs[i];
    d.pid = map_pid(m, in, d.pid);
    if (d.pid == INT64_MIN) return -1;
    d.name = xs(out, t, d.name), d.vendor = xs(out, t, d.vendor), d.type = xs(out, t, d.type);
    d.device_type = xs(out, t, d.device_type), d.backend = xs(out, t, d.backend);
    d.args_off = (uint32_t)out->nargs;
    for (uint32_t a = 0; a < t->devs[i].nargs; a++) {
      loom__targ x = t->args[t->devs[i].args_off + a];
      x.key = xs(out, t, x.key);
      if (x.type == LOOM_ARG_STRING) x.v.s = xs(out, t, x.v.s);
      /* no event owns them */
      if (LOOM__PUSH_BIG(out->args, out->nargs, out->cap_args, x)) return -1;
    }
    if (LOOM__PUSH(out->devs, out->ndevs, out->cap_devs, d)) return -1;
  }
  return 0;
}

/* Tracks, warnings and window of input k. */
static int copy_rest(merger *m, loom__minput *in) {
  loom_trace *out = m->out, *t = in->t;
  in->tmap = malloc((t->ntracks + 1) * sizeof *in->tmap);
  if (!in->tmap) return -1;
  for (size_t i = 0; i < t->ntracks; i++) {
    const loom__track *tk = &t->tracks[i];
    int64_t pid = map_pid(m, in, tk->pid);
    if (pid == INT64_MIN ||
        loom__trace_track(out, pid, tk->tid, tk->name ? loom__trace_cstr(t, tk->name) : NULL,
                          tk->device, &in->tmap[i]))
      return -1;
    out->tracks[in->tmap[i]].sort = tk->sort;
  }
  for (size_t i = 0; i < t->nwarnings; i++) {
    /* named by the input it came from, once (readers name the file already) */
    const char *w = loom__trace_cstr(t, t->warnings[i]);
    size_t n = strlen(in->path);
    int named = !strncmp(w, in->path, n) && w[n] == ':';
    char msg[2048];
    snprintf(msg, sizeof msg, "%s%s%s", named ? "" : in->path, named ? "" : ": ", w);
    if (loom__trace_add_warning(out, msg)) return -1;
  }
  out->dropped += t->dropped;
  out->window_end |= t->window_end;
  return 0;
}

/* The output's span from the inputs' (shifted) spans. */
static void span(loom_trace *out, loom__minput **ord, size_t n) {
  int any = 0;
  for (size_t k = 0; k < n; k++) {
    const loom__minput *in = ord[k];
    int64_t a = loom__merge_shift(in, in->min_ts), b = loom__merge_shift(in, in->max_end);
    if (in->t->window_end && loom__merge_shift(in, in->t->end_ns) > b)
      b = loom__merge_shift(in, in->t->end_ns);
    if (!in->nev && !in->t->window_end) continue;
    if (!in->nev) a = b;
    if (!any || a < out->start_ns) out->start_ns = a;
    if (!any || b > out->end_ns) out->end_ns = b;
    any = 1;
  }
}

static int build(merger *m, loom__minput **ord, size_t n, uint32_t flags) {
  loom_trace *out = m->out;
  for (size_t k = 0; k < n; k++) {
    ord[k]->k = k;
    if (flags & LOOM_MERGE_F_NO_ALIGN) ord[k]->aligned = 0;
    else if (loom__merge_align(ord[k], ord[0], out)) return -1;
  }
  for (size_t k = 0; k < n; k++) {
    loom__minput *in = ord[k];
    int32_t sort = in->rank >= 0 ? (int32_t)in->rank : (int32_t)(k + 1000000);
    if (copy_meta(out, in, k) || copy_procs(m, in, sort) || copy_rest(m, in)) return -1;
  }
  out->trace_name = loom__trace_str(out, "loom merge");
  span(out, ord, n);
  return 0;
}

/* ---- writing: the runs merged in shifted time order ---------------------- */
typedef struct cursor {
  const loom__minput *in;
  const loom__mrec *rec;
  int64_t ts, dur; /* shifted */
} cursor;

/* Both ends through the (drifting) offset, so ranges that abut in the input
 * still abut: shifting the start alone would stretch or shrink each range
 * by the drift over its length. */
static cursor shifted(const loom__minput *inputs, const loom__mrec *rec) {
  cursor c = {.in = &inputs[rec->input], .rec = rec};
  int64_t ts = rec->e.ts + c.in->t->base_ns;
  c.ts = loom__merge_shift(c.in, ts);
  if (rec->e.dur) {
    int64_t end = loom__merge_shift(c.in, ts + rec->e.dur);
    c.dur = end > c.ts ? end - c.ts : 0;
  }
  return c;
}

/* The merge's order over the runs: shifted start, longer first, output
 * order of the input, reading order. */
static int cmp_merged(const void *pa, const void *pb, const void *ctx) {
  cursor a = shifted(ctx, pa), b = shifted(ctx, pb);
  if (a.ts != b.ts) return a.ts < b.ts ? -1 : 1;
  if (a.dur != b.dur) return a.dur > b.dur ? -1 : 1; /* parents first */
  if (a.in->k != b.in->k) return a.in->k < b.in->k ? -1 : 1;
  return a.rec->seq < b.rec->seq ? -1 : a.rec->seq > b.rec->seq;
}

static uint64_t uniq(uint64_t id, size_t k) { return id ? id + ((uint64_t)k << ID_SHIFT) : 0; }

typedef struct counts {
  uint64_t events, flows, matched, unmatched;
} counts;

static int is_flow_end(uint8_t ph) { return ph == 's' || ph == 't' || ph == 'f'; }

/* A memory event's "device" (the device's pid in its input) as the pid
 * that device has in the output: into *buf (freed by the caller) when it
 * was renumbered.  The arguments to write; NULL when out of memory. */
static const loom__targ *memory_device(const loom__minput *in, const loom__ev *e,
                                       const loom__targ *args, uint32_t k_device,
                                       loom__targ **buf) {
  for (uint16_t i = 0; k_device && i < e->nargs; i++) {
    const loom__targ *a = &args[i];
    if (a->key != k_device || (a->type != LOOM_ARG_INT && a->type != LOOM_ARG_UINT)) continue;
    const uint64_t *o = loom__map_get(&in->pmap, LOOM__PID_KEY(a->v.i));
    if (!o || (int64_t)*o == a->v.i) return args;
    if (!(*buf = malloc(e->nargs * sizeof **buf))) return NULL;
    memcpy(*buf, args, e->nargs * sizeof **buf);
    (*buf)[i].type = LOOM_ARG_INT;
    (*buf)[i].v.i = (int64_t)*o;
    return *buf;
  }
  return args;
}

/* Writes one record (k_device: the output's string "device", 0 when it
 * has none); returns -1 when out of memory. */
static int emit(const cursor *c, loom__jstream *w, loom__match *mt, counts *n,
                uint32_t k_device) {
  const loom__minput *in = c->in;
  loom__ev e = c->rec->e;
  const loom__targ *args = (const loom__targ *)(c->rec + 1);
  loom__targ *own = NULL;
  if (e.kind == LOOM_KIND_MEMORY && !(args = memory_device(in, &e, args, k_device, &own)))
    return -1;
  uint32_t track = in->tmap[e.track];
  if (is_flow_end(e.ph)) {
    loom__jstream_flow(w, (char)e.ph, uniq(e.correlation, in->k), track, c->ts, e.kind, e.name,
                       e.cat);
    n->flows += e.ph == 's'; /* a flow carried over counts once, at its start */
    return 0;
  }
  e.ts = c->ts;
  e.dur = c->dur;
  e.track = track;
  e.correlation = uniq(e.correlation, in->k), e.external_id = uniq(e.external_id, in->k);
  int rc = mt ? loom__match_event(mt, &e, args, w) : 0;
  if (!rc) loom__jstream_event(w, &e, args);
  free(own);
  n->events += !rc;
  return rc ? -1 : 0;
}

/* The matcher of messages, knowing each output track's rank (*ranks, which
 * it reads until freed: free both); *err set when out of memory (NULL
 * without an error: nothing to match). */
static loom__match *match_open(const merger *m, size_t ninputs, int64_t **ranks, int *err) {
  const loom_trace *out = m->out;
  int64_t *rank_of_track = *ranks = malloc((out->ntracks + 1) * sizeof *rank_of_track);
  if (!rank_of_track) {
    *err = 1;
    return NULL;
  }
  for (size_t i = 0; i < out->ntracks; i++) {
    uint64_t *r = loom__map_get(&m->rank_of, LOOM__PID_KEY(out->tracks[i].pid));
    rank_of_track[i] = r ? (int64_t)*r : -1;
  }
  return loom__match_new(out, rank_of_track, ((uint64_t)ninputs + 1) << ID_SHIFT, err);
}

/* Every record out of the sort into w. */
static loom_status pass(loom__xsort *s, const loom__minput *in, loom__jstream *w, loom__match *mt,
                        const char *path, counts *n, uint32_t k_device) {
  for (const loom__mrec *rec; (rec = loom__xsort_next(s));) {
    cursor c = shifted(in, rec);
    if (emit(&c, w, mt, n, k_device))
      return loom__fail(LOOM_ENOMEM, "out of memory merging traces into %s", path);
  }
  if (loom__xsort_error(s)[0]) return sort_failed(s); /* a run could not be read */
  return LOOM_OK;
}

static loom_status warn(loom_trace *out, const char *msg) {
  loom__log(LOOM_SEV_WARNING, "%s", msg);
  return loom__trace_add_warning(out, msg) ? loom__fail(LOOM_ENOMEM, "out of memory") : LOOM_OK;
}

/* Ends left unmatched; messages received, on the merged timeline, before
 * they were sent (their flows kept as they are: trace_processor drops them
 * without an error, so this is where the user learns of them). */
static loom_status message_warnings(loom_trace *out, const counts *n, uint64_t back,
                                    int64_t worst) {
  char msg[400];
  loom_status st = LOOM_OK;
  if (n->unmatched) {
    snprintf(msg, sizeof msg, "%llu point-to-point message ends without a matching partner "
             "(a rank missing or the trace cut)", (unsigned long long)n->unmatched);
    st = warn(out, msg);
  }
  if (st == LOOM_OK && back) {
    snprintf(msg, sizeof msg, "%llu of %llu point-to-point messages end their receive before "
             "their send began, by up to %.3f us: the ranks' clocks disagree by at least that "
             "much there (trace_processor drops these flows)", (unsigned long long)back,
             (unsigned long long)n->matched, (double)worst / 1000.0);
    st = warn(out, msg);
  }
  return st;
}

static loom_status stream_out(loom__xsort *s, merger *m, loom__minput *in, size_t ninputs,
                              const char *path, int gzip, counts *n) {
  loom_trace *out = m->out;
  loom__xsort_merge_by(s, cmp_merged, in);
  if (loom__xsort_finish(s)) return sort_failed(s);
  int err = 0;
  int64_t *ranks = NULL;
  loom__match *mt = match_open(m, ninputs, &ranks, &err);
  loom__jstream *w = NULL;
  loom_status st = err ? loom__fail(LOOM_ENOMEM, "out of memory merging traces into %s", path)
                       : loom__jstream_open(&w, out, path, gzip);
  uint32_t k_device = loom__strtab_find(&out->strs, "device", 6);
  if (st == LOOM_OK) st = pass(s, in, w, mt, path, n, k_device);
  uint64_t back = 0;
  int64_t worst = 0;
  loom__match_backwards(mt, &back, &worst);
  loom__match_free(mt, &n->matched, &n->unmatched);
  free(ranks);
  n->flows += n->matched;
  if (st == LOOM_OK) st = message_warnings(out, n, back, worst);
  if (st == LOOM_OK) st = loom__jstream_close(w);
  else loom__jstream_abort(w);
  return st;
}

/* ---- the entry point ------------------------------------------------------ */
/* Fails before reading anything when the output cannot be written. */
static loom_status check_output(const char *path) {
  if (!loom__format_of(path))
    return loom__fail(LOOM_EUNSUPPORTED, "cannot write %s: unknown extension (supported: %s)", path,
                      loom__format_exts);
  return LOOM_OK;
}

/* A format the JSON stream writes goes straight to the output; another
 * (.pftrace, .pftrace.gz) is written from a temporary merged JSON. */
static loom_status write_output(loom__xsort *s, merger *m, loom__minput *in,
                                const loom_merge_config *cfg, counts *n) {
  const loom__format *f = loom__format_of(cfg->output);
  if (f->json) return stream_out(s, m, in, cfg->ninputs, cfg->output, f->gzip ? 1 : -1, n);
  const char *d = getenv("TMPDIR");
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/loom-merge-XXXXXX.json", d && *d ? d : "/tmp");
  int fd = mkstemps(tmp, 5);
  if (fd < 0)
    return loom__fail(LOOM_EIO, "loom merge: cannot create a temporary file %s: %s", tmp,
                      strerror(errno));
  close(fd);
  loom_status st = stream_out(s, m, in, cfg->ninputs, tmp, -1, n);
  loom_trace *t = NULL;
  if (st == LOOM_OK) st = loom_trace_load(tmp, &t);
  if (st == LOOM_OK) st = loom_trace_save(t, cfg->output);
  if (st == LOOM_OK) n->events = t->nev; /* what the file holds: every event */
  loom_trace_free(t);
  unlink(tmp);
  return st;
}

LOOM_EXTERN loom_status loom_merge(const loom_merge_config *cfg, loom_merge_result *result) {
  loom__clear_error();
  if (!cfg || cfg->struct_size < offsetof(loom_merge_config, flags) + sizeof cfg->flags)
    return loom__fail(LOOM_EINVAL, "loom_merge: NULL or short config");
  if (!cfg->ninputs || !cfg->inputs)
    return loom__fail(LOOM_EINVAL, "loom merge: no input traces given");
  if (!cfg->output) return loom__fail(LOOM_EINVAL, "loom merge: no output given");
  loom_status st = check_output(cfg->output);
  if (st != LOOM_OK) return st;
  loom__minput *in = calloc(cfg->ninputs, sizeof *in);
  loom__minput **ord = calloc(cfg->ninputs, sizeof *ord);
  merger m = {.out = loom__trace_new(), .next_pid = 1};
  uint64_t budget = cfg->sort_memory ? cfg->sort_memory : DEFAULT_SORT_MEMORY;
  if (budget < (1u << 20)) budget = 1u << 20;
  loom__xsort *s = loom__xsort_new(&mrec_order, NULL, (size_t)budget);
  if (!s || !in || !ord || !m.out) st = loom__fail(LOOM_ENOMEM, "out of memory merging traces");
  if (st == LOOM_OK) st = read_all(cfg, in, s, m.out);
  counts n = {0};
  if (st == LOOM_OK) {
    for (uint32_t i = 0; i < cfg->ninputs; i++) ord[i] = &in[i];
    qsort(ord, cfg->ninputs, sizeof *ord, cmp_order);
    if (build(&m, ord, cfg->ninputs, cfg->flags))
      st = loom__fail(LOOM_ENOMEM, "out of memory merging traces into %s", cfg->output);
  }
  if (st == LOOM_OK) st = write_output(s, &m, in, cfg, &n);
  if (st == LOOM_OK && result) {
    loom_merge_result res = {.struct_size = sizeof res, .processes = (uint32_t)m.out->nprocs,
                             .events = n.events, .flows = n.flows, .warnings = m.out->nwarnings,
                             .sort_memory = budget};
    loom__xsort_runs(s, &res.sort_runs, &res.sort_spilled);
    uint32_t size = result->struct_size < sizeof res ? result->struct_size : (uint32_t)sizeof res;
    memcpy(result, &res, size);
    result->struct_size = size;
  }
  loom__xsort_free(s);
  for (uint32_t i = 0; in && i < cfg->ninputs; i++) {
    loom_trace_free(in[i].t);
    free(in[i].pts);
    free(in[i].tmap);
    loom__map_free(&in[i].pmap);
  }
  free(in);
  free(ord);
  loom__map_free(&m.used_pids);
  loom__map_free(&m.rank_of);
  loom_trace_free(m.out);
  return st;
}

typedef struct sort_key {
  int64_t ts, dur;
  uint32_t i;
} sort_key;

static int cmp_time(const void *pa, const void *pb) {
  const sort_key *x = pa, *y = pb;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1; /* parents first */
  return x->i < y->i ? -1 : x->i > y->i;                 /* stable */
}

/* Declared in trace.h (nothing else defined it): events by start time. */
int loom__trace_sort_by_time(loom_trace *t) {
  sort_key *idx = malloc((t->nev + 1) * sizeof *idx);
  uint32_t *order = malloc((t->nev + 1) * sizeof *order);
  int rc = idx && order ? 0 : -1;
  if (rc == 0) {
    for (size_t i = 0; i < t->nev; i++) idx[i] = (sort_key){t->ev[i].ts, t->ev[i].dur, (uint32_t)i};
    qsort(idx, t->nev, sizeof *idx, cmp_time);
    for (size_t i = 0; i < t->nev; i++) order[i] = idx[i].i;
    rc = loom__trace_permute(t, order);
  }
  free(idx);
  free(order);
  return rc;
}
