/*
 * pipe.c - a streaming read's sinks on a thread of their own (pipe.h).
 *
 * The reader's thread (the producer) appends what its sinks are given to
 * the batch it fills; at a batch's end it adds what changed in the trace
 * (the strings new since the last batch, the processes, tracks and
 * metadata whole), hands the batch over and takes the other one, waiting
 * while the consumer still delivers it.  The consumer brings its mirror of
 * the trace up to date from the batch, then calls the caller's sinks: the
 * flow ends and events in the order the reader gave them.  A sink that
 * fails stops the consumer; the producer's next call then fails, so the
 * read stops as it would have without the pipe.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "export/pipe.h"
#include "util/util.h"

size_t loom__pipe_min = 4u << 20;
size_t loom__pipe_batch = 16384;

/* More events per batch when the trace's processes, tracks and metadata
 * are many, so that copying them stays a small share of a batch's cost. */
#define PIPE_COPY_SHARE 8

typedef struct pflow {
  uint64_t id;
  int64_t ts;
  uint32_t track, name, cat;
  uint32_t before; /* delivered before the batch's event of this index */
  char ph;
  int bind_enclosing;
} pflow;

typedef struct batch {
  loom__ev *ev;
  size_t nev, cap_ev;
  loom__targ *args;
  size_t nargs, cap_args;
  pflow *fl;
  size_t nfl, cap_fl;
  /* the trace when handed over: new strings (bytes, lengths), the rest whole */
  char *sbytes;
  size_t nsbytes, cap_sbytes;
  uint32_t *slens;
  size_t nslens, cap_slens;
  loom__proc *procs;
  size_t nprocs, cap_procs;
  loom__track *tracks;
  size_t ntracks, cap_tracks;
  loom__kv *meta;
  size_t nmeta, cap_meta;
  loom_trace scalars; /* its scalar fields only */
  int full;           /* handed over, not yet delivered (under mu) */
} batch;

struct loom__pipe {
  loom__sink own_sink, sink;
  loom__flow_sink own_flows, flows;
  int has_flows;
  batch b[2];
  int pi, ci;         /* the producer's batch, the consumer's */
  size_t sent_strs;   /* strings of the reader's trace already copied over */
  loom_trace *mirror; /* the consumer's */
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;           /* no batch will come any more (under mu) */
  int failed;         /* a sink failed or memory ran out (under mu) */
  int oom;            /* the producer's own copy failed */
};

static void batch_free(batch *b) {
  free(b->ev);
  free(b->args);
  free(b->fl);
  free(b->sbytes);
  free(b->slens);
  free(b->procs);
  free(b->tracks);
  free(b->meta);
}

/* ---- the consumer ---------------------------------------------------------- */

/* Copies n elements of size esz into *dst (capacity *cap), sized to fit. */
static int copy_array(void **dst, size_t *cap, const void *src, size_t n, size_t esz) {
  if (n > *cap && loom__grow(dst, cap, n, esz)) return -1;
  if (n) memcpy(*dst, src, n * esz);
  return 0;
}

/* The mirror brought up to the trace as b saw it. */
static int mirror_update(loom_trace *m, const batch *b) {
  const char *s = b->sbytes;
  for (size_t i = 0; i < b->nslens; i++) {
    size_t want = m->strs.n ? m->strs.n : 1; /* the id the reader's trace gave it */
    if (loom__strtab_intern(&m->strs, s, b->slens[i]) != want) return -1;
    s += b->slens[i];
  }
  if (copy_array((void **)&m->procs, &m->cap_procs, b->procs, b->nprocs, sizeof *b->procs) ||
      copy_array((void **)&m->tracks, &m->cap_tracks, b->tracks, b->ntracks, sizeof *b->tracks) ||
      copy_array((void **)&m->meta, &m->cap_meta, b->meta, b->nmeta, sizeof *b->meta))
    return -1;
  m->nprocs = b->nprocs, m->ntracks = b->ntracks, m->nmeta = b->nmeta;
  m->dropped = b->scalars.dropped;
  m->start_ns = b->scalars.start_ns, m->end_ns = b->scalars.end_ns;
  m->trace_name = b->scalars.trace_name;
  m->last_track = 0;
  m->window_end = b->scalars.window_end;
  m->base_ns = b->scalars.base_ns;
  m->bad = b->scalars.bad;
  return 0;
}

static int deliver_flow(loom__pipe *p, const pflow *f) {
  return p->flows.flow(p->flows.ctx, p->mirror, f->id, f->ts, f->track, f->ph, f->bind_enclosing,
                       f->name, f->cat);
}

static int deliver(loom__pipe *p, const batch *b) {
  if (mirror_update(p->mirror, b)) return -1;
  size_t k = 0;
  for (size_t i = 0; i < b->nev; i++) {
    for (; k < b->nfl && b->fl[k].before <= i; k++)
      if (deliver_flow(p, &b->fl[k])) return -1;
    const loom__ev *e = &b->ev[i];
    if (p->sink.event(p->sink.ctx, p->mirror, e, e->nargs ? &b->args[e->args_off] : NULL))
      return -1;
  }
  for (; k < b->nfl; k++)
    if (deliver_flow(p, &b->fl[k])) return -1;
  return 0;
}

static void *consumer(void *arg) {
  loom__pipe *p = arg;
  for (;;) {
    batch *b = &p->b[p->ci];
    pthread_mutex_lock(&p->mu);
    while (!b->full && !p->done) pthread_cond_wait(&p->cv, &p->mu);
    int have = b->full, go = have && !p->failed;
    pthread_mutex_unlock(&p->mu);
    if (!have) break; /* done, nothing more */
    int rc = go ? deliver(p, b) : 0;
    pthread_mutex_lock(&p->mu);
    if (rc) p->failed = 1;
    b->full = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    p->ci ^= 1;
  }
  return NULL;
}

