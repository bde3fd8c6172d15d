/*
 * merge.c - loom_merge(): several traces (one per process or rank) into one
 * timeline (docs/multirank.md, "Merging").
 *
 * Every input is read whole, checked (a trace, a rank seen once), ordered by
 * rank, related in time to the reference (lowest rank, align.c) and copied
 * into one trace: pids kept unless taken, ids made unique per input, names
 * and metadata per schema.  Messages become flows (messages.c).  Nothing is
 * written unless every input was read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "merge/merge.h"

/* Ids of input k live in their own range (Perfetto links correlation and
 * flow ids across processes otherwise, issue #978); input 0 keeps its own. */
#define ID_SHIFT 40

static uint32_t xs(loom_trace *out, const loom_trace *in, uint32_t id) {
  return id ? loom__trace_str(out, loom__trace_cstr(in, id)) : 0;
}

static int cmp_order(const void *pa, const void *pb) {
  const loom__minput *a = *(loom__minput *const *)pa, *b = *(loom__minput *const *)pb;
  if ((a->rank < 0) != (b->rank < 0)) return a->rank < 0 ? 1 : -1;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return a->order < b->order ? -1 : a->order > b->order;
}

static loom_status load_all(const loom_merge_config *cfg, loom__minput *in) {
  for (uint32_t i = 0; i < cfg->ninputs; i++) {
    in[i].path = cfg->inputs[i];
    in[i].order = i;
    in[i].rank = -1;
    if (!in[i].path) return loom__fail(LOOM_EINVAL, "loom merge: input %u is NULL", i);
    loom_status st = loom_trace_load(in[i].path, &in[i].t);
    if (st != LOOM_OK) return st; /* the reader's message names the file */
    const char *r = loom__meta_get(in[i].t, "rank");
    char *end;
    if (r && *r) {
      long v = strtol(r, &end, 10);
      if (*end || v < 0)
        return loom__fail(LOOM_EFORMAT, "%s: metadata rank '%s' is not a rank", in[i].path, r);
      in[i].rank = v;
    }
    for (uint32_t j = 0; j < i; j++)
      if (in[j].rank >= 0 && in[j].rank == in[i].rank)
        return loom__fail(LOOM_EINVAL, "loom merge: rank %ld appears twice: %s and %s", in[i].rank,
                          in[j].path, in[i].path);
  }
  return LOOM_OK;
}

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

/* The output pid of pid in input `in`, taking a fresh one when another
 * input holds it; pmap remembers the choice for this input. */
