/*
 * critpath_path.c - a step's graph walked when the step ends (docs/report.md, "Critical
 * path"): from its last node back along the dependency satisfied last, each edge's time
 * given a class and the event it belongs to; then the slack of every node (how much
 * later it could happen without moving the end) in reverse resolution order; then the
 * figures kept per step and per name, and the bound named.
 */
#include <stdlib.h>
#include <string.h>

#include "critpath_int.h"
#include "ranks.h"

const char *const loom__cpc_name[LOOM__CPC_COUNT_] = {"host",  "launch", "compute", "copy",
                                                      "sync",  "communication", "waiting"};
const char *const loom__cpe_name[LOOM__CPE_COUNT_] = {"thread", "launch", "queue",
                                                      "cross_queue", "sync"};
const char *const loom__bound_name[LOOM__BOUND_COUNT_] = {
    "none", "launch-bound", "host-bound", "sync-bound", "transfer-bound",
    "communication-bound", "waiting on a late rank", "compute-bound"};

/* The edge into node n that was satisfied last (ties: the higher type), or -1. */
static int crit(const loom__cp *c, uint32_t n) {
  const cpe *e = &c->ev[n >> 1];
  int k = n & 1, best = -1;
  for (int j = 0; j < CP_NPRED; j++) {
    if (!e->pred[k][j]) continue;
    if (best < 0) {
      best = j;
      continue;
    }
    int64_t tj = cp_time(c, e->pred[k][j] - 1), tb = cp_time(c, e->pred[k][best] - 1);
    if (tj > tb || (tj == tb && e->et[k][j] > e->et[k][best])) best = j;
  }
  return best;
}

/* The class and owner event of edge p -> n of type et. */
static uint8_t edge_class(const loom__cp *c, uint32_t n, uint32_t p, uint8_t et,
                          int32_t *owner) {
  int32_t i = (int32_t)(n >> 1);
  *owner = i;
  switch (et) {
  case ET_LAUNCH: *owner = (int32_t)(p >> 1); return LOOM__CPC_LAUNCH;
  case ET_QUEUE: return LOOM__CPC_LAUNCH;
  case ET_XQUEUE:
  case ET_SYNC: return LOOM__CPC_SYNC;
  case ET_SEQ:
    if (!(n & 1)) *owner = c->ev[i].parent;
    return *owner >= 0 ? c->ev[*owner].cls : LOOM__CPC_HOST;
  default: return c->ev[i].cls;
  }
}

static uint32_t tally(loom__cp *c, const cpe *e) {
  if (!(e->flags & CPF_STEP)) return e->name;
  if (!c->step_all) c->step_all = loom__trace_str(c->t, "ProfilerStep#*");
  return c->step_all;
}

/* dt of the path to event owner (-1: none) in class cls. */
static void credit(loom__cp *c, loom__cpstep *s, int32_t owner, uint8_t cls, int64_t dt) {
  s->cls_ns[cls] += dt;
  c->res.cls_ns[cls] += dt;
  if (owner < 0 || dt <= 0) return;
  const cpe *e = &c->ev[owner];
  uint32_t nm = tally(c, e);
  uint64_t key = ((uint64_t)cls << 40 | (uint64_t)e->kind << 32 | nm) + 1;
  uint64_t *ix = loom__map_get(&c->segmap, key);
  if (!ix) {
    cpseg z = {nm, e->kind, cls, e->cls, 0, 0, -1};
    if (LOOM__PUSH(c->seg, c->nseg, c->cap_seg, z) || loom__map_put(&c->segmap, key, c->nseg)) {
      c->oom = 1;
      return;
    }
    ix = loom__map_get(&c->segmap, key);
  }
  cpseg *g = &c->seg[*ix - 1];
  g->ns += dt;
  if (g->last != owner) g->count++, g->last = owner;
  if (cls == LOOM__CPC_COMM && c->res.max_spans &&
      c->t->tracks[e->track].device == LOOM_DEVICE_HOST) {
    if (c->res.nspans == c->res.max_spans) {
      c->res.spans_left++;
      return;
    }
    loom__cpspan sp = {0, 0, (uint32_t)c->res.nsteps, e->name, cls, e->kind};
    if (LOOM__PUSH(c->res.spans, c->res.nspans, c->res.cap_spans, sp)) c->oom = 1;
  }
}

