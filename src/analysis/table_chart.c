/*
 * table_chart.c - the HTML page's charts, drawn from a table's own cells
 * (inline SVG, a tooltip per mark, no script):
 *   BARS      one bar per row (at most 15) of the chart column, labelled by
 *             the first text column: kernels, transfers;
 *   TIMELINE  per row, its two INTS columns (all work, compute) as busy
 *             share per bucket of the chart column's width (ns): devices;
 *   HEAT      columns 0 and 1 are a row and a column key, each chart column
 *             one map, darker = larger: rank x step;
 *   FLAME     a flame graph of CPU samples (table_flame.c);
 *   LEVELS    per row, its two INTS columns as levels per bucket of the chart
 *             column's width (ns), scaled to the row's largest: memory in
 *             use (area) and reserved (line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "table.h"

#define hf loom__outf

static long first_col(const loom__table *t, unsigned mask, int type) {
  for (size_t c = 0; c < t->ncols && c < 32; c++)
    if ((mask >> c & 1) || (!mask && t->cols[c].type == type)) return (long)c;
  return -1;
}

static const char *label(const loom__table *t, size_t r) {
  long c = first_col(t, 0, LOOM__COL_STR);
  return c < 0 ? "" : loom__table_at(t, r, (size_t)c)->s;
}

static void bars(const loom__table *t, loom__out *o, size_t rows) {
  long vc = first_col(t, t->chart_cols, -1);
  if (vc < 0 || !rows) return;
  if (rows > 15) rows = 15;
  const loom__col *col = &t->cols[vc];
  double max = 1e-9;
  for (size_t r = 0; r < rows; r++)
    if (loom__table_at(t, r, (size_t)vc)->d > max) max = loom__table_at(t, r, (size_t)vc)->d;
  const int W = 1100, rowh = 22, lx = 430;
  hf(o, "<svg role=\"img\" viewBox=\"0 0 %d %zu\" width=\"100%%\" height=\"%zu\">", W,
     rows * rowh + 4, rows * rowh + 4);
  for (size_t r = 0; r < rows; r++) {
    char buf[64];
    int w = (int)((double)(W - lx - 150) * loom__table_at(t, r, (size_t)vc)->d / max + 0.5);
    w = w > 1 ? w : 1;
    hf(o, "<text x=\"%d\" y=\"%zu\" font-size=\"12\" text-anchor=\"end\" fill=\"#1d2433\">", lx - 8,
       r * rowh + 15);
    loom__html_esc(o, label(t, r), 60);
    hf(o,
       "</text><rect x=\"%d\" y=\"%zu\" width=\"%d\" height=\"%d\" rx=\"3\" "
       "fill=\"#2f5bc4\"><title>",
       lx, r * rowh + 3, w, rowh - 6);
    loom__html_esc(o, label(t, r), 400);
    hf(o, "</title></rect><text x=\"%d\" y=\"%zu\" font-size=\"12\" fill=\"#5b6478\">", lx + w + 6,
       r * rowh + 15);
    loom__html_esc(o, loom__col_header(col, buf, sizeof buf), 100);
    hf(o, ": %s</text>", loom__cell_text(col, loom__table_at(t, r, (size_t)vc), buf, sizeof buf));
  }
  hf(o, "</svg>");
}

/* One device's utilisation over the trace: busy (light) and compute (dark). */
static void timeline(loom__out *o, const int64_t *busy, const int64_t *comp, size_t n,
                     double width) {
  const int W = 1100, H = 120, bw = n ? W / (int)n : W;
  hf(o,
     "<svg role=\"img\" viewBox=\"0 0 %d %d\" width=\"100%%\" height=\"%d\">"
     "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f0f2f8\"/>",
     W, H + 18, H + 18, W, H);
  for (size_t b = 0; b < n; b++) {
    double u = width > 0 ? (double)busy[b] / width : 0, c = width > 0 ? (double)comp[b] / width : 0;
    u = u > 1 ? 1 : u;
    c = c > u ? u : c;
    int hu = (int)(u * H + 0.5), hc = (int)(c * H + 0.5), x = (int)b * bw;
    if (hu > 0)
      hf(o,
         "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#9db4e8\"><title>%.1f ms: "
         "%.1f%% busy, "
         "%.1f%% compute</title></rect>",
         x, H - hu, bw - 1, hu, (double)b * width / 1e6, u * 100, c * 100);
    if (hc > 0)
      hf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#2f5bc4\"/>", x, H - hc,
         bw - 1, hc);
  }
  hf(o,
     "<text x=\"0\" y=\"%d\" font-size=\"11\" fill=\"#5b6478\">0 ms</text>"
     "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#5b6478\" text-anchor=\"end\">%.3f "
     "ms</text></svg>",
     H + 14, W, H + 14, width * (double)n / 1e6);
}

