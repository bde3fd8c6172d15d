/*
 * table_json.c - the JSON rendering of the report model (table.h).  Every
 * table has a place in the document, a dotted path: a list of rows is an
 * array there (tables of the same path are joined row by row into one
 * object per row), a record puts its figures there as keys, a map is an
 * object of column 0 -> column 1, a full table is {title, columns,
 * row_count, rows, notes}.  Dotted column keys nest inside a row.  The
 * writer opens and closes objects as the paths go, so the document needs
 * no code of its own (schema in docs/report.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "table.h"

#define DEPTH 8
#define NAMELEN 64

/* Objects open on the way to the current key. */
typedef struct jw {
  loom__out *o;
  char open[DEPTH][NAMELEN];
  int depth;
  int first[DEPTH + 1];
} jw;

static void js(loom__out *o, const char *s) { loom__json_str(o, s, strlen(s)); }

static void jw_begin(jw *w, loom__out *o) {
  memset(w, 0, sizeof *w);
  w->o = o;
  w->first[0] = 1;
  loom__out_lit(o, "{");
}

static void sep(jw *w) {
  if (!w->first[w->depth]) loom__out_lit(w->o, ",");
  w->first[w->depth] = 0;
}

/* Positions the writer at path ("a.b.c"): closes what it leaves, opens what
 * it enters, and writes the last name and its colon. */
static void jw_key(jw *w, const char *path) {
  char part[DEPTH + 1][NAMELEN];
  int n = 0;
  for (const char *p = path; n <= DEPTH; n++) {
    size_t len = strcspn(p, "."), k = len < NAMELEN ? len : NAMELEN - 1;
    memcpy(part[n], p, k);
    part[n][k] = 0;
    if (!p[len]) {
      n++;
      break;
    }
    p += len + 1;
  }
  int keep = 0;
  while (keep < w->depth && keep < n - 1 && !strcmp(w->open[keep], part[keep])) keep++;
  for (; w->depth > keep; w->depth--) loom__out_lit(w->o, "}");
  for (; w->depth < n - 1 && w->depth < DEPTH; w->depth++) {
    sep(w);
    js(w->o, part[w->depth]);
    loom__out_lit(w->o, ":{");
    memcpy(w->open[w->depth], part[w->depth], NAMELEN);
    w->first[w->depth + 1] = 1;
  }
  sep(w);
  js(w->o, part[n - 1]);
  loom__out_lit(w->o, ":");
}

static void jw_end(jw *w) {
  for (; w->depth > 0; w->depth--) loom__out_lit(w->o, "}");
  loom__out_lit(w->o, "}");
}

static void jnum(loom__out *o, double v, int prec) {
  if (!isfinite(v)) v = 0;
  if (prec) loom__outf(o, "%.*f", prec, v);
  else if (v == (double)(int64_t)v && fabs(v) < 1e15) loom__outf(o, "%lld", (long long)v);
  else loom__outf(o, "%.6f", v);
}

static void jcell(loom__out *o, const loom__col *c, const loom__cell *v) {
  switch (v->kind) {
  case LOOM__CELL_NULL: loom__out_lit(o, "null"); return;
  case LOOM__CELL_STR: js(o, v->s); return;
  case LOOM__CELL_INTS:
    loom__out_lit(o, "[");
    for (size_t i = 0; i < v->nv; i++) loom__outf(o, "%s%lld", i ? "," : "", (long long)v->v[i]);
    loom__out_lit(o, "]");
    return;
  default: break;
  }
  if (c->type == LOOM__COL_BOOL) loom__outf(o, "%s", v->i ? "true" : "false");
  else if (c->type == LOOM__COL_PCT || c->type == LOOM__COL_NUM || v->kind == LOOM__CELL_REAL)
    jnum(o, v->d, c->jprec);
  else loom__outf(o, "%lld", (long long)v->i);
}

static int in_json(const loom__col *c) { return !(c->flags & LOOM__CF_NOJSON); }

/* The figures of row r of t at the writer's keys. */
static void row_keys(jw *w, const loom__table *t, size_t r) {
  for (size_t c = 0; c < t->ncols; c++) {
    if (!in_json(&t->cols[c])) continue;
    jw_key(w, t->cols[c].key);
    jcell(w->o, &t->cols[c], loom__table_at(t, r, c));
  }
}

static void rows_json(const loom__table *const *join, size_t nj, loom__out *o, size_t rows);

