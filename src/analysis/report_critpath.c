/*
 * report_critpath.c - the critical-path section of the report (docs/report.md, "Critical
 * path" and "Bound"): the paths' time by class, each step's path with its bound and the
 * evidence for it, the ops and device work on the paths with their contribution, and the
 * slack of work off them; tables of the report model, so text, JSON and HTML agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "critpath.h"
#include "report_model.h"
#include "table.h"

#define NCOLS(a) (sizeof a / sizeof a[0])
static const loom__col cls_cols[] = {{"class", "class", LOOM__COL_STR},
                                     {"time_ns", "time", LOOM__COL_NS},
                                     {"share_pct", "share", LOOM__COL_PCT}};
static const loom__col step_cols[] = {
    {"step", "step", LOOM__COL_STR},         {"pid", "pid", LOOM__COL_INT},
    {"start_ns", "start", LOOM__COL_NS},
    {"length_ns", "length", LOOM__COL_NS},   {"host_ns", "host", LOOM__COL_NS},
    {"launch_ns", "launch", LOOM__COL_NS},   {"compute_ns", "compute", LOOM__COL_NS},
    {"copy_ns", "copy", LOOM__COL_NS},       {"sync_ns", "sync", LOOM__COL_NS},
    {"communication_ns", "comm", LOOM__COL_NS}, {"waiting_ns", "waiting", LOOM__COL_NS},
    {"events", "events", LOOM__COL_INT},     {"on_path", "on path", LOOM__COL_INT},
    {"bound", "bound", LOOM__COL_STR},       {"evidence", "evidence", LOOM__COL_STR}};
static const loom__col evid_cols[] = {
    {"step", "step", LOOM__COL_STR},   {"bound", "bound", LOOM__COL_STR},
    {"name", "name", LOOM__COL_STR},   {"kind", "kind", LOOM__COL_STR},
    {"count", "events", LOOM__COL_INT}, {"time_ns", "time on path", LOOM__COL_NS},
    {"share_pct", "of path", LOOM__COL_PCT}};
static const loom__col on_cols[] = {
    {"name", "name", LOOM__COL_STR},   {"kind", "kind", LOOM__COL_STR},
    {"class", "class", LOOM__COL_STR}, {"on_path", "on path", LOOM__COL_INT},
    {"time_ns", "time on path", LOOM__COL_NS}, {"share_pct", "of paths", LOOM__COL_PCT},
    {"off_path", "off path", LOOM__COL_INT}};
static const loom__col slack_cols[] = {
    {"name", "name", LOOM__COL_STR},      {"kind", "kind", LOOM__COL_STR},
    {"off_path", "off path", LOOM__COL_INT}, {"min_slack_ns", "min slack", LOOM__COL_NS},
    {"mean_slack_ns", "mean slack", LOOM__COL_NS}};

/* The class a bound is named from (its evidence rows). */
static const int bound_cls[LOOM__BOUND_COUNT_] = {
    [LOOM__BOUND_LAUNCH] = LOOM__CPC_LAUNCH, [LOOM__BOUND_HOST] = LOOM__CPC_HOST,
    [LOOM__BOUND_SYNC] = LOOM__CPC_SYNC,     [LOOM__BOUND_TRANSFER] = LOOM__CPC_COPY,
    [LOOM__BOUND_COMM] = LOOM__CPC_COMM,     [LOOM__BOUND_LATE_RANK] = LOOM__CPC_WAIT,
    [LOOM__BOUND_COMPUTE] = LOOM__CPC_COMPUTE};

static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0; }

static const char *step_name(const loom__report *r, const loom__cpstep *s, char *buf,
                             size_t n) {
  if (s->step >= 0) return loom__report_str(r, r->steps[s->step].name);
  snprintf(buf, n, "window at %.3f ms", (double)(s->t0 - r->t0) / 1e6);
  return buf;
}

