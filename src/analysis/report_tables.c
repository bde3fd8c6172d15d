/*
 * report_tables.c - the device side of the report as tables of the model
 * (table.h): the input, devices and their queues, overlap by class, launch
 * latency, utilisation over time, kernels, transfers and fills.  The four
 * device tables share the JSON path "devices", so each device is one JSON
 * object (docs/report.md), while text and HTML show them as four tables.
 */
#include <stdio.h>
#include <stdlib.h>

#include "analysis.h"
#include "report_model.h"
#include "table.h"

static const char *S(const loom__report *r, uint32_t id) { return loom__trace_cstr(r->meta, id); }
static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0; }
#define NCOLS(a) (sizeof a / sizeof a[0])

void loom__report_dist(loom__table *t, const loom__qs *cq) {
  loom__qs *q = (loom__qs *)cq; /* quantiles sort its samples in place */
  loom__table_int(t, (int64_t)q->n);
  loom__table_real(t, loom__qs_mean(q));
  loom__table_real(t, loom__qs_quantile(q, 0.5));
  loom__table_real(t, loom__qs_quantile(q, 0.95));
  loom__table_int(t, q->min);
  loom__table_int(t, q->max);
  loom__table_int(t, loom__qs_exact(q));
}

/* ---- input ------------------------------------------------------------------ */
static const loom__col input_cols[] = {
    {"schema", "schema", LOOM__COL_STR, LOOM__CF_JSON_ONLY}, /* the document's root */
    {"input.path", "trace", LOOM__COL_STR, LOOM__CF_JSON_ONLY},
    {"input.events", "events read", LOOM__COL_INT},
    {"input.analysed", "analysed", LOOM__COL_INT},
    {"input.start_epoch_ns", "first event (Unix epoch ns)", LOOM__COL_INT},
    {"input.span_ns", "span", LOOM__COL_NS}};
static const loom__col kind_cols[] = {{"kind", "kind", LOOM__COL_STR},
                                      {"events", "events", LOOM__COL_INT}};

void loom__report_input(const loom__report *r, loom__model *m) {
  loom__table *t = loom__model_add(m, "", "Input", input_cols, NCOLS(input_cols), LOOM__TF_RECORD);
  loom__table_str(t, "loom-report/2");
  loom__table_str(t, r->path);
  loom__table_int(t, (int64_t)r->nevents);
  loom__table_int(t, (int64_t)r->nkept);
  loom__table_int(t, r->t0 + r->meta->base_ns);
  loom__table_int(t, r->t1 - r->t0);
  t = loom__model_add(m, "input.events_by_kind", "Events by kind", kind_cols, 2,
                      LOOM__TF_MAP | LOOM__TF_ALL);
  for (int k = 0; k < LOOM_KIND_COUNT_; k++) {
    if (!r->by_kind[k]) continue;
    loom__table_str(t, loom_kind_name((loom_kind)k));
    loom__table_int(t, (int64_t)r->by_kind[k]);
  }
}

/* ---- devices ---------------------------------------------------------------- */
#define WINDOW_COLS                                                                                \
  {"window_ns", "window", LOOM__COL_NS}, {"busy_ns", "busy", LOOM__COL_NS},                        \
      {"utilization_pct", "util", LOOM__COL_PCT}
#define IDLE_COLS                                                                                  \
  {"idle_waiting_for_host_ns", "idle host", LOOM__COL_NS},                                         \
  {"idle_other_ns", "idle other", LOOM__COL_NS}
static const loom__col dev_cols[] = {{"pid", "id", LOOM__COL_INT},
                                     {"name", "device / queue", LOOM__COL_STR},
                                     {"work", "work", LOOM__COL_INT},
                                     {"kernels", "kernels", LOOM__COL_INT, LOOM__CF_NOTEXT},
                                     {"start_ns", "start", LOOM__COL_NS, LOOM__CF_NOTEXT},
                                     WINDOW_COLS,
                                     {"idle_ns", "idle", LOOM__COL_NS, LOOM__CF_NOTEXT},
                                     IDLE_COLS};
static const loom__col queue_cols[] = {{"tid", "id", LOOM__COL_INT},
                                       {"name", "device / queue", LOOM__COL_STR},
                                       {"work", "work", LOOM__COL_INT},
                                       {"start_ns", "start", LOOM__COL_NS},
                                       WINDOW_COLS,
                                       IDLE_COLS};
static const loom__col overlap_cols[] = {
    {"pid", "device", LOOM__COL_INT, LOOM__CF_NOJSON},
    {"busy_by_class_ns.compute", "compute", LOOM__COL_NS},
    {"busy_by_class_ns.communication", "communication", LOOM__COL_NS},
    {"busy_by_class_ns.memory", "memory", LOOM__COL_NS},
    {"overlap_ns.compute_memory", "compute+memory", LOOM__COL_NS},
    {"overlap_ns.compute_communication", "compute+comm", LOOM__COL_NS},
    {"overlap_ns.communication_memory", "comm+memory", LOOM__COL_NS},
    {"overlap_ns.all_three", "all three", LOOM__COL_NS}};