static void on_path(loom__cp *c, loom__cpstep *s, int32_t i) {
  cpe *e = &c->ev[i];
  if (e->walk == c->walkgen) return;
  e->walk = c->walkgen;
  s->npath++;
  if (e->flags & CPF_ON) return; /* on another step's path of the graph too */
  e->flags |= CPF_ON;
  if (c->keep && LOOM__PUSH(c->back, c->nback, c->cap_back, i)) c->oom = 1;
}

static uint64_t key_of(const loom__cp *c, int32_t i) {
  const cpe *e = &c->ev[i];
  const loom__track *tr = &c->t->tracks[e->track];
  return loom__cp_key(tr->pid, tr->tid, e->ts + c->t->base_ns, e->end - e->ts,
                      loom__trace_cstr(c->t, e->name));
}

/* A dependency edge p -> n of the path between two events, kept for the marked trace
 * (nesting edges are not drawn). */
static void keep_edge(loom__cp *c, uint32_t p, uint32_t n, uint8_t et) {
  static const int8_t type[] = {[ET_SELF] = -1,          [ET_SEQ] = LOOM__CPE_THREAD,
                                [ET_LAUNCH] = LOOM__CPE_LAUNCH, [ET_QUEUE] = LOOM__CPE_QUEUE,
                                [ET_XQUEUE] = LOOM__CPE_XQUEUE, [ET_SYNC] = LOOM__CPE_SYNC};
  if (type[et] < 0 || (et == ET_SEQ && ((n & 1) || !(p & 1)))) return;
  loom__cpedge x = {key_of(c, (int32_t)(p >> 1)), key_of(c, (int32_t)(n >> 1)),
                    cp_time(c, p) + c->t->base_ns, cp_time(c, n) + c->t->base_ns,
                    (uint8_t)type[et]};
  if (LOOM__PUSH(c->res.edges, c->res.nedges, c->res.cap_edges, x)) c->oom = 1;
}

/* Back from the sink along the edges satisfied last. */
static void walk(loom__cp *c, loom__cpstep *s, uint32_t n) {
  for (;;) {
    on_path(c, s, (int32_t)(n >> 1));
    int k = crit(c, n);
    if (k < 0) break;
    const cpe *e = &c->ev[n >> 1];
    uint32_t p = e->pred[n & 1][k] - 1;
    int32_t owner;
    uint8_t cls = edge_class(c, n, p, e->et[n & 1][k], &owner);
    if (c->keep) keep_edge(c, p, n, e->et[n & 1][k]);
    size_t ns0 = c->res.nspans;
    credit(c, s, owner, cls, cp_time(c, n) - cp_time(c, p));
    if (c->res.nspans > ns0) { /* the span is this edge's stretch */
      c->res.spans[ns0].t0 = cp_time(c, p);
      c->res.spans[ns0].t1 = cp_time(c, n);
    }
    n = p;
  }
  if (cp_time(c, n) > s->t0) credit(c, s, -1, LOOM__CPC_HOST, cp_time(c, n) - s->t0);
}

/* Slack of every node: how much later it could be without moving the sink.  The edge
 * satisfied last is rigid (its time is the work's own or the dependency's latency);
 * another edge adds the time by which its source came early. */
static int slacks(loom__cp *c, int64_t tsink) {
  if (loom__grow((void **)&c->slack, &c->cap_slack, 2 * c->nev, sizeof *c->slack)) return -1;
  for (size_t n = 0; n < 2 * c->nev; n++) c->slack[n] = tsink - cp_time(c, (uint32_t)n);
  for (size_t o = c->nord; o-- > 0;) {
    uint32_t n = c->order[o];
    const cpe *e = &c->ev[n >> 1];
    int ck = crit(c, n);
    for (int j = 0; j < CP_NPRED; j++) {
      if (!e->pred[n & 1][j]) continue;
      uint32_t p = e->pred[n & 1][j] - 1;
      int64_t v = c->slack[n] + (j == ck ? 0 : cp_time(c, n) - cp_time(c, p));
      if (v < c->slack[p]) c->slack[p] = v;
    }
  }
  return 0;
}