static int64_t map_pid(merger *m, loom__map *pmap, const loom__minput *in, int64_t pid) {
  uint64_t *got = loom__map_get(pmap, LOOM__PID_KEY(pid));
  if (got) return (int64_t)*got;
  int64_t o = pid;
  if (loom__map_get(&m->used_pids, LOOM__PID_KEY(pid))) {
    while (loom__map_get(&m->used_pids, LOOM__PID_KEY(m->next_pid))) m->next_pid++;
    o = m->next_pid++;
    char msg[1200];
    snprintf(msg, sizeof msg, "%s: pid %lld also in another input: renumbered %lld", in->path,
             (long long)pid, (long long)o);
    loom__log(LOOM_SEV_WARNING, "%s", msg);
    if (loom__trace_add_warning(m->out, msg)) return INT64_MIN;
    m->renumbered++;
  }
  if (loom__map_put(&m->used_pids, LOOM__PID_KEY(o), 1) || loom__map_put(pmap, LOOM__PID_KEY(pid), (uint64_t)o))
    return INT64_MIN;
  if (in->rank >= 0 && loom__map_put(&m->rank_of, LOOM__PID_KEY(o), (uint64_t)in->rank)) return INT64_MIN;
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
    const char *kk = loom__trace_cstr(t, t->meta[i].key), *vv = loom__trace_cstr(t, t->meta[i].value);
    snprintf(key, sizeof key, "ranks/%zu/%s", k, kk);
    if (loom__trace_add_meta(out, key, vv)) return -1;
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

static int copy_procs(merger *m, loom__map *pmap, const loom__minput *in, int32_t sort) {
  loom_trace *out = m->out, *t = in->t;
  for (size_t i = 0; i < t->nprocs; i++) {
    const loom__proc *p = &t->procs[i];
    int64_t o = map_pid(m, pmap, in, p->pid);
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
    d.pid = map_pid(m, pmap, in, d.pid);
    if (d.pid == INT64_MIN) return -1;
    d.name = xs(out, t, d.name), d.vendor = xs(out, t, d.vendor), d.type = xs(out, t, d.type);
    d.device_type = xs(out, t, d.device_type), d.backend = xs(out, t, d.backend);
    d.args_off = (uint32_t)out->nargs;
    for (uint32_t a = 0; a < t->devs[i].nargs; a++) {
      loom__targ x = t->args[t->devs[i].args_off + a];
      x.key = xs(out, t, x.key);
      if (x.type == LOOM_ARG_STRING) x.v.s = xs(out, t, x.v.s);
      if (LOOM__PUSH(out->args, out->nargs, out->cap_args, x)) return -1; /* no event owns them */
    }
    if (LOOM__PUSH(out->devs, out->ndevs, out->cap_devs, d)) return -1;
  }
  return 0;
}

static uint64_t uniq(uint64_t id, size_t k) { return id ? id + ((uint64_t)k << ID_SHIFT) : 0; }

/* Tracks, events (times shifted to the reference), warnings of input k. */
static int copy_events(merger *m, loom__map *pmap, const loom__minput *in, size_t k) {
  loom_trace *out = m->out, *t = in->t;
  uint32_t *tmap = malloc((t->ntracks + 1) * sizeof *tmap);
  if (!tmap) return -1;
  for (size_t i = 0; i < t->ntracks; i++) {
    const loom__track *tr = &t->tracks[i];
    int64_t pid = map_pid(m, pmap, in, tr->pid);
    if (pid == INT64_MIN ||
        loom__trace_track(out, pid, tr->tid, tr->name ? loom__trace_cstr(t, tr->name) : NULL, tr->device, &tmap[i]))
      goto oom;
    out->tracks[tmap[i]].sort = tr->sort;
  }
  for (size_t i = 0; i < t->nev; i++) {
    loom__ev e = t->ev[i];
    /* both ends through the (drifting) offset, so ranges that abut in the
     * input still abut: shifting the start alone would stretch or shrink
     * each range by the drift over its length */
    int64_t end = loom__merge_shift(in, e.ts + e.dur);
    e.ts = loom__merge_shift(in, e.ts);
    if (e.dur) e.dur = end > e.ts ? end - e.ts : 0;
    e.name = xs(out, t, e.name), e.cat = xs(out, t, e.cat);
    e.track = tmap[e.track];
    e.correlation = uniq(e.correlation, k), e.external_id = uniq(e.external_id, k);
    e.args_off = (uint32_t)out->nargs;
    if (loom__trace_add_ev(out, &e)) goto oom;
    for (uint16_t a = 0; a < t->ev[i].nargs; a++) {
      loom__targ x = t->args[t->ev[i].args_off + a];
      x.key = xs(out, t, x.key);
      if (x.type == LOOM_ARG_STRING) x.v.s = xs(out, t, x.v.s);
      if (loom__trace_add_arg(out, &x)) goto oom;
    }
  }
  free(tmap);
  return 0;
oom:
  free(tmap);
  return -1;
}

static int copy_rest(loom_trace *out, const loom__minput *in, size_t ev_base, size_t k) {
  const loom_trace *t = in->t;
  for (size_t i = 0; i < t->nflows; i++) {
    loom__flow f = {(uint32_t)(t->flows[i].from + ev_base), (uint32_t)(t->flows[i].to + ev_base),
                    uniq(t->flows[i].id ? t->flows[i].id : i + 1, k)};
    if (LOOM__PUSH(out->flows, out->nflows, out->cap_flows, f)) return -1;
  }
  for (size_t i = 0; i < t->nwarnings; i++) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s: %s", in->path, loom__trace_cstr(t, t->warnings[i]));
    if (loom__trace_add_warning(out, msg)) return -1;
  }
  out->dropped += t->dropped;
  out->window_end |= t->window_end;
  return 0;
}