/* One line saying why the step has its bound. */
static void evidence(const loom__report *r, const loom__cpstep *s, char *buf, size_t n) {
  int64_t len = s->t1 - s->t0;
  int c = bound_cls[s->bound];
  const loom__cpevid *e = &s->ev[c][0];
  int k = snprintf(buf, n, "%s %.1f%% of the path", loom__cpc_name[c], pct(s->cls_ns[c], len));
  if (e->count && k > 0 && (size_t)k < n)
    k += snprintf(buf + k, n - (size_t)k, ", most in %s (%llu, %.3f ms)",
                  loom__report_str(r, e->name), (unsigned long long)e->count,
                  (double)e->ns / 1e6);
  if (k > 0 && (size_t)k < n && (s->bound == LOOM__BOUND_LAUNCH || s->bound == LOOM__BOUND_HOST))
    k += snprintf(buf + k, n - (size_t)k, "; device busy %.1f%% of the step",
                  pct(s->device_busy, len));
  if (k > 0 && (size_t)k < n && s->bound == LOOM__BOUND_LAUNCH && s->kernels)
    k += snprintf(buf + k, n - (size_t)k, "; %llu kernels of %.3f us on average",
                  (unsigned long long)s->kernels, (double)s->kernel_ns / (double)s->kernels / 1e3);
  if (k > 0 && (size_t)k < n && s->bound == LOOM__BOUND_LATE_RANK && s->late_rank >= 0)
    snprintf(buf + k, n - (size_t)k, "; waiting for rank %d", (int)s->late_rank);
}

static void step_rows(const loom__report *r, const loom__cpres *p, loom__table *t,
                      loom__model *m) {
  char nb[64], ev[512];
  for (size_t i = 0, made = loom__model_limit(m, t, p->nsteps); i < made; i++) {
    const loom__cpstep *s = &p->steps[i];
    loom__table_str(t, step_name(r, s, nb, sizeof nb));
    if (s->pid >= 0) loom__table_int(t, s->pid);
    else loom__table_null(t);
    loom__table_int(t, s->t0 - r->t0);
    loom__table_int(t, s->t1 - s->t0);
    for (int c = 0; c < LOOM__CPC_COUNT_; c++) loom__table_int(t, s->cls_ns[c]);
    loom__table_int(t, (int64_t)s->nevents);
    loom__table_int(t, (int64_t)s->npath);
    loom__table_str(t, loom__bound_name[s->bound]);
    evidence(r, s, ev, sizeof ev);
    loom__table_str(t, ev);
  }
}

static void evidence_rows(const loom__report *r, const loom__cpres *p, loom__table *t,
                          loom__model *m) {
  char nb[64];
  size_t rows = 0;
  for (size_t i = 0; i < p->nsteps; i++)
    for (int k = 0; k < LOOM__CP_NEVID; k++)
      rows += p->steps[i].ev[bound_cls[p->steps[i].bound]][k].count > 0;
  size_t made = loom__model_limit(m, t, rows), done = 0;
  for (size_t i = 0; i < p->nsteps && done < made; i++) {
    const loom__cpstep *s = &p->steps[i];
    for (int k = 0; k < LOOM__CP_NEVID && done < made; k++) {
      const loom__cpevid *e = &s->ev[bound_cls[s->bound]][k];
      if (!e->count) continue;
      loom__table_str(t, step_name(r, s, nb, sizeof nb));
      loom__table_str(t, loom__bound_name[s->bound]);
      loom__table_str(t, loom__report_str(r, e->name));
      loom__table_str(t, loom_kind_name((loom_kind)e->kind));
      loom__table_int(t, (int64_t)e->count);
      loom__table_int(t, e->ns);
      loom__table_pct(t, pct(e->ns, s->t1 - s->t0));
      done++;
    }
  }
}

static _Thread_local const loom__cpres *SORT;
static _Thread_local const loom__report *SORT_R;
static _Thread_local int SORT_SLACK;
static int cmp_name(const void *pa, const void *pb) {
  const loom__cpname *a = &SORT->names[*(const size_t *)pa], *b = &SORT->names[*(const size_t *)pb];
  int64_t x = SORT_SLACK ? b->slack_min : a->ns, y = SORT_SLACK ? a->slack_min : b->ns;
  if (x != y) return x > y ? -1 : 1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  return strcmp(loom__report_str(SORT_R, a->name), loom__report_str(SORT_R, b->name));
}

