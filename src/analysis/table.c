/*
 * table.c - building tables and the report model (table.h); the renderers
 * are table_text.c, table_json.c and table_html.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "table.h"

loom__table *loom__table_new(const char *key, const char *title, const loom__col *cols,
                             size_t ncols) {
  loom__table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->key = key;
  t->title = strdup(title ? title : "");
  t->cols = cols;
  t->ncols = ncols;
  t->path = key;
  if (!t->title) {
    free(t);
    return NULL;
  }
  return t;
}

void loom__table_free(loom__table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->ncells; i++) free(t->cells[i].s), free(t->cells[i].v);
  for (size_t i = 0; i < t->nnotes; i++) free(t->notes[i]);
  loom__table_free(t->child);
  free(t->cells);
  free(t->notes);
  free(t->parent);
  free(t->title);
  free(t);
}

void loom__table_retitle(loom__table *t, const char *fmt, ...) {
  if (!t) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *s = strdup(buf);
  if (!s) {
    t->oom = 1;
    return;
  }
  free(t->title);
  t->title = s;
}

/* Every builder call accepts a NULL table (one that could not be made). */
static loom__cell *cell(loom__table *t, int kind) {
  if (!t) return NULL;
  loom__cell z;
  memset(&z, 0, sizeof z);
  z.kind = kind;
  if (LOOM__PUSH(t->cells, t->ncells, t->cap, z)) {
    t->oom = 1;
    return NULL;
  }
  return &t->cells[t->ncells - 1];
}

void loom__table_str(loom__table *t, const char *s) {
  loom__cell *c = cell(t, LOOM__CELL_STR);
  if (c && !(c->s = strdup(s ? s : ""))) t->oom = 1;
}
void loom__table_int(loom__table *t, int64_t v) {
  loom__cell *c = cell(t, LOOM__CELL_INT);
  if (c) c->i = v, c->d = (double)v;
}
void loom__table_real(loom__table *t, double v) {
  loom__cell *c = cell(t, LOOM__CELL_REAL);
  if (c) c->d = v, c->i = (int64_t)v;
}
void loom__table_pct(loom__table *t, double v) { loom__table_real(t, v); }
void loom__table_num(loom__table *t, double v) { loom__table_real(t, v); }
void loom__table_null(loom__table *t) { cell(t, LOOM__CELL_NULL); }

void loom__table_ints(loom__table *t, const int64_t *v, size_t n) {
  loom__cell *c = cell(t, LOOM__CELL_INTS);
  if (!c) return;
  c->v = malloc((n ? n : 1) * sizeof *v);
  if (!c->v) {
    t->oom = 1;
    return;
  }
  if (n) memcpy(c->v, v, n * sizeof *v);
  c->nv = n;
}

void loom__table_note(loom__table *t, const char *fmt, ...) {
  if (!t) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *s = strdup(buf);
  if (!s || LOOM__PUSH(t->notes, t->nnotes, t->cap_notes, s)) {
    free(s);
    t->oom = 1;
  }
}

size_t loom__table_rows(const loom__table *t) { return t->ncols ? t->ncells / t->ncols : 0; }
size_t loom__table_count(const loom__table *t) { return loom__table_rows(t) + t->more; }

const loom__cell *loom__table_at(const loom__table *t, size_t row, size_t col) {
  return &t->cells[row * t->ncols + col];
}

loom__table *loom__table_child(loom__table *t, const char *key, const loom__col *cols,
                               size_t ncols) {
  if (!t) return NULL;
  if (!(t->child = loom__table_new(key, "", cols, ncols))) t->oom = 1;
  t->child_key = key;
  return t->child;
}

void loom__table_parent(loom__table *child, size_t parent_row) {
  if (child && LOOM__PUSH(child->parent, child->nparent, child->cap_parent, parent_row))
    child->oom = 1;
}

/* ---- the model ------------------------------------------------------------ */
void loom__model_put(loom__model *m, loom__table *t, const char *path, int flags) {
  if (!t || LOOM__PUSH(m->t, m->n, m->cap, t)) {
    loom__table_free(t);
    m->oom = 1;
    return;
  }
  t->path = path;
  t->flags |= flags;
}

loom__table *loom__model_add(loom__model *m, const char *path, const char *title,
                             const loom__col *cols, size_t ncols, int flags) {
  loom__table *t = loom__table_new(path, title, cols, ncols);
  loom__model_put(m, t, path, flags);
  return m->n && m->t[m->n - 1] == t ? t : NULL;
}

void loom__model_free(loom__model *m) {
  for (size_t i = 0; i < m->n; i++) loom__table_free(m->t[i]);
  free(m->t);
  memset(m, 0, sizeof *m);
}

size_t loom__model_limit(const loom__model *m, loom__table *t, size_t n) {
  size_t k = !t || (t->flags & LOOM__TF_ALL) || !m->top || m->top >= n ? n : m->top;
  if (t) t->more = n - k;
  return k;
}

size_t loom__table_shown(const loom__model *m, const loom__table *t, int text) {
  size_t n = loom__table_rows(t);
  if (!(t->flags & LOOM__TF_ALL) && m->top && m->top < n) n = m->top;
  if (text && t->text_max && t->text_max < n) n = t->text_max;
  return n;
}

/* ---- cells as text (the text and HTML forms) ------------------------------- */
const char *loom__cell_text(const loom__col *c, const loom__cell *v, char *buf, size_t cap) {
  int prec = c->prec ? c->prec : c->type == LOOM__COL_PCT ? 2 : 3;
  switch (v->kind) {
  case LOOM__CELL_NULL: return "-";
  case LOOM__CELL_STR: return v->s;
  case LOOM__CELL_INTS: snprintf(buf, cap, "(%zu values)", v->nv); return buf;
  default: break;
  }
  switch (c->type) {
  case LOOM__COL_NS: snprintf(buf, cap, "%.*f", prec, v->d / 1e6); break;
  case LOOM__COL_US: snprintf(buf, cap, "%.*f", prec, v->d / 1e3); break;
  case LOOM__COL_PCT:
  case LOOM__COL_NUM: snprintf(buf, cap, "%.*f", prec, v->d); break;
  case LOOM__COL_BOOL: return v->i ? "yes" : "no";
  default: snprintf(buf, cap, "%lld", (long long)v->i); break;
  }
  return buf;
}

const char *loom__col_header(const loom__col *c, char *buf, size_t cap) {
  const char *unit = c->type == LOOM__COL_NS ? " (ms)" : c->type == LOOM__COL_US ? " (us)"
                     : c->type == LOOM__COL_PCT ? " %" : "";
  snprintf(buf, cap, "%s%s", c->title, unit);
  return buf;
}
