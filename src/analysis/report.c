/*
 * report.c - a report's three forms.  The sections are built once as tables
 * of the report model (report_model.h, table.h) and rendered as text, JSON
 * or HTML (table_text.c, table_json.c, table_html.c); the JSON schema is
 * "loom-report/2", documented in docs/report.md: times are integer
 * nanoseconds relative to the trace's first event unless a key says
 * otherwise, shares are percentages.
 */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "report_model.h"
#include "table.h"

void loom__outf(loom__out *o, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof buf) { /* rare: long names */
    char *big = malloc((size_t)n + 1);
    if (!big) return;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    loom__out_mem(o, big, (size_t)n);
    free(big);
    return;
  }
  loom__out_mem(o, buf, (size_t)n);
}


/* ---- shared helpers -------------------------------------------------------- */
static _Thread_local const loom__report *rows_rep;
static _Thread_local int rows_self;

static int cmp_rows(const void *pa, const void *pb) {
  const loom__rname *a = &rows_rep->names[*(const size_t *)pa],
                    *b = &rows_rep->names[*(const size_t *)pb];
  int64_t x = rows_self ? a->self : a->total, y = rows_self ? b->self : b->total;
  if (x != y) return x > y ? -1 : 1;
  return strcmp(loom__report_str(rows_rep, a->name), loom__report_str(rows_rep, b->name));
}

size_t *loom__report_rows(const loom__report *r, int group, size_t *n, int by_self) {
  size_t *idx = malloc((r->nnames + 1) * sizeof *idx), k = 0;
  if (!idx) {
    *n = 0;
    return NULL;
  }
  for (size_t i = 0; i < r->nnames; i++)
    if (r->names[i].group == group) idx[k++] = i;
  rows_rep = r;
  rows_self = by_self;
  qsort(idx, k, sizeof *idx, cmp_rows);
  *n = k;
  return idx;
}

void loom__hta_temporal_of(const loom__rhta *d, loom__hta_temporal *h) {
  memset(h, 0, sizeof *h);
  h->kernel_time = d->nevents ? d->last - d->first : 0;
  h->idle = h->kernel_time - d->all;
  h->compute = d->m.u[1];
  h->non_compute = h->kernel_time - h->compute - h->idle;
  /* rounded to whole us, events shorter than 1 us can leave kernel_time
   * negative: HTA divides by it all the same */
  double k = (double)h->kernel_time;
  h->idle_pct = k != 0 ? 100.0 * (double)h->idle / k : 0;
  h->compute_pct = k != 0 ? 100.0 * (double)h->compute / k : 0;
  h->non_compute_pct = k != 0 ? 100.0 * (double)h->non_compute / k : 0;
  int64_t comm = d->m.u[2];
  int64_t both = d->m.u[1] + d->m.u[2] - d->m.u[3];
  h->comm_comp_overlap_pct = comm > 0 ? 100.0 * (double)both / (double)comm : -1;
}

/* ---- the report: one model, three renderings ---------------------------------- */
void loom__report_model(const loom__report *r, size_t top, loom__model *m) {
  static void (*const section[])(const loom__report *, loom__model *) = {
      loom__report_input, loom__report_devices, loom__report_kernels, loom__report_moves,
      loom__report_host,  loom__report_steps,   loom__report_memory,  loom__report_cpu,
      loom__report_hta,   loom__report_ranks,   loom__report_critpath, loom__report_unknown};
  memset(m, 0, sizeof *m);
  m->top = top;
  snprintf(m->title, sizeof m->title, "loom report: %s", r->path);
  for (size_t i = 0; i < sizeof section / sizeof section[0]; i++) section[i](r, m);
  for (size_t i = 0; i < m->n; i++)
    if (m->t[i]->oom || (m->t[i]->child && m->t[i]->child->oom)) m->oom = 1;
}

