/*
 * critpath.c - the graph of one step (or window) of the critical path, built from the
 * pass's records in time order (docs/report.md, "Critical path").
 *
 * Every event is two nodes, its start and its end, at their times.  The edges into a node
 * are its dependencies, each satisfied at the time of its source: the thread's previous
 * node (host nesting and thread order), the launch call's start (device work, by
 * correlation id), the previous work on the same queue, the work a cross-queue wait
 * names, and for a call that waited for a device (a sync record with its correlation id,
 * or a host record of kind sync) the last device work on the waited queue(s) that ended
 * before the call did, and for a launch or copy call the work it launched that ran inside
 * it (the call blocked until that work ended).  Nodes are numbered in the order they are
 * resolved, which is a topological order: critpath_path.c walks and measures it when the
 * step ends.
 */
#include <stdlib.h>
#include <string.h>

#include "critpath_int.h"

/* ---- nodes and edges --------------------------------------------------------- */
static int grow_ev(loom__cp *c) {
  if (c->nev < c->cap_ev) return 0;
  return loom__grow((void **)&c->ev, &c->cap_ev, c->nev + 1, sizeof *c->ev);
}

void loom__cp_order(loom__cp *c, uint32_t node) {
  if (LOOM__PUSH(c->order, c->nord, c->cap_ord, node)) c->oom = 1;
}

/* An incoming edge of node k (0 start, 1 end) of event i from node src.  Past NPRED edges
 * the one from the earliest source gives way to a later one. */
void loom__cp_pred(loom__cp *c, int32_t i, int k, uint32_t src, uint8_t et) {
  cpe *e = &c->ev[i];
  int slot = -1;
  for (int j = 0; j < CP_NPRED; j++)
    if (!e->pred[k][j]) {
      slot = j;
      break;
    }
  if (slot < 0) {
    slot = 0;
    for (int j = 1; j < CP_NPRED; j++)
      if (cp_time(c, e->pred[k][j] - 1) < cp_time(c, e->pred[k][slot] - 1)) slot = j;
    if (cp_time(c, e->pred[k][slot] - 1) >= cp_time(c, src)) return;
  }
  e->pred[k][slot] = src + 1;
  e->et[k][slot] = et;
}

static int32_t new_ev(loom__cp *c, const loom__arec *r, uint8_t cls) {
  if (grow_ev(c)) {
    c->oom = 1;
    return -1;
  }
  cpe *e = &c->ev[c->nev];
  memset(e, 0, sizeof *e);
  e->ts = r->ts;
  e->end = r->ts + r->dur;
  e->corr = r->corr;
  e->name = r->name;
  e->track = r->track;
  e->kind = r->kind;
  e->cls = cls;
  e->parent = -1;
  e->waitq = -1;
  e->owner = c->nroots == 1 ? 0 : -1;
  return (int32_t)c->nev++;
}

/* ---- per thread and per queue state, reset lazily per graph ----------------------- */
static cpthr *thread(loom__cp *c, uint32_t track) {
  cpthr *h = &c->th[track];
  if (h->gen != c->gen) {
    h->gen = c->gen;
    h->n = 0;
    h->last = 0;
    if (LOOM__PUSH(c->touched, c->ntouched, c->cap_touched, track)) c->oom = 1;
  }
  return h;
}

static cpq *queue_of(loom__cp *c, int32_t qi) {
  if ((size_t)qi >= c->nq) {
    size_t cap = c->nq;
    if (loom__grow((void **)&c->q, &cap, (size_t)qi + 1, sizeof *c->q)) {
      c->oom = 1;
      return NULL;
    }
    memset(c->q + c->nq, 0, (cap - c->nq) * sizeof *c->q);
    c->nq = cap;
  }
  cpq *q = &c->q[qi];
  if (q->gen != c->gen) {
    q->gen = c->gen;
    q->n = 0;
    q->xsrc = -1;
  }
  return q;
}

/* The last work on queue q that ended by t, or -1. */
int32_t loom__cp_last_before(loom__cp *c, int32_t qi, int64_t t) {
  cpq *q = queue_of(c, qi);
  int32_t best = -1;
  unsigned n = q && q->n < CP_QRING ? q->n : CP_QRING;
  for (unsigned k = 0; q && k < n; k++) {
    int32_t j = q->ring[(q->n - 1 - k) % CP_QRING];
    if (c->ev[j].end <= t && (best < 0 || c->ev[j].end > c->ev[best].end)) best = j;
  }
  return best;
}

