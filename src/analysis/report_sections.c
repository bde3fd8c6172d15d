/*
 * report_sections.c - the host side of the report as tables of the model
 * (table.h): framework ops, user ranges and runtime calls, steps, the
 * Holistic Trace Analysis figures and what was not understood.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "report_model.h"
#include "table.h"

static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0; }
#define NCOLS(a) (sizeof a / sizeof a[0])
#define HIDDEN (LOOM__TF_NOTEXT | LOOM__TF_NOHTML)

/* ---- host: per name, by total (or self) time -------------------------------- */
static const loom__col host_cols[] = {{"name", "name", LOOM__COL_STR},
                                      {"count", "count", LOOM__COL_INT},
                                      {"total_ns", "total", LOOM__COL_US},
                                      {"self_ns", "self", LOOM__COL_US},
                                      {"min_ns", "min", LOOM__COL_US},
                                      {"max_ns", "max", LOOM__COL_US},
                                      {"device_time_ns", "device", LOOM__COL_US},
                                      {"device_work", "work", LOOM__COL_INT}};

/* JSON: by total time only (the rows are the same by self time). */
static const struct host_table {
  int group, by_self;
  const char *path, *count_at, *title;
} host_tables[] = {{LOOM__G_OP, 0, "host.ops.top", "host.ops.names", "Framework ops by total time"},
                   {LOOM__G_OP, 1, "host.ops.top", NULL, "Framework ops by self time"},
                   {LOOM__G_RANGE, 0, "host.user_ranges.top", "host.user_ranges.names",
                    "User ranges by total time"},
                   {LOOM__G_RANGE, 1, "host.user_ranges.top", NULL, "User ranges by self time"},
                   {LOOM__G_CALL, 0, "host.runtime_calls.top", "host.runtime_calls.names",
                    "Runtime calls by total time"}};

static void host_table(const loom__report *r, loom__model *m, const struct host_table *h) {
  int ranges = h->group == LOOM__G_RANGE;
  loom__table *t = loom__model_add(m, h->path, h->title, host_cols, ranges ? 8 : 6,
                                   h->by_self ? LOOM__TF_NOJSON : 0);
  if (t) t->count_at = h->count_at;
  size_t n, *rows = loom__report_rows(r, h->group, &n, h->by_self);
  for (size_t i = 0, made = loom__model_limit(m, t, n); i < made; i++) {
    const loom__rname *k = &r->names[rows[i]];
    loom__table_str(t, loom__report_str(r, k->name));
    loom__table_int(t, (int64_t)k->count);
    loom__table_int(t, k->total);
    loom__table_int(t, k->self);
    loom__table_int(t, k->min);
    loom__table_int(t, k->max);
    if (!ranges) continue;
    loom__table_int(t, k->dev_time);
    loom__table_int(t, (int64_t)k->dev_count);
  }
  free(rows);
}

void loom__report_host(const loom__report *r, loom__model *m) {
  for (size_t i = 0; i < NCOLS(host_tables); i++) host_table(r, m, &host_tables[i]);
}

/* ---- steps -------------------------------------------------------------------- */
static const loom__col step_cols[] = {
    {"count", "steps", LOOM__COL_INT},     {"mean_ns", "mean", LOOM__COL_NS},
    {"stddev_ns", "stddev", LOOM__COL_NS}, {"p50_ns", "p50", LOOM__COL_NS},
    {"min_ns", "min", LOOM__COL_NS},       {"max_ns", "max", LOOM__COL_NS}};
static const loom__col slow_cols[] = {{"name", "step", LOOM__COL_STR},
                                      {"start_ns", "start", LOOM__COL_NS},
                                      {"dur_ns", "time", LOOM__COL_NS},
                                      {"device_time_ns", "device", LOOM__COL_NS},
                                      {"device_work", "work", LOOM__COL_INT}};