#define DIST_COLS(p, count_flags)                                                                  \
  {p "count", "count", LOOM__COL_INT, count_flags}, {p "mean_ns", "mean", LOOM__COL_US},           \
      {p "p50_ns", "p50", LOOM__COL_US}, {p "p95_ns", "p95", LOOM__COL_US},                        \
      {p "min_ns", "min", LOOM__COL_US}, {p "max_ns", "max", LOOM__COL_US},                        \
      {p "exact", "exact", LOOM__COL_BOOL, LOOM__CF_NOTEXT}
static const loom__col latency_cols[] = {{"pid", "device", LOOM__COL_INT, LOOM__CF_NOJSON},
                                         DIST_COLS("launch_latency.", 0)};
static const loom__col timeline_cols[] = {{"label", "device", LOOM__COL_STR, LOOM__CF_NOJSON},
                                          {"timeline.buckets", "buckets", LOOM__COL_INT},
                                          {"timeline.bucket_ns", "bucket", LOOM__COL_NUM},
                                          {"timeline.busy_ns", "busy", LOOM__COL_INTS},
                                          {"timeline.compute_ns", "compute", LOOM__COL_INTS}};

static void dev_row(const loom__report *r, const loom__rdev *d, loom__table *t) {
  int64_t win = d->last - d->first;
  loom__table_int(t, d->pid);
  loom__table_str(t, S(r, d->name));
  loom__table_int(t, (int64_t)d->nwork);
  loom__table_int(t, (int64_t)d->nkernels);
  if (d->nwork) loom__table_int(t, d->first - r->t0);
  else loom__table_null(t); /* only syncs: no window, no start */
  loom__table_int(t, win);
  loom__table_int(t, d->m.u[7]);
  loom__table_pct(t, pct(d->m.u[7], win));
  loom__table_int(t, win - d->m.u[7]);
  loom__table_int(t, d->idle_host);
  loom__table_int(t, d->idle_other);
}

static void queue_rows(const loom__report *r, const loom__rdev *d, size_t row, loom__table *t) {
  for (size_t k = d->q0; k < d->q0 + d->nq; k++) {
    const loom__rq *q = &r->queues[k];
    int64_t qw = q->last - q->first;
    loom__table_parent(t, row);
    loom__table_int(t, q->tid);
    loom__table_str(t, S(r, q->name));
    loom__table_int(t, (int64_t)q->nwork);
    if (q->nwork) loom__table_int(t, q->first - r->t0);
    else loom__table_null(t); /* only syncs: no window, no start */
    loom__table_int(t, qw);
    loom__table_int(t, q->busy);
    loom__table_pct(t, pct(q->busy, qw));
    loom__table_int(t, q->idle_host);
    loom__table_int(t, q->idle_other);
  }
}

static void overlap_row(const loom__rdev *d, loom__table *t) {
  const int64_t *u = d->m.u;
  loom__table_int(t, d->pid);
  for (int c = 0; c < 3; c++) loom__table_int(t, u[1 << c]);
  loom__table_int(t, u[1] + u[4] - u[5]);
  loom__table_int(t, u[1] + u[2] - u[3]);
  loom__table_int(t, u[2] + u[4] - u[6]);
  loom__table_int(t, loom__umeas_exact(&d->m, 7));
}

static void timeline_row(const loom__report *r, const loom__rdev *d, loom__table *t) {
  char label[160];
  snprintf(label, sizeof label, "%lld %s", (long long)d->pid, S(r, d->name));
  loom__table_str(t, label);
  loom__table_int(t, LOOM__NBUCKETS);
  loom__table_num(t, (double)(r->t1 - r->t0) / LOOM__NBUCKETS);
  loom__table_ints(t, d->bucket, LOOM__NBUCKETS);
  loom__table_ints(t, d->bucket_c, LOOM__NBUCKETS);
}

