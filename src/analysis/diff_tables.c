/*
 * diff_tables.c - `loom diff` as tables of the report model (table.h), so
 * that text, JSON (schema "loom-diff/1", docs/report.md) and HTML come from
 * the report's renderers; and the public API (loom_diff_*).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "diff.h"
#include "export/outfile.h"
#include "util/util.h"

#define NCOLS(a) (sizeof a / sizeof a[0])

static const char *S(const loom__diff *d, uint32_t sid) { return loom__strtab_get(&d->strs, sid); }

static void real_or_null(loom__table *t, double v) {
  if (isnan(v)) loom__table_null(t);
  else loom__table_real(t, v);
}
static void pct_or_null(loom__table *t, double v) {
  if (isnan(v)) loom__table_null(t);
  else loom__table_pct(t, v);
}
static void num_or_null(loom__table *t, double v) {
  if (isnan(v)) loom__table_null(t);
  else loom__table_num(t, v);
}

static const char *basis_name(int b) {
  return b == LOOM__DT_STEPS ? "steps" : b == LOOM__DT_OCCURRENCES ? "occurrences" : "none";
}

/* ---- the runs --------------------------------------------------------------- */
#define RUN_COLS(s)                                                                            \
  {s ".traces", s " traces", LOOM__COL_STR, LOOM__CF_NOTEXT},                                  \
      {s ".ranks", s " ranks", LOOM__COL_INT}, {s ".events", s " events", LOOM__COL_INT},      \
      {s ".steps", s " steps", LOOM__COL_INT}, {s ".run_time_ns", s " run time", LOOM__COL_NS}, \
      {s ".step_mean_ns", s " step mean", LOOM__COL_NS},                                       \
      {s ".step_p50_ns", s " step p50", LOOM__COL_NS}
