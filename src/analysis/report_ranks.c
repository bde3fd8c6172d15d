/*
 * report_ranks.c - the cross-rank section of the report: tables built from
 * the ranks analysis (ranks.h) on the table model (table.h), so the text,
 * JSON and HTML forms print the same figures; the HTML page draws the rank
 * x step table as two heat maps (table_chart.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "ranks.h"
#include "report_model.h"
#include "table.h"

#define W_COLS                                                                                     \
  {"late_sender_ns", "late sender", LOOM__COL_NS},                                                 \
  {"late_receiver_ns", "late receiver", LOOM__COL_NS},                                             \
  {"wait_nxn_ns", "wait N x N", LOOM__COL_NS}, {"wait_barrier_ns", "wait barrier", LOOM__COL_NS},  \
  {"late_broadcast_ns", "late bcast", LOOM__COL_NS},                                               \
  {"early_reduce_ns", "early reduce", LOOM__COL_NS}

static const loom__col rank_cols[] = {{"rank", "rank", LOOM__COL_INT},
                                      {"steps", "steps", LOOM__COL_INT},
                                      {"step_time_ns", "step time", LOOM__COL_NS},
                                      {"communication_ns", "comm", LOOM__COL_NS},
                                      {"waiting_ns", "waiting", LOOM__COL_NS},
                                      W_COLS,
                                      {"caused_ns", "caused", LOOM__COL_NS},
                                      {"root_caused_ns", "root cause of", LOOM__COL_NS},
                                      {"below_threshold_ns", "noise", LOOM__COL_NS},
                                      {"straggler_steps", "straggler in", LOOM__COL_INT}};
static const loom__col step_cols[] = {
    {"step", "step", LOOM__COL_INT}, {"ranks", "ranks", LOOM__COL_INT},
    {"max_ns", "max", LOOM__COL_NS}, {"min_ns", "min", LOOM__COL_NS},
    {"imbalance_ns", "max-min", LOOM__COL_NS}, {"slowest_rank", "slowest", LOOM__COL_INT},
    {"waiting_ns", "waiting", LOOM__COL_NS}, W_COLS, {"straggler", "straggler", LOOM__COL_INT}};
static const loom__col cell_cols[] = {
    {"rank", "rank", LOOM__COL_INT}, {"step", "step", LOOM__COL_INT},
    {"step_time_ns", "step time", LOOM__COL_NS}, {"waiting_ns", "waiting", LOOM__COL_NS},
    {"caused_ns", "caused", LOOM__COL_NS}, {"root_caused_ns", "root cause of", LOOM__COL_NS}};
static const loom__col site_cols[] = {
    {"state", "wait state", LOOM__COL_STR}, {"call", "call", LOOM__COL_STR},
    {"calls", "calls", LOOM__COL_INT}, {"waiting_ns", "waiting", LOOM__COL_NS}};
static const loom__col for_cols[] = {
    {"step", "step", LOOM__COL_INT}, {"rank", "rank", LOOM__COL_INT},
    {"waited_for", "waited for", LOOM__COL_INT}, {"waiting_ns", "waiting", LOOM__COL_NS}};
#define NCOLS(a) (sizeof a / sizeof a[0])

enum { T_RANKS, T_STEPS, T_CELLS, T_SITES, T_FOR, T_COUNT };
static const char *const table_key[T_COUNT] = {"ranks", "steps", "rank_steps", "wait_sites",
                                               "waits_for"};

static int64_t at(const int64_t *m, const loom__ranks *k, size_t r, size_t s) {
  return m[r * k->nsteps + s];
}

static void rank_rows(loom__table *t, const loom__ranks *k) {
  for (size_t r = 0; r < k->nranks; r++) {
    int64_t steps = 0, time = 0, caused = 0, root = 0, wait = 0, strag = 0;
    for (size_t s = 0; s < k->nsteps; s++) {
      if (at(k->step_ns, k, r, s) >= 0) steps++, time += at(k->step_ns, k, r, s);
      caused += at(k->caused_ns, k, r, s);
      root += at(k->root_ns, k, r, s);
      strag += loom__ranks_straggler(k, s) == (int32_t)r;
    }
    for (int w = 0; w < LOOM__W_COUNT_; w++) wait += k->state_ns[r * LOOM__W_COUNT_ + w];
    loom__table_int(t, k->rank_id[r]);
    loom__table_int(t, steps);
    loom__table_int(t, time);
    loom__table_int(t, k->comm_ns[r]);
    loom__table_int(t, wait);
    for (int w = 0; w < LOOM__W_COUNT_; w++)
      loom__table_int(t, k->state_ns[r * LOOM__W_COUNT_ + w]);
    loom__table_int(t, caused);
    loom__table_int(t, root);
    loom__table_int(t, k->noise_ns[r]);
    loom__table_int(t, strag);
  }
}

static void step_rows(loom__table *t, const loom__ranks *k) {
  for (size_t s = 0; s < k->nsteps; s++) {
    int64_t mx = -1, mn = -1, n = 0, wait = 0;
    size_t slow = 0;
    for (size_t r = 0; r < k->nranks; r++) {
      int64_t v = at(k->step_ns, k, r, s);
      if (v < 0) continue;
      if (v > mx) mx = v, slow = r;
      if (mn < 0 || v < mn) mn = v;
      n++;
    }
    for (int w = 0; w < LOOM__W_COUNT_; w++) wait += k->step_state_ns[s * LOOM__W_COUNT_ + w];
    loom__table_int(t, k->step_no[s]);
    loom__table_int(t, n);
    loom__table_int(t, mx);
    loom__table_int(t, mn);
    loom__table_int(t, mx - mn);
    loom__table_int(t, k->rank_id[slow]);
    loom__table_int(t, wait);
    for (int w = 0; w < LOOM__W_COUNT_; w++)
      loom__table_int(t, k->step_state_ns[s * LOOM__W_COUNT_ + w]);
    int32_t who = loom__ranks_straggler(k, s);
    if (who >= 0) loom__table_int(t, k->rank_id[who]);
    else loom__table_null(t);
  }
}

static void cell_rows(loom__table *t, const loom__ranks *k) {
  for (size_t r = 0; r < k->nranks; r++)
    for (size_t s = 0; s < k->nsteps; s++) {
      loom__table_int(t, k->rank_id[r]);
      loom__table_int(t, k->step_no[s]);
      if (at(k->step_ns, k, r, s) >= 0) loom__table_int(t, at(k->step_ns, k, r, s));
      else loom__table_null(t);
      loom__table_int(t, at(k->wait_ns, k, r, s));
      loom__table_int(t, at(k->caused_ns, k, r, s));
      loom__table_int(t, at(k->root_ns, k, r, s));
    }
}

static _Thread_local const loom__ranks *SITES;
static int cmp_site(const void *pa, const void *pb) {
  const loom__rsite *a = &SITES->sites[*(const size_t *)pa],
                    *b = &SITES->sites[*(const size_t *)pb];
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  if (a->state != b->state) return a->state < b->state ? -1 : 1;
  return strcmp(loom__strtab_get(&SITES->strs, a->name), loom__strtab_get(&SITES->strs, b->name));
}

static void site_rows(loom__table *t, const loom__ranks *k) {
  size_t *ix = malloc((k->nsites + 1) * sizeof *ix);
  if (!ix) {
    t->oom = 1;
    return;
  }
  for (size_t i = 0; i < k->nsites; i++) ix[i] = i;
  SITES = k;
  qsort(ix, k->nsites, sizeof *ix, cmp_site);
  for (size_t i = 0; i < k->nsites; i++) {
    const loom__rsite *s = &k->sites[ix[i]];
    loom__table_str(t, loom__wait_name[s->state]);
    loom__table_str(t, loom__strtab_get(&k->strs, s->name));
    loom__table_int(t, (int64_t)s->calls);
    loom__table_int(t, s->total);
  }
  free(ix);
}

/* Who waited for whom: (step, rank, root) cells, the most waiting first. */
typedef struct wf { uint64_t key, ns; } wf;
static int cmp_wf(const void *pa, const void *pb) {
  const wf *a = pa, *b = pb;
  if (a->ns != b->ns) return a->ns > b->ns ? -1 : 1;
  return a->key < b->key ? -1 : a->key > b->key;
}

