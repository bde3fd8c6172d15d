/*
 * table_html.c - the report model (table.h) as one self-contained HTML
 * page: inline CSS, each table under its title (child rows indented), a
 * record as tiles of figures, and the charts a table asks for
 * (table_chart.c).  No script, no fonts, no network.
 */
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "loom/loom.h"
#include "table.h"

static const char *css =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2433;"
    "background:#f6f7fb}main{max-width:1180px;margin:0 auto;padding:24px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;color:#2b3a67}"
    ".card{background:#fff;border-radius:10px;"
    "box-shadow:0 1px 3px rgba(20,30,60,.12);padding:14px 16px;margin:10px 0;overflow-x:auto}"
    "table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}"
    "th,td{padding:4px 8px;text-align:right;border-bottom:1px solid #e6e9f0;white-space:nowrap}"
    "th{background:#eef1f8;color:#2b3a67;font-weight:600}td.n,th.n{text-align:left;"
    "max-width:520px;overflow:hidden;text-overflow:ellipsis}tr.sub td.n{padding-left:26px}"
    ".kpis{display:flex;flex-wrap:wrap;gap:10px}.kpi{background:#fff;border-radius:10px;"
    "box-shadow:0 1px 3px rgba(20,30,60,.12);padding:10px 14px;min-width:150px}"
    ".kpi b{display:block;font-size:20px;color:#2b3a67}.kpi span{color:#5b6478;font-size:12px}"
    ".legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:10px;"
    "height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}"
    ".note{color:#5b6478;font-size:12px}";

void loom__html_esc(loom__out *o, const char *s, size_t max) {
  size_t n = strnlen(s, max), run = 0;
  for (size_t i = 0; i < n; i++) { /* runs of plain bytes go out at once */
    const char *e = s[i] == '&'   ? "&amp;"
                    : s[i] == '<' ? "&lt;"
                    : s[i] == '>' ? "&gt;"
                    : s[i] == '"' ? "&quot;"
                                  : NULL;
    if (!e) continue;
    loom__out_mem(o, s + run, i - run);
    loom__out_mem(o, e, strlen(e));
    run = i + 1;
  }
  loom__out_mem(o, s + run, n - run);
  if (s[n]) loom__out_lit(o, "&hellip;");
}

static int shown_col(const loom__col *c) {
  return !(c->flags & LOOM__CF_NOHTML) && c->type != LOOM__COL_INTS;
}
static const char *cls(const loom__col *c) {
  return c->type == LOOM__COL_STR ? " class=\"n\"" : "";
}

/* A child row's cell under parent column c: the child column of that title. */
static const loom__cell *sub_cell(const loom__table *ch, const loom__col *c, size_t row,
                                  const loom__col **cc) {
  for (size_t k = 0; k < ch->ncols; k++)
    if (!strcmp(ch->cols[k].title, c->title)) return *cc = &ch->cols[k], loom__table_at(ch, row, k);
  return NULL;
}

static void row_html(const loom__table *t, size_t row, int child, loom__out *o) {
  char buf[160];
  loom__outf(o, "<tr%s>", child ? " class=\"sub\"" : "");
  for (size_t c = 0; c < t->ncols; c++) {
    if (!shown_col(&t->cols[c])) continue;
    const loom__col *col = &t->cols[c];
    const loom__cell *v = child ? sub_cell(t->child, col, row, &col) : loom__table_at(t, row, c);
    loom__outf(o, "<td%s>", cls(&t->cols[c]));
    if (v) loom__html_esc(o, loom__cell_text(col, v, buf, sizeof buf), 400);
    loom__out_lit(o, "</td>");
  }
  loom__out_lit(o, "</tr>");
}

static void notes_html(const loom__table *t, loom__out *o) {
  for (size_t i = 0; i < t->nnotes; i++) {
    loom__out_lit(o, "<p class=\"note\">");
    loom__html_esc(o, t->notes[i], 1000);
    loom__out_lit(o, "</p>");
  }
}

void loom__table_html(const loom__table *t, loom__out *o, size_t rows) {
  char buf[160];
  loom__out_lit(o, "<table><tr>");
  for (size_t c = 0; c < t->ncols; c++) {
    if (!shown_col(&t->cols[c])) continue;
    loom__outf(o, "<th%s>", cls(&t->cols[c]));
    loom__html_esc(o, loom__col_header(&t->cols[c], buf, sizeof buf), 200);
    loom__out_lit(o, "</th>");
  }
  loom__out_lit(o, "</tr>");
  for (size_t r = 0; r < rows; r++) {
    row_html(t, r, 0, o);
    for (size_t k = 0; t->child && k < t->child->nparent; k++)
      if (t->child->parent[k] == r) row_html(t, k, 1, o);
  }
  loom__out_lit(o, "</table>");
}

/* A record: its figures as tiles. */
static void record_html(const loom__table *t, loom__out *o) {
  char buf[160];
  loom__out_lit(o, "<div class=\"kpis\">");
  for (size_t c = 0; c < t->ncols && loom__table_rows(t); c++) {
    if (!shown_col(&t->cols[c])) continue;
    loom__out_lit(o, "<div class=\"kpi\"><b>");
    loom__html_esc(o, loom__cell_text(&t->cols[c], loom__table_at(t, 0, c), buf, sizeof buf), 200);
    loom__out_lit(o, "</b><span>");
    loom__html_esc(o, loom__col_header(&t->cols[c], buf, sizeof buf), 200);
    loom__out_lit(o, "</span></div>");
  }
  loom__out_lit(o, "</div>");
  notes_html(t, o);
}

static void section_html(const loom__model *m, const loom__table *t, loom__out *o) {
  int table = !(t->flags & LOOM__TF_NOHTML);
  if (!table && t->chart == LOOM__CHART_NONE) return;
  if (!loom__table_rows(t)) return;
  loom__out_lit(o, "<h2>");
  loom__html_esc(o, t->title, 400);
  loom__out_lit(o, "</h2>");
  if (t->flags & LOOM__TF_RECORD) {
    record_html(t, o);
    return;
  }
  size_t rows = loom__table_shown(m, t, 0);
  loom__out_lit(o, "<div class=\"card\">");
  loom__table_chart(t, o, rows);
  if (table) loom__table_html(t, o, rows);
  notes_html(t, o);
  loom__out_lit(o, "</div>");
}

void loom__model_html(const loom__model *m, loom__out *o) {
  loom__outf(o, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                "<title>loom report</title><style>%s</style></head><body><main><h1>", css);
  loom__html_esc(o, m->title[0] ? m->title : "loom report", 400);
  loom__out_lit(o, "</h1>");
  for (size_t i = 0; i < m->n; i++) section_html(m, m->t[i], o);
  loom__outf(o, "<p class=\"note\">Written by loom %s.</p></main></body></html>\n",
             loom_version_string());
}