static loom__cpname *cpname(loom__cp *c, uint32_t name, uint8_t kind, uint8_t cls) {
  uint64_t key = ((uint64_t)kind << 32 | name) + 1;
  uint64_t *ix = loom__map_get(&c->name_of, key);
  if (ix) return &c->res.names[*ix - 1];
  loom__cpname z = {name, kind, cls, 0, 0, 0, INT64_MAX, 0};
  if (LOOM__PUSH(c->res.names, c->res.nnames, c->res.cap_names, z) ||
      loom__map_put(&c->name_of, key, c->res.nnames)) {
    c->oom = 1;
    return NULL;
  }
  return &c->res.names[c->res.nnames - 1];
}

/* Per name: events on the paths, off them with their slack. */
static void names(loom__cp *c) {
  for (size_t i = 0; i < c->nev; i++) {
    const cpe *e = &c->ev[i];
    loom__cpname *n = cpname(c, tally(c, e), e->kind, e->cls);
    if (!n) return;
    if (e->flags & CPF_ON) {
      n->on++;
      continue;
    }
    int64_t sl = c->slack[CP_REF(i, 1)];
    n->off++;
    n->slack_sum += sl;
    if (sl < n->slack_min) n->slack_min = sl;
  }
}

/* Per name the time of one step's path, and its top contributors per class. */
static void path_names(loom__cp *c, loom__cpstep *s) {
  for (size_t g = 0; g < c->nseg; g++) {
    const cpseg *x = &c->seg[g];
    loom__cpname *n = cpname(c, x->name, x->kind, x->ecls);
    if (n) n->ns += x->ns;
    loom__cpevid *ev = s->ev[x->cls];
    for (int k = 0; k < LOOM__CP_NEVID; k++) { /* top contributors, most time first */
      if (ev[k].ns >= x->ns && ev[k].count) continue;
      memmove(&ev[k + 1], &ev[k], (LOOM__CP_NEVID - 1 - (size_t)k) * sizeof *ev);
      ev[k] = (loom__cpevid){x->name, x->kind, x->count, x->ns};
      break;
    }
  }
}

uint8_t loom__cp_bound(const loom__cpstep *s) {
  const int64_t *v = s->cls_ns;
  int64_t hostside = v[LOOM__CPC_HOST] + v[LOOM__CPC_LAUNCH];
  if (s->t1 <= s->t0) return LOOM__BOUND_NONE;
  static const struct { int cls; uint8_t bound; } dev[] = {
      {LOOM__CPC_COMPUTE, LOOM__BOUND_COMPUTE}, {LOOM__CPC_COPY, LOOM__BOUND_TRANSFER},
      {LOOM__CPC_COMM, LOOM__BOUND_COMM}, {LOOM__CPC_SYNC, LOOM__BOUND_SYNC}};
  int64_t best = -1;
  uint8_t b = LOOM__BOUND_NONE;
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
    if (v[dev[i].cls] > best) best = v[dev[i].cls], b = dev[i].bound;
  if (v[LOOM__CPC_WAIT] > 0 && v[LOOM__CPC_WAIT] >= best && v[LOOM__CPC_WAIT] >= hostside)
    return LOOM__BOUND_LATE_RANK;
  if (hostside >= best)
    return v[LOOM__CPC_LAUNCH] >= v[LOOM__CPC_HOST] ? LOOM__BOUND_LAUNCH : LOOM__BOUND_HOST;
  return b;
}

/* The path events' keys, for the marked trace. */
static void keep_keys(loom__cp *c) {
  for (size_t k = 0; k < c->nback; k++)
    if (loom__map_put(&c->res.on_path, key_of(c, c->back[k]), 1)) c->oom = 1;
}

