/*
 * report_html.c - the report as one self-contained HTML page: inline CSS and
 * inline SVG charts (device utilisation over time, kernel and transfer
 * breakdowns) followed by the tables.  No script, no fonts, no network.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "table.h"

#define hf loom__outf

/* Text with &, <, >, " escaped (names are arbitrary bytes from the trace). */
static void hs(loom__out *o, const char *s, size_t max) {
  size_t n = 0;
  for (; *s && n < max; s++, n++) {
    switch (*s) {
    case '&': loom__out_mem(o, "&amp;", 5); break;
    case '<': loom__out_mem(o, "&lt;", 4); break;
    case '>': loom__out_mem(o, "&gt;", 4); break;
    case '"': loom__out_mem(o, "&quot;", 6); break;
    default: loom__out_mem(o, s, 1);
    }
  }
  if (*s) loom__out_mem(o, "&hellip;", 8);
}

static const char *S(const loom__report *r, uint32_t id) { return loom__trace_cstr(r->meta, id); }
static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0; }
static double us(int64_t ns) { return (double)ns / 1000.0; }
static size_t limit(size_t n, size_t top) { return top && top < n ? top : n; }

static const char *css =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2433;"
    "background:#f6f7fb}main{max-width:1180px;margin:0 auto;padding:24px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;color:#2b3a67}"
    ".sub{color:#5b6478;margin-bottom:18px}.card{background:#fff;border-radius:10px;"
    "box-shadow:0 1px 3px rgba(20,30,60,.12);padding:14px 16px;margin:10px 0;overflow-x:auto}"
    "table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}"
    "th,td{padding:4px 8px;text-align:right;border-bottom:1px solid #e6e9f0;white-space:nowrap}"
    "th{background:#eef1f8;color:#2b3a67;font-weight:600}td.n,th.n{text-align:left;"
    "max-width:520px;overflow:hidden;text-overflow:ellipsis}"
    ".kpis{display:flex;flex-wrap:wrap;gap:10px}.kpi{background:#fff;border-radius:10px;"
    "box-shadow:0 1px 3px rgba(20,30,60,.12);padding:10px 14px;min-width:150px}"
    ".kpi b{display:block;font-size:20px;color:#2b3a67}.kpi span{color:#5b6478;font-size:12px}"
    ".legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:10px;"
    "height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}"
    ".note{color:#5b6478;font-size:12px}";

static void kpi(loom__out *o, const char *value, const char *label) {
  hf(o, "<div class=\"kpi\"><b>%s</b><span>%s</span></div>", value, label);
}

static void timeline(loom__out *o, const loom__report *r, const loom__rdev *d) {
  const int W = 1100, H = 120, bw = W / LOOM__NBUCKETS;
  double width = (double)(r->t1 - r->t0) / LOOM__NBUCKETS;
  hf(o, "<svg role=\"img\" viewBox=\"0 0 %d %d\" width=\"100%%\" height=\"%d\">"
        "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f0f2f8\"/>", W, H + 18, H + 18, W, H);
  for (int b = 0; b < LOOM__NBUCKETS; b++) {
    double u = width > 0 ? (double)d->bucket[b] / width : 0, c = width > 0 ? (double)d->bucket_c[b] / width : 0;
    if (u > 1) u = 1;
    if (c > u) c = u;
    int hu = (int)(u * H + 0.5), hc = (int)(c * H + 0.5);
    if (hu > 0)
      hf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#9db4e8\"><title>%.1f ms: %.1f%% busy, "
            "%.1f%% compute</title></rect>", b * bw, H - hu, bw - 1, hu,
         (double)b * width / 1e6, u * 100, c * 100);
    if (hc > 0)
      hf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#2f5bc4\"/>", b * bw, H - hc, bw - 1, hc);
  }
  hf(o, "<text x=\"0\" y=\"%d\" font-size=\"11\" fill=\"#5b6478\">0 ms</text>"
        "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#5b6478\" text-anchor=\"end\">%.3f ms</text></svg>",
     H + 14, W, H + 14, (double)(r->t1 - r->t0) / 1e6);
}

static void bars(loom__out *o, const loom__report *r, const size_t *rows, size_t n, const char *color,
                 int show_bytes) {
  if (!n) return;
  int64_t max = 1;
  for (size_t i = 0; i < n; i++)
    if (r->names[rows[i]].total > max) max = r->names[rows[i]].total;
  const int W = 1100, rowh = 22, label = 430;
  hf(o, "<svg role=\"img\" viewBox=\"0 0 %d %zu\" width=\"100%%\" height=\"%zu\">", W, n * rowh + 4,
     n * rowh + 4);
  for (size_t i = 0; i < n; i++) {
    const loom__rname *k = &r->names[rows[i]];
    int w = (int)((double)(W - label - 150) * (double)k->total / (double)max + 0.5);
    hf(o, "<text x=\"%d\" y=\"%zu\" font-size=\"12\" text-anchor=\"end\" fill=\"#1d2433\">", label - 8,
       i * rowh + 15);
    hs(o, S(r, k->name), 60);
    hf(o, "</text><rect x=\"%d\" y=\"%zu\" width=\"%d\" height=\"%d\" rx=\"3\" fill=\"%s\"><title>",
       label, i * rowh + 3, w > 1 ? w : 1, rowh - 6, color);
    hs(o, S(r, k->name), 400);
    hf(o, "</title></rect><text x=\"%d\" y=\"%zu\" font-size=\"12\" fill=\"#5b6478\">%.3f us",
       label + (w > 1 ? w : 1) + 6, i * rowh + 15, us(k->total));
    if (show_bytes) hf(o, ", %llu B", (unsigned long long)k->bytes);
    hf(o, "</text>");
  }
  hf(o, "</svg>");
}