/* ---- host events: nesting and thread order ------------------------------------------ */
/* The latest work a waiting call depended on: its queue, or every queue of the device
 * its sync record lay on, or (a host record of kind sync with no record on a device)
 * every queue. */
static void sync_preds(loom__cp *c, int32_t i) {
  cpe *e = &c->ev[i];
  int32_t best = -1;
  if (e->waitq >= 0) best = loom__cp_last_before(c, e->waitq, e->end);
  for (size_t qi = 0; e->waitq < 0 && qi < c->rep->nqueues; qi++) {
    if ((e->flags & CPF_WAITDEV) && c->rep->queues[qi].pid != c->t->tracks[e->wtrack].pid)
      continue;
    int32_t j = qi < c->nq && c->q[qi].gen == c->gen ? loom__cp_last_before(c, (int32_t)qi, e->end)
                                                    : -1;
    if (j >= 0 && (best < 0 || c->ev[j].end > c->ev[best].end)) best = j;
  }
  if (best >= 0) {
    loom__cp_pred(c, i, 1, CP_REF(best, 1), ET_SYNC);
    c->res.sync_edges++;
  }
}

static void pop_one(loom__cp *c, cpthr *h) {
  int32_t i = h->st[--h->n];
  uint32_t last = h->last - 1;
  loom__cp_pred(c, i, 1, last, last == CP_REF(i, 0) ? ET_SELF : ET_SEQ);
  if (c->ev[i].flags & (CPF_WAITS | CPF_WAITDEV | CPF_WAITANY)) sync_preds(c, i);
  loom__cp_order(c, CP_REF(i, 1));
  h->last = CP_REF(i, 1) + 1;
}

void loom__cp_pop_all(loom__cp *c) {
  for (size_t k = 0; k < c->ntouched; k++) {
    cpthr *h = &c->th[c->touched[k]];
    while (h->n) pop_one(c, h);
  }
}

/* The step of the graph on the process of track (several steps: one per process). */
static int32_t owner_of(const loom__cp *c, uint32_t track) {
  int64_t pid = c->t->tracks[track].pid;
  for (size_t k = 0; k < c->nroots; k++)
    if (c->t->tracks[c->ev[c->roots[k].ev].track].pid == pid) return (int32_t)k;
  return -1;
}

static uint8_t host_class(const loom__arec *r, int launch, int comm) {
  if (r->kind == LOOM_KIND_SYNC) return LOOM__CPC_SYNC;
  if (comm || r->kind == LOOM_KIND_COLLECTIVE) return LOOM__CPC_COMM;
  if ((r->kind == LOOM_KIND_RUNTIME || r->kind == LOOM_KIND_DRIVER) && launch)
    return LOOM__CPC_LAUNCH;
  return LOOM__CPC_HOST;
}

static void host_rec(loom__cp *c, const loom__arec *r, int step, int launch, int comm) {
  cpthr *h = thread(c, r->track);
  while (h->n && c->ev[h->st[h->n - 1]].end <= r->ts) pop_one(c, h);
  int32_t i = new_ev(c, r, host_class(r, launch, comm));
  if (i < 0) return;
  cpe *e = &c->ev[i];
  e->parent = h->n ? h->st[h->n - 1] : -1;
  if (step) {
    e->flags |= CPF_STEP;
    struct cproot rt = {i, (int32_t)c->rep->nsteps - 1};
    if (LOOM__PUSH(c->roots, c->nroots, c->cap_roots, rt)) c->oom = 1;
    e = &c->ev[i];
    if (c->nroots == 1)
      for (size_t k = 0; k < c->nev; k++) c->ev[k].owner = 0;
  }
  if (c->nroots > 1) e->owner = step ? (int32_t)c->nroots - 1 : owner_of(c, r->track);
  if (r->kind == LOOM_KIND_SYNC) e->flags |= CPF_WAITANY; /* until a device record says */
  if (h->last) loom__cp_pred(c, i, 0, h->last - 1, ET_SEQ);
  loom__cp_order(c, CP_REF(i, 0));
  h->last = CP_REF(i, 0) + 1;
  if (LOOM__PUSH(h->st, h->n, h->cap, i)) c->oom = 1;
  if (r->corr && r->kind != LOOM_KIND_CPU_OP && r->kind != LOOM_KIND_USER_RANGE &&
      loom__map_put(&c->corr, r->corr, (uint64_t)i + 1))
    c->oom = 1;
}

