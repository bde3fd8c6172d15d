/*
 * waits.c - Scalasca's wait states over the events ranks.c kept
 * (../shared/docs/multirank.md has the definitions; docs/report.md the
 * user's version):
 *  - collectives are matched across ranks by (comm, seq);
 *    Wait at Barrier / Wait at N x N: max(0, min(latest enter, my leave) -
 *    my enter); Late Broadcast (1-to-N, non-root): max(0, min(root's enter,
 *    my leave) - my enter); Early Reduce (N-to-1, the root): max(0,
 *    min(first non-root enter, my leave) - my enter);
 *  - messages are matched FIFO per (src, dst, comm, tag), sends in the order
 *    they were entered, receives in the order they were posted (a Recv's
 *    enter, an Irecv's enter for the wait that completed it);
 *    Late Sender: min(send enter, receive leave) - receive enter, >= 0, the
 *    receive's enter being the wait's for a nonblocking one; where one wait
 *    completes several receives only the latest sender counts;
 *    Late Receiver (blocking sends only): the receive was posted while the
 *    send was in progress: post - send enter.
 * Every wait is also charged, as caused, to the rank that was late: the
 * last to enter a barrier or N x N, the root of a broadcast, the first
 * sender of a reduce, the sender or the receiver of a message.
 */
#include <stdlib.h>
#include <string.h>

#include "ranks.h"

/* ---- bookkeeping ---------------------------------------------------------- */
/* Index in steps of rank r's step whose range holds t, or -1.  Steps of a
 * rank are the LOOM__RK_STEP events, sorted by (rank, ts) in k->ev's front
 * (loom__ranks_finish puts them there). */
typedef struct stepidx {
  const loom__rkev *ev;
  size_t *first, *count; /* per rank */
} stepidx;
static _Thread_local stepidx SI;

static int32_t step_at(const loom__ranks *k, int32_t r, int64_t t) {
  const loom__rkev *s = SI.ev + SI.first[r];
  size_t lo = 0, hi = SI.count[r];
  while (lo < hi) { /* last step starting at or before t */
    size_t mid = (lo + hi) / 2;
    if (s[mid].ts <= t) lo = mid + 1;
    else hi = mid;
  }
  if (!lo || t >= s[lo - 1].end) return -1;
  int64_t no = s[lo - 1].step;
  for (size_t i = 0; i < k->nsteps; i++)
    if (k->step_no[i] == no) return (int32_t)i;
  return -1;
}

static void site_add(loom__ranks *k, int state, uint32_t name, int64_t ns) {
  for (size_t i = 0; i < k->nsites; i++)
    if (k->sites[i].state == state && k->sites[i].name == name) {
      k->sites[i].total += ns;
      k->sites[i].calls++;
      return;
    }
  loom__rsite s = {(uint8_t)state, name, ns, 1};
  if (LOOM__PUSH(k->sites, k->nsites, k->cap_sites, s)) k->oom = 1;
}

/* rank r waited ns in state from time t (its call's enter) on, because of
 * rank by: kept until every wait is known (account() below). */
static void waited(loom__ranks *k, int state, int32_t r, int64_t t, uint32_t name, int64_t ns,
                   int32_t by) {
  if (ns <= 0) return;
  loom__rwait w = {t, t + ns, r, by, step_at(k, r, t), name, (uint8_t)state};
  if (LOOM__PUSH(k->waits, k->nwaits, k->cap_waits, w)) k->oom = 1;
}

/* ---- collectives ---------------------------------------------------------- */
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static _Thread_local const loom__ranks *SORT_K;