static int build(merger *m, loom__minput **ord, size_t n, uint64_t flags, loom_merge_result *res) {
  loom_trace *out = m->out;
  for (size_t k = 0; k < n; k++) {
    loom__minput *in = ord[k];
    if (flags & LOOM_MERGE_F_NO_ALIGN) in->aligned = 0;
    else if (loom__merge_align(in, ord[0], out)) return -1;
  }
  for (size_t k = 0; k < n; k++) {
    loom__map pmap = {0};
    loom__minput *in = ord[k];
    size_t ev_base = out->nev;
    int32_t sort = in->rank >= 0 ? (int32_t)in->rank : (int32_t)(k + 1000000);
    int bad = copy_meta(out, in, k) || copy_procs(m, &pmap, in, sort) || copy_events(m, &pmap, in, k) ||
              copy_rest(out, in, ev_base, k);
    loom__map_free(&pmap);
    if (bad) return -1;
    loom_trace_free(in->t); /* its copy is in out */
    in->t = NULL;
  }
  if (!out->trace_name) out->trace_name = loom__trace_str(out, "loom merge");
  loom__trace_span(out);
  if (loom__trace_sort_by_time(out)) return -1;
  uint64_t matched = 0, unmatched = 0, before = out->nflows;
  if (loom__merge_messages(out, &m->rank_of, ((uint64_t)n + 1) << ID_SHIFT, &matched, &unmatched)) return -1;
  if (unmatched) {
    char msg[256];
    snprintf(msg, sizeof msg, "%llu point-to-point message ends without a matching partner "
             "(a rank missing or the trace cut)", (unsigned long long)unmatched);
    loom__log(LOOM_SEV_WARNING, "%s", msg);
    if (loom__trace_add_warning(out, msg)) return -1;
  }
  if (res) {
    res->processes = (uint32_t)out->nprocs;
    res->events = out->nev;
    res->flows = out->nflows;
    res->warnings = out->nwarnings;
  }
  (void)before;
  return 0;
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
  uint32_t *inv = malloc((t->nev + 1) * sizeof *inv);
  loom__ev *ev = malloc((t->nev + 1) * sizeof *ev);
  if (!idx || !inv || !ev) {
    free(idx), free(inv), free(ev);
    return -1;
  }
  for (size_t i = 0; i < t->nev; i++) idx[i] = (sort_key){t->ev[i].ts, t->ev[i].dur, (uint32_t)i};
  qsort(idx, t->nev, sizeof *idx, cmp_time);
  for (size_t i = 0; i < t->nev; i++) ev[i] = t->ev[idx[i].i], inv[idx[i].i] = (uint32_t)i;
  for (size_t i = 0; i < t->nflows; i++)
    t->flows[i].from = inv[t->flows[i].from], t->flows[i].to = inv[t->flows[i].to];
  free(t->ev);
  t->ev = ev;
  t->cap_ev = t->nev + 1;
  free(idx);
  free(inv);
  return 0;
}

/* Fails before reading anything when the output cannot be written. */
static loom_status check_output(const char *path) {
  size_t n = strlen(path);
  int ok = (n >= 5 && !strcmp(path + n - 5, ".json")) || (n >= 8 && !strcmp(path + n - 8, ".json.gz")) ||
           (n >= 8 && !strcmp(path + n - 8, ".pftrace"));
  if (!ok)
    return loom__fail(LOOM_EUNSUPPORTED, "cannot write %s: unknown extension (supported: .json, "
                      ".json.gz, .pftrace)", path);
  return LOOM_OK;
}

LOOM_EXTERN loom_status loom_merge(const loom_merge_config *cfg, loom_merge_result *result) {
  loom__clear_error();
  if (!cfg || cfg->struct_size < sizeof *cfg) return loom__fail(LOOM_EINVAL, "loom_merge: NULL or short config");
  if (!cfg->ninputs || !cfg->inputs) return loom__fail(LOOM_EINVAL, "loom merge: no input traces given");
  if (!cfg->output) return loom__fail(LOOM_EINVAL, "loom merge: no output given");
  loom_status st = check_output(cfg->output);
  if (st != LOOM_OK) return st;
  loom__minput *in = calloc(cfg->ninputs, sizeof *in);
  loom__minput **ord = calloc(cfg->ninputs, sizeof *ord);
  merger m = {.out = loom__trace_new(), .next_pid = 1};
  if (!in || !ord || !m.out) {
    st = loom__fail(LOOM_ENOMEM, "out of memory merging traces");
    goto done;
  }
  st = load_all(cfg, in);
  if (st != LOOM_OK) goto done;
  for (uint32_t i = 0; i < cfg->ninputs; i++) ord[i] = &in[i];
  qsort(ord, cfg->ninputs, sizeof *ord, cmp_order);
  loom_merge_result res = {.struct_size = sizeof res};
  if (build(&m, ord, cfg->ninputs, cfg->flags, &res)) {
    st = loom__fail(LOOM_ENOMEM, "out of memory merging traces into %s", cfg->output);
    goto done;
  }
  st = loom_trace_save(m.out, cfg->output);
  if (st == LOOM_OK && result) {
    uint32_t size = result->struct_size < sizeof res ? result->struct_size : (uint32_t)sizeof res;
    memcpy(result, &res, size);
    result->struct_size = size;
  }
done:
  for (uint32_t i = 0; in && i < cfg->ninputs; i++) loom_trace_free(in[i].t);
  free(in);
  free(ord);
  loom__map_free(&m.used_pids);
  loom__map_free(&m.rank_of);
  loom_trace_free(m.out);
  return st;
}