static const loom__col run_cols[] = {
    {"schema", "schema", LOOM__COL_STR, LOOM__CF_JSON_ONLY},
    RUN_COLS("base"),
    RUN_COLS("new"),
    {"step_time.change_pct", "step time change", LOOM__COL_PCT},
    {"step_time.p_value", "step time p (U test)", LOOM__COL_NUM, 0, 6, 15},
    {"test.basis", "test across", LOOM__COL_STR},
    {"test.alpha", "alpha", LOOM__COL_NUM},
    {"test.min_change_pct", "min change", LOOM__COL_PCT},
    {"test.min_share_pct", "min share of run", LOOM__COL_PCT},
    {"test.names_tested", "names tested", LOOM__COL_INT}};

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Mean and p50 (numpy's) of a run's step times; *mean NAN without steps. */
static void step_stats(const loom__dside *s, double *mean, double *p50) {
  *mean = *p50 = NAN;
  int64_t *v = malloc((s->nsteps + 1) * sizeof *v), sum = 0;
  if (!v || !s->nsteps) {
    free(v);
    return;
  }
  for (size_t i = 0; i < s->nsteps; i++) sum += v[i] = s->steps[i].dur;
  qsort(v, s->nsteps, sizeof *v, cmp_i64);
  *mean = (double)sum / (double)s->nsteps;
  *p50 = ((double)v[(s->nsteps - 1) / 2] + (double)v[s->nsteps / 2]) / 2;
  free(v);
}

static void run_cells(const loom__diff *d, loom__table *t, int k, double *mean) {
  const loom__dside *s = &d->side[k];
  size_t len = 1;
  for (size_t i = 0; i < s->nranks; i++) len += strlen(S(d, s->ranks[i].path)) + 2;
  char *paths = malloc(len);
  if (paths) {
    paths[0] = 0;
    for (size_t i = 0; i < s->nranks; i++)
      strcat(strcat(paths, i ? ", " : ""), S(d, s->ranks[i].path));
  }
  loom__table_str(t, paths ? paths : "");
  free(paths);
  loom__table_int(t, (int64_t)s->nranks);
  loom__table_int(t, (int64_t)s->events);
  loom__table_int(t, (int64_t)s->nsteps);
  loom__table_int(t, s->run_time);
  double p50;
  step_stats(s, mean, &p50);
  real_or_null(t, *mean);
  real_or_null(t, p50);
}

/* What was tested, and whether any test could succeed, under the runs. */
static void test_notes(const loom__diff *d, loom__table *t) {
  loom__table_note(t, "%zu name%s tested (Mann-Whitney U across %s, Holm-corrected, alpha %g): "
                   "only changes of %g%% of a name's base time and %g%% of base's run time or "
                   "more; waits (synchronisation calls) are never tested",
                   d->tested, d->tested == 1 ? "" : "s",
                   d->basis == LOOM__DT_STEPS ? "steps" : "occurrences", d->o.alpha,
                   100 * d->o.min_change, 100 * d->o.min_share);
  if (d->basis != LOOM__DT_STEPS || !d->tested) return;
  double nb = (double)d->side[0].nsteps, nn = (double)d->side[1].nsteps;
  double least = 2 * exp(lgamma(nb + 1) + lgamma(nn + 1) - lgamma(nb + nn + 1));
  if (least * (double)d->tested >= d->o.alpha)
    loom__table_note(t, "%g and %g steps: no test of %zu names can reach alpha %g (the least p is "
                     "%.2g, times the names tested); record more steps", nb, nn, d->tested,
                     d->o.alpha, least);
}

static void runs_table(const loom__diff *d, loom__model *m) {
  loom__table *t = loom__model_add(m, "", "Runs", run_cols, NCOLS(run_cols), LOOM__TF_RECORD);
  double mean[2];
  loom__table_str(t, "loom-diff/1");
  run_cells(d, t, 0, &mean[0]);
  run_cells(d, t, 1, &mean[1]);
  pct_or_null(t, mean[0] > 0 ? 100 * (mean[1] - mean[0]) / mean[0] : NAN);
  num_or_null(t, d->step_p);
  loom__table_str(t, basis_name(d->basis));
  loom__table_num(t, d->o.alpha);
  loom__table_pct(t, 100 * d->o.min_change);
  loom__table_pct(t, 100 * d->o.min_share);
  loom__table_int(t, (int64_t)d->tested);
  test_notes(d, t);
}

/* ---- regressions and improvements ------------------------------------------ */
static const loom__col verdict_cols[] = {
    {"group", "group", LOOM__COL_STR},
    {"name", "name", LOOM__COL_STR},
    {"base_ns", "base", LOOM__COL_US},
    {"new_ns", "new", LOOM__COL_US},
    {"added_ns", "added", LOOM__COL_US},
    {"change_pct", "change", LOOM__COL_PCT},
    {"base_typical_ns", "base typical", LOOM__COL_US},
    {"new_typical_ns", "new typical", LOOM__COL_US},
    {"p_value", "p", LOOM__COL_NUM, 0, 6, 15},
    {"test", "across", LOOM__COL_STR}};

static const loom__dent *ent(const loom__diff *d, const loom__drow *r, int k) {
  return r->e[k] >= 0 ? &d->side[k].e[r->e[k]] : NULL;
}

static void verdict_row(const loom__diff *d, loom__table *t, const loom__drow *r) {
  const loom__dent *b = ent(d, r, 0), *n = ent(d, r, 1);
  loom__table_str(t, loom__diff_group_name(r->group));
  loom__table_str(t, S(d, r->sid));
  loom__table_int(t, b ? b->measure : 0);
  loom__table_int(t, n ? n->measure : 0);
  loom__table_int(t, r->added);
  pct_or_null(t, r->change_pct);
  real_or_null(t, r->med[0]);
  real_or_null(t, r->med[1]);
  num_or_null(t, r->p);
  loom__table_str(t, basis_name(r->basis));
}

static void verdict_table(const loom__diff *d, loom__model *m, int verdict) {
  size_t n = 0;
  for (size_t i = 0; i < d->nrows; i++) n += d->rows[i].verdict == verdict;
  loom__table *t = loom__model_add(m, verdict > 0 ? "regressions" : "improvements", "",
                                   verdict_cols, NCOLS(verdict_cols), LOOM__TF_OWN_COUNT);
  if (!t) return;
  size_t made = loom__model_limit(m, t, n);
  loom__table_retitle(t, "%s (%zu name%s%s; by time %s, self time for ops and ranges)",
                      verdict > 0 ? "Regressions: slower in new" : "Improvements: faster in new",
                      n, n == 1 ? "" : "s", made < n ? ", top shown" : "",
                      verdict > 0 ? "added" : "saved");
  /* rows are ordered by the size of the change: regressions by time added */
  for (size_t i = 0, k = 0; i < d->nrows && k < made; i++)
    if (d->rows[i].verdict == verdict) verdict_row(d, t, &d->rows[i]), k++;
}

/* ---- names that appear or disappear ------------------------------------------- */
static const loom__col gone_cols[] = {{"group", "group", LOOM__COL_STR},
                                      {"name", "name", LOOM__COL_STR},
                                      {"count", "count", LOOM__COL_INT},
                                      {"total_ns", "total", LOOM__COL_US}};

static void gone_table(const loom__diff *d, loom__model *m, int side) {
  size_t n = 0;
  for (size_t i = 0; i < d->nrows; i++) n += d->rows[i].e[!side] < 0;
  loom__table *t = loom__model_add(m, side ? "appeared" : "disappeared", "", gone_cols,
                                   NCOLS(gone_cols), LOOM__TF_OWN_COUNT);
  if (!t) return;
  size_t made = loom__model_limit(m, t, n);
  loom__table_retitle(t, "%s (%zu name%s%s)", side ? "Names only in new" : "Names only in base",
                      n, n == 1 ? "" : "s", made < n ? ", top shown" : "");
  for (size_t i = 0, k = 0; i < d->nrows && k < made; i++) {
    const loom__drow *r = &d->rows[i];
    if (r->e[!side] >= 0) continue;
    const loom__dent *e = ent(d, r, side);
    loom__table_str(t, loom__diff_group_name(r->group));
    loom__table_str(t, S(d, r->sid));
    loom__table_int(t, (int64_t)e->count);
    loom__table_int(t, e->total);
    k++;
  }
}

/* ---- per group -------------------------------------------------------------- */
/* Text and HTML show base, new and their difference side by side; JSON
 * nests each run's figures in one object ("base", "new"). */
#define TXT LOOM__CF_NOJSON
#define JSN LOOM__CF_JSON_ONLY
#define RUN_FIGS(s)                                                                             \
  {s ".count", s, LOOM__COL_INT, JSN}, {s ".total_ns", s, LOOM__COL_US, JSN},                 \
      {s ".mean_ns", s, LOOM__COL_US, JSN}, {s ".p50_ns", s, LOOM__COL_US, JSN},               \
      {s ".self_ns", s, LOOM__COL_US, JSN}
static const loom__col name_cols[] = {
    {"name", "name", LOOM__COL_STR},
    {"", "count base", LOOM__COL_INT, TXT}, {"", "new", LOOM__COL_INT, TXT},
    {"", "diff", LOOM__COL_INT, TXT},
    {"", "total base", LOOM__COL_US, TXT}, {"", "new", LOOM__COL_US, TXT},
    {"", "diff", LOOM__COL_US, TXT},
    {"", "mean base", LOOM__COL_US, TXT}, {"", "new", LOOM__COL_US, TXT},
    {"", "p50 base", LOOM__COL_US, TXT}, {"", "new", LOOM__COL_US, TXT},
    RUN_FIGS("base"),
    RUN_FIGS("new"),
    {"count_diff", "count diff", LOOM__COL_INT, JSN},
    {"total_diff_ns", "total diff", LOOM__COL_US, JSN},
    {"mean_diff_ns", "mean diff", LOOM__COL_US, LOOM__CF_NOTEXT},
    {"p50_diff_ns", "p50 diff", LOOM__COL_US, LOOM__CF_NOTEXT},
    {"added_ns", "added", LOOM__COL_US},
    {"change_pct", "change", LOOM__COL_PCT},
    {"p_value", "p", LOOM__COL_NUM, 0, 6, 15},
    {"verdict", "verdict", LOOM__COL_STR}};

static const struct {
  const char *path, *title;
} groups[LOOM__DG_COUNT_] = {{"names.kernels", "Kernels"},
                             {"names.copies", "Copies by direction"},
                             {"names.fills", "Fills"},
                             {"names.ops", "Framework ops"},
                             {"names.user_ranges", "User ranges"},
                             {"names.runtime_calls", "Runtime calls"},
                             {"names.waits", "Waits (synchronisation calls)"}};

/* One run's figures of a name: count, total, mean, p50 (what = 0..3),
 * measure (4). */
static void side_cells(loom__table *t, const loom__dent *e, int what) {
  loom__qs *q = e ? (loom__qs *)&e->q : NULL; /* quantiles sort samples in place */
  if (what == 0) loom__table_int(t, e ? (int64_t)e->count : 0);
  else if (what == 1) loom__table_int(t, e ? e->total : 0);
  else if (what == 2) real_or_null(t, e && e->count ? (double)e->total / (double)e->count : NAN);
  else if (what == 3) real_or_null(t, e ? loom__qs_quantile(q, 0.5) : NAN);
  else loom__table_int(t, e ? e->measure : 0);
}

static void name_row(const loom__diff *d, loom__table *t, const loom__drow *r) {
  const loom__dent *b = ent(d, r, 0), *n = ent(d, r, 1);
  int64_t dc = (int64_t)(n ? n->count : 0) - (int64_t)(b ? b->count : 0);
  int64_t dt = (n ? n->total : 0) - (b ? b->total : 0);
  loom__table_str(t, S(d, r->sid));
  for (int what = 0; what < 4; what++) { /* text: base, new (, diff) side by side */
    side_cells(t, b, what);
    side_cells(t, n, what);
    if (what < 2) loom__table_int(t, what ? dt : dc);
  }
  for (int k = 0; k < 2; k++) /* JSON: each run's figures together */
    for (int what = 0; what < 5; what++) side_cells(t, k ? n : b, what);
  loom__table_int(t, dc);
  loom__table_int(t, dt);
  loom__qs *qb = b ? (loom__qs *)&b->q : NULL, *qn = n ? (loom__qs *)&n->q : NULL;
  real_or_null(t, b && n ? (double)n->total / (double)n->count - (double)b->total / (double)b->count
                         : NAN);
  real_or_null(t, b && n ? loom__qs_quantile(qn, 0.5) - loom__qs_quantile(qb, 0.5) : NAN);
  loom__table_int(t, r->added);
  pct_or_null(t, r->change_pct);
  num_or_null(t, r->p);
  loom__table_str(t, r->verdict > 0 ? "slower" : r->verdict < 0 ? "faster" : "");
}

static void group_table(const loom__diff *d, loom__model *m, int g) {
  size_t n = 0;
  for (size_t i = 0; i < d->nrows; i++) n += d->rows[i].group == g;
  if (!n) return;
  loom__table *t = loom__model_add(m, groups[g].path, "", name_cols, NCOLS(name_cols),
                                   LOOM__TF_OWN_COUNT);
  if (!t) return;
  size_t made = loom__model_limit(m, t, n);
  loom__table_retitle(t, "%s (%zu name%s%s; by the size of the change)", groups[g].title, n,
                      n == 1 ? "" : "s", made < n ? ", top shown" : "");
  for (size_t i = 0, k = 0; i < d->nrows && k < made; i++)
    if (d->rows[i].group == g) name_row(d, t, &d->rows[i]), k++;
  if (g == LOOM__DG_OP || g == LOOM__DG_RANGE)
    loom__table_note(t, "added, change and the test: self time (in the %s itself, not in what it "
                     "called); new's time scaled to base's step count", g == LOOM__DG_OP ? "op"
                     : "range");
  else if (g == LOOM__DG_WAIT)
    loom__table_note(t, "waits grow with what they wait for: never tested");
}

/* ---- steps and ranks ------------------------------------------------------------ */
static const loom__col step_cols[] = {{"index", "step", LOOM__COL_INT},
                                      {"base.name", "base", LOOM__COL_STR},
                                      {"base.dur_ns", "base time", LOOM__COL_NS},
                                      {"new.name", "new", LOOM__COL_STR},
                                      {"new.dur_ns", "new time", LOOM__COL_NS},
                                      {"diff_ns", "diff", LOOM__COL_NS}};

static void steps_table(const loom__diff *d, loom__model *m) {
  const loom__dside *b = &d->side[0], *n = &d->side[1];
  size_t rows = b->nsteps > n->nsteps ? b->nsteps : n->nsteps;
  if (!rows) return;
  loom__table *t = loom__model_add(m, "steps", "Steps, in order", step_cols, NCOLS(step_cols), 0);
  for (size_t i = 0, made = loom__model_limit(m, t, rows); i < made; i++) {
    const loom__dstep *x = i < b->nsteps ? &b->steps[i] : NULL;
    const loom__dstep *y = i < n->nsteps ? &n->steps[i] : NULL;
    loom__table_int(t, (int64_t)i);
    for (const loom__dstep *v = x;; v = y) {
      if (v) loom__table_str(t, S(d, v->name)), loom__table_int(t, v->dur);
      else loom__table_null(t), loom__table_null(t);
      if (v == y) break;
    }
    if (x && y) loom__table_int(t, y->dur - x->dur);
    else loom__table_null(t);
  }
}

#define RANK_COLS(s)                                                                        \
  {s ".trace", s " trace", LOOM__COL_STR, LOOM__CF_NOTEXT},                                  \
      {s ".steps", s " steps", LOOM__COL_INT},                                               \
      {s ".step_time_ns", s " step time", LOOM__COL_NS},                                     \
      {s ".step_mean_ns", s " step mean", LOOM__COL_NS},                                     \
      {s ".step_p50_ns", s " step p50", LOOM__COL_NS},                                       \
      {s ".work_ns", s " device work", LOOM__COL_NS}
static const loom__col rank_cols[] = {{"rank", "rank", LOOM__COL_INT}, RANK_COLS("base"),
                                      RANK_COLS("new"),
                                      {"work_diff_ns", "work diff", LOOM__COL_NS}};

/* Mean and p50 of the steps of rank index ri of a run (NAN without). */
static void rank_steps(const loom__dside *s, size_t ri, double *mean, double *p50) {
  loom__dside one;
  memset(&one, 0, sizeof one);
  one.steps = malloc((s->nsteps + 1) * sizeof *one.steps);
  for (size_t i = 0; one.steps && i < s->nsteps; i++)
    if (s->steps[i].rank == ri) one.steps[one.nsteps++] = s->steps[i];
  step_stats(&one, mean, p50);
  free(one.steps);
}

static void rank_cells(const loom__diff *d, loom__table *t, const loom__drank *x,
                       const loom__drank *y) {
  loom__table_int(t, x ? x->rank : y->rank);
  const loom__drank *v[2] = {x, y};
  for (int k = 0; k < 2; k++) {
    if (!v[k]) {
      for (int f = 0; f < 6; f++) loom__table_null(t);
      continue;
    }
    const loom__dside *s = &d->side[k];
    double mean, p50;
    rank_steps(s, (size_t)(v[k] - s->ranks), &mean, &p50);
    loom__table_str(t, S(d, v[k]->path));
    loom__table_int(t, (int64_t)v[k]->steps);
    loom__table_int(t, v[k]->step_time);
    real_or_null(t, mean);
    real_or_null(t, p50);
    loom__table_int(t, v[k]->work);
  }
  if (x && y) loom__table_int(t, y->work - x->work);
  else loom__table_null(t);
}

/* The rank of new that pairs with base's rank i: the same rank number when
 * both runs have the same numbers, else the same place among the inputs
 * (the HTA demo's control is rank 3, its test rank 1). */
static const loom__drank *pair_of(const loom__dside *b, const loom__dside *n, size_t i,
                                  int by_number) {
  if (!by_number) return i < n->nranks ? &n->ranks[i] : NULL;
  for (size_t j = 0; j < n->nranks; j++)
    if (n->ranks[j].rank == b->ranks[i].rank) return &n->ranks[j];
  return NULL;
}

static void ranks_table(const loom__diff *d, loom__model *m) {
  const loom__dside *b = &d->side[0], *n = &d->side[1];
  loom__table *t = loom__model_add(m, "ranks", "Ranks", rank_cols, NCOLS(rank_cols), LOOM__TF_ALL);
  int by_number = b->nranks == n->nranks;
  for (size_t i = 0; i < b->nranks && by_number; i++)
    by_number = pair_of(b, n, i, 1) != NULL;
  for (size_t i = 0; i < b->nranks; i++)
    rank_cells(d, t, &b->ranks[i], pair_of(b, n, i, by_number));
  for (size_t j = b->nranks; j < n->nranks; j++) rank_cells(d, t, NULL, &n->ranks[j]);
}

void loom__diff_model(const loom__diff *d, size_t top, loom__model *m) {
  memset(m, 0, sizeof *m);
  m->top = top;
  snprintf(m->title, sizeof m->title, "loom diff: %s (base) vs %s (new)",
           S(d, d->side[0].ranks[0].path), S(d, d->side[1].ranks[0].path));
  runs_table(d, m);
  verdict_table(d, m, 1);
  verdict_table(d, m, -1);
  gone_table(d, m, 1);
  gone_table(d, m, 0);
  for (int g = 0; g < LOOM__DG_COUNT_; g++) group_table(d, m, g);
  steps_table(d, m);
  ranks_table(d, m);
  for (size_t i = 0; i < m->n; i++)
    if (m->t[i]->oom) m->oom = 1;
}

/* ---- public API ------------------------------------------------------------ */
struct loom_diff {
  loom__diff *d;
  size_t top;
};

loom_status loom_diff_open(const char *const *base, size_t nbase, const char *const *newer,
                           size_t nnew, const loom_diff_options *opts, loom_diff **out) {
  loom__clear_error();
  if (!out || !base || !newer || !nbase || !nnew)
    return loom__fail(LOOM_EINVAL, "loom_diff_open: no traces for a run, or NULL out");
  *out = NULL;
  if (opts && opts->struct_size < offsetof(loom_diff_options, min_share) + sizeof(double))
    return loom__fail(LOOM_EINVAL, "loom_diff_open: options from an unknown version "
                      "(struct_size %zu)", opts->struct_size);
  loom__diff_opts o = {0};
  if (opts) {
    o.sort_budget = opts->sort_memory;
    o.steps_set = opts->steps_set;
    o.step[0] = opts->base_step;
    o.step[1] = opts->new_step;
    o.alpha = opts->alpha;
    o.min_change = opts->min_change;
    o.min_share = opts->min_share;
  }
  loom_diff *h = calloc(1, sizeof *h);
  if (!h) return loom__fail(LOOM_ENOMEM, "out of memory");
  h->top = opts ? opts->top : 0;
  loom_status st = loom__diff_run(base, nbase, newer, nnew, &o, &h->d);
  if (st != LOOM_OK) {
    free(h);
    return st;
  }
  *out = h;
  return LOOM_OK;
}

static loom_status put(const loom__out *m, const char *path) {
  if (!path || !strcmp(path, "-")) {
    if (fwrite(m->buf, 1, m->len, stdout) != m->len || fflush(stdout))
      return loom__fail(LOOM_EIO, "cannot write the diff to standard output");
    return LOOM_OK;
  }
  loom__out f;
  loom_status st = loom__out_open(&f, path, -1);
  if (st == LOOM_OK) {
    loom__out_mem(&f, m->buf, m->len);
    st = loom__out_commit(&f);
  }
  return st;
}

loom_status loom_diff_write(const loom_diff *h, loom_report_format format, const char *path) {
  loom__clear_error();
  if (!h || format > LOOM_REPORT_HTML)
    return loom__fail(LOOM_EINVAL, "loom_diff_write: bad diff or format");
  loom__out o;
  if (loom__out_mem_init(&o)) return loom__fail(LOOM_ENOMEM, "out of memory");
  loom__model m;
  loom__diff_model(h->d, h->top, &m);
  if (m.oom) o.failed = ENOMEM;
  else if (format == LOOM_REPORT_TEXT) loom__model_text(&m, &o);
  else if (format == LOOM_REPORT_JSON) loom__model_json(&m, &o);
  else loom__model_html(&m, &o);
  loom__model_free(&m);
  loom_status st = o.failed ? loom__fail(LOOM_ENOMEM, "out of memory writing the diff")
                            : put(&o, path);
  free(o.buf);
  return st;
}

void loom_diff_free(loom_diff *h) {
  if (!h) return;
  loom__diff_free(h->d);
  free(h);
}
