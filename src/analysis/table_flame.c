/*
 * table_flame.c - a flame graph as inline SVG (no script): the rows of a
 * FLAME table (report_cpu.c) are nodes (depth, start, samples, share,
 * function) in samples; each is a rect as wide as its share of the page's
 * width, at its depth from the bottom, labelled with as much of its name as
 * fits, with a <title> naming it, its samples and its share.
 */
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "table.h"

#define W 1100
#define ROWH 17
#define CHARW 6.6 /* width of a character at font-size 11 */

/* A warm colour from the name, so that a function keeps its colour. */
static int hue_of(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return (int)(h % 55);
}

static void label(loom__out *o, const char *name, double w) {
  size_t fit = w > 8 ? (size_t)((w - 6) / CHARW) : 0, len = strlen(name);
  if (fit < 3) return;
  loom__outf(o, "<text x=\"3\" y=\"12\" font-size=\"11\" fill=\"#1d2433\">");
  loom__html_esc(o, name, len <= fit ? len : fit - 1); /* cut: an ellipsis ends it */
  loom__out_lit(o, "</text>");
}

void loom__table_flame(const loom__table *t, loom__out *o, size_t rows) {
  if (!rows || t->ncols < 5) return;
  int64_t maxd = 1;
  for (size_t r = 0; r < rows; r++)
    if (loom__table_at(t, r, 0)->i > maxd) maxd = loom__table_at(t, r, 0)->i;
  const loom__cell *n0 = loom__table_at(t, 0, 2), *p0 = loom__table_at(t, 0, 3);
  double scale = n0->d > 0 ? W * p0->d / 100.0 / n0->d : 0; /* px per sample */
  int h = (int)maxd * ROWH + 2;
  loom__outf(
      o, "<svg role=\"img\" class=\"flame\" viewBox=\"0 0 %d %d\" width=\"100%%\" height=\"%d\">",
      W, h, h);
  for (size_t r = 0; r < rows; r++) {
    int64_t depth = loom__table_at(t, r, 0)->i;
    double x = scale * loom__table_at(t, r, 1)->d, w = scale * loom__table_at(t, r, 2)->d;
    const char *name = loom__table_at(t, r, 4)->s;
    char pbuf[64];
    loom__outf(o,
               "<g transform=\"translate(%.2f,%d)\"><rect width=\"%.2f\" height=\"%d\" "
               "fill=\"hsl(%d,75%%,62%%)\" "
               "stroke=\"#fff\" stroke-width=\"0.5\"><title>",
               x, (int)(maxd - depth) * ROWH, w, ROWH - 1, hue_of(name));
    loom__html_esc(o, name, 400);
    loom__outf(o, ": %lld samples, %s%%</title></rect>", (long long)loom__table_at(t, r, 2)->i,
               loom__cell_text(&t->cols[3], loom__table_at(t, r, 3), pbuf, sizeof pbuf));
    label(o, name, w);
    loom__out_lit(o, "</g>");
  }
  loom__out_lit(o, "</svg>");
}