/* ---- device work and sync records ----------------------------------------------------- */
/* A launch or copy call h that was still running when its work i began and ended no
 * earlier than it: the call blocked until the work was done (a blocking copy, a runtime
 * that runs the work inside its enqueue call), so its end waited for the work's end, as
 * a sync's does.  Its end node is not resolved yet: the work began before the call ended,
 * so no later record of its thread has closed it. */
static void blocked(loom__cp *c, int32_t h, int32_t i) {
  const cpe *call = &c->ev[h], *w = &c->ev[i];
  if (call->kind != LOOM_KIND_RUNTIME && call->kind != LOOM_KIND_DRIVER) return;
  if (w->ts < call->ts || w->ts >= call->end || w->end > call->end) return;
  loom__cp_pred(c, h, 1, CP_REF(i, 1), ET_SYNC);
  c->res.block_edges++;
}

static void work_rec(loom__cp *c, const loom__arec *r, int32_t qi, int comm) {
  cpq *q = queue_of(c, qi);
  uint8_t cls = r->kind == LOOM_KIND_MEMCPY || r->kind == LOOM_KIND_MEMSET ? LOOM__CPC_COPY
              : comm || r->cls == LOOM__CLS_COMM ? LOOM__CPC_COMM : LOOM__CPC_COMPUTE;
  int32_t i = q ? new_ev(c, r, cls) : -1;
  if (i < 0) return;
  c->ev[i].waitq = qi;
  uint64_t *l = r->corr ? loom__map_get(&c->corr, r->corr) : NULL;
  if (l) loom__cp_pred(c, i, 0, CP_REF(*l - 1, 0), ET_LAUNCH);
  if (l) c->ev[i].owner = c->ev[*l - 1].owner; /* the step of its launch, else its queue's */
  if (l) blocked(c, (int32_t)*l - 1, i);
  if (q->n) {
    int32_t p = q->ring[(q->n - 1) % CP_QRING];
    if (c->ev[p].end <= r->ts) loom__cp_pred(c, i, 0, CP_REF(p, 1), ET_QUEUE);
    if (!l) c->ev[i].owner = c->ev[p].owner;
  }
  if (q->xsrc >= 0 && c->ev[q->xsrc].end <= r->ts) {
    loom__cp_pred(c, i, 0, CP_REF(q->xsrc, 1), ET_XQUEUE);
    c->res.xqueue_edges++;
  }
  q->xsrc = -1;
  loom__cp_order(c, CP_REF(i, 0));
  loom__cp_pred(c, i, 1, CP_REF(i, 0), ET_SELF);
  loom__cp_order(c, CP_REF(i, 1));
  q->ring[q->n++ % CP_QRING] = i;
  c->busy += r->dur;
  if (cls == LOOM__CPC_COMPUTE) c->kernels++, c->kernel_ns += r->dur;
}

/* The queue of the device process of track with thread id tid, or -1. */
static int32_t queue_by_tid(loom__cp *c, uint32_t track, int64_t tid) {
  int64_t pid = c->t->tracks[track].pid;
  for (size_t i = 0; i < c->rep->nqueues; i++)
    if (c->rep->queues[i].pid == pid && c->rep->queues[i].tid == tid) return (int32_t)i;
  return -1;
}

/* A sync record on a device.  With a waited queue (r->bytes: its tid + 1, from the
 * record's "wait_on_stream"), the next work on this queue waits for the last work begun
 * on that one; else the call with its correlation id waited: for this queue when it holds
 * work, else for every queue of the device. */