/* Names with time on the paths (or, slack: with events off them), sorted. */
static size_t *sorted(const loom__report *r, const loom__cpres *p, int slack, size_t *n) {
  size_t *ix = malloc((p->nnames + 1) * sizeof *ix), k = 0;
  if (!ix) return NULL;
  for (size_t i = 0; i < p->nnames; i++)
    if (slack ? p->names[i].off > 0 : p->names[i].ns > 0) ix[k++] = i;
  SORT = p;
  SORT_R = r;
  SORT_SLACK = slack;
  qsort(ix, k, sizeof *ix, cmp_name);
  *n = k;
  return ix;
}

static void name_rows(const loom__report *r, const loom__cpres *p, loom__table *t,
                      loom__model *m, int slack) {
  int64_t all = 0;
  for (int c = 0; c < LOOM__CPC_COUNT_; c++) all += p->cls_ns[c];
  size_t n, *ix = sorted(r, p, slack, &n);
  if (!ix) {
    t->oom = 1;
    return;
  }
  for (size_t i = 0, made = loom__model_limit(m, t, n); i < made; i++) {
    const loom__cpname *x = &p->names[ix[i]];
    loom__table_str(t, loom__report_str(r, x->name));
    loom__table_str(t, loom_kind_name((loom_kind)x->kind));
    if (slack) {
      loom__table_int(t, (int64_t)x->off);
      loom__table_int(t, x->slack_min);
      loom__table_int(t, x->slack_sum / (int64_t)x->off);
      continue;
    }
    loom__table_str(t, loom__cpc_name[x->cls]);
    loom__table_int(t, (int64_t)x->on);
    loom__table_int(t, x->ns);
    loom__table_pct(t, pct(x->ns, all));
    loom__table_int(t, (int64_t)x->off);
  }
  free(ix);
}

void loom__report_critpath(const loom__report *r, loom__model *m) {
  const loom__cpres *p = r->cp;
  if (!p) return;
  int64_t all = 0;
  for (int c = 0; c < LOOM__CPC_COUNT_; c++) all += p->cls_ns[c];
  loom__table *t = loom__model_add(m, "critical_path.classes", "Critical path: time by class",
                                   cls_cols, NCOLS(cls_cols), LOOM__TF_ALL);
  for (int c = 0; t && c < LOOM__CPC_COUNT_; c++) {
    loom__table_str(t, loom__cpc_name[c]);
    loom__table_int(t, p->cls_ns[c]);
    loom__table_pct(t, pct(p->cls_ns[c], all));
  }
  if (t && p->cut)
    loom__table_note(t, "%llu step(s) held more than %zu events: their first events only "
                     "(raise --sort-memory)", (unsigned long long)p->cut, p->cap);
  if (t && p->spans_left)
    loom__table_note(t, "%llu stretches of communication calls past the first %zu: no "
                     "cross-rank waiting laid on them (raise --sort-memory)",
                     (unsigned long long)p->spans_left, p->max_spans);
  if (t) loom__table_note(t, "%llu sync, %llu cross-queue and %llu blocking-call "
                          "dependencies seen", (unsigned long long)p->sync_edges,
                          (unsigned long long)p->xqueue_edges,
                          (unsigned long long)p->block_edges);
  if ((t = loom__model_add(m, "critical_path.steps", "Critical path per step", step_cols,
                           NCOLS(step_cols), 0)))
    step_rows(r, p, t, m);
  if ((t = loom__model_add(m, "critical_path.evidence", "Bound evidence: the path's largest "
                           "contributors of the bound's class", evid_cols, NCOLS(evid_cols), 0)))
    evidence_rows(r, p, t, m);
  if ((t = loom__model_add(m, "critical_path.on_path", "On the critical path", on_cols,
                           NCOLS(on_cols), 0)))
    name_rows(r, p, t, m, 0);
  if ((t = loom__model_add(m, "critical_path.slack", "Off the critical path: slack", slack_cols,
                           NCOLS(slack_cols), 0)))
    name_rows(r, p, t, m, 1);
}