/* One row object: the joined tables' figures, then the child rows. */
static void row_json(const loom__table *const *join, size_t nj, loom__out *o, size_t r) {
  jw w;
  jw_begin(&w, o);
  for (size_t j = 0; j < nj; j++) row_keys(&w, join[j], r);
  const loom__table *c = join[0]->child;
  if (c) {
    jw_key(&w, join[0]->child_key);
    loom__out_lit(o, "[");
    for (size_t k = 0, first = 1; k < c->nparent; k++) {
      if (c->parent[k] != r) continue;
      if (!first) loom__out_lit(o, ",");
      row_json(&c, 1, o, k);
      first = 0;
    }
    loom__out_lit(o, "]");
  }
  jw_end(&w);
}

static void rows_json(const loom__table *const *join, size_t nj, loom__out *o, size_t rows) {
  loom__out_lit(o, "[");
  for (size_t r = 0; r < rows; r++) {
    if (r) loom__out_lit(o, ",");
    row_json(join, nj, o, r);
  }
  loom__out_lit(o, "]");
}

void loom__table_json(const loom__table *t, loom__out *o, size_t rows) {
  static const char *const tn[] = {"string", "int", "ns", "pct", "number", "ns", "bool", "ints"};
  loom__out_lit(o, "{\"title\":");
  js(o, t->title);
  loom__out_lit(o, ",\"columns\":[");
  for (size_t c = 0, first = 1; c < t->ncols; c++) {
    if (!in_json(&t->cols[c])) continue;
    loom__outf(o, "%s{\"key\":", first ? "" : ",");
    js(o, t->cols[c].key);
    loom__outf(o, ",\"type\":\"%s\"}", tn[t->cols[c].type]);
    first = 0;
  }
  loom__outf(o, "],\"row_count\":%zu,\"rows\":", loom__table_count(t));
  rows_json(&t, 1, o, rows);
  loom__out_lit(o, ",\"notes\":[");
  for (size_t i = 0; i < t->nnotes; i++) {
    if (i) loom__out_lit(o, ",");
    js(o, t->notes[i]);
  }
  loom__out_lit(o, "]}");
}

static void map_json(const loom__table *t, loom__out *o) {
  loom__out_lit(o, "{");
  for (size_t r = 0; r < loom__table_rows(t) && t->ncols >= 2; r++) {
    if (r) loom__out_lit(o, ",");
    js(o, loom__table_at(t, r, 0)->s ? loom__table_at(t, r, 0)->s : "");
    loom__out_lit(o, ":");
    jcell(o, &t->cols[1], loom__table_at(t, r, 1));
  }
  loom__out_lit(o, "}");
}

static void record_json(jw *w, const loom__table *t) {
  char key[256];
  for (size_t c = 0; c < t->ncols && loom__table_rows(t); c++) {
    if (!in_json(&t->cols[c])) continue;
    snprintf(key, sizeof key, "%s%s%s", t->path, *t->path ? "." : "", t->cols[c].key);
    jw_key(w, key);
    jcell(w->o, &t->cols[c], loom__table_at(t, 0, c));
  }
}

#define KIND_FLAGS (LOOM__TF_RECORD | LOOM__TF_FULL | LOOM__TF_MAP)
/* Tables after i at the same path, listed the same way: joined to it. */
static size_t join_of(const loom__model *m, size_t i, const loom__table **join, size_t cap,
                      char *done) {
  size_t n = 0;
  join[n++] = m->t[i];
  for (size_t k = i + 1; k < m->n && n < cap; k++) {
    const loom__table *t = m->t[k];
    if (done[k] || (t->flags & (KIND_FLAGS | LOOM__TF_NOJSON)) || strcmp(t->path, m->t[i]->path) ||
        loom__table_rows(t) != loom__table_rows(m->t[i]))
      continue;
    join[n++] = t;
    done[k] = 1;
  }
  return n;
}

void loom__model_json(const loom__model *m, loom__out *o) {
  char *done = calloc(m->n + 1, 1);
  jw w;
  jw_begin(&w, o);
  for (size_t i = 0; done && i < m->n; i++) {
    const loom__table *t = m->t[i], *join[16];
    if (done[i] || (t->flags & LOOM__TF_NOJSON)) continue;
    if (t->flags & LOOM__TF_RECORD) {
      record_json(&w, t);
      continue;
    }
    if (t->count_at) {
      jw_key(&w, t->count_at);
      loom__outf(o, "%zu", loom__table_count(t));
    }
    jw_key(&w, t->path);
    if (t->flags & LOOM__TF_MAP) map_json(t, o);
    else if (t->flags & LOOM__TF_FULL) loom__table_json(t, o, loom__table_shown(m, t, 0));
    else rows_json(join, join_of(m, i, join, 16, done), o, loom__table_shown(m, t, 0));
  }
  jw_end(&w);
  loom__out_lit(o, "\n");
  free(done);
}
