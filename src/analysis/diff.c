/*
 * diff.c - reading the two runs of `loom diff` (diff.h): folders expanded
 * into their traces, each trace through the report's streaming pass with
 * an item callback that fills the run's per-name figures and (name, step)
 * cells; the report of a trace is freed before the next is read, so memory
 * is one report's plus the runs' names and cells.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "diff.h"
#include "ranks.h"
#include "util/util.h"

/* One input's pass. */
typedef struct input_ctx {
  loom__diff *d;
  loom__dside *s;
  int side;
  uint32_t rank;           /* its index in the run */
  uint64_t step0;          /* global index of its first step */
  /* per report group (twice: calls of kind sync apart) and the trace's name
   * id: the run's entry index + 1 (ids are dense: arrays, not a map) */
  uint32_t *local[2 * LOOM__G_COUNT_];
  size_t nlocal[2 * LOOM__G_COUNT_];
  uint8_t *keep;           /* per step of the input: 0 not judged, 1 compared, 2 not */
  size_t nkeep;
  int64_t work;
  int oom;
} input_ctx;

/* A diff group: a call is a wait when it is a synchronisation (its kind, or
 * a name the backends list as one). */
static int dgroup(int group, int kind, const char *name) {
  switch (group) {
  case LOOM__G_KERNEL: return LOOM__DG_KERNEL;
  case LOOM__G_COPY: return LOOM__DG_COPY;
  case LOOM__G_FILL: return LOOM__DG_FILL;
  case LOOM__G_OP: return LOOM__DG_OP;
  case LOOM__G_RANGE: return LOOM__DG_RANGE;
  default: return kind == LOOM_KIND_SYNC || loom__sync_name(name) ? LOOM__DG_WAIT : LOOM__DG_CALL;
  }
}

/* The number of a step named "...#N" (ProfilerStep#N), -1 without one. */
static int64_t step_number(const char *name) {
  const char *h = strrchr(name, '#');
  if (!h || h[1] < '0' || h[1] > '9') return -1;
  return strtoll(h + 1, NULL, 10);
}

/* Whether figures of the input's step st (-1: none) are compared. */
static int step_kept(input_ctx *c, const loom__report *rep, int32_t st) {
  if (!c->d->o.steps_set) return 1;
  if (st < 0 || (size_t)st >= rep->nsteps) return 0;
  if ((size_t)st >= c->nkeep) {
    size_t n = c->nkeep ? c->nkeep : 64;
    while (n <= (size_t)st) n *= 2;
    uint8_t *k = realloc(c->keep, n);
    if (!k) return c->oom = 1, 0;
    memset(k + c->nkeep, 0, n - c->nkeep);
    c->keep = k;
    c->nkeep = n;
  }
  if (!c->keep[st]) {
    const char *name = loom__report_str(rep, rep->steps[st].name);
    c->keep[st] = step_number(name) == c->d->o.step[c->side] ? 1 : 2;
  }
  return c->keep[st] == 1;
}

/* The run's entry of a name of the report (its group, kind and the trace's
 * name id): looked up by its text once per input. */
static loom__dent *entry(input_ctx *c, const loom__report *rep, int group, int kind,
                         uint32_t name, size_t *idx) {
  size_t k = (size_t)group * 2 + (kind == LOOM_KIND_SYNC);
  loom__dside *s = c->s;
  if (name < c->nlocal[k] && c->local[k][name]) return &s->e[*idx = c->local[k][name] - 1];
  if (name >= c->nlocal[k]) {
    size_t n = c->nlocal[k] ? c->nlocal[k] : 256;
    while (n <= name) n *= 2;
    uint32_t *v = realloc(c->local[k], n * sizeof *v);
    if (!v) return NULL;
    memset(v + c->nlocal[k], 0, (n - c->nlocal[k]) * sizeof *v);
    c->local[k] = v;
    c->nlocal[k] = n;
  }
  const char *txt = loom__report_str(rep, name);
  int g = dgroup(group, kind, txt);
  uint32_t sid = loom__strtab_intern(&c->d->strs, txt, strlen(txt));
  if (!sid) return NULL;
  uint64_t key = (uint64_t)g << 32 | sid, *gi = loom__map_get(&s->of, key);
  if (!gi) {
    loom__dent z;
    memset(&z, 0, sizeof z);
    z.sid = sid;
    z.group = (uint8_t)g;
    if (LOOM__PUSH(s->e, s->n, s->cap, z) || loom__map_put(&s->of, key, s->n)) return NULL;
    gi = loom__map_get(&s->of, key);
  }
  c->local[k][name] = (uint32_t)*gi;
  return &s->e[*idx = *gi - 1];
}

