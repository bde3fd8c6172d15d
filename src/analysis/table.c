/*
 * table.c - one table model, three renderings (table.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "table.h"

loom__table *loom__table_new(const char *key, const char *title, const loom__col *cols, size_t ncols) {
  loom__table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->key = key;
  t->title = strdup(title);
  t->cols = cols;
  t->ncols = ncols;
  if (!t->title) {
    free(t);
    return NULL;
  }
  return t;
}

void loom__table_free(loom__table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->ncells; i++) free(t->cells[i].s);
  for (size_t i = 0; i < t->nnotes; i++) free(t->notes[i]);
  free(t->cells);
  free(t->notes);
  free(t->title);
  free(t);
}

static loom__cell *cell(loom__table *t) {
  loom__cell z;
  memset(&z, 0, sizeof z);
  if (LOOM__PUSH(t->cells, t->ncells, t->cap, z)) {
    t->oom = 1;
    return NULL;
  }
  return &t->cells[t->ncells - 1];
}

void loom__table_str(loom__table *t, const char *s) {
  loom__cell *c = cell(t);
  if (c && !(c->s = strdup(s ? s : ""))) t->oom = 1;
}
void loom__table_int(loom__table *t, int64_t v) {
  loom__cell *c = cell(t);
  if (c) c->i = v, c->d = (double)v;
}
void loom__table_pct(loom__table *t, double v) {
  loom__cell *c = cell(t);
  if (c) c->d = v;
}
void loom__table_num(loom__table *t, double v) {
  loom__cell *c = cell(t);
  if (c) c->d = v;
}
void loom__table_null(loom__table *t) {
  loom__cell *c = cell(t);
  if (c) c->null = 1;
}

void loom__table_note(loom__table *t, const char *fmt, ...) {
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

static size_t shown(const loom__table *t, size_t top) {
  size_t n = loom__table_rows(t);
  return top && top < n ? top : n;
}

/* A cell as text (ms for times), into buf. */
static const char *fmt_cell(const loom__col *c, const loom__cell *v, char *buf, size_t cap) {
  if (v->null) return "-";
  switch (c->type) {
  case LOOM__COL_STR: return v->s;
  case LOOM__COL_NS: snprintf(buf, cap, "%.3f", (double)v->i / 1e6); break;
  case LOOM__COL_PCT: snprintf(buf, cap, "%.2f", v->d); break;
  case LOOM__COL_NUM: snprintf(buf, cap, "%.3f", v->d); break;
  case LOOM__COL_US: snprintf(buf, cap, "%.3f", (double)v->i / 1e3); break;
  default: snprintf(buf, cap, "%lld", (long long)v->i); break;
  }
  return buf;
}

static const char *col_title(const loom__col *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s%s", c->title, c->type == LOOM__COL_NS ? " (ms)" : c->type == LOOM__COL_US ? " (us)" : c->type == LOOM__COL_PCT ? " %" : "");
  return buf;
}

void loom__table_text(const loom__table *t, loom__out *o, size_t top) {
  size_t rows = shown(t, top), w[32];
  char buf[64];
  loom__outf(o, "\n%s", t->title);
  if (rows < loom__table_rows(t)) loom__outf(o, " (top %zu of %zu)", rows, loom__table_rows(t));
  loom__outf(o, "\n");
  for (size_t c = 0; c < t->ncols && c < 32; c++) { /* column widths from the content */
    w[c] = strlen(col_title(&t->cols[c], buf, sizeof buf));
    for (size_t r = 0; r < rows; r++) {
      size_t n = strlen(fmt_cell(&t->cols[c], &t->cells[r * t->ncols + c], buf, sizeof buf));
      if (n > w[c]) w[c] = n > 48 ? 48 : n;
    }
  }
  for (size_t r = 0; r <= rows; r++) {
    loom__outf(o, " ");
    for (size_t c = 0; c < t->ncols && c < 32; c++) {
      const char *s = r ? fmt_cell(&t->cols[c], &t->cells[(r - 1) * t->ncols + c], buf, sizeof buf)
                        : col_title(&t->cols[c], buf, sizeof buf);
      if (t->cols[c].type == LOOM__COL_STR) loom__outf(o, " %-*.*s", (int)w[c], (int)w[c], s);
      else loom__outf(o, " %*s", (int)w[c], s);
    }
    loom__outf(o, "\n");
  }
  for (size_t i = 0; i < t->nnotes; i++) loom__outf(o, "  %s\n", t->notes[i]);
}

