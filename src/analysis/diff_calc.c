/*
 * diff_calc.c - the rows of `loom diff` once both runs are read (diff.h):
 * every name of either run with its difference, the test that says whether
 * the difference is more than the runs' own spread, and the verdict.
 *
 * The test (docs/report.md, "loom diff"): a name's samples are its time in
 * each compared step (0 in a step it did not run in) when both runs have
 * LOOM__DIFF_MIN_STEPS steps or more, else its occurrences' durations.
 * Only names whose change could matter are tested: at least min_change of
 * the name's own base time and min_share of the base run's time, and not a
 * wait (a synchronisation call waits longer because what it waits for got
 * slower: it is shown, never called a cause).  Mann-Whitney's U test, then
 * Holm's correction over the names tested, so that the chance of calling
 * any name changed when none is stays below alpha.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"

const char *loom__diff_group_name(int group) {
  static const char *n[] = {"kernel", "copy", "fill", "op", "range", "call", "wait"};
  return group >= 0 && group < LOOM__DG_COUNT_ ? n[group] : "?";
}

/* ---- Mann-Whitney's U ------------------------------------------------------ */
/* P(U <= u) for m and n values without ties: the coefficients of the
 * Gaussian binomial [m+n choose m]_q count the arrangements by U. */
static double exact_cdf(size_t m, size_t n, double u) {
  size_t deg = m * n, size = deg + m + n + 1;
  double *c = calloc(size, sizeof *c);
  if (!c) return NAN;
  c[0] = 1;
  size_t top = 0;
  for (size_t i = 1; i <= m; i++) { /* times (1 - q^(n+i)), then over (1 - q^i) */
    size_t s = n + i;
    top += s;
    for (size_t k = top; k >= s; k--) c[k] -= c[k - s];
    for (size_t k = i; k <= top; k++) c[k] += c[k - i];
    top -= i;
  }
  double below = 0, all = 0;
  for (size_t k = 0; k <= deg; k++) {
    all += c[k];
    if ((double)k <= u + 1e-9) below += c[k];
  }
  free(c);
  return below / all;
}

double loom__mwu(const loom__wv *x, size_t nx, const loom__wv *y, size_t ny, double *u) {
  double m = 0, n = 0, rx = 0, ties = 0, rank = 0;
  int tied = 0;
  for (size_t i = 0; i < nx; i++) m += (double)x[i].c;
  for (size_t j = 0; j < ny; j++) n += (double)y[j].c;
  *u = NAN;
  if (m == 0 || n == 0) return NAN;
  for (size_t i = 0, j = 0; i < nx || j < ny;) { /* merge, one tie group at a time */
    double v = j >= ny || (i < nx && x[i].v <= y[j].v) ? x[i].v : y[j].v;
    double cx = i < nx && x[i].v == v ? (double)x[i++].c : 0;
    double cy = j < ny && y[j].v == v ? (double)y[j++].c : 0;
    double t = cx + cy;
    rx += cx * (rank + (t + 1) / 2);
    rank += t;
    if (t > 1) tied = 1, ties += t * t * t - t;
  }
  *u = rx - m * (m + 1) / 2;
  double lo = *u < m * n - *u ? *u : m * n - *u;
  if (!tied && m + n <= 50) {
    double p = 2 * exact_cdf((size_t)m, (size_t)n, lo);
    return p > 1 ? 1 : p;
  }
  double N = m + n, var = m * n / 12 * ((N + 1) - ties / (N * (N - 1)));
  if (var <= 0) return 1;
  double z = (m * n / 2 - lo - 0.5) / sqrt(var);
  return z <= 0 ? 1 : erfc(z / sqrt(2));
}

/* ---- samples --------------------------------------------------------------- */
typedef struct wlist {
  loom__wv *v;
  size_t n, cap;
  double total;   /* sum of counts */
  int oom;
} wlist;