static void for_rows(loom__table *t, const loom__ranks *k) {
  wf *v = malloc((k->waits_for.n + 1) * sizeof *v);
  if (!v) {
    t->oom = 1;
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < k->waits_for.cap; i++)
    if (k->waits_for.keys[i]) v[n++] = (wf){k->waits_for.keys[i] - 1, k->waits_for.vals[i]};
  qsort(v, n, sizeof *v, cmp_wf);
  for (size_t i = 0; i < n; i++) {
    uint64_t root = v[i].key % k->nranks, who = v[i].key / k->nranks % k->nranks,
             s = v[i].key / k->nranks / k->nranks;
    loom__table_int(t, k->step_no[s]);
    loom__table_int(t, k->rank_id[who]);
    loom__table_int(t, k->rank_id[root]);
    loom__table_int(t, (int64_t)v[i].ns);
  }
  free(v);
}

static void build(const loom__ranks *k, loom__table *t[T_COUNT]) {
  t[T_RANKS] =
      loom__table_new(table_key[T_RANKS],
                      "Ranks: step time, communication and waiting (Scalasca's "
                      "wait states; caused = waiting of others this rank was late for; root cause "
                      "of = waiting that ends at this rank, following ranks that were late because "
                      "they waited)",
                      rank_cols, NCOLS(rank_cols));
  t[T_STEPS] = loom__table_new(table_key[T_STEPS],
                               "Steps across ranks (straggler: the rank at the root of "
                               "the most waiting in the step)",
                               step_cols, NCOLS(step_cols));
  t[T_CELLS] = loom__table_new(table_key[T_CELLS], "Rank x step", cell_cols, NCOLS(cell_cols));
  t[T_SITES] = loom__table_new(table_key[T_SITES], "Waiting per wait state and call", site_cols,
                               NCOLS(site_cols));
  t[T_FOR] =
      loom__table_new(table_key[T_FOR], "Who waited for whom (the rank at the root of each wait)",
                      for_cols, NCOLS(for_cols));
  for (int i = 0; i < T_COUNT; i++)
    if (!t[i]) return;
  rank_rows(t[T_RANKS], k);
  step_rows(t[T_STEPS], k);
  cell_rows(t[T_CELLS], k);
  site_rows(t[T_SITES], k);
  for_rows(t[T_FOR], k);
  loom__table_note(t[T_RANKS],
                   "%llu messages matched, %llu sends and %llu receives unmatched; %llu collective "
                   "instances",
                   (unsigned long long)k->messages, (unsigned long long)k->unmatched_sends,
                   (unsigned long long)k->unmatched_recvs, (unsigned long long)k->coll_instances);
  loom__table_note(t[T_RANKS], "waits under %.3f ms are noise: not wait states, charged to nobody "
                   "(%llu, in the noise column)", (double)k->wait_threshold_ns / 1e6,
                   (unsigned long long)k->noise_waits);
  if (k->pace_step >= 0)
    loom__table_note(t[T_RANKS], "slowest step: %lld", (long long)k->step_no[k->pace_step]);
  if (k->pace_rank >= 0)
    loom__table_note(t[T_RANKS], "rank that set the pace (root cause of the most waiting): %lld",
                     (long long)k->rank_id[k->pace_rank]);
}

