/*
 * messages.c - point-to-point messages of a merged trace as flows.
 *
 * A sending call carries "dst" and "tag", a call or completion record that
 * received carries "src" and "recv_tag" (docs/multirank.md); both carry
 * "comm".  Messages between one pair on one communicator with one tag do
 * not overtake each other, so the k-th send matches the k-th receive of the
 * same (source, destination, communicator, tag), in time order.  A
 * completion instant stands for the wait call around it: the flow ends on
 * that call's slice.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "merge/merge.h"

typedef struct msg_end {
  int64_t src, dst, tag;
  uint64_t comm;
  int64_t ts;
  uint32_t ev;
  int recv;
} msg_end;

static int cmp_end(const void *pa, const void *pb) {
  const msg_end *a = pa, *b = pb;
#define CMP(f) if (a->f != b->f) return a->f < b->f ? -1 : 1
  CMP(src); CMP(dst); CMP(comm); CMP(tag); CMP(recv); CMP(ts); CMP(ev);
#undef CMP
  return 0;
}

static int get_int(const loom_trace *t, const loom__ev *e, uint32_t key, int64_t *v) {
  const loom__targ *a = loom__ev_arg(t, e, key);
  if (!a || (a->type != LOOM_ARG_INT && a->type != LOOM_ARG_UINT)) return 0;
  *v = a->v.i;
  return 1;
}

/* The slice on e's track that encloses instant i (the completing call). */
static uint32_t enclosing(const loom_trace *t, size_t i) {
  const loom__ev *e = &t->ev[i];
  for (size_t j = i, steps = 0; j-- > 0 && steps < 65536; steps++) {
    const loom__ev *p = &t->ev[j];
    if (p->track == e->track && p->ph == LOOM__PH_COMPLETE && p->ts <= e->ts && p->ts + p->dur >= e->ts)
      return (uint32_t)j;
  }
  return (uint32_t)i;
}

int loom__merge_messages(loom_trace *t, const loom__map *rank_of_pid, uint64_t first_flow_id,
                         uint64_t *matched, uint64_t *unmatched) {
  *matched = *unmatched = 0;
  uint32_t k_dst = loom__strtab_find(&t->strs, "dst", 3), k_tag = loom__strtab_find(&t->strs, "tag", 3);
  uint32_t k_src = loom__strtab_find(&t->strs, "src", 3);
  uint32_t k_rtag = loom__strtab_find(&t->strs, "recv_tag", 8);
  uint32_t k_comm = loom__strtab_find(&t->strs, "comm", 4);
  if (!k_comm || !((k_dst && k_tag) || (k_src && k_rtag))) return 0;
  msg_end *v = NULL;
  size_t n = 0, cap = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    int64_t a, b, comm;
    if (!e->nargs || !get_int(t, e, k_comm, &comm)) continue;
    uint64_t *r = loom__map_get(rank_of_pid, LOOM__PID_KEY(t->tracks[e->track].pid));
    if (!r) continue;
    int64_t me = (int64_t)*r;
    if (get_int(t, e, k_dst, &a) && get_int(t, e, k_tag, &b)) {
      msg_end m = {me, a, b, (uint64_t)comm, e->ts, (uint32_t)i, 0};
      if (LOOM__PUSH(v, n, cap, m)) goto oom;
    }
    if (get_int(t, e, k_src, &a) && get_int(t, e, k_rtag, &b)) {
      uint32_t to = e->ph == LOOM__PH_INSTANT ? enclosing(t, i) : (uint32_t)i;
      msg_end m = {a, me, b, (uint64_t)comm, e->ts + e->dur, to, 1};
      if (LOOM__PUSH(v, n, cap, m)) goto oom;
    }
  }
  qsort(v, n, sizeof *v, cmp_end);
  for (size_t g = 0; g < n;) {
    size_t s = g, r, end;
    for (end = g; end < n && v[end].src == v[g].src && v[end].dst == v[g].dst &&
                  v[end].comm == v[g].comm && v[end].tag == v[g].tag;
         end++) {}
    for (r = g; r < end && !v[r].recv; r++) {}
    size_t nsend = r - s, nrecv = end - r, k = nsend < nrecv ? nsend : nrecv;
    for (size_t i = 0; i < k; i++) {
      loom__flow f = {v[s + i].ev, v[r + i].ev, first_flow_id + *matched};
      if (LOOM__PUSH(t->flows, t->nflows, t->cap_flows, f)) goto oom;
      ++*matched;
    }
    *unmatched += nsend + nrecv - 2 * k;
    g = end;
  }
  free(v);
  return 0;
oom:
  free(v);
  return -1;
}