/* The node that ends last among the events of step k (-1: all of them). */
static uint32_t sink_of(const loom__cp *c, int32_t k) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < c->nev; i++)
    if ((k < 0 || c->ev[i].owner == k) &&
        (best == SIZE_MAX || c->ev[i].end >= c->ev[best].end))
      best = i;
  return CP_REF(best == SIZE_MAX ? 0 : best, 1);
}

/* The path of step k of the graph (-1: the window), its figures pushed. */
static void one_path(loom__cp *c, int32_t k) {
  loom__cpstep s;
  memset(&s, 0, sizeof s);
  s.step = k < 0 ? -1 : c->roots[k].step;
  s.pid = k < 0 ? -1 : c->t->tracks[c->ev[c->roots[k].ev].track].pid;
  s.t0 = k < 0 ? c->t0 : c->ev[c->roots[k].ev].ts;
  for (size_t i = 0; i < c->nev; i++) s.nevents += k < 0 || c->ev[i].owner == k;
  s.device_busy = c->busy;
  s.kernels = c->kernels;
  s.kernel_ns = c->kernel_ns;
  s.late_rank = -1;
  s.cut = (uint8_t)c->cut;
  uint32_t sink = sink_of(c, k);
  s.t1 = cp_time(c, sink);
  c->nseg = 0;
  c->walkgen++;
  loom__map_clear(&c->segmap);
  walk(c, &s, sink);
  path_names(c, &s);
  s.bound = loom__cp_bound(&s);
  if (LOOM__PUSH(c->res.steps, c->res.nsteps, c->res.cap_steps, s)) c->oom = 1;
}

/* The graph's paths: its step's, or each of its steps' (one per process), or the
 * window's.  Slack is measured to the end of the graph's last node. */
void loom__cp_close(loom__cp *c) {
  c->open = 0;
  loom__cp_pop_all(c);
  if (!c->nev || c->oom) return;
  c->res.cut += c->cut;
  c->nback = 0;
  if (slacks(c, cp_time(c, sink_of(c, -1)))) {
    c->oom = 1;
    return;
  }
  if (c->nroots <= 1) one_path(c, c->nroots ? 0 : -1);
  for (size_t k = 0; c->nroots > 1 && k < c->nroots; k++) one_path(c, (int32_t)k);
  names(c);
  if (c->keep) keep_keys(c);
}

/* ---- cross-rank waits ------------------------------------------------------------------- */
static int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
  return hi > lo ? hi - lo : 0;
}

void loom__cp_ranks(loom__cpres *res, const loom__ranks *k, const uint8_t *mine,
                    size_t nmine, int64_t base_ns) {
  if (!k || !k->nwaits) return;
  int64_t *most = calloc(res->nsteps ? res->nsteps : 1, sizeof *most);
  for (size_t w = 0; most && w < k->nwaits; w++) {
    const loom__rwait *x = &k->waits[w];
    if (x->rank < 0 || (size_t)x->rank >= nmine || !mine[x->rank]) continue;
    for (size_t i = 0; i < res->nspans; i++) {
      loom__cpspan *sp = &res->spans[i];
      int64_t o = overlap(sp->t0 + base_ns, sp->t1 + base_ns, x->t0, x->t1);
      if (!o) continue;
      loom__cpstep *s = &res->steps[sp->step];
      s->cls_ns[sp->cls] -= o;
      res->cls_ns[sp->cls] -= o;
      s->cls_ns[LOOM__CPC_WAIT] += o;
      res->cls_ns[LOOM__CPC_WAIT] += o;
      if (x->by >= 0 && o > most[sp->step]) most[sp->step] = o, s->late_rank = x->by;
      loom__cpevid *ev = s->ev[LOOM__CPC_WAIT];
      if (!ev[0].count || ev[0].name == sp->name) {
        ev[0].name = sp->name;
        ev[0].kind = sp->kind;
        ev[0].ns += o;
        ev[0].count++;
      }
      sp->t1 = sp->t0; /* counted once */
    }
  }
  for (size_t i = 0; most && i < res->nsteps; i++) {
    loom__cpstep *s = &res->steps[i];
    if (s->late_rank >= 0) s->late_rank = (int32_t)k->rank_id[s->late_rank];
    s->bound = loom__cp_bound(s);
  }
  free(most);
}
