/*
 * table_text.c - the text rendering of the report model (table.h): a table
 * is its title, a header and aligned columns (names left, figures right),
 * its child rows indented below their parent, then its notes; a record is
 * one "name  value" line per figure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "table.h"

#define MAXV 40   /* columns shown */
#define MAXW 60   /* widest column, in characters */

/* The columns a renderer shows, and for a child table the matching column
 * of each (by title; -1: none). */
typedef struct view {
  size_t n, col[MAXV];
  size_t name;         /* the column a child row indents: the first of text */
  long sub[MAXV];
} view;

static int visible(const loom__col *c, int hide) {
  return !(c->flags & hide) && c->type != LOOM__COL_INTS;
}

static void view_of(const loom__table *t, int hide, view *v) {
  v->n = 0;
  for (size_t c = 0; c < t->ncols && v->n < MAXV; c++)
    if (visible(&t->cols[c], hide)) v->col[v->n++] = c;
  v->name = 0;
  while (v->name < v->n && t->cols[v->col[v->name]].type != LOOM__COL_STR) v->name++;
  for (size_t j = 0; j < v->n; j++) {
    v->sub[j] = -1;
    for (size_t c = 0; t->child && c < t->child->ncols; c++)
      if (!strcmp(t->child->cols[c].title, t->cols[v->col[j]].title)) v->sub[j] = (long)c;
  }
}

/* Cell j of a row (child: a row of t->child, its first column indented). */
static const char *row_cell(const loom__table *t, const view *v, size_t row, int child, size_t j,
                            char *buf, size_t cap) {
  if (!child)
    return loom__cell_text(&t->cols[v->col[j]], loom__table_at(t, row, v->col[j]), buf, cap);
  if (v->sub[j] < 0) return "";
  const loom__table *c = t->child;
  char tmp[128];
  const char *s = loom__cell_text(&c->cols[v->sub[j]], loom__table_at(c, row, (size_t)v->sub[j]),
                                  tmp, sizeof tmp);
  snprintf(buf, cap, "%s%s", j == v->name ? "  " : "", s);
  return buf;
}

/* The cells of the lines shown, each formatted once, in print order (each
 * row, then its child rows). */
typedef struct grid {
  loom__out m;  /* the strings, each ended by a NUL */
  size_t *off;  /* [line * view.n + j] */
  size_t lines;
} grid;

static void grid_line(grid *g, const loom__table *t, const view *v, size_t row, int child,
                      size_t cap) {
  char buf[160];
  if (g->lines >= cap) return;
  for (size_t j = 0; j < v->n; j++) {
    const char *s = row_cell(t, v, row, child, j, buf, sizeof buf);
    g->off[g->lines * v->n + j] = g->m.len;
    loom__out_mem(&g->m, s, strlen(s) + 1);
  }
  g->lines++;
}

static int grid_of(const loom__table *t, const view *v, size_t rows, grid *g) {
  size_t cap = rows;
  for (size_t k = 0; t->child && k < t->child->nparent; k++) cap += t->child->parent[k] < rows;
  memset(g, 0, sizeof *g);
  if (loom__out_mem_init(&g->m) || !(g->off = malloc((cap * v->n + 1) * sizeof *g->off))) return -1;
  for (size_t r = 0; r < rows; r++) {
    grid_line(g, t, v, r, 0, cap);
    for (size_t k = 0; t->child && k < t->child->nparent; k++)
      if (t->child->parent[k] == r) grid_line(g, t, v, k, 1, cap);
  }
  return g->m.failed ? -1 : 0;
}

static const char *grid_at(const grid *g, const view *v, size_t line, size_t j) {
  return g->m.buf + g->off[line * v->n + j];
}

static void cells_out(const loom__table *t, const view *v, const size_t *w, const char *const *s,
                      loom__out *o) {
  loom__out_lit(o, " ");
  for (size_t j = 0; j < v->n; j++) {
    int n = (int)w[j];
    if (t->cols[v->col[j]].type != LOOM__COL_STR) loom__outf(o, " %*s", n, s[j]);
    else if (strlen(s[j]) > w[j])
      loom__outf(o, " %.*s...", n - 3, s[j]); /* long names end in "..." */
    else loom__outf(o, " %-*s", n, s[j]);
  }
  loom__out_lit(o, "\n");
}

static void widen_to(size_t *w, const char *s, size_t max) {
  size_t n = strlen(s);
  if (n > *w) *w = n > max ? max : n;
}

void loom__table_text(const loom__table *t, loom__out *o, size_t rows) {
  view v;
  grid g;
  size_t w[MAXV];
  char head[MAXV][96];
  const char *s[MAXV];
  view_of(t, LOOM__CF_NOTEXT, &v);
  if (grid_of(t, &v, rows, &g)) {
    o->failed = ENOMEM;
  } else {
    for (size_t j = 0; j < v.n; j++) {
      w[j] = 0;
      widen_to(&w[j], s[j] = loom__col_header(&t->cols[v.col[j]], head[j], sizeof head[j]), MAXW);
      for (size_t l = 0; l < g.lines; l++) widen_to(&w[j], grid_at(&g, &v, l, j), MAXW);
    }
    loom__outf(o, "\n%s", t->title);
    if (rows < loom__table_count(t) && !(t->flags & LOOM__TF_OWN_COUNT))
      loom__outf(o, " (top %zu of %zu)", rows, loom__table_count(t));
    loom__out_lit(o, "\n");
    cells_out(t, &v, w, s, o);
    for (size_t l = 0; l < g.lines; l++) {
      for (size_t j = 0; j < v.n; j++) s[j] = grid_at(&g, &v, l, j);
      cells_out(t, &v, w, s, o);
    }
    for (size_t i = 0; i < t->nnotes; i++) loom__outf(o, "  %s\n", t->notes[i]);
  }
  free(g.m.buf);
  free(g.off);
}

/* A record: "title" then one aligned "name  value" line per figure. */
static void record_text(const loom__table *t, loom__out *o) {
  view v;
  size_t w = 0;
  char buf[160], val[160];
  view_of(t, LOOM__CF_NOTEXT, &v);
  for (size_t j = 0; j < v.n; j++)
    widen_to(&w, loom__col_header(&t->cols[v.col[j]], buf, sizeof buf), 100);
  loom__outf(o, "\n%s\n", t->title);
  for (size_t j = 0; j < v.n && loom__table_rows(t); j++)
    loom__outf(
        o, "  %-*s  %s\n", (int)w, loom__col_header(&t->cols[v.col[j]], buf, sizeof buf),
        loom__cell_text(&t->cols[v.col[j]], loom__table_at(t, 0, v.col[j]), val, sizeof val));
  for (size_t i = 0; i < t->nnotes; i++) loom__outf(o, "  %s\n", t->notes[i]);
}

void loom__model_text(const loom__model *m, loom__out *o) {
  if (m->title[0]) loom__outf(o, "%s\n", m->title);
  for (size_t i = 0; i < m->n; i++) {
    const loom__table *t = m->t[i];
    if (t->flags & LOOM__TF_NOTEXT) continue;
    if (!loom__table_rows(t)) continue;
    if (t->flags & LOOM__TF_RECORD) record_text(t, o);
    else loom__table_text(t, o, loom__table_shown(m, t, 1));
  }
}