static const loom__col sum_cols[] = {
    {"count", "ranks", LOOM__COL_INT},
    {"messages", "messages matched", LOOM__COL_INT},
    {"unmatched_sends", "sends unmatched", LOOM__COL_INT},
    {"unmatched_receives", "receives unmatched", LOOM__COL_INT},
    {"collective_instances", "collective instances", LOOM__COL_INT},
    {"slowest_step", "slowest step", LOOM__COL_INT},
    {"wait_threshold_ns", "wait threshold", LOOM__COL_NS},
    {"waits_below_threshold", "waits below it", LOOM__COL_INT},
    {"pace_rank", "rank that set the pace", LOOM__COL_INT}};
static const char *const table_path[T_COUNT] = {
    "ranks.tables.ranks", "ranks.tables.steps", "ranks.tables.rank_steps",
    "ranks.tables.wait_sites", "ranks.tables.waits_for"};

/* The figures of the section (JSON: the keys of "ranks"; the text gives
 * them as the ranks table's notes). */
static void summary(const loom__ranks *k, loom__model *m, int hide) {
  loom__table *t = loom__model_add(m, "ranks", "Ranks", sum_cols, k ? NCOLS(sum_cols) : 1,
                                   LOOM__TF_RECORD | LOOM__TF_NOTEXT | hide);
  loom__table_int(t, k ? (int64_t)k->nranks : 0);
  if (!k) return;
  loom__table_int(t, (int64_t)k->messages);
  loom__table_int(t, (int64_t)k->unmatched_sends);
  loom__table_int(t, (int64_t)k->unmatched_recvs);
  loom__table_int(t, (int64_t)k->coll_instances);
  if (k->pace_step >= 0) loom__table_int(t, k->step_no[k->pace_step]);
  else loom__table_null(t);
  loom__table_int(t, k->wait_threshold_ns);
  loom__table_int(t, (int64_t)k->noise_waits);
  if (k->pace_rank >= 0) loom__table_int(t, k->rank_id[k->pace_rank]);
  else loom__table_null(t);
}

/* Shown in text and HTML when there is more than one rank; the rank x step
 * table is the page's two heat maps (step time, waiting). */
void loom__report_ranks(const loom__report *r, loom__model *m) {
  const loom__ranks *k = r->ranks;
  int hide = k && k->nranks >= 2 ? 0 : LOOM__TF_NOTEXT | LOOM__TF_NOHTML;
  summary(k, m, hide);
  if (!k) return;
  loom__table *t[T_COUNT] = {0};
  build(k, t);
  for (int i = 0; i < T_COUNT; i++) {
    int flags = LOOM__TF_FULL | hide | (i >= T_SITES ? 0 : LOOM__TF_ALL);
    if (i == T_CELLS) flags |= LOOM__TF_NOTEXT | LOOM__TF_NOHTML;
    if (i == T_CELLS && t[i] && !hide)
      t[i]->chart = LOOM__CHART_HEAT, t[i]->chart_cols = 1u << 2 | 1u << 3;
    if (t[i]) loom__model_put(m, t[i], table_path[i], flags);
    else m->oom = 1;
  }
}