/* ---- the producer ---------------------------------------------------------- */

/* What changed in t since the last batch, copied into b. */
static int snapshot(loom__pipe *p, batch *b, const loom_trace *t) {
  b->nsbytes = b->nslens = 0;
  for (size_t id = p->sent_strs; id < t->strs.n; id++) {
    size_t len = t->strs.lens[id];
    if ((b->nsbytes + len > b->cap_sbytes &&
         loom__grow((void **)&b->sbytes, &b->cap_sbytes, b->nsbytes + len, 1)) ||
        LOOM__PUSH(b->slens, b->nslens, b->cap_slens, (uint32_t)len))
      return -1;
    if (len) memcpy(b->sbytes + b->nsbytes, t->strs.strs[id], len);
    b->nsbytes += len;
  }
  p->sent_strs = t->strs.n;
  if (copy_array((void **)&b->procs, &b->cap_procs, t->procs, t->nprocs, sizeof *t->procs) ||
      copy_array((void **)&b->tracks, &b->cap_tracks, t->tracks, t->ntracks, sizeof *t->tracks) ||
      copy_array((void **)&b->meta, &b->cap_meta, t->meta, t->nmeta, sizeof *t->meta))
    return -1;
  b->nprocs = t->nprocs, b->ntracks = t->ntracks, b->nmeta = t->nmeta;
  b->scalars = *t; /* the pointers in it are never read */
  return 0;
}

/* Hands the producer's batch over and takes the other one once delivered.
 * -1 when a sink failed. */
static int hand_over(loom__pipe *p, const loom_trace *t) {
  batch *b = &p->b[p->pi];
  if (snapshot(p, b, t)) {
    p->oom = 1;
    return -1;
  }
  pthread_mutex_lock(&p->mu);
  b->full = 1;
  pthread_cond_broadcast(&p->cv);
  p->pi ^= 1;
  batch *next = &p->b[p->pi];
  while (next->full && !p->failed) pthread_cond_wait(&p->cv, &p->mu);
  int failed = p->failed;
  pthread_mutex_unlock(&p->mu);
  next->nev = next->nargs = next->nfl = 0;
  return failed ? -1 : 0;
}

static size_t batch_goal(const loom_trace *t) {
  size_t copied = t->nprocs + t->ntracks + t->nmeta;
  size_t least = loom__pipe_batch ? loom__pipe_batch : 1;
  return copied * PIPE_COPY_SHARE > least ? copied * PIPE_COPY_SHARE : least;
}

static int pipe_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  loom__pipe *p = ctx;
  batch *b = &p->b[p->pi];
  loom__ev c = *e;
  c.args_off = (uint32_t)b->nargs;
  if (e->nargs && b->nargs + e->nargs > b->cap_args &&
      loom__grow((void **)&b->args, &b->cap_args, b->nargs + e->nargs, sizeof *b->args))
    return p->oom = 1, -1;
  if (LOOM__PUSH(b->ev, b->nev, b->cap_ev, c)) return p->oom = 1, -1;
  if (e->nargs) memcpy(b->args + b->nargs, args, e->nargs * sizeof *args);
  b->nargs += e->nargs;
  return b->nev + b->nfl >= batch_goal(t) ? hand_over(p, t) : 0;
}

static int pipe_flow(void *ctx, const loom_trace *t, uint64_t id, int64_t ts, uint32_t track,
                     char ph, int bind_enclosing, uint32_t name, uint32_t cat) {
  loom__pipe *p = ctx;
  batch *b = &p->b[p->pi];
  pflow f = {id, ts, track, name, cat, (uint32_t)b->nev, ph, bind_enclosing};
  if (LOOM__PUSH(b->fl, b->nfl, b->cap_fl, f)) return p->oom = 1, -1;
  return b->nev + b->nfl >= batch_goal(t) ? hand_over(p, t) : 0;
}

/* ---- the pipe ---------------------------------------------------------------- */

static int two_cpus(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 2;
}

loom__pipe *loom__pipe_new(const loom__sink *sink, const loom__flow_sink *flows) {
  if (!sink || !two_cpus()) return NULL;
  loom__pipe *p = calloc(1, sizeof *p);
  if (!p || !(p->mirror = loom__trace_new())) {
    free(p);
    return NULL;
  }
  p->sink = *sink;
  p->own_sink = (loom__sink){.event = pipe_event, .ctx = p, .all_args = sink->all_args};
  if (flows) p->flows = *flows, p->has_flows = 1;
  p->own_flows = (loom__flow_sink){pipe_flow, p};
  p->sent_strs = 1; /* ids are dense from 1 */
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (pthread_create(&p->th, NULL, consumer, p) != 0) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    loom_trace_free(p->mirror);
    free(p);
    return NULL;
  }
  return p;
}

const loom__sink *loom__pipe_sink(loom__pipe *p) { return &p->own_sink; }
const loom__flow_sink *loom__pipe_flows(loom__pipe *p) {
  return p->has_flows ? &p->own_flows : NULL;
}

int loom__pipe_end(loom__pipe *p, const loom_trace *t) {
  int rc = 0;
  if (t) rc = hand_over(p, t);
  pthread_mutex_lock(&p->mu);
  if (!t) p->failed = 1; /* what was not delivered is dropped */
  p->done = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->th, NULL);
  if (p->failed || p->oom) rc = -1;
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  for (int i = 0; i < 2; i++) batch_free(&p->b[i]);
  loom_trace_free(p->mirror);
  free(p);
  return rc;
}