static void jstr(loom__out *o, const char *s) { loom__json_str(o, s, strlen(s)); }

/* One value as JSON. */
static void jcell(loom__out *o, const loom__col *c, const loom__cell *v) {
  if (v->null) loom__outf(o, "null");
  else if (c->type == LOOM__COL_STR) jstr(o, v->s);
  else if (c->type == LOOM__COL_PCT) loom__outf(o, "%.2f", isfinite(v->d) ? v->d : 0);
  else if (c->type != LOOM__COL_NUM) loom__outf(o, "%lld", (long long)v->i);
  else if (!isfinite(v->d)) loom__outf(o, "0");
  else if (v->d == (double)(int64_t)v->d && fabs(v->d) < 1e15) loom__outf(o, "%lld", (long long)v->d);
  else loom__outf(o, "%.6f", v->d);
}

void loom__table_json_rows(const loom__table *t, loom__out *o, size_t top) {
  loom__outf(o, "[");
  for (size_t r = 0; r < shown(t, top); r++) {
    loom__outf(o, "%s{", r ? "," : "");
    for (size_t c = 0; c < t->ncols; c++) {
      loom__outf(o, "%s", c ? "," : "");
      jstr(o, t->cols[c].key);
      loom__outf(o, ":");
      jcell(o, &t->cols[c], &t->cells[r * t->ncols + c]);
    }
    loom__outf(o, "}");
  }
  loom__outf(o, "]");
}

void loom__table_json(const loom__table *t, loom__out *o, size_t top) {
  static const char *const tn[] = {"string", "int", "ns", "pct", "number", "ns"};
  loom__outf(o, "{\"title\":");
  jstr(o, t->title);
  loom__outf(o, ",\"columns\":[");
  for (size_t c = 0; c < t->ncols; c++) {
    loom__outf(o, "%s{\"key\":", c ? "," : "");
    jstr(o, t->cols[c].key);
    loom__outf(o, ",\"type\":\"%s\"}", tn[t->cols[c].type]);
  }
  loom__outf(o, "],\"row_count\":%zu,\"rows\":", loom__table_rows(t));
  loom__table_json_rows(t, o, top);
  loom__outf(o, ",\"notes\":[");
  for (size_t i = 0; i < t->nnotes; i++) {
    loom__outf(o, "%s", i ? "," : "");
    jstr(o, t->notes[i]);
  }
  loom__outf(o, "]}");
}

/* Text with &, <, >, " escaped. */
static void hesc(loom__out *o, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': loom__out_lit(o, "&amp;"); break;
    case '<': loom__out_lit(o, "&lt;"); break;
    case '>': loom__out_lit(o, "&gt;"); break;
    case '"': loom__out_lit(o, "&quot;"); break;
    default: loom__out_mem(o, s, 1);
    }
  }
}

void loom__table_html(const loom__table *t, loom__out *o, size_t top) {
  char buf[64];
  loom__outf(o, "<h2>");
  hesc(o, t->title);
  loom__outf(o, "</h2><div class=\"card\"><table><tr>");
  for (size_t c = 0; c < t->ncols; c++) {
    loom__outf(o, "<th%s>", t->cols[c].type == LOOM__COL_STR ? " class=\"n\"" : "");
    hesc(o, col_title(&t->cols[c], buf, sizeof buf));
    loom__outf(o, "</th>");
  }
  loom__outf(o, "</tr>");
  for (size_t r = 0; r < shown(t, top); r++) {
    loom__outf(o, "<tr>");
    for (size_t c = 0; c < t->ncols; c++) {
      loom__outf(o, "<td%s>", t->cols[c].type == LOOM__COL_STR ? " class=\"n\"" : "");
      hesc(o, fmt_cell(&t->cols[c], &t->cells[r * t->ncols + c], buf, sizeof buf));
      loom__outf(o, "</td>");
    }
    loom__outf(o, "</tr>");
  }
  loom__outf(o, "</table>");
  for (size_t i = 0; i < t->nnotes; i++) {
    loom__outf(o, "<p class=\"note\">");
    hesc(o, t->notes[i]);
    loom__outf(o, "</p>");
  }
  loom__outf(o, "</div>");
}