/* Steps sorted by duration, longest first (ties: earlier first). */
static _Thread_local const loom__report *steps_rep;
static int cmp_step(const void *pa, const void *pb) {
  const loom__rstep *a = &steps_rep->steps[*(const size_t *)pa],
                    *b = &steps_rep->steps[*(const size_t *)pb];
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static void step_figures(const loom__report *r, loom__table *t) {
  loom__qs q;
  memset(&q, 0, sizeof q);
  for (size_t i = 0; i < r->nsteps; i++) loom__qs_add(&q, r->steps[i].dur);
  loom__table_int(t, (int64_t)r->nsteps);
  loom__table_real(t, loom__qs_mean(&q));
  loom__table_real(t, loom__qs_stddev(&q));
  loom__table_real(t, loom__qs_quantile(&q, 0.5));
  loom__table_int(t, q.min);
  loom__table_int(t, q.max);
  loom__qs_free(&q);
}

void loom__report_steps(const loom__report *r, loom__model *m) {
  loom__table *t = loom__model_add(m, "steps", "Steps (ProfilerStep ranges)", step_cols,
                                   r->nsteps ? 6 : 1, LOOM__TF_RECORD | (r->nsteps ? 0 : HIDDEN));
  if (!r->nsteps) {
    loom__table_int(t, 0);
    return;
  }
  step_figures(r, t);
  size_t *ix = malloc(r->nsteps * sizeof *ix);
  t = loom__model_add(m, "steps.slowest", "Slowest steps", slow_cols, NCOLS(slow_cols), 0);
  if (!ix || !t) {
    m->oom = 1;
    free(ix);
    return;
  }
  t->text_max = 5;
  for (size_t i = 0; i < r->nsteps; i++) ix[i] = i;
  steps_rep = r;
  qsort(ix, r->nsteps, sizeof *ix, cmp_step);
  for (size_t i = 0, made = loom__model_limit(m, t, r->nsteps); i < made; i++) {
    const loom__rstep *st = &r->steps[ix[i]];
    loom__table_str(t, loom__report_str(r, st->name));
    loom__table_int(t, st->ts - r->t0);
    loom__table_int(t, st->dur);
    loom__table_int(t, st->dev_time);
    loom__table_int(t, (int64_t)st->dev_count);
  }
  free(ix);
}

/* ---- Holistic Trace Analysis ---------------------------------------------------- */
#define PCTG(key, title) {key, title, LOOM__COL_PCT, 0, 2, 2}
static const loom__col hta_cols[] = {
    {"last_step_left_out", "last profiler step left out", LOOM__COL_BOOL},
    {"events", "GPU events", LOOM__COL_INT},
    {"temporal_breakdown.kernel_time_ns", "kernel time", LOOM__COL_US},
    {"temporal_breakdown.idle_time_ns", "idle", LOOM__COL_US},
    {"temporal_breakdown.compute_time_ns", "compute", LOOM__COL_US},
    {"temporal_breakdown.non_compute_time_ns", "non-compute", LOOM__COL_US},
    PCTG("temporal_breakdown.idle_time_pctg", "idle"),
    PCTG("temporal_breakdown.compute_time_pctg", "compute"),
    PCTG("temporal_breakdown.non_compute_time_pctg", "non-compute"),
    PCTG("comp_comm_overlap_pctg", "communication overlapped by computation"),
    {"rounded_to_us", "events rounded to whole us (fractional timestamps)", LOOM__COL_BOOL}};
static const loom__col ktype_cols[] = {{"kernel_type", "kernel type", LOOM__COL_STR},
                                       {"sum_ns", "time", LOOM__COL_US},
                                       {"percentage", "share", LOOM__COL_PCT, 0, 1, 1}};
static const loom__col launch_cols[] = {
    {"launches", "launches", LOOM__COL_INT},
    {"launch_delay.count", "delays", LOOM__COL_INT, LOOM__CF_JSON_ONLY},
    {"launch_delay.mean_ns", "delay mean", LOOM__COL_US},
    {"launch_delay.p50_ns", "delay p50", LOOM__COL_US},
    {"launch_delay.p95_ns", "delay p95", LOOM__COL_US},
    {"launch_delay.min_ns", "delay min", LOOM__COL_US},
    {"launch_delay.max_ns", "delay max", LOOM__COL_US},
    {"launch_delay.exact", "exact", LOOM__COL_BOOL, LOOM__CF_JSON_ONLY},
    {"runtime_over_50us", "calls over 50 us", LOOM__COL_INT},
    {"launch_delay_over_100us", "delays over 100 us", LOOM__COL_INT},
    {"short_kernels", "short kernels", LOOM__COL_INT}};
static const loom__col idle_cols[] = {
    {"stream", "stream", LOOM__COL_INT}, {"idle_category", "idle category", LOOM__COL_STR},
    {"idle_time_ns", "idle time", LOOM__COL_US}, {"intervals", "intervals", LOOM__COL_INT},
    {"idle_time_ratio", "ratio", LOOM__COL_NUM, 0, 2, 2}};
static const char *const class_label[8] = {
    NULL, "COMPUTATION", "COMMUNICATION", "COMPUTATION overlapping COMMUNICATION", "MEMORY",
    "COMPUTATION overlapping MEMORY", "COMMUNICATION overlapping MEMORY",
    "COMPUTATION overlapping COMMUNICATION overlapping MEMORY"};
static const char *const idle_name[3] = {"host_wait", "kernel_wait", "other"};

static void hta_temporal(const loom__report *r, loom__model *m, int hide) {
  const loom__rhta *H = &r->hta;
  loom__hta_temporal h;
  loom__hta_temporal_of(H, &h);
  loom__table *t =
      loom__model_add(m, "hta",
                      "Holistic Trace Analysis figures (its definitions, docs/report.md): "
                      "temporal breakdown",
                      hta_cols, NCOLS(hta_cols), LOOM__TF_RECORD | hide);
  loom__table_int(t, H->last_step_dropped);
  loom__table_int(t, (int64_t)H->nevents);
  loom__table_int(t, h.kernel_time);
  loom__table_int(t, h.idle);
  loom__table_int(t, h.compute);
  loom__table_int(t, h.non_compute);
  loom__table_pct(t, h.idle_pct);
  loom__table_pct(t, h.compute_pct);
  loom__table_pct(t, h.non_compute_pct);
  if (h.comm_comp_overlap_pct >= 0) loom__table_pct(t, h.comm_comp_overlap_pct);
  else loom__table_null(t); /* no communication */
  loom__table_int(t, H->rounded);
}

static void hta_launches(const loom__report *r, loom__model *m, int hide) {
  const loom__rhta *H = &r->hta;
  loom__table *t = loom__model_add(m, "hta.launch_stats",
                                   "HTA kernel launch statistics (delay: max(0, device "
                                   "start - call end))",
                                   launch_cols, NCOLS(launch_cols), LOOM__TF_RECORD | hide);
  loom__table_int(t, (int64_t)H->launches);
  loom__report_dist(t, &H->delay);
  loom__table_int(t, (int64_t)H->long_runtime);
  loom__table_int(t, (int64_t)H->long_delay);
  loom__table_int(t, (int64_t)H->short_kernels);
}

static void hta_idle(const loom__report *r, loom__model *m, int hide) {
  const loom__rhta *H = &r->hta;
  loom__table *t = loom__model_add(m, "hta.idle_time_breakdown", "HTA idle time per stream",
                                   idle_cols, NCOLS(idle_cols), LOOM__TF_ALL | hide);
  for (size_t k = 0; k < H->nstreams; k++) {
    const loom__hstream *st = &H->streams[k];
    int64_t all = st->idle[0] + st->idle[1] + st->idle[2];
    for (int c = 0; c < 3; c++) {
      if (!st->seen[c]) continue;
      loom__table_int(t, st->stream);
      loom__table_str(t, idle_name[c]);
      loom__table_int(t, st->idle[c]);
      loom__table_int(t, (int64_t)st->nidle[c]);
      if (all) loom__table_num(t, (double)st->idle[c] / (double)all);
      else loom__table_null(t); /* 0 / 0, NaN in HTA */
    }
  }
}

void loom__report_hta(const loom__report *r, loom__model *m) {
  const loom__rhta *H = &r->hta;
  int hide = H->nevents ? 0 : HIDDEN;
  hta_temporal(r, m, hide);
  loom__table *t =
      loom__model_add(m, "hta.kernel_types", "HTA kernel types (time when exactly these run)",
                      ktype_cols, NCOLS(ktype_cols), LOOM__TF_ALL | hide);
  int64_t tot = 0;
  for (unsigned k = 1; k < 8; k++) tot += loom__umeas_exact(&H->m, k);
  for (unsigned k = 1; k < 8; k++) {
    int64_t x = loom__umeas_exact(&H->m, k);
    if (x <= 0) continue;
    loom__table_str(t, class_label[k]);
    loom__table_int(t, x);
    loom__table_pct(t, pct(x, tot));
  }
  hta_launches(r, m, hide);
  hta_idle(r, m, hide);
}

/* ---- not understood ------------------------------------------------------------- */
static const loom__col cat_cols[] = {{"category", "category", LOOM__COL_STR},
                                     {"events", "events", LOOM__COL_INT}};
static const loom__col unk_cols[] = {
    {"device_work_without_launch", "device work items with no launch call (no latency, no range)",
     LOOM__COL_INT},
    {"unclosed_ranges", "ranges still open when the trace ended", LOOM__COL_INT}};

static const loom__col bad_cols[] = {
    {"kind", "kind", LOOM__COL_STR}, {"count", "count", LOOM__COL_INT},
    {"example", "first", LOOM__COL_STR}, {"kept_as", "kept as", LOOM__COL_STR}};

/* Values the reader could not keep as written (docs/formats.md), by kind. */
static void not_understood_values(const loom__report *r, loom__model *m) {
  const loom__bad *b = &r->meta->bad;
  int any = 0;
  for (int k = 0; k < LOOM__BAD_COUNT_; k++) any |= b->count[k] != 0;
  loom__table *t = loom__model_add(m, "not_understood.values",
                                   "Not understood: values and events that "
                                   "could not be kept as written",
                                   bad_cols, 4, LOOM__TF_ALL | (any ? 0 : HIDDEN));
  for (int k = 0; k < LOOM__BAD_COUNT_; k++) {
    if (!b->count[k]) continue;
    loom__table_str(t, loom__bad_name(k));
    loom__table_int(t, (int64_t)b->count[k]);
    loom__table_str(t, loom__report_str(r, b->example[k]));
    loom__table_str(t, loom__bad_kept(k));
  }
}

void loom__report_unknown(const loom__report *r, loom__model *m) {
  loom__table *t = loom__model_add(m, "not_understood.categories",
                                   "Not understood: categories of no known "
                                   "kind (not analysed)",
                                   cat_cols, 2, LOOM__TF_ALL);
  for (size_t i = 0; i < r->nunknown; i++) {
    loom__table_str(t, r->unknown[i].cat ? loom__report_str(r, r->unknown[i].cat) : "");
    loom__table_int(t, (int64_t)r->unknown[i].count);
  }
  not_understood_values(r, m);
  t = loom__model_add(m, "not_understood", "Incomplete", unk_cols, 2,
                      LOOM__TF_RECORD | (r->orphan_work || r->unclosed ? 0 : HIDDEN));
  loom__table_int(t, (int64_t)r->orphan_work);
  loom__table_int(t, (int64_t)r->unclosed);
}