/* Adds m to the cell of (entry, global step); a name that would need a
 * cell past the limit is marked partial instead. */
static void add_cell(input_ctx *c, loom__dent *e, size_t idx, uint64_t global, int64_t m) {
  loom__map *cells = &c->s->cells;
  uint64_t key = (uint64_t)idx << 32 | global, *v = loom__map_get(cells, key);
  if (v) {
    *v += (uint64_t)m;
    return;
  }
  if (cells->n >= LOOM__DIFF_MAX_CELLS) {
    e->partial = 1;
    c->s->cells_full = 1;
    return;
  }
  if (loom__map_put(cells, key, (uint64_t)m)) c->oom = 1;
}

static void on_item(void *ctx, const loom__report *rep, int group, uint32_t name, int32_t step,
                    int64_t dur, int64_t self, int kind) {
  input_ctx *c = ctx;
  if (c->oom || !step_kept(c, rep, step)) return;
  size_t idx;
  loom__dent *e = entry(c, rep, group, kind, name, &idx);
  if (!e) {
    c->oom = 1;
    return;
  }
  int g = e->group, host = g == LOOM__DG_OP || g == LOOM__DG_RANGE;
  int64_t m = host ? self : dur;
  e->count++;
  e->total += dur;
  e->measure += m;
  if (loom__qs_add(&e->q, dur) || (host && loom__qs_add(&e->qm, self))) c->oom = 1;
  if (g <= LOOM__DG_FILL) c->work += dur;
  if (step >= 0) add_cell(c, e, idx, c->step0 + (uint64_t)step, m);
}

/* After an input's pass: its steps and its line among the run's ranks. */
static int input_done(input_ctx *c, const loom__report *rep, const char *path) {
  loom__dside *s = c->s;
  loom__drank r = {.rank = loom__ranks_meta_rank(rep->meta), .events = rep->nevents,
                   .span = rep->t1 - rep->t0, .work = c->work};
  if (r.rank < 0) r.rank = c->rank;
  if (!(r.path = loom__strtab_intern(&c->d->strs, path, strlen(path)))) return -1;
  for (size_t i = 0; i < rep->nsteps; i++) {
    if (!step_kept(c, rep, (int32_t)i)) continue;
    const char *n = loom__report_str(rep, rep->steps[i].name);
    loom__dstep st = {c->rank, loom__strtab_intern(&c->d->strs, n, strlen(n)), c->step0 + i,
                      rep->steps[i].dur};
    if (!st.name || LOOM__PUSH(s->steps, s->nsteps, s->cap_steps, st)) return -1;
    r.steps++;
    r.step_time += st.dur;
  }
  s->nglobal = c->step0 + rep->nsteps;
  s->events += rep->nevents;
  return LOOM__PUSH(s->ranks, s->nranks, s->cap_ranks, r) ? -1 : 0;
}

static loom_status read_input(loom__diff *d, int side, const char *path) {
  loom__dside *s = &d->side[side];
  input_ctx c = {.d = d, .s = s, .side = side, .rank = (uint32_t)s->nranks, .step0 = s->nglobal};
  /* the critical path is the report's, not the diff's: left out */
  loom__report_opts o = {.sort_budget = d->o.sort_budget, .on_item = on_item, .item_ctx = &c,
                         .no_critical_path = 1};
  loom__report *rep;
  loom_status st = loom__analyze(path, &o, &rep);
  if (st == LOOM_OK) {
    if (c.oom || input_done(&c, rep, path))
      st = loom__fail(LOOM_ENOMEM, "out of memory comparing %s", path);
    else if (d->o.steps_set && !s->ranks[s->nranks - 1].steps)
      st = loom__fail(LOOM_EINVAL, "%s: no step numbered %lld (ProfilerStep#%lld)", path,
                      (long long)d->o.step[side], (long long)d->o.step[side]);
    loom__report_free(rep);
  }
  for (size_t k = 0; k < 2 * LOOM__G_COUNT_; k++) free(c.local[k]);
  free(c.keep);
  return st;
}