static int cmp_coll(const void *pa, const void *pb) {
  const loom__rkev *a = &SORT_K->ev[*(const size_t *)pa], *b = &SORT_K->ev[*(const size_t *)pb];
  if (a->a_comm != b->a_comm) return a->a_comm < b->a_comm ? -1 : 1;
  if (a->a_seq != b->a_seq) return a->a_seq < b->a_seq ? -1 : 1;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* One instance: members m[0..n). */
static void coll_instance(loom__ranks *k, const size_t *m, size_t n) {
  const loom__rkev *e0 = &k->ev[m[0]];
  int state = e0->pattern;
  k->coll_instances++;
  if (state < 0 || n < 2) return;
  if (state == LOOM__W_BARRIER || state == LOOM__W_NXN) {
    size_t last = 0;
    for (size_t i = 1; i < n; i++)
      if (k->ev[m[i]].ts > k->ev[m[last]].ts) last = i;
    int64_t latest = k->ev[m[last]].ts;
    for (size_t i = 0; i < n; i++) {
      const loom__rkev *e = &k->ev[m[i]];
      waited(k, state, e->rank, e->ts, e->name, min64(latest, e->end) - e->ts, k->ev[m[last]].rank);
    }
    return;
  }
  size_t root = n, first = n; /* first: the earliest non-root */
  for (size_t i = 0; i < n; i++)
    if (e0->a_root != LOOM__RK_NONE && k->rank_id[k->ev[m[i]].rank] == e0->a_root) root = i;
  if (root == n) return; /* root unknown or not in the traces */
  for (size_t i = 0; i < n; i++)
    if (i != root && (first == n || k->ev[m[i]].ts < k->ev[m[first]].ts)) first = i;
  const loom__rkev *R = &k->ev[m[root]], *F = &k->ev[m[first]];
  if (state == LOOM__W_LATE_BCAST) {
    for (size_t i = 0; i < n; i++) {
      const loom__rkev *e = &k->ev[m[i]];
      if (i != root)
        waited(k, state, e->rank, e->ts, e->name, min64(R->ts, e->end) - e->ts, R->rank);
    }
  } else {
    waited(k, state, R->rank, R->ts, R->name, min64(F->ts, R->end) - R->ts, F->rank);
  }
}

static int collectives(loom__ranks *k) {
  size_t n = 0, *ix = malloc((k->nev + 1) * sizeof *ix);
  if (!ix) return -1;
  for (size_t i = 0; i < k->nev; i++)
    if (k->ev[i].type == LOOM__RK_COLL) ix[n++] = i;
  SORT_K = k;
  qsort(ix, n, sizeof *ix, cmp_coll);
  for (size_t i = 0, j; i < n; i = j) {
    const loom__rkev *a = &k->ev[ix[i]];
    for (j = i + 1; j < n && k->ev[ix[j]].a_comm == a->a_comm && k->ev[ix[j]].a_seq == a->a_seq;
         j++) {}
    coll_instance(k, ix + i, j - i);
  }
  free(ix);
  return 0;
}

/* ---- messages --------------------------------------------------------------- */
typedef struct msg {
  int64_t src, dst, comm, tag; /* world ranks */
  int64_t order;               /* send: enter; receive: post */
  int64_t enter, leave;        /* the call that waited */
  size_t ev;
  uint32_t name;               /* the waiting call's name */
  int64_t wait;                /* receives: Late Sender before the Waitall rule */
  int32_t by;                  /* receives: the sender's rank index, -1 */
  int tested;                  /* completed by a call that does not wait (a test) */
} msg;

static int cmp_msg(const void *pa, const void *pb) {
  const msg *a = pa, *b = pb;
  const int64_t x[5] = {a->src, a->dst, a->comm, a->tag, a->order},
                y[5] = {b->src, b->dst, b->comm, b->tag, b->order};
  for (int i = 0; i < 5; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return a->ev < b->ev ? -1 : a->ev > b->ev;
}

static int same_key(const msg *a, const msg *b) {
  return a->src == b->src && a->dst == b->dst && a->comm == b->comm && a->tag == b->tag;
}

/* The call of rank r that ended at t (a completion instant is written at
 * its completing call's end): among the calls started at or before t (ix
 * sorted by (rank, ts)), the latest one still running at t, 1 us of
 * rounding allowed; NULL when none of the last 16 is. */
static const loom__rkev *call_ending_at(const loom__ranks *k, const size_t *ix, size_t n, int32_t r,
                                        int64_t t) {
  size_t lo = 0, hi = n;
  while (lo < hi) { /* first call after (r, t) */
    size_t mid = (lo + hi) / 2;
    const loom__rkev *e = &k->ev[ix[mid]];
    if (e->rank < r || (e->rank == r && e->ts <= t)) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo, seen = 0; i-- > 0 && seen < 16; seen++) {
    const loom__rkev *e = &k->ev[ix[i]];
    if (e->rank != r) break;
    if (e->end + 1000 >= t && e->end - 1000 <= t) return e;
  }
  return NULL;
}

static int cmp_rank_ts(const void *pa, const void *pb) {
  const loom__rkev *a = &SORT_K->ev[*(const size_t *)pa], *b = &SORT_K->ev[*(const size_t *)pb];
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return *(const size_t *)pa < *(const size_t *)pb ? -1 : 1;
}

static int cmp_req(const void *pa, const void *pb) {
  const loom__rkev *a = &SORT_K->ev[*(const size_t *)pa], *b = &SORT_K->ev[*(const size_t *)pb];
  const int64_t x[3] = {a->rank, a->a_req, a->ts}, y[3] = {b->rank, b->a_req, b->ts};
  for (int i = 0; i < 3; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

/* Start of the latest Irecv of (rank, request) at or before t, else dflt;
 * irecv is sorted by (rank, request, ts). */
static int64_t posted_at(const loom__ranks *k, const size_t *irecv, size_t n,
                         const loom__rkev *done, int64_t dflt) {
  size_t lo = 0, hi = n;
  while (lo < hi) { /* first entry after (rank, req, t) */
    size_t mid = (lo + hi) / 2;
    const loom__rkev *p = &k->ev[irecv[mid]];
    int before = p->rank < done->rank || (p->rank == done->rank && (p->a_req < done->a_req ||
                 (p->a_req == done->a_req && p->ts <= done->ts)));
    if (before) lo = mid + 1;
    else hi = mid;
  }
  if (!lo) return dflt;
  const loom__rkev *p = &k->ev[irecv[lo - 1]];
  return p->rank == done->rank && p->a_req == done->a_req ? p->ts : dflt;
}

/* Receives: a Recv is its own call; a completion's call is the wait that
 * ended where it is (its enter on the aligned timeline: a merge moves
 * events, not the wait_start_ns argument, which is the fallback), posted at
 * the latest Irecv of its request. */
static size_t receives(loom__ranks *k, msg *out, const size_t *calls, size_t ncalls,
                       const size_t *irecv, size_t nirecv) {
  size_t n = 0;
  for (size_t i = 0; i < k->nev; i++) {
    const loom__rkev *e = &k->ev[i];
    if (e->type != LOOM__RK_RECV && e->type != LOOM__RK_DONE) continue;
    msg m = {e->a_peer, k->rank_id[e->rank],
             e->a_comm, e->a_tag,
             e->ts,     e->ts,
             e->end,    i,
             e->name,   0,
             -1,        0};
    if (e->type == LOOM__RK_DONE) {
      const loom__rkev *w = call_ending_at(k, calls, ncalls, e->rank, e->ts);
      m.enter = w ? w->ts : e->a_wait != LOOM__RK_NONE ? e->a_wait : e->ts;
      m.leave = e->ts;
      if (w) m.name = w->name, m.tested = !w->blocking;
      m.order = posted_at(k, irecv, nirecv, e, m.enter);
    }
    out[n++] = m;
  }
  return n;
}

static size_t sends(const loom__ranks *k, msg *out) {
  size_t n = 0;
  for (size_t i = 0; i < k->nev; i++) {
    const loom__rkev *e = &k->ev[i];
    if (e->type != LOOM__RK_SEND) continue;
    msg m = {k->rank_id[e->rank],
             e->a_peer,
             e->a_comm,
             e->a_tag,
             e->ts,
             e->ts,
             e->end,
             i,
             e->name,
             0,
             -1,
             0};
    out[n++] = m;
  }
  return n;
}

static int32_t rank_of_id(const loom__ranks *k, int64_t id) {
  for (size_t i = 0; i < k->nranks; i++)
    if (k->rank_id[i] == id) return (int32_t)i;
  return -1;
}

static int cmp_wait(const void *pa, const void *pb) {
  const msg *a = pa, *b = pb;
  const int64_t x[4] = {a->dst, a->enter, a->leave, -a->wait},
                y[4] = {b->dst, b->enter, b->leave, -b->wait};
  for (int i = 0; i < 4; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return a->ev < b->ev ? -1 : a->ev > b->ev;
}

/* Late Sender; where one wait completes several receives (same rank, same
 * enter and leave) only the latest sender counts: the largest wait.  A test
 * call that completed a receive did not wait for it (Scalasca leaves tests
 * out). */
static void late_senders(loom__ranks *k, msg *rv, size_t n) {
  qsort(rv, n, sizeof *rv, cmp_wait);
  for (size_t i = 0; i < n; i++) {
    const loom__rkev *e = &k->ev[rv[i].ev];
    if (i && e->type == LOOM__RK_DONE && k->ev[rv[i - 1].ev].type == LOOM__RK_DONE &&
        rv[i - 1].dst == rv[i].dst && rv[i - 1].enter == rv[i].enter &&
        rv[i - 1].leave == rv[i].leave)
      continue;
    if (!rv[i].tested)
      waited(k, LOOM__W_LATE_SENDER, e->rank, rv[i].enter, rv[i].name, rv[i].wait, rv[i].by);
  }
}

static int messages(loom__ranks *k, const size_t *calls, size_t ncalls, const size_t *irecv,
                    size_t nirecv) {
  msg *sv = malloc((k->nev + 1) * sizeof *sv), *rv = malloc((k->nev + 1) * sizeof *rv);
  if (!sv || !rv) {
    free(sv), free(rv);
    return -1;
  }
  size_t ns = sends(k, sv), nr = receives(k, rv, calls, ncalls, irecv, nirecv);
  qsort(sv, ns, sizeof *sv, cmp_msg);
  qsort(rv, nr, sizeof *rv, cmp_msg);
  size_t i = 0, j = 0;
  while (i < ns || j < nr) {
    int c = i == ns ? 1 : j == nr ? -1 : same_key(&sv[i], &rv[j]) ? 0 : cmp_msg(&sv[i], &rv[j]);
    if (c < 0) { k->unmatched_sends++; i++; continue; }
    if (c > 0) { k->unmatched_recvs++; j++; continue; }
    const msg *s = &sv[i];
    msg *r = &rv[j];
    k->messages++;
    r->wait = min64(s->enter, r->leave) - r->enter;
    r->by = rank_of_id(k, s->src);
    const loom__rkev *se = &k->ev[s->ev];
    if (se->blocking && r->order > s->enter && r->order < s->leave)
      waited(k, LOOM__W_LATE_RECEIVER, se->rank, s->enter, s->name, r->order - s->enter,
             k->ev[r->ev].rank);
    i++, j++;
  }
  late_senders(k, rv, nr);
  free(sv), free(rv);
  return 0;
}

/* ---- what each wait is charged to ----------------------------------------------
 * A wait at or above the threshold counts: per rank, step, state and call,
 * and as caused by the rank that was late (by).  Below it, it is noise: the
 * time ranks always take to meet, summed apart, charged to nobody.
 * Root cause: while rank A waited for rank B, B may itself have been
 * waiting (a Late Sender on rank C, a collective...): that part of A's wait
 * is C's doing, and so on along the chain until a rank that was not
 * waiting (computing, sleeping: delayed).  So each nanosecond of a wait is
 * charged to the rank at the end of its chain, in the waiter's step. */
typedef struct seg { int64_t t0, t1; int32_t by; } seg;
typedef struct segs {
  seg *v;
  size_t *first, *count; /* per rank: its disjoint waiting segments, in time order */
} segs;

static int cmp_wait_rank(const void *pa, const void *pb) {
  const loom__rwait *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
  return a->t1 < b->t1 ? -1 : a->t1 > b->t1;
}

/* Every counted wait of each rank as disjoint segments (a later wait that
 * overlaps an earlier one keeps only its part after it). */
static int build_segs(const loom__ranks *k, segs *g) {
  size_t n = 0, nw = k->nwaits;
  loom__rwait *w = malloc((nw + 1) * sizeof *w);
  g->v = malloc((nw + 1) * sizeof *g->v);
  g->first = calloc(k->nranks + 1, sizeof *g->first);
  g->count = calloc(k->nranks + 1, sizeof *g->count);
  if (!w || !g->v || !g->first || !g->count) return free(w), -1;
  size_t m = 0;
  for (size_t i = 0; i < nw; i++)
    if (k->waits[i].t1 - k->waits[i].t0 >= k->wait_threshold_ns) w[m++] = k->waits[i];
  qsort(w, m, sizeof *w, cmp_wait_rank);
  for (size_t i = 0; i < m; i++) {
    seg x = {w[i].t0, w[i].t1, w[i].by};
    if (n && g->v[n - 1].t1 > x.t0 && w[i - 1].rank == w[i].rank) {
      if (x.t1 <= g->v[n - 1].t1) continue;
      x.t0 = g->v[n - 1].t1;
    }
    if (!g->count[w[i].rank]++) g->first[w[i].rank] = n;
    g->v[n++] = x;
  }
  free(w);
  return 0;
}

#define BLAME_DEPTH 64 /* a chain longer than this ends where it is */

/* ns of rank who's waiting in step s ends at rank root. */
static void charge(loom__ranks *k, int32_t who, int32_t root, size_t s, int64_t ns) {
  if (ns <= 0) return;
  k->root_ns[(size_t)root * k->nsteps + s] += ns;
  uint64_t key = ((uint64_t)s * k->nranks + (uint64_t)who) * k->nranks + (uint64_t)root + 1;
  uint64_t *v = loom__map_get(&k->waits_for, key);
  if (v) *v += (uint64_t)ns;
  else if (loom__map_put(&k->waits_for, key, (uint64_t)ns)) k->oom = 1;
}

/* [a, b) of rank who's waiting in step s, caused by rank r: r's own where r
 * was not waiting itself, else passed on to whoever r waited for. */
static void blame(loom__ranks *k, const segs *g, int32_t who, int32_t r, int64_t a, int64_t b,
                  size_t s, int depth) {
  const seg *v = g->v + g->first[r];
  size_t lo = 0, hi = g->count[r];
  while (lo < hi) { /* first segment ending after a */
    size_t mid = (lo + hi) / 2;
    if (v[mid].t1 <= a) lo = mid + 1;
    else hi = mid;
  }
  int64_t cur = a;
  for (size_t i = lo; i < g->count[r] && v[i].t0 < b; i++) {
    int64_t x = v[i].t0 > a ? v[i].t0 : a, y = v[i].t1 < b ? v[i].t1 : b;
    charge(k, who, r, s, x - cur);
    if (v[i].by >= 0 && v[i].by != r && depth < BLAME_DEPTH)
      blame(k, g, who, v[i].by, x, y, s, depth + 1);
    else charge(k, who, r, s, y - x);
    cur = y;
  }
  charge(k, who, r, s, b - cur);
}

static int account(loom__ranks *k) {
  for (size_t i = 0; i < k->nwaits; i++) {
    const loom__rwait *w = &k->waits[i];
    int64_t ns = w->t1 - w->t0;
    if (ns < k->wait_threshold_ns) {
      k->noise_ns[w->rank] += ns;
      k->noise_waits++;
      continue;
    }
    k->state_ns[(size_t)w->rank * LOOM__W_COUNT_ + w->state] += ns;
    if (w->step >= 0) {
      k->wait_ns[(size_t)w->rank * k->nsteps + w->step] += ns;
      k->step_state_ns[(size_t)w->step * LOOM__W_COUNT_ + w->state] += ns;
      if (w->by >= 0) k->caused_ns[(size_t)w->by * k->nsteps + w->step] += ns;
    }
    site_add(k, w->state, w->name, ns);
  }
  segs g = {0};
  int rc = build_segs(k, &g);
  for (size_t i = 0; !rc && i < k->nwaits; i++) {
    const loom__rwait *w = &k->waits[i];
    if (w->t1 - w->t0 >= k->wait_threshold_ns && w->step >= 0 && w->by >= 0 && w->by != w->rank)
      blame(k, &g, w->rank, w->by, w->t0, w->t1, (size_t)w->step, 0);
  }
  free(g.v), free(g.first), free(g.count);
  return rc;
}

int loom__ranks_waits(loom__ranks *k) {
  /* Steps first, sorted by (rank, ts), for step_at(). */
  size_t n = k->nev;
  size_t *ix = malloc((n + 1) * sizeof *ix), *calls = malloc((n + 1) * sizeof *calls),
         *irecv = malloc((n + 1) * sizeof *irecv);
  SI.first = calloc(k->nranks + 1, sizeof *SI.first);
  SI.count = calloc(k->nranks + 1, sizeof *SI.count);
  loom__rkev *steps = malloc((n + 1) * sizeof *steps);
  int rc = -1;
  if (!ix || !calls || !irecv || !SI.first || !SI.count || !steps) goto out;
  size_t nst = 0, nc = 0, ni = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t t = k->ev[i].type;
    if (t == LOOM__RK_STEP) ix[nst++] = i;
    else if (t == LOOM__RK_OTHER) calls[nc++] = i;
    else if (t == LOOM__RK_IRECV) irecv[ni++] = i;
  }
  SORT_K = k;
  qsort(ix, nst, sizeof *ix, cmp_rank_ts);
  qsort(calls, nc, sizeof *calls, cmp_rank_ts);
  qsort(irecv, ni, sizeof *irecv, cmp_req);
  for (size_t i = 0; i < nst; i++) {
    steps[i] = k->ev[ix[i]];
    if (!SI.count[steps[i].rank]++) SI.first[steps[i].rank] = i;
  }
  SI.ev = steps;
  /* Communication time: the calls in the rank's steps (setup and teardown
   * are not iterations), or all of them for a rank without steps. */
  for (size_t i = 0; i < nc; i++) {
    const loom__rkev *e = &k->ev[calls[i]];
    if (!SI.count[e->rank] || step_at(k, e->rank, e->ts) >= 0)
      k->comm_ns[e->rank] += e->end - e->ts;
  }
  if (collectives(k) || messages(k, calls, nc, irecv, ni) || k->oom || account(k)) goto out;
  rc = 0;
out:
  free(ix), free(calls), free(irecv), free(steps), free(SI.first), free(SI.count);
  memset(&SI, 0, sizeof SI);
  return rc;
}
