/*
 * messages.c - point-to-point messages of a merge as flows, matched while
 * the merged events stream by in time order.
 *
 * A sending call carries "dst" and "tag", a call or completion record that
 * received carries "src" and "recv_tag" (docs/multirank.md); both carry
 * "comm".  Messages between one pair on one communicator with one tag do
 * not overtake each other, so the k-th send matches the k-th receive of the
 * same (source, destination, communicator, tag), in time order: per key a
 * FIFO holds the ends still waiting for their partner, nothing else is
 * kept.  A completion instant stands for the wait call around it: the flow
 * ends on that call's slice, found on a stack of the slices still open on
 * each track.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "merge/merge.h"
#include "util/util.h"

typedef struct end_ {
  int64_t ts, dur;
  uint32_t track, cat; /* cat: the call's category (the flow's is "<cat>_message") */
} end_;

typedef struct key_ {
  int64_t src, dst, tag, comm;
  int recv;        /* what the queue holds: 0 sends, 1 receives */
  end_ *q;
  size_t head, n, cap;
} key_;

typedef struct open_ {
  int64_t ts, end;
} open_;

typedef struct stack_ {
  open_ *v;
  size_t n, cap;
} stack_;

struct loom__match {
  uint32_t k_dst, k_tag, k_src, k_rtag, k_comm;
  const int64_t *rank_of_track;
  size_t ntracks;
  stack_ *open;     /* per output track */
  loom__map key_of; /* hash -> index + 1 */
  key_ *keys;
  size_t nkeys, cap_keys;
  uint64_t next_id, matched;
  uint64_t backwards; /* receives that ended before their send began */
  int64_t worst;      /* by how much, at most */
};

loom__match *loom__match_new(const loom_trace *out, const int64_t *rank_of_track, uint64_t first_id,
                           int *err) {
  *err = 0;
  uint32_t k_dst = loom__strtab_find(&out->strs, "dst", 3),
           k_tag = loom__strtab_find(&out->strs, "tag", 3);
  uint32_t k_src = loom__strtab_find(&out->strs, "src", 3);
  uint32_t k_rtag = loom__strtab_find(&out->strs, "recv_tag", 8);
  uint32_t k_comm = loom__strtab_find(&out->strs, "comm", 4);
  if (!k_comm || !((k_dst && k_tag) || (k_src && k_rtag))) return NULL;
  loom__match *m = calloc(1, sizeof *m);
  if (m) m->open = calloc(out->ntracks + 1, sizeof *m->open);
  if (!m || !m->open) {
    free(m);
    *err = 1;
    return NULL;
  }
  m->k_dst = k_dst, m->k_tag = k_tag, m->k_src = k_src, m->k_rtag = k_rtag, m->k_comm = k_comm;
  m->rank_of_track = rank_of_track;
  m->ntracks = out->ntracks;
  m->next_id = first_id;
  return m;
}

static int get_int(const loom__ev *e, const loom__targ *args, uint32_t key, int64_t *v) {
  const loom__targ *a = loom__arg_of(e, args, key);
  if (!a || (a->type != LOOM_ARG_INT && a->type != LOOM_ARG_UINT)) return 0;
  *v = a->v.i;
  return 1;
}

static key_ *key_for(loom__match *m, int64_t src, int64_t dst, int64_t comm, int64_t tag) {
  uint64_t h = loom__hash_u64((uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)dst << 21 ^
                              (uint64_t)comm * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)tag);
  for (;; h = loom__hash_u64(h + 1)) {
    uint64_t hk = h | 1; /* the map reserves 0 */
    uint64_t *i = loom__map_get(&m->key_of, hk);
    if (!i) {
      key_ k = {src, dst, tag, comm, 0, NULL, 0, 0, 0};
      if (LOOM__PUSH(m->keys, m->nkeys, m->cap_keys, k) || loom__map_put(&m->key_of, hk, m->nkeys))
        return NULL;
      return &m->keys[m->nkeys - 1];
    }
    key_ *k = &m->keys[*i - 1];
    if (k->src == src && k->dst == dst && k->comm == comm && k->tag == tag) return k;
  }
}