static void timelines(const loom__table *t, loom__out *o, size_t rows) {
  long wc = first_col(t, t->chart_cols, -1), a = -1, b = -1;
  for (size_t c = 0; c < t->ncols; c++)
    if (t->cols[c].type == LOOM__COL_INTS && a < 0) a = (long)c;
    else if (t->cols[c].type == LOOM__COL_INTS && b < 0) b = (long)c;
  if (wc < 0 || b < 0) return;
  for (size_t r = 0; r < rows; r++) {
    const loom__cell *busy = loom__table_at(t, r, (size_t)a),
                     *comp = loom__table_at(t, r, (size_t)b);
    double width = loom__table_at(t, r, (size_t)wc)->d;
    hf(o, "<p class=\"legend note\"><b>");
    loom__html_esc(o, label(t, r), 100);
    hf(o,
       "</b>: <span><i class=\"sw\" style=\"background:#2f5bc4\"></i>compute</span><span><i "
       "class=\"sw\" "
       "style=\"background:#9db4e8\"></i>all device work</span>utilisation per %.3f ms of the "
       "trace</p>",
       width / 1e6);
    timeline(o, busy->v, comp->v, busy->nv < comp->nv ? busy->nv : comp->nv, width);
  }
}

/* Distinct values of an INT column, in order of appearance. */
static size_t keys_of(const loom__table *t, size_t col, int64_t *out, size_t cap) {
  size_t n = 0;
  for (size_t r = 0; r < loom__table_rows(t); r++) {
    int64_t v = loom__table_at(t, r, col)->i;
    size_t k = 0;
    while (k < n && out[k] != v) k++;
    if (k == n && n < cap) out[n++] = v;
  }
  return n;
}

static size_t index_of(const int64_t *keys, size_t n, int64_t v) {
  for (size_t k = 0; k < n; k++)
    if (keys[k] == v) return k;
  return 0;
}

static void heat(const loom__table *t, loom__out *o, size_t vc, int hue, const int64_t *rk,
                 size_t nr, const int64_t *ck, size_t nc) {
  const loom__col *col = &t->cols[vc];
  const int cw = nc > 25 ? 1000 / (int)nc : 40, ch = 22, lx = 70, ty = 20;
  double mx = 0;
  char buf[64];
  for (size_t r = 0; r < loom__table_rows(t); r++)
    if (loom__table_at(t, r, vc)->kind != LOOM__CELL_NULL && loom__table_at(t, r, vc)->d > mx)
      mx = loom__table_at(t, r, vc)->d;
  int w = lx + cw * (int)nc + 10, h = ty + ch * (int)nr + 10;
  loom__cell top = {.kind = LOOM__CELL_REAL, .d = mx};
  hf(o,
     "<p class=\"note\">%s per %s (rows) and %s (columns); darkest = %s ms</p><svg role=\"img\" "
     "viewBox=\"0 0 "
     "%d %d\" width=\"%d\" height=\"%d\">",
     col->title, t->cols[0].title, t->cols[1].title, loom__cell_text(col, &top, buf, sizeof buf), w,
     h, w, h);
  for (size_t s = 0; s < nc; s++)
    if (nc <= 40 || s % 10 == 0)
      hf(o, "<text x=\"%d\" y=\"14\" font-size=\"10\" fill=\"#5b6478\">%lld</text>",
         lx + cw * (int)s, (long long)ck[s]);
  for (size_t r = 0; r < nr; r++)
    hf(o, "<text x=\"0\" y=\"%d\" font-size=\"11\" fill=\"#1d2433\">%s %lld</text>",
       ty + ch * (int)r + 15, t->cols[0].title, (long long)rk[r]);
  for (size_t r = 0; r < loom__table_rows(t); r++) {
    const loom__cell *v = loom__table_at(t, r, vc);
    size_t y = index_of(rk, nr, loom__table_at(t, r, 0)->i),
           x = index_of(ck, nc, loom__table_at(t, r, 1)->i);
    int light = v->kind == LOOM__CELL_NULL || mx <= 0 ? 97 : 92 - (int)(60.0 * v->d / mx);
    hf(o,
       "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"hsl(%d,60%%,%d%%)\"><title>%s "
       "%lld, %s %lld: "
       "%s ms</title></rect>",
       lx + cw * (int)x, ty + ch * (int)y, cw - 1, ch - 1, hue, light, t->cols[0].title,
       (long long)rk[y], t->cols[1].title, (long long)ck[x],
       loom__cell_text(col, v, buf, sizeof buf));
  }
  hf(o, "</svg>");
}