static void host_table(loom__out *o, const loom__report *r, int g, const char *title, size_t top) {
  loom__table *t = loom__report_host(r, g, 0, title);
  if (t && loom__table_rows(t)) loom__table_html(t, o, top);
  loom__table_free(t);
}

void loom__report_html(const loom__report *r, loom__out *o, size_t top) {
  hf(o, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
        "<title>loom report</title><style>%s</style></head><body><main><h1>loom report</h1>"
        "<div class=\"sub\">", css);
  hs(o, r->path, 300);
  hf(o, "</div><div class=\"kpis\">");
  char v[64];
  snprintf(v, sizeof v, "%llu", (unsigned long long)r->nevents);
  kpi(o, v, "events read");
  snprintf(v, sizeof v, "%.3f ms", (double)(r->t1 - r->t0) / 1e6);
  kpi(o, v, "trace span");
  snprintf(v, sizeof v, "%zu", r->ndevs);
  kpi(o, v, "devices");
  int64_t ktot = 0;
  uint64_t kn = 0;
  for (size_t i = 0; i < r->nnames; i++)
    if (r->names[i].group == LOOM__G_KERNEL) ktot += r->names[i].total, kn += r->names[i].count;
  snprintf(v, sizeof v, "%llu", (unsigned long long)kn);
  kpi(o, v, "kernels");
  snprintf(v, sizeof v, "%.3f ms", (double)ktot / 1e6);
  kpi(o, v, "kernel time");
  if (r->nsteps) {
    snprintf(v, sizeof v, "%zu", r->nsteps);
    kpi(o, v, "steps");
  }
  hf(o, "</div>");

  for (size_t i = 0; i < r->ndevs; i++) {
    const loom__rdev *d = &r->devs[i];
    int64_t win = d->last - d->first;
    hf(o, "<h2>Device %lld ", (long long)d->pid);
    hs(o, S(r, d->name), 80);
    hf(o, ": %.1f%% busy over its window</h2><div class=\"card\"><div class=\"legend note\">"
          "<span><i class=\"sw\" style=\"background:#2f5bc4\"></i>compute</span>"
          "<span><i class=\"sw\" style=\"background:#9db4e8\"></i>all device work</span>"
          "utilisation per %.3f ms of the trace</div>",
       pct(d->m.u[7], win), (double)(r->t1 - r->t0) / LOOM__NBUCKETS / 1e6);
    timeline(o, r, d);
    hf(o, "<table><tr><th class=\"n\">queue</th><th>work</th><th>window (us)</th><th>busy (us)</th>"
          "<th>util %%</th><th>idle, waiting for host (us)</th><th>idle, other (us)</th></tr>");
    hf(o, "<tr><td class=\"n\"><b>device</b></td><td>%llu</td><td>%.3f</td><td>%.3f</td><td>%.2f</td>"
          "<td>%.3f</td><td>%.3f</td></tr>", (unsigned long long)d->nwork, us(win), us(d->m.u[7]),
       pct(d->m.u[7], win), us(d->idle_host), us(d->idle_other));
    for (size_t k = d->q0; k < d->q0 + d->nq; k++) {
      const loom__rq *q = &r->queues[k];
      int64_t qw = q->last - q->first;
      hf(o, "<tr><td class=\"n\">");
      if (q->name && *S(r, q->name)) hs(o, S(r, q->name), 60);
      else hf(o, "queue %lld", (long long)q->tid);
      hf(o, "</td><td>%llu</td><td>%.3f</td><td>%.3f</td><td>%.2f</td><td>%.3f</td><td>%.3f</td></tr>",
         (unsigned long long)q->nwork, us(qw), us(q->busy), pct(q->busy, qw), us(q->idle_host),
         us(q->idle_other));
    }
    loom__qs *lq = (loom__qs *)&d->launch;
    hf(o, "</table><p class=\"note\">Overlap: compute %.3f us, communication %.3f us, memory %.3f us; "
          "compute with memory %.3f us, compute with communication %.3f us. Launch latency (call start "
          "to device start): %llu launches, mean %.3f us, p50 %.3f us, p95 %.3f us, max %.3f us.</p></div>",
       us(d->m.u[1]), us(d->m.u[2]), us(d->m.u[4]), us(d->m.u[1] + d->m.u[4] - d->m.u[5]),
       us(d->m.u[1] + d->m.u[2] - d->m.u[3]), (unsigned long long)lq->n, loom__qs_mean(lq) / 1000,
       loom__qs_quantile(lq, 0.5) / 1000, loom__qs_quantile(lq, 0.95) / 1000, us(lq->max));
  }

  size_t n, *rows = loom__report_rows(r, LOOM__G_KERNEL, &n, 0);
  if (n) {
    hf(o, "<h2>Kernels by total time (%zu names)</h2><div class=\"card\">", n);
    bars(o, r, rows, limit(n, 15), "#2f5bc4", 0);
    hf(o, "<table><tr><th class=\"n\">name</th><th>count</th><th>total (us)</th><th>mean</th><th>p50</th>"
          "<th>p95</th><th>max</th><th>share</th></tr>");
    for (size_t i = 0; i < limit(n, top); i++) {
      loom__rname *k = &r->names[rows[i]];
      hf(o, "<tr><td class=\"n\">");
      hs(o, S(r, k->name), 120);
      hf(o, "</td><td>%llu</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>"
            "<td>%.1f%%</td></tr>", (unsigned long long)k->count, us(k->total), loom__qs_mean(&k->q) / 1000,
         loom__qs_quantile(&k->q, 0.5) / 1000, loom__qs_quantile(&k->q, 0.95) / 1000, us(k->max),
         pct(k->total, ktot));
    }
    hf(o, "</table></div>");
  }
  free(rows);

  rows = loom__report_rows(r, LOOM__G_COPY, &n, 0);
  if (n) {
    hf(o, "<h2>Transfers by direction</h2><div class=\"card\">");
    bars(o, r, rows, n, "#2a9d8f", 1);
    hf(o, "</div>");
    loom__table *t = loom__report_moves(r, 1, "Transfers: figures");
    if (t) loom__table_html(t, o, 0);
    loom__table_free(t);
  }
  free(rows);

  host_table(o, r, LOOM__G_OP, "Framework ops", top);
  host_table(o, r, LOOM__G_RANGE, "User ranges", top);
  host_table(o, r, LOOM__G_CALL, "Runtime calls", top);

  if (r->nsteps) {
    hf(o, "<h2>Steps (%zu)</h2><div class=\"card\"><table><tr><th class=\"n\">step</th><th>start (ms)</th>"
          "<th>time (ms)</th><th>device time (ms)</th><th>device work</th></tr>", r->nsteps);
    for (size_t i = 0; i < limit(r->nsteps, top); i++) {
      const loom__rstep *s = &r->steps[i];
      hf(o, "<tr><td class=\"n\">");
      hs(o, S(r, s->name), 60);
      hf(o, "</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%llu</td></tr>", (double)(s->ts - r->t0) / 1e6,
         (double)s->dur / 1e6, (double)s->dev_time / 1e6, (unsigned long long)s->dev_count);
    }
    hf(o, "</table></div>");
  }

  if (r->hta.nevents) {
    loom__hta_temporal h;
    loom__hta_temporal_of(&r->hta, &h);
    hf(o, "<h2>Holistic Trace Analysis figures</h2><div class=\"card\"><p class=\"note\">Computed with HTA's "
          "definitions (docs/report.md)%s.</p><table><tr><th>kernel_time (us)</th><th>idle</th><th>compute</th>"
          "<th>non-compute</th><th>idle %%</th><th>compute %%</th><th>non-compute %%</th>"
          "<th>comm/comp overlap %%</th></tr>",
       r->hta.last_step_dropped ? "; the last profiler step is left out, as HTA does" : "");
    hf(o, "<tr><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>",
       us(h.kernel_time), us(h.idle), us(h.compute), us(h.non_compute), h.idle_pct, h.compute_pct,
       h.non_compute_pct);
    if (h.comm_comp_overlap_pct >= 0) hf(o, "%.2f", h.comm_comp_overlap_pct);
    else hf(o, "n/a");
    hf(o, "</td></tr></table><table><tr><th class=\"n\">stream</th><th>host_wait (us)</th>"
          "<th>kernel_wait (us)</th><th>other (us)</th></tr>");
    for (size_t k = 0; k < r->hta.nstreams; k++) {
      const loom__hstream *st = &r->hta.streams[k];
      hf(o, "<tr><td class=\"n\">%lld</td><td>%.3f</td><td>%.3f</td><td>%.3f</td></tr>", (long long)st->stream,
         us(st->idle[0]), us(st->idle[1]), us(st->idle[2]));
    }
    hf(o, "</table></div>");
  }

  loom__report_ranks_html(r, o, top);
  if (r->nunknown || r->orphan_work) {
    hf(o, "<h2>Not understood</h2><div class=\"card\"><ul>");
    for (size_t i = 0; i < r->nunknown; i++) {
      hf(o, "<li>category &ldquo;");
      hs(o, S(r, r->unknown[i].cat), 80);
      hf(o, "&rdquo;: %llu events</li>", (unsigned long long)r->unknown[i].count);
    }
    if (r->orphan_work)
      hf(o, "<li>%llu device work items with no launch call</li>", (unsigned long long)r->orphan_work);
    hf(o, "</ul></div>");
  }
  hf(o, "<p class=\"note\">Written by loom %s.</p></main></body></html>\n", loom_version_string());
}