/* ---- inputs: traces, or folders of them (one per rank) ------------------------ */
static int is_trace_name(const char *n) {
  static const char *ext[] = {".json", ".json.gz", ".pftrace", ".pftrace.gz", ".perfetto-trace"};
  size_t len = strlen(n);
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
    size_t k = strlen(ext[i]);
    if (len > k && !strcmp(n + len - k, ext[i])) return 1;
  }
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The traces of a folder, sorted by name, or just path; NULL on failure. */
static char **expand(const char *path, size_t *n) {
  struct stat sb;
  char **v = NULL;
  size_t cap = 0;
  *n = 0;
  DIR *dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? opendir(path) : NULL;
  if (!dir) {
    char *p = strdup(path);
    if (!p || LOOM__PUSH(v, *n, cap, p)) free(p), free(v), v = NULL;
    return v;
  }
  for (struct dirent *de; (de = readdir(dir));) {
    if (!is_trace_name(de->d_name)) continue;
    size_t len = strlen(path) + strlen(de->d_name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", path, de->d_name);
    if (!p || LOOM__PUSH(v, *n, cap, p)) {
      free(p);
      break;
    }
  }
  closedir(dir);
  if (v) qsort(v, *n, sizeof *v, cmp_str);
  return v;
}

static loom_status read_run(loom__diff *d, int side, const char *const *paths, size_t np) {
  loom_status st = LOOM_OK;
  for (size_t i = 0; i < np && st == LOOM_OK; i++) {
    size_t n;
    char **v = expand(paths[i], &n);
    if (!v) return loom__fail(LOOM_EINVAL, "%s: no traces to compare (a folder holds .json, "
                              ".json.gz or .pftrace files)", paths[i]);
    for (size_t k = 0; k < n && st == LOOM_OK; k++) st = read_input(d, side, v[k]);
    for (size_t k = 0; k < n; k++) free(v[k]);
    free(v);
  }
  if (st == LOOM_OK && !d->side[side].nranks)
    st = loom__fail(LOOM_EINVAL, "no traces in the %s run", side ? "new" : "base");
  return st;
}

/* Each name's cells as a list of its per-step totals (one walk over the
 * cells map: counted, then placed). */
static int gather_cells(loom__dside *s) {
  for (size_t i = 0; i < s->cells.cap; i++)
    if (s->cells.keys[i]) s->e[s->cells.keys[i] >> 32].ncell++;
  if (s->cells.has_zero) s->e[0].ncell++;
  for (size_t i = 0; i < s->n; i++) {
    if (s->e[i].ncell && !(s->e[i].cell = malloc(s->e[i].ncell * sizeof *s->e[i].cell)))
      return -1;
    s->e[i].ncell = 0;
  }
  if (s->cells.has_zero) s->e[0].cell[s->e[0].ncell++] = (int64_t)s->cells.zero_val;
  for (size_t i = 0; i < s->cells.cap; i++) {
    if (!s->cells.keys[i]) continue;
    loom__dent *e = &s->e[s->cells.keys[i] >> 32];
    e->cell[e->ncell++] = (int64_t)s->cells.vals[i];
  }
  loom__map_free(&s->cells);
  int64_t steps = 0, spans = 0;
  for (size_t i = 0; i < s->nsteps; i++) steps += s->steps[i].dur;
  for (size_t i = 0; i < s->nranks; i++) spans += s->ranks[i].span;
  s->run_time = s->nsteps ? steps : spans;
  return 0;
}

loom_status loom__diff_run(const char *const *base, size_t nbase, const char *const *newer,
                           size_t nnew, const loom__diff_opts *o, loom__diff **out) {
  *out = NULL;
  loom__diff *d = calloc(1, sizeof *d);
  if (!d) return loom__fail(LOOM_ENOMEM, "out of memory");
  loom__strtab_init(&d->strs);
  if (o) d->o = *o;
  if (d->o.alpha <= 0 || d->o.alpha >= 1) d->o.alpha = 0.01;
  d->o.min_change = d->o.min_change == 0 ? 0.10 : d->o.min_change < 0 ? 0 : d->o.min_change;
  d->o.min_share = d->o.min_share == 0 ? 0.01 : d->o.min_share < 0 ? 0 : d->o.min_share;
  loom_status st = read_run(d, 0, base, nbase);
  if (st == LOOM_OK) st = read_run(d, 1, newer, nnew);
  if (st == LOOM_OK && (gather_cells(&d->side[0]) || gather_cells(&d->side[1]) ||
                        loom__diff_rows(d) || d->strs.oom))
    st = loom__fail(LOOM_ENOMEM, "out of memory comparing the runs");
  if (st != LOOM_OK) {
    loom__diff_free(d);
    return st;
  }
  *out = d;
  return LOOM_OK;
}

void loom__diff_free(loom__diff *d) {
  if (!d) return;
  for (int k = 0; k < 2; k++) {
    loom__dside *s = &d->side[k];
    for (size_t i = 0; i < s->n; i++) {
      loom__qs_free(&s->e[i].q);
      loom__qs_free(&s->e[i].qm);
      free(s->e[i].cell);
    }
    free(s->e);
    loom__map_free(&s->of);
    loom__map_free(&s->cells);
    free(s->steps);
    free(s->ranks);
  }
  free(d->rows);
  loom__strtab_free(&d->strs);
  free(d);
}