typedef void (*render_fn)(const loom__model *, loom__out *);
static void render(const loom__report *r, loom__out *o, size_t top, render_fn fn) {
  loom__model m;
  loom__report_model(r, top, &m);
  if (m.oom) o->failed = ENOMEM; /* a table short of rows must not pass for the report */
  else fn(&m, o);
  loom__model_free(&m);
}

void loom__report_text(const loom__report *r, loom__out *o, size_t top) {
  render(r, o, top, loom__model_text);
}
void loom__report_json(const loom__report *r, loom__out *o, size_t top) {
  render(r, o, top, loom__model_json);
}
void loom__report_html(const loom__report *r, loom__out *o, size_t top) {
  render(r, o, top, loom__model_html);
}

/* ---- public API ------------------------------------------------------------ */
#include "base/base.h"
#include "util/util.h"

struct loom_report {
  loom__report *r;
  size_t top;
};

loom_status loom_report_open(const char *path, const loom_report_options *opts, loom_report **out) {
  loom__clear_error();
  if (!path || !out) return loom__fail(LOOM_EINVAL, "loom_report_open: NULL path or out");
  *out = NULL;
  if (opts && opts->struct_size < sizeof(size_t) * 3 + sizeof(int))
    return loom__fail(LOOM_EINVAL,
                      "loom_report_open: options from an unknown version (struct_size %zu)",
                      opts->struct_size);
  loom__report_opts o = {0};
  if (opts) {
    o.sort_budget = opts->sort_memory;
    o.hta_include_last_step = opts->hta_include_last_step;
    if (opts->struct_size >=
        offsetof(loom_report_options, nmore_traces) + sizeof opts->nmore_traces) {
      o.more = opts->more_traces;
      o.nmore = opts->nmore_traces;
    }
    if (opts->struct_size >= offsetof(loom_report_options, wait_threshold_ns) + sizeof(int64_t))
      o.wait_threshold_ns = opts->wait_threshold_ns;
    if (opts->struct_size >=
        offsetof(loom_report_options, critical_path_trace) + sizeof(const char *)) {
      o.no_critical_path = opts->no_critical_path;
      o.critical_path_trace = opts->critical_path_trace;
    }
  }
  loom_report *h = calloc(1, sizeof *h);
  if (!h) return loom__fail(LOOM_ENOMEM, "out of memory");
  h->top = opts ? opts->top : 0;
  loom_status st = loom__analyze(path, &o, &h->r);
  if (st != LOOM_OK) {
    free(h);
    return st;
  }
  *out = h;
  return LOOM_OK;
}

loom_status loom_report_write(const loom_report *h, loom_report_format format, const char *path) {
  loom__clear_error();
  if (!h || format > LOOM_REPORT_HTML)
    return loom__fail(LOOM_EINVAL, "loom_report_write: bad report or format");
  loom__out m;
  if (loom__out_mem_init(&m)) return loom__fail(LOOM_ENOMEM, "out of memory");
  if (format == LOOM_REPORT_TEXT) loom__report_text(h->r, &m, h->top);
  else if (format == LOOM_REPORT_JSON) loom__report_json(h->r, &m, h->top);
  else loom__report_html(h->r, &m, h->top);
  if (m.failed) {
    free(m.buf);
    return loom__fail(LOOM_ENOMEM, "out of memory writing the report");
  }
  loom_status st = LOOM_OK;
  if (!path || !strcmp(path, "-")) {
    if (fwrite(m.buf, 1, m.len, stdout) != m.len || fflush(stdout))
      st = loom__fail(LOOM_EIO, "cannot write the report to standard output");
  } else {
    loom__out f;
    st = loom__out_open(&f, path, -1);
    if (st == LOOM_OK) {
      loom__out_mem(&f, m.buf, m.len);
      st = loom__out_commit(&f);
    }
  }
  free(m.buf);
  return st;
}

void loom_report_free(loom_report *h) {
  if (!h) return;
  loom__report_free(h->r);
  free(h);
}