static void wl_add(void *ctx, double v, uint64_t c) {
  wlist *w = ctx;
  if (w->n && w->v[w->n - 1].v == v) w->v[w->n - 1].c += c;
  else if (LOOM__PUSH(w->v, w->n, w->cap, ((loom__wv){v, c}))) w->oom = 1;
  w->total += (double)c;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* A name's samples in one run (e: its entry, NULL when absent). */
static void samples(loom__dside *s, loom__dent *e, int basis, wlist *w) {
  if (basis == LOOM__DT_STEPS) {
    size_t cells = e ? e->ncell : 0, zeros = s->nsteps > cells ? s->nsteps - cells : 0;
    if (zeros) wl_add(w, 0, zeros);
    if (!cells) return;
    qsort(e->cell, cells, sizeof *e->cell, cmp_i64);
    for (size_t i = 0; i < cells; i++) wl_add(w, (double)e->cell[i], 1);
  } else if (e) {
    int host = e->group == LOOM__DG_OP || e->group == LOOM__DG_RANGE;
    loom__qs_each(host ? &e->qm : &e->q, wl_add, w);
  }
}

/* The median of a sample list (numpy's rule: the mean of the middle two). */
static double wl_median(const wlist *w) {
  if (!w->total) return NAN;
  double k0 = floor((w->total - 1) / 2), k1 = ceil((w->total - 1) / 2), seen = 0, a = NAN;
  for (size_t i = 0; i < w->n; i++) {
    double next = seen + (double)w->v[i].c;
    if (isnan(a) && k0 < next) a = w->v[i].v;
    if (k1 < next) return (a + w->v[i].v) / 2;
    seen = next;
  }
  return a;
}

/* The interquartile mean: the mean of the middle half of the samples (each
 * value weighted by how much of it lies between the quartiles).  As robust
 * as the median to a few slow steps, yet it moves when a name that runs in
 * a third of the steps gets slower; the mean when it is 0. */
static double wl_iqm(const wlist *w) {
  if (!w->total) return NAN;
  double lo = w->total / 4, hi = w->total * 3 / 4, seen = 0, sum = 0, all = 0;
  for (size_t i = 0; i < w->n; i++) {
    double next = seen + (double)w->v[i].c;
    double a = seen > lo ? seen : lo, b = next < hi ? next : hi;
    if (b > a) sum += (b - a) * w->v[i].v;
    all += (double)w->v[i].c * w->v[i].v;
    seen = next;
  }
  return sum > 0 ? sum / (hi - lo) : all / w->total;
}

/* ---- rows ------------------------------------------------------------------- */
static loom__dent *ent(loom__diff *d, const loom__drow *r, int k) {
  return r->e[k] >= 0 ? &d->side[k].e[r->e[k]] : NULL;
}

/* Whether the row's change could matter (docs/report.md): across steps,
 * by the shift of its typical step (interquartile means) against base's
 * typical step; by occurrence, by its total against base's run time. */
static int matters(const loom__diff *d, const loom__drow *r, int64_t mb) {
  if (r->group == LOOM__DG_WAIT) return 0;
  double eff = (double)r->added, own = (double)mb, run = (double)d->side[0].run_time;
  if (r->basis == LOOM__DT_STEPS) eff = r->med[1] - r->med[0], own = r->med[0], run = d->step_iqm;
  if (eff == 0 || (r->basis == LOOM__DT_STEPS && (eff > 0) != (r->added > 0))) return 0;
  return fabs(eff) >= d->o.min_share * run && (own <= 0 || fabs(eff) >= d->o.min_change * own);
}

/* The row's difference, typical values and raw p; 1 when it is a
 * candidate (tested). */
static int judge(loom__diff *d, loom__drow *r) {
  loom__dent *b = ent(d, r, 0), *n = ent(d, r, 1);
  int64_t mb = b ? b->measure : 0, mn = n ? n->measure : 0;
  size_t kb = d->side[0].nsteps, kn = d->side[1].nsteps;
  r->added = kb && kn ? (int64_t)llround((double)mn * (double)kb / (double)kn) - mb : mn - mb;
  r->change_pct = mb > 0 ? 100.0 * (double)r->added / (double)mb : NAN;
  r->basis = d->basis;
  if ((b && b->partial) || (n && n->partial)) r->basis = LOOM__DT_OCCURRENCES;
  wlist w[2];
  memset(w, 0, sizeof w);
  samples(&d->side[0], b, r->basis, &w[0]);
  samples(&d->side[1], n, r->basis, &w[1]);
  for (int k = 0; k < 2; k++) r->med[k] = r->basis == LOOM__DT_STEPS ? wl_iqm(&w[k])
                                                                      : wl_median(&w[k]);
  double u;
  int cand = matters(d, r, mb);
  r->p = cand ? loom__mwu(w[0].v, w[0].n, w[1].v, w[1].n, &u) : NAN;
  if (w[0].oom || w[1].oom) r->p = NAN; /* untested rather than wrong */
  free(w[0].v);
  free(w[1].v);
  if (cand && isnan(r->p)) r->basis = LOOM__DT_NONE;
  return cand && !isnan(r->p);
}

static _Thread_local const loom__diff *sort_d;
static int cmp_p(const void *pa, const void *pb) {
  double a = sort_d->rows[*(const size_t *)pa].p, b = sort_d->rows[*(const size_t *)pb].p;
  return a < b ? -1 : a > b;
}

static int cmp_rows(const void *pa, const void *pb) {
  const loom__drow *a = pa, *b = pb;
  int64_t x = llabs(a->added), y = llabs(b->added);
  if (x != y) return x > y ? -1 : 1;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  return strcmp(loom__strtab_get(&sort_d->strs, a->sid), loom__strtab_get(&sort_d->strs, b->sid));
}

/* Holm's step-down correction over the candidates; their verdicts. */
static int holm(loom__diff *d, const size_t *cand, size_t m) {
  size_t *o = malloc((m + 1) * sizeof *o);
  if (!o) return -1;
  memcpy(o, cand, m * sizeof *o);
  sort_d = d;
  qsort(o, m, sizeof *o, cmp_p);
  double run = 0;
  for (size_t j = 0; j < m; j++) {
    loom__drow *r = &d->rows[o[j]];
    double adj = (double)(m - j) * r->p;
    run = adj > run ? adj : run;
    r->p = run > 1 ? 1 : run;
    if (r->p < d->o.alpha) r->verdict = r->added > 0 ? 1 : -1; /* matters(): signs agree */
  }
  free(o);
  return 0;
}

/* Step times of both runs: the U test's p (NAN without steps). */
static double step_test(loom__diff *d) {
  wlist w[2];
  memset(w, 0, sizeof w);
  for (int k = 0; k < 2; k++) {
    loom__dside *s = &d->side[k];
    int64_t *v = malloc((s->nsteps + 1) * sizeof *v);
    if (!v) return NAN;
    for (size_t i = 0; i < s->nsteps; i++) v[i] = s->steps[i].dur;
    qsort(v, s->nsteps, sizeof *v, cmp_i64);
    for (size_t i = 0; i < s->nsteps; i++) wl_add(&w[k], (double)v[i], 1);
    free(v);
  }
  double u, p = w[0].oom || w[1].oom ? NAN : loom__mwu(w[0].v, w[0].n, w[1].v, w[1].n, &u);
  d->step_iqm = wl_iqm(&w[0]);
  free(w[0].v);
  free(w[1].v);
  return p;
}

static int add_row(loom__diff *d, size_t *cap, uint8_t g, uint32_t sid, int32_t b, int32_t n) {
  loom__drow r;
  memset(&r, 0, sizeof r);
  r.group = g;
  r.sid = sid;
  r.e[0] = b;
  r.e[1] = n;
  return LOOM__PUSH(d->rows, d->nrows, *cap, r);
}

int loom__diff_rows(loom__diff *d) {
  size_t cap = 0;
  loom__dside *b = &d->side[0], *n = &d->side[1];
  d->basis = b->nsteps >= LOOM__DIFF_MIN_STEPS && n->nsteps >= LOOM__DIFF_MIN_STEPS
                 ? LOOM__DT_STEPS : LOOM__DT_OCCURRENCES;
  for (size_t i = 0; i < b->n; i++) {
    uint64_t *j = loom__map_get(&n->of, (uint64_t)b->e[i].group << 32 | b->e[i].sid);
    if (add_row(d, &cap, b->e[i].group, b->e[i].sid, (int32_t)i, j ? (int32_t)(*j - 1) : -1))
      return -1;
  }
  for (size_t i = 0; i < n->n; i++)
    if (!loom__map_get(&b->of, (uint64_t)n->e[i].group << 32 | n->e[i].sid) &&
        add_row(d, &cap, n->e[i].group, n->e[i].sid, -1, (int32_t)i))
      return -1;
  d->step_p = step_test(d); /* before the rows: they use base's typical step */
  size_t *cand = malloc((d->nrows + 1) * sizeof *cand), m = 0;
  if (!cand) return -1;
  for (size_t i = 0; i < d->nrows; i++)
    if (judge(d, &d->rows[i])) cand[m++] = i;
  d->tested = m;
  int rc = holm(d, cand, m);
  free(cand);
  sort_d = d;
  qsort(d->rows, d->nrows, sizeof *d->rows, cmp_rows);
  return rc;
}