void loom__report_devices(const loom__report *r, loom__model *m) {
  loom__table *dev =
      loom__model_add(m, "devices", "Devices and queues (idle split: waiting for the host / other)",
                      dev_cols, NCOLS(dev_cols), LOOM__TF_ALL);
  loom__table *q = loom__table_child(dev, "queues", queue_cols, NCOLS(queue_cols));
  loom__table *ov = loom__model_add(m, "devices",
                                    "Overlap per device: busy time by class, and where classes "
                                    "overlap",
                                    overlap_cols, NCOLS(overlap_cols), LOOM__TF_ALL);
  loom__table *lat =
      loom__model_add(m, "devices", "Launch latency: host call start -> device start", latency_cols,
                      NCOLS(latency_cols), LOOM__TF_ALL);
  loom__table *tl =
      loom__model_add(m, "devices", "Device utilisation over the trace", timeline_cols,
                      NCOLS(timeline_cols), LOOM__TF_ALL | LOOM__TF_NOTEXT | LOOM__TF_NOHTML);
  if (tl) tl->chart = LOOM__CHART_TIMELINE, tl->chart_cols = 1u << 2;
  for (size_t i = 0; i < r->ndevs; i++) {
    const loom__rdev *d = &r->devs[i];
    dev_row(r, d, dev);
    queue_rows(r, d, i, q);
    overlap_row(d, ov);
    loom__table_int(lat, d->pid);
    loom__report_dist(lat, &d->launch);
    timeline_row(r, d, tl);
  }
}

/* ---- kernels, transfers, fills --------------------------------------------- */
static const char *const class_name[3] = {"compute", "communication", "memory"};
static const loom__col ktotal_cols[] = {{"total_ns", "kernel time", LOOM__COL_NS}};
static const loom__col kernel_cols[] = {{"name", "name", LOOM__COL_STR},
                                        {"class", "class", LOOM__COL_STR, LOOM__CF_NOTEXT},
                                        {"count", "count", LOOM__COL_INT},
                                        {"total_ns", "total", LOOM__COL_US},
                                        {"share_pct", "share", LOOM__COL_PCT, 0, 1},
                                        {"stddev_ns", "stddev", LOOM__COL_US, LOOM__CF_NOTEXT},
                                        DIST_COLS("durations.", LOOM__CF_JSON_ONLY)};

void loom__report_kernels(const loom__report *r, loom__model *m) {
  size_t n, *rows = loom__report_rows(r, LOOM__G_KERNEL, &n, 0);
  int64_t total = 0;
  for (size_t i = 0; i < n; i++) total += r->names[rows[i]].total;
  loom__table *t = loom__model_add(m, "kernels", "Kernels", ktotal_cols, 1,
                                   LOOM__TF_RECORD | LOOM__TF_NOTEXT | (n ? 0 : LOOM__TF_NOHTML));
  loom__table_int(t, total);
  t = loom__model_add(m, "kernels.top", "", kernel_cols, NCOLS(kernel_cols), LOOM__TF_OWN_COUNT);
  if (t) t->count_at = "kernels.names", t->chart = LOOM__CHART_BARS, t->chart_cols = 1u << 3;
  loom__table_retitle(t, "Kernels (%zu names; top %zu by total time)", n,
                      m->top && m->top < n ? m->top : n);
  for (size_t i = 0, made = loom__model_limit(m, t, n); i < made; i++) {
    loom__rname *k = &r->names[rows[i]];
    loom__table_str(t, S(r, k->name));
    loom__table_str(t, class_name[k->cls < 3 ? k->cls : 0]);
    loom__table_int(t, (int64_t)k->count);
    loom__table_int(t, k->total);
    loom__table_pct(t, pct(k->total, total));
    loom__table_real(t, loom__qs_stddev(&k->q));
    loom__report_dist(t, &k->q);
  }
  free(rows);
}

/* Copies by direction, fills by name: count, bytes, time, bandwidth
 * (bytes / ns = GB/s). */
#define MOVE_COLS(first, title)                                                                    \
  {{first, title, LOOM__COL_STR}, {"count", "count", LOOM__COL_INT},                           \
   {"bytes", "bytes", LOOM__COL_INT}, {"time_ns", "time", LOOM__COL_US},                           \
   {"bandwidth_gbps", "GB/s", LOOM__COL_NUM}}
static const loom__col move_cols[2][5] = {MOVE_COLS("direction", "direction"),
                                          MOVE_COLS("name", "fill")};

void loom__report_moves(const loom__report *r, loom__model *m) {
  for (int g = 0; g < 2; g++) {
    loom__table *t =
        loom__model_add(m, g ? "fills" : "transfers", g ? "Fills" : "Transfers by direction",
                        move_cols[g], 5, LOOM__TF_ALL);
    if (t && !g) t->chart = LOOM__CHART_BARS, t->chart_cols = 1u << 3;
    size_t n, *rows = loom__report_rows(r, g ? LOOM__G_FILL : LOOM__G_COPY, &n, 0);
    for (size_t i = 0; i < n; i++) {
      const loom__rname *c = &r->names[rows[i]];
      loom__table_str(t, S(r, c->name));
      loom__table_int(t, (int64_t)c->count);
      loom__table_int(t, (int64_t)c->bytes);
      loom__table_int(t, c->total);
      loom__table_num(t, c->total > 0 ? (double)c->bytes / (double)c->total : 0);
    }
    free(rows);
  }
}
