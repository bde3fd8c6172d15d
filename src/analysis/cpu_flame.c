/*
 * cpu_flame.c - the report's flame graph (cpu.h): every sample's stack,
 * merged by function from the outermost frame in, as nodes in depth-first
 * order, children by samples (most first, then by name), each with its
 * place (x: samples before it at its depth) and width (n: samples through
 * it).
 */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

typedef struct node {
  uint32_t fn, parent; /* parent: node + 1, 0 for a root */
  uint32_t depth;
  uint64_t n;
} node;

typedef struct tree {
  node *v;
  size_t n, cap;
  loom__map child_of; /* parent << 32 | fn -> node + 1 */
  loom__map node_of;  /* call site -> node + 1 */
} tree;

static long child(tree *t, uint32_t parent, uint32_t fn) {
  uint64_t k = (uint64_t)parent << 32 | fn;
  uint64_t *at = loom__map_get(&t->child_of, k);
  if (at) return (long)(*at - 1);
  node z = {fn, parent, parent ? t->v[parent - 1].depth + 1 : 1, 0};
  if (LOOM__PUSH(t->v, t->n, t->cap, z) || loom__map_put(&t->child_of, k, t->n)) return -1;
  return (long)t->n - 1;
}

/* The node of call site (index + 1): its unmerged parents first. */
static long node_of(tree *t, const loom__rcpu *c, uint32_t site, uint32_t **todo, size_t *cap) {
  size_t k = 0;
  uint32_t at = site, parent = 0;
  for (; at; at = c->s.sites[at - 1].parent) {
    uint64_t *known = loom__map_get(&t->node_of, at);
    if (known) {
      parent = (uint32_t)*known;
      break;
    }
    if (LOOM__PUSH(*todo, k, *cap, at)) return -1;
  }
  while (k) {
    uint32_t s = (*todo)[--k];
    long nd = child(t, parent, c->frame_fn[c->s.sites[s - 1].frame]);
    if (nd < 0 || loom__map_put(&t->node_of, s, (uint64_t)nd + 1)) return -1;
    parent = (uint32_t)nd + 1;
  }
  return (long)parent - 1;
}

static _Thread_local const tree *cmp_tree;
static _Thread_local const loom__rcpu *cmp_cpu;
static int cmp_node(const void *pa, const void *pb) {
  const node *a = &cmp_tree->v[*(const uint32_t *)pa], *b = &cmp_tree->v[*(const uint32_t *)pb];
  if (a->parent != b->parent) return a->parent < b->parent ? -1 : 1;
  if (a->n != b->n) return a->n > b->n ? -1 : 1;
  return strcmp(loom__strtab_get(&cmp_cpu->s.strs, cmp_cpu->fns[a->fn].label),
                loom__strtab_get(&cmp_cpu->s.strs, cmp_cpu->fns[b->fn].label));
}

/* Depth-first from the roots: ord holds the nodes by parent, first[p] where
 * the children of node p - 1 (p = 0: the roots) begin in it. */
static int layout(loom__rcpu *c, const tree *t, const uint32_t *ord, const size_t *first) {
  typedef struct { size_t at, end; uint64_t x; } frame;
  frame *st = NULL;
  size_t ns = 0, cs = 0;
  frame f0 = {first[0], first[1], 0};
  if (LOOM__PUSH(st, ns, cs, f0)) return -1;
  while (ns) {
    frame *f = &st[ns - 1];
    if (f->at == f->end) {
      ns--;
      continue;
    }
    uint32_t i = ord[f->at++];
    const node *v = &t->v[i];
    loom__cflame o = {v->fn, v->depth, f->x, v->n};
    f->x += v->n;
    frame sub = {first[i + 1], first[i + 2], o.x};
    if (LOOM__PUSH(c->flame, c->nflame, c->cap_flame, o) || LOOM__PUSH(st, ns, cs, sub)) {
      free(st);
      return -1;
    }
  }
  free(st);
  return 0;
}

static int order(loom__rcpu *c, const tree *t) {
  uint32_t *ord = malloc((t->n + 1) * sizeof *ord);
  size_t *first = calloc(t->n + 2, sizeof *first);
  int rc = -1;
  if (ord && first) {
    for (size_t i = 0; i < t->n; i++) ord[i] = (uint32_t)i;
    cmp_tree = t;
    cmp_cpu = c;
    qsort(ord, t->n, sizeof *ord, cmp_node);
    /* first[p] = index in ord of the first node whose parent is >= p */
    for (size_t p = 0, k = 0; p <= t->n + 1; p++) {
      while (k < t->n && t->v[ord[k]].parent < p) k++;
      first[p] = k;
    }
    rc = layout(c, t, ord, first);
  }
  free(ord);
  free(first);
  return rc;
}

int loom__cpu_flame(loom__rcpu *c) {
  tree t = {0};
  uint32_t *todo = NULL;
  size_t cap = 0;
  int rc = 0;
  for (size_t h = 0; rc == 0 && h < c->nhits; h++) {
    const loom__chit *x = &c->hits[h];
    if (x->slot != 0 || !x->site) continue;
    long nd = node_of(&t, c, x->site, &todo, &cap);
    if (nd < 0) rc = -1;
    for (uint32_t at = (uint32_t)nd + 1; rc == 0 && at; at = t.v[at - 1].parent)
      t.v[at - 1].n += x->n;
  }
  if (rc == 0 && t.n) rc = order(c, &t);
  free(todo);
  free(t.v);
  loom__map_free(&t.child_of);
  loom__map_free(&t.node_of);
  return rc;
}
