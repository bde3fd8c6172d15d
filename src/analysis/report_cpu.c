/*
 * report_cpu.c - CPU samples and OS counters as tables of the report model
 * (table.h, docs/report.md "CPU samples"): the top functions by self and
 * total samples, the functions inside the top framework ops, user ranges
 * and steps, the OS counters per thread, and the flame graph's nodes (drawn
 * by table_flame.c).  None of them exists for a trace without samples or
 * counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "cpu.h"
#include "report_model.h"
#include "table.h"

#define NCOLS(a) (sizeof a / sizeof a[0])
/* Functions listed per op, range or step (fewer when --top is smaller). */
#define FNS_PER_SLICE 10
/* Flame graph nodes narrower than 1/FLAME_MIN of the samples are left out. */
#define FLAME_MIN 1000

static const char *cpu_str(const loom__rcpu *c, uint32_t id) {
  return loom__strtab_get(&c->s.strs, id);
}
static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0; }
static const char *base(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static const loom__col sum_cols[] = {{"samples", "samples", LOOM__COL_INT},
                                     {"threads", "threads sampled", LOOM__COL_INT},
                                     {"functions", "functions", LOOM__COL_INT},
                                     {"no_stack", "samples without a stack", LOOM__COL_INT}};
#define FN_FIGURES(flags)                                                                          \
  {"self", "self", LOOM__COL_INT, flags}, {"self_pct", "self share", LOOM__COL_PCT, flags},        \
      {"total", "total", LOOM__COL_INT, flags}, {"total_pct", "total share", LOOM__COL_PCT, flags}
static const loom__col fn_cols[] = {{"function", "function", LOOM__COL_STR},
                                    {"module", "module path", LOOM__COL_STR, LOOM__CF_JSON_ONLY},
                                    {"module_name", "module", LOOM__COL_STR, LOOM__CF_NOJSON},
                                    FN_FIGURES(0)};
/* A slice's functions, as child rows: text and HTML show them under the
 * parent's columns of the same titles. */
static const loom__col sub_cols[] = {{"function", "name", LOOM__COL_STR},
                                     {"module", "module path", LOOM__COL_STR, LOOM__CF_JSON_ONLY},
                                     {"module_name", "module", LOOM__COL_STR, LOOM__CF_NOJSON},
                                     FN_FIGURES(0)};
static const loom__col name_cols[] = {{"name", "name", LOOM__COL_STR},
                                      {"total_ns", "time", LOOM__COL_US},
                                      {"samples", "samples", LOOM__COL_INT},
                                      FN_FIGURES(LOOM__CF_NOJSON),
                                      {"module_name", "module", LOOM__COL_STR, LOOM__CF_NOJSON}};
static const loom__col step_cols[] = {
    {"name", "name", LOOM__COL_STR},  {"start_ns", "start", LOOM__COL_NS},
    {"dur_ns", "time", LOOM__COL_NS}, {"samples", "samples", LOOM__COL_INT},
    FN_FIGURES(LOOM__CF_NOJSON),      {"module_name", "module", LOOM__COL_STR, LOOM__CF_NOJSON}};
static const loom__col ctr_cols[] = {{"pid", "pid", LOOM__COL_INT},
                                     {"tid", "tid", LOOM__COL_INT},
                                     {"thread", "thread", LOOM__COL_STR},
                                     {"context_switches", "context switches", LOOM__COL_INT},
                                     {"page_faults", "page faults", LOOM__COL_INT},
                                     {"cpu_migrations", "CPU migrations", LOOM__COL_INT}};
static const loom__col flame_cols[] = {{"depth", "depth", LOOM__COL_INT},
                                       {"start", "start", LOOM__COL_INT},
                                       {"samples", "samples", LOOM__COL_INT},
                                       {"pct", "share", LOOM__COL_PCT},
                                       {"function", "function", LOOM__COL_STR}};

static void fn_row(const loom__rcpu *c, loom__table *t, const loom__centry *e, uint64_t of) {
  const loom__cfn *f = &c->fns[e->fn];
  loom__table_str(t, cpu_str(c, f->label));
  loom__table_str(t, cpu_str(c, f->module));
  loom__table_str(t, base(cpu_str(c, f->module)));
  loom__table_int(t, (int64_t)e->self);
  loom__table_pct(t, pct(e->self, of));
  loom__table_int(t, (int64_t)e->total);
  loom__table_pct(t, pct(e->total, of));
}

static void summary(const loom__rcpu *c, loom__model *m) {
  loom__table *t =
      loom__model_add(m, "cpu", "CPU samples", sum_cols, NCOLS(sum_cols), LOOM__TF_RECORD);
  size_t threads = 0;
  for (size_t i = 0; i < c->nsmp; i++) threads += !i || c->smp[i].track != c->smp[i - 1].track;
  loom__table_int(t, (int64_t)c->nsmp);
  loom__table_int(t, (int64_t)threads);
  loom__table_int(t, (int64_t)c->nfns);
  loom__table_int(t, (int64_t)c->nempty);
}

static _Thread_local const loom__rcpu *self_cpu;
static int cmp_self(const void *pa, const void *pb) {
  const loom__centry *a = pa, *b = pb;
  if (a->self != b->self) return a->self > b->self ? -1 : 1;
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  const loom__cfn *x = &self_cpu->fns[a->fn], *y = &self_cpu->fns[b->fn];
  int d = strcmp(cpu_str(self_cpu, x->label), cpu_str(self_cpu, y->label));
  return d ? d : strcmp(cpu_str(self_cpu, x->module), cpu_str(self_cpu, y->module));
}

/* entries (n of them) by self samples, in a copy; NULL when out of memory. */
static loom__centry *by_self(const loom__rcpu *c, const loom__centry *e, size_t n) {
  loom__centry *by = malloc((n + 1) * sizeof *by);
  if (!by) return NULL;
  if (n) memcpy(by, e, n * sizeof *by); /* e is NULL when there is none */
  self_cpu = c;
  qsort(by, n, sizeof *by, cmp_self);
  return by;
}

/* Overall: by self samples, then by total samples. */
static void top_functions(const loom__rcpu *c, loom__model *m) {
  const loom__cslot *all = &c->slots[0];
  loom__table *t =
      loom__model_add(m, "cpu.by_self", "Functions by self samples (the function itself ran)",
                      fn_cols, NCOLS(fn_cols), 0);
  loom__centry *by = by_self(c, all->ne ? c->ent + all->e0 : NULL, all->ne); /* no NULL + 0 */
  if (!t || !by) {
    m->oom = 1;
    free(by);
    return;
  }
  size_t n = all->ne;
  while (n && !by[n - 1].self) n--; /* functions that never ran themselves */
  for (size_t i = 0, made = loom__model_limit(m, t, n); i < made; i++) fn_row(c, t, &by[i], all->n);
  free(by);
  loom__table_note(t, "%llu samples; shares are of all samples", (unsigned long long)all->n);
  t = loom__model_add(m, "cpu.by_total",
                      "Functions by total samples (the function was on the stack)", fn_cols,
                      NCOLS(fn_cols), 0);
  for (size_t i = 0, made = loom__model_limit(m, t, all->ne); i < made; i++)
    fn_row(c, t, &c->ent[all->e0 + i], all->n);
}

/* A parent row's cells under its functions' columns. */
static void parent_blanks(loom__table *t) {
  for (int k = 0; k < 4; k++) loom__table_null(t);
  loom__table_str(t, "");
}

/* A parent row's functions in child rows: those that ran most themselves
 * first (then by total), so the callers every sample has come last. */
static void slot_fns(const loom__rcpu *c, loom__model *m, loom__table *ch, size_t row,
                     const loom__cslot *s) {
  size_t k = m->top && m->top < FNS_PER_SLICE ? m->top : FNS_PER_SLICE;
  if (!m->top) k = s->ne;
  loom__centry *by = by_self(c, s->ne ? c->ent + s->e0 : NULL, s->ne);
  if (!by) {
    m->oom = 1;
    return;
  }
  for (size_t i = 0; i < s->ne && i < k; i++) {
    loom__table_parent(ch, row);
    fn_row(c, ch, &by[i], s->n);
  }
  free(by);
}

static void per_name(const loom__report *r, loom__model *m, int group) {
  const loom__rcpu *c = r->cpu;
  size_t n, *rows = loom__report_rows(r, group, &n, 0), k = 0;
  for (size_t i = 0; rows && i < n; i++)
    if (loom__cpu_slot(c, (uint32_t)group, r->names[rows[i]].name)) rows[k++] = rows[i];
  if (!k) {
    free(rows);
    return;
  }
  int ops = group == LOOM__G_OP;
  loom__table *t = loom__model_add(m, ops ? "cpu.ops" : "cpu.user_ranges",
                                   ops ? "Functions inside framework ops (top ops by time)"
                                       : "Functions inside user ranges (top ranges by time)",
                                   name_cols, NCOLS(name_cols), 0);
  loom__table *ch = t ? loom__table_child(t, "functions", sub_cols, NCOLS(sub_cols)) : NULL;
  if (!ch) m->oom = 1;
  for (size_t i = 0, made = ch ? loom__model_limit(m, t, k) : 0; i < made; i++) {
    const loom__rname *nm = &r->names[rows[i]];
    const loom__cslot *s = loom__cpu_slot(c, (uint32_t)group, nm->name);
    loom__table_str(t, loom__report_str(r, nm->name));
    loom__table_int(t, nm->total);
    loom__table_int(t, (int64_t)s->n);
    parent_blanks(t);
    slot_fns(c, m, ch, i, s);
  }
  if (t)
    loom__table_note(
        t, "a sample counts for every slice it falls in on its thread, so a slice's functions "
           "include its children's; shares are of the slice's samples");
  free(rows);
}

static _Thread_local const loom__report *steps_rep;
static int cmp_step(const void *pa, const void *pb) {
  const loom__rstep *a = &steps_rep->steps[*(const size_t *)pa],
                    *b = &steps_rep->steps[*(const size_t *)pb];
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static void per_step(const loom__report *r, loom__model *m) {
  const loom__rcpu *c = r->cpu;
  size_t *ix = malloc((r->nsteps + 1) * sizeof *ix), k = 0;
  if (!ix) {
    m->oom = 1;
    return;
  }
  for (size_t i = 0; i < r->nsteps; i++)
    if (loom__cpu_slot(c, LOOM__CPU_STEP, (uint32_t)i)) ix[k++] = i;
  steps_rep = r;
  qsort(ix, k, sizeof *ix, cmp_step);
  loom__table *t = k ? loom__model_add(m, "cpu.steps", "Functions inside the slowest steps",
                                       step_cols, NCOLS(step_cols), 0)
                     : NULL;
  loom__table *ch = t ? loom__table_child(t, "functions", sub_cols, NCOLS(sub_cols)) : NULL;
  if (k && !ch) m->oom = 1;
  for (size_t i = 0, made = ch ? loom__model_limit(m, t, k) : 0; i < made; i++) {
    const loom__rstep *st = &r->steps[ix[i]];
    const loom__cslot *s = loom__cpu_slot(c, LOOM__CPU_STEP, (uint32_t)ix[i]);
    loom__table_str(t, loom__report_str(r, st->name));
    loom__table_int(t, st->ts - r->t0);
    loom__table_int(t, st->dur);
    loom__table_int(t, (int64_t)s->n);
    parent_blanks(t);
    slot_fns(c, m, ch, i, s);
  }
  free(ix);
}

static void counters(const loom__report *r, loom__model *m) {
  const loom__rcpu *c = r->cpu;
  if (!c->nctr) return;
  loom__table *t =
      loom__model_add(m, "cpu.os_counters", "OS counters per thread (totals over the recording)",
                      ctr_cols, NCOLS(ctr_cols), LOOM__TF_ALL);
  for (size_t i = 0; i < c->nctr; i++) {
    const loom__cctr *k = &c->ctr[i];
    const loom__track *tr = k->track < r->meta->ntracks ? &r->meta->tracks[k->track] : NULL;
    if (tr) {
      loom__table_int(t, tr->pid);
      loom__table_int(t, tr->tid);
      loom__table_str(t, loom__report_str(r, tr->name));
    } else {
      loom__table_null(t);
      loom__table_null(t);
      loom__table_str(t, "");
    }
    for (int w = 0; w < LOOM__CPU_NCTR; w++)
      if (k->seen[w]) loom__table_int(t, (int64_t)k->v[w]);
      else loom__table_null(t);
  }
}

static void flame(const loom__rcpu *c, loom__model *m) {
  if (!c->nflame) return;
  loom__table *t =
      loom__model_add(m, "cpu.flame", "Flame graph of the CPU samples", flame_cols,
                      NCOLS(flame_cols), LOOM__TF_NOTEXT | LOOM__TF_NOHTML | LOOM__TF_ALL);
  if (!t) return;
  t->chart = LOOM__CHART_FLAME;
  uint64_t all = c->slots[0].n;
  for (size_t i = 0; i < c->nflame; i++) {
    const loom__cflame *f = &c->flame[i];
    if (f->n * FLAME_MIN < all) continue; /* its children are narrower still */
    loom__table_int(t, f->depth);
    loom__table_int(t, (int64_t)f->x);
    loom__table_int(t, (int64_t)f->n);
    loom__table_pct(t, pct(f->n, all));
    loom__table_str(t, cpu_str(c, c->fns[f->fn].label));
  }
  loom__table_note(
      t,
      "%llu samples; outermost frames at the bottom, width = samples through the function, "
      "callees above their callers",
      (unsigned long long)all);
}

void loom__report_cpu(const loom__report *r, loom__model *m) {
  const loom__rcpu *c = r->cpu;
  if (!c) return;
  if (c->nsmp) {
    summary(c, m);
    top_functions(c, m);
    per_name(r, m, LOOM__G_OP);
    per_name(r, m, LOOM__G_RANGE);
    per_step(r, m);
  }
  counters(r, m);
  if (c->nsmp) flame(c, m);
}