static void sync_rec(loom__cp *c, const loom__arec *r, int32_t qi) {
  cpq *q = queue_of(c, qi);
  if (!q) return;
  if (r->bytes) {
    int32_t w = queue_by_tid(c, r->track, (int64_t)r->bytes - 1);
    cpq *wq = w >= 0 ? queue_of(c, w) : NULL;
    if (!wq || !wq->n) return;
    q = queue_of(c, qi); /* wq's growth may have moved it */
    int32_t last = wq->ring[(wq->n - 1) % CP_QRING];
    for (unsigned k = 0; k < wq->n && k < CP_QRING; k++) {
      int32_t j = wq->ring[(wq->n - 1 - k) % CP_QRING];
      if (c->ev[j].ts <= r->ts) {
        last = j;
        break;
      }
    }
    q->xsrc = last;
    return;
  }
  uint64_t *l = r->corr ? loom__map_get(&c->corr, r->corr) : NULL;
  if (!l) return;
  cpe *h = &c->ev[*l - 1];
  h->cls = LOOM__CPC_SYNC;
  h->flags &= (uint8_t)~CPF_WAITANY;
  if (c->rep->queues[qi].nwork && !(h->flags & CPF_WAITDEV) &&
      (h->waitq < 0 || h->waitq == qi)) {
    h->waitq = qi;
    h->flags |= CPF_WAITS;
  } else { /* a device-wide sync, or one record per queue: the device */
    h->waitq = -1;
    h->flags |= CPF_WAITDEV;
    h->wtrack = r->track;
  }
}

/* ---- graphs: steps or windows ---------------------------------------------------------- */
static void open_graph(loom__cp *c, int64_t t0, int64_t tend) {
  c->open = 1;
  c->gen++;
  c->t0 = t0;
  c->tend = tend;
  c->nev = c->nord = c->ntouched = c->nroots = 0;
  c->busy = c->kernel_ns = 0;
  c->kernels = 0;
  c->cut = 0;
  loom__map_clear(&c->corr); /* its slots kept: steps are alike */
  c->corr.runs = 1;
}

/* Where a record goes: 1 into the open graph (opened or cut over first), 0 nowhere.  A
 * step that begins before the open graph's steps end (another process's, in a merged
 * trace of several ranks) joins it. */
static int place(loom__cp *c, const loom__arec *r, int step) {
  if (c->open && step && r->ts < c->tend && !c->cut) {
    if (r->ts + r->dur > c->tend) c->tend = r->ts + r->dur;
  } else if (c->open && (step || (c->stepped && r->ts >= c->tend))) {
    loom__cp_close(c);
  }
  if (!c->open) {
    if (c->stepped && !step) return 0;
    open_graph(c, r->ts, step ? r->ts + r->dur : INT64_MAX);
  }
  if (c->nev + 2 > c->cap) {
    if (c->stepped) {
      c->cut = 1; /* the rest of the step stays out */
      return 0;
    }
    loom__cp_close(c);
    open_graph(c, r->ts, INT64_MAX);
  }
  return 1;
}

void loom__cp_record(loom__cp *c, const loom__arec *r, int32_t queue, int step, int launch,
                     int comm) {
  if (!c || c->oom || !place(c, r, step)) return;
  if (queue >= 0 && r->kind == LOOM_KIND_SYNC) sync_rec(c, r, queue);
  else if (queue >= 0) work_rec(c, r, queue, comm);
  else host_rec(c, r, step, launch, comm);
}

loom__cp *loom__cp_new(loom_trace *t, loom__report *rep, size_t cap, int stepped,
                       int keep_path, size_t max_spans) {
  loom__cp *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->t = t;
  c->rep = rep;
  c->cap = cap < 64 ? 64 : cap;
  c->stepped = stepped;
  c->keep = keep_path;
  c->res.cap = c->cap;
  c->res.max_spans = max_spans;
  c->th = calloc(t->ntracks ? t->ntracks : 1, sizeof *c->th);
  if (!c->th) {
    free(c);
    return NULL;
  }
  return c;
}

int loom__cp_finish(loom__cp *c, loom__cpres *out) {
  if (c->open) loom__cp_close(c);
  *out = c->res;
  memset(&c->res, 0, sizeof c->res);
  return c->oom ? -1 : 0;
}

void loom__cp_free(loom__cp *c) {
  if (!c) return;
  for (size_t i = 0; c->th && i < c->t->ntracks; i++) free(c->th[i].st);
  free(c->th);
  free(c->q);
  free(c->ev);
  free(c->order);
  free(c->touched);
  free(c->slack);
  free(c->back);
  free(c->seg);
  free(c->roots);
  loom__map_free(&c->corr);
  loom__map_free(&c->segmap);
  loom__map_free(&c->name_of);
  loom__cpres_free(&c->res);
  free(c);
}

void loom__cpres_free(loom__cpres *r) {
  free(r->steps);
  free(r->names);
  free(r->spans);
  free(r->edges);
  loom__map_free(&r->on_path);
  memset(r, 0, sizeof *r);
}