/* One end arrives: matched with the oldest waiting end of the other kind,
 * or queued. */
static int arrive(loom__match *m, key_ *k, int recv, end_ x, loom__jstream *w) {
  if (k->n > k->head && k->recv != recv) {
    end_ o = k->q[k->head++];
    if (k->head == k->n) k->head = k->n = 0;
    const end_ *s = recv ? &o : &x, *r = recv ? &x : &o;
    loom__jstream_message(w, m->next_id++, s->cat, s->track, s->ts, r->track, r->ts, r->dur);
    m->matched++;
    if (r->ts + r->dur < s->ts) { /* only clocks that disagree can put it there */
      m->backwards++;
      if (s->ts - (r->ts + r->dur) > m->worst) m->worst = s->ts - (r->ts + r->dur);
    }
    return 0;
  }
  if (k->head == k->n) k->head = k->n = 0;
  if (k->head > 1024 && k->head * 2 > k->n) { /* drop what was consumed */
    memmove(k->q, k->q + k->head, (k->n - k->head) * sizeof *k->q);
    k->n -= k->head;
    k->head = 0;
  }
  k->recv = recv;
  return LOOM__PUSH(k->q, k->n, k->cap, x);
}

/* The innermost slice still open on the track at ts; pops the ended ones. */
static const open_ *enclosing(stack_ *st, int64_t ts) {
  while (st->n && st->v[st->n - 1].end < ts) st->n--;
  return st->n ? &st->v[st->n - 1] : NULL;
}

int loom__match_event(loom__match *m, const loom__ev *e, const loom__targ *args, loom__jstream *w) {
  if (e->track >= m->ntracks) return 0;
  stack_ *st = &m->open[e->track];
  if (e->ph == LOOM__PH_COMPLETE) {
    enclosing(st, e->ts);
    open_ o = {e->ts, e->ts + e->dur};
    if (LOOM__PUSH(st->v, st->n, st->cap, o)) return -1;
  }
  int64_t a, b, comm, me = m->rank_of_track[e->track];
  if (!e->nargs || me < 0 || !get_int(e, args, m->k_comm, &comm)) return 0;
  if (get_int(e, args, m->k_dst, &a) && get_int(e, args, m->k_tag, &b)) {
    key_ *k = key_for(m, me, a, comm, b);
    if (!k || arrive(m, k, 0, (end_){e->ts, e->dur, e->track, e->cat}, w)) return -1;
  }
  if (get_int(e, args, m->k_src, &a) && get_int(e, args, m->k_rtag, &b)) {
    end_ x = {e->ts, e->dur, e->track, e->cat};
    if (e->ph == LOOM__PH_INSTANT) {
      const open_ *o = enclosing(st, e->ts);
      if (o) x.ts = o->ts, x.dur = o->end - o->ts;
    }
    key_ *k = key_for(m, a, me, comm, b);
    if (!k || arrive(m, k, 1, x, w)) return -1;
  }
  return 0;
}

void loom__match_backwards(const loom__match *m, uint64_t *n, int64_t *worst) {
  *n = m ? m->backwards : 0;
  *worst = m ? m->worst : 0;
}

void loom__match_free(loom__match *m, uint64_t *matched, uint64_t *unmatched) {
  *matched = *unmatched = 0;
  if (!m) return;
  *matched = m->matched;
  for (size_t i = 0; i < m->nkeys; i++) {
    *unmatched += m->keys[i].n - m->keys[i].head;
    free(m->keys[i].q);
  }
  for (size_t i = 0; i < m->ntracks; i++) free(m->open[i].v);
  free(m->open);
  free(m->keys);
  loom__map_free(&m->key_of);
  free(m);
}