static void heats(const loom__table *t, loom__out *o) {
  size_t rows = loom__table_rows(t), nr, nc;
  int64_t *rk = malloc((rows + 1) * sizeof *rk), *ck = malloc((rows + 1) * sizeof *ck);
  if (rk && ck && t->ncols >= 3) {
    nr = keys_of(t, 0, rk, rows);
    nc = keys_of(t, 1, ck, rows);
    int hue = 222;
    for (size_t c = 2; c < t->ncols && c < 32; c++)
      if (t->chart_cols >> c & 1) heat(t, o, c, hue, rk, nr, ck, nc), hue = hue == 222 ? 12 : 222;
  }
  free(rk);
  free(ck);
}

/* A byte count for a tooltip or an axis: "1.50 MiB". */
static const char *bytes_text(double b, char *buf, size_t n) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, u++;
  snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
  return buf;
}

/* v's height in pixels on a scale of mx to H: 0 to H, whatever v is (a
 * hostile trace's accounting may go below zero). */
static int level_px(int64_t v, double mx, int H) {
  double f = (double)v / mx;
  return f > 0 ? (int)((f < 1 ? f : 1) * H + 0.5) : 0;
}

/* One series of levels: in use as bars, reserved (when any) as a line. */
static void levels(loom__out *o, const loom__cell *use, const loom__cell *res, double width) {
  const int W = 1100, H = 120;
  size_t n = use->nv;
  int bw = n ? W / (int)n : W;
  double mx = 1;
  char b1[32], b2[32];
  for (size_t b = 0; b < n; b++) mx = (double)use->v[b] > mx ? (double)use->v[b] : mx;
  for (size_t b = 0; b < res->nv; b++) mx = (double)res->v[b] > mx ? (double)res->v[b] : mx;
  hf(o,
     "<svg role=\"img\" viewBox=\"0 0 %d %d\" width=\"100%%\" height=\"%d\">"
     "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f0f2f8\"/>",
     W, H + 18, H + 18, W, H);
  for (size_t b = 0; b < n; b++) {
    int h = level_px(use->v[b], mx, H);
    if (h > 0)
      hf(o,
         "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#2f5bc4\"><title>%.3f ms: "
         "%s in use</title></rect>",
         (int)b * bw, H - h, bw - 1, h, (double)b * width / 1e6,
         bytes_text((double)use->v[b], b1, sizeof b1));
  }
  if (res->nv == n && n) {
    hf(o, "<polyline fill=\"none\" stroke=\"#c4552f\" stroke-width=\"2\" points=\"");
    for (size_t b = 0; b < n; b++)
      hf(o, "%d,%d %d,%d ", (int)b * bw, H - level_px(res->v[b], mx, H), (int)(b + 1) * bw,
         H - level_px(res->v[b], mx, H));
    hf(o, "\"/>");
  }
  hf(o,
     "<text x=\"0\" y=\"%d\" font-size=\"11\" fill=\"#5b6478\">0 ms</text>"
     "<text x=\"%d\" y=\"12\" font-size=\"11\" fill=\"#5b6478\" text-anchor=\"end\">%s</text>"
     "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#5b6478\" text-anchor=\"end\">%.3f "
     "ms</text></svg>",
     H + 14, W - 4, bytes_text(mx, b2, sizeof b2), W, H + 14, width * (double)n / 1e6);
}

static void levels_rows(const loom__table *t, loom__out *o, size_t rows) {
  long wc = first_col(t, t->chart_cols, -1), a = -1, b = -1;
  for (size_t c = 0; c < t->ncols; c++)
    if (t->cols[c].type == LOOM__COL_INTS && a < 0) a = (long)c;
    else if (t->cols[c].type == LOOM__COL_INTS && b < 0) b = (long)c;
  if (wc < 0 || b < 0) return;
  for (size_t r = 0; r < rows; r++) {
    const loom__cell *res = loom__table_at(t, r, (size_t)b);
    hf(o, "<p class=\"legend note\"><b>");
    loom__html_esc(o, label(t, r), 100);
    hf(o, "</b>: <span><i class=\"sw\" style=\"background:#2f5bc4\"></i>most bytes in use</span>");
    if (res->nv)
      hf(o, "<span><i class=\"sw\" style=\"background:#c4552f\"></i>reserved</span>");
    hf(o, "per %.3f ms of the trace</p>", loom__table_at(t, r, (size_t)wc)->d / 1e6);
    levels(o, loom__table_at(t, r, (size_t)a), res, loom__table_at(t, r, (size_t)wc)->d);
  }
}

void loom__table_chart(const loom__table *t, loom__out *o, size_t rows) {
  switch (t->chart) {
  case LOOM__CHART_BARS: bars(t, o, rows); break;
  case LOOM__CHART_TIMELINE: timelines(t, o, rows); break;
  case LOOM__CHART_HEAT: heats(t, o); break;
  case LOOM__CHART_FLAME: loom__table_flame(t, o, rows); break;
  case LOOM__CHART_LEVELS: levels_rows(t, o, rows); break;
  default: break;
  }
}
