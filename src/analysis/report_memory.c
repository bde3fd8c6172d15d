/*
 * report_memory.c - the memory section of `loom report` (docs/memory.md),
 * present when the trace has memory events: per device and memory kind the
 * allocations, the peak with its time, op, range and step, the bytes left
 * at the end; the ops that allocated most and that held most at the peak;
 * the leaks (live at the end) with the op that made them; the frees of
 * addresses never seen allocated; and the bytes in use over time (a chart
 * on the HTML page).  Times are relative to the trace's first event, like
 * every time of the report; bytes are exact integers.
 */
#include <stdio.h>
#include <stdlib.h>

#include "analysis.h"
#include "report_model.h"
#include "table.h"

#define NCOLS(a) (sizeof a / sizeof a[0])

static const loom__col series_cols[] = {
    {"device", "device", LOOM__COL_STR},
    {"pid", "pid", LOOM__COL_INT, LOOM__CF_JSON_ONLY},
    {"kind", "kind", LOOM__COL_STR},
    {"allocations", "allocs", LOOM__COL_INT},
    {"allocated_bytes", "allocated (B)", LOOM__COL_INT},
    {"frees", "frees", LOOM__COL_INT, LOOM__CF_NOTEXT},
    {"freed_bytes", "freed (B)", LOOM__COL_INT, LOOM__CF_NOTEXT},
    {"live_at_start", "live at start", LOOM__COL_INT, LOOM__CF_NOTEXT},
    {"live_at_start_bytes", "at start (B)", LOOM__COL_INT, LOOM__CF_NOTEXT},
    {"peak_bytes", "peak (B)", LOOM__COL_INT},
    {"peak_ns", "peak at", LOOM__COL_NS},
    {"peak_op", "peak op", LOOM__COL_STR},
    {"peak_call", "peak call", LOOM__COL_STR, LOOM__CF_NOTEXT},
    {"peak_range", "peak range", LOOM__COL_STR, LOOM__CF_NOTEXT},
    {"peak_step", "peak step", LOOM__COL_STR},
    {"in_use_end_bytes", "at end (B)", LOOM__COL_INT},
    {"reserved_peak_bytes", "reserved peak (B)", LOOM__COL_INT, LOOM__CF_NOTEXT},
    {"reserved_end_bytes", "reserved at end (B)", LOOM__COL_INT, LOOM__CF_NOTEXT},
    {"leaks", "leaks", LOOM__COL_INT},
    {"leaked_bytes", "leaked (B)", LOOM__COL_INT},
    {"unknown_frees", "unknown frees", LOOM__COL_INT},
    {"unknown_free_bytes", "unknown freed (B)", LOOM__COL_INT, LOOM__CF_NOTEXT},
    {"reallocated_live", "alloc over live", LOOM__COL_INT, LOOM__CF_NOTEXT}};
static const loom__col top_cols[] = {{"device", "device", LOOM__COL_STR},
                                     {"kind", "kind", LOOM__COL_STR},
                                     {"op", "op", LOOM__COL_STR},
                                     {"bytes", "bytes", LOOM__COL_INT},
                                     {"count", "allocations", LOOM__COL_INT}};
static const loom__col block_cols[] = {{"device", "device", LOOM__COL_STR},
                                       {"kind", "kind", LOOM__COL_STR},
                                       {"op", "op", LOOM__COL_STR},
                                       {"call", "call", LOOM__COL_STR},
                                       {"bytes", "bytes", LOOM__COL_INT},
                                       {"addr", "address", LOOM__COL_STR},
                                       {"ts_ns", "time", LOOM__COL_NS},
                                       {"range", "range", LOOM__COL_STR, LOOM__CF_NOTEXT},
                                       {"step", "step", LOOM__COL_STR}};
static const loom__col line_cols[] = {{"label", "series", LOOM__COL_STR, LOOM__CF_NOJSON},
                                      {"device", "device", LOOM__COL_STR, LOOM__CF_JSON_ONLY},
                                      {"kind", "kind", LOOM__COL_STR, LOOM__CF_JSON_ONLY},
                                      {"buckets", "buckets", LOOM__COL_INT},
                                      {"bucket_ns", "bucket", LOOM__COL_NUM},
                                      {"in_use_max_bytes", "in use", LOOM__COL_INTS},
                                      {"reserved_max_bytes", "reserved", LOOM__COL_INTS}};

static const char *S(const loom__report *r, uint32_t id) { return loom__trace_cstr(r->meta, id); }

/* A name, or "-" for none (the op of an allocation made outside any op). */
static void name_cell(loom__table *t, const loom__report *r, uint32_t id) {
  if (id) loom__table_str(t, S(r, id));
  else loom__table_null(t);
}

static void series_key(loom__table *t, const loom__report *r, const loom__mem_series *s) {
  char buf[64];
  loom__table_str(t, loom__mem_device_name(r->meta, r->mem, s, buf, sizeof buf));
  loom__table_str(t, loom__mem_kind_name(r->meta, s->device, s->kind));
}

static void series_row(loom__table *t, const loom__report *r, const loom__mem_series *s) {
  char buf[64];
  loom__table_str(t, loom__mem_device_name(r->meta, r->mem, s, buf, sizeof buf));
  if (s->device == LOOM__MEM_HOST) loom__table_null(t);
  else loom__table_int(t, s->device);
  loom__table_str(t, loom__mem_kind_name(r->meta, s->device, s->kind));
  int64_t v[] = {(int64_t)s->nalloc, (int64_t)s->alloc_bytes, (int64_t)s->nfree,
                 (int64_t)s->free_bytes, (int64_t)s->nstart, (int64_t)s->start_bytes,
                 (int64_t)s->peak};
  for (size_t i = 0; i < NCOLS(v); i++) loom__table_int(t, v[i]);
  if (s->peak) {
    loom__table_int(t, s->peak_ts - r->t0);
    name_cell(t, r, s->peak_op);
    name_cell(t, r, s->peak_call);
    name_cell(t, r, s->peak_range);
    name_cell(t, r, s->peak_step);
  } else {
    for (int i = 0; i < 5; i++) loom__table_null(t);
  }
  loom__table_int(t, (int64_t)s->in_use);
  if (s->has_reserved) {
    loom__table_int(t, (int64_t)s->peak_reserved);
    loom__table_int(t, (int64_t)s->reserved);
  } else {
    loom__table_null(t);
    loom__table_null(t);
  }
  int64_t w[] = {(int64_t)s->nleaks, (int64_t)s->leak_bytes, (int64_t)s->nunknown,
                 (int64_t)s->unknown_bytes, (int64_t)s->nreplaced};
  for (size_t i = 0; i < NCOLS(w); i++) loom__table_int(t, w[i]);
}

/* Rows of one series' list: the report's top N of each series. */
static size_t limit(const loom__model *m, loom__table *t, size_t n) {
  size_t k = m->top && n > m->top ? m->top : n;
  t->more += n - k;
  return k;
}

static void tops(const loom__report *r, loom__model *m, const loom__mem *mem, int peak) {
  loom__table *t = loom__model_add(
      m, peak ? "memory.top_ops_at_peak" : "memory.top_ops_by_allocated",
      peak ? "Memory: ops by bytes live at the peak" : "Memory: ops by bytes allocated",
      top_cols, NCOLS(top_cols), LOOM__TF_ALL);
  if (!t) return;
  for (size_t i = 0; i < loom__mem_count(mem); i++) {
    const loom__mem_series *s = loom__mem_series_at(mem, i);
    const loom__mem_top *x = peak ? s->at_peak : s->by_alloc;
    size_t n = limit(m, t, peak ? s->nat_peak : s->nby_alloc);
    for (size_t k = 0; k < n; k++) {
      series_key(t, r, s);
      name_cell(t, r, x[k].op);
      loom__table_int(t, (int64_t)x[k].bytes);
      loom__table_int(t, (int64_t)x[k].count);
    }
  }
  if (peak) loom__table_note(t, "allocations: of the op's, live at the peak");
}

static void block_row(loom__table *t, const loom__report *r, const loom__mem_series *s,
                      const loom__mem_block *b) {
  char addr[24];
  series_key(t, r, s);
  name_cell(t, r, b->op);
  name_cell(t, r, b->call);
  loom__table_int(t, (int64_t)b->bytes);
  snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)b->addr);
  loom__table_str(t, addr);
  loom__table_int(t, b->ts - r->t0);
  name_cell(t, r, b->range);
  name_cell(t, r, b->step);
}

static void blocks(const loom__report *r, loom__model *m, const loom__mem *mem, int leaks) {
  loom__table *t = loom__model_add(
      m, leaks ? "memory.leaks" : "memory.unknown_frees",
      leaks ? "Memory: live at the end (leaks), largest first"
            : "Memory: frees of addresses never seen allocated",
      block_cols, NCOLS(block_cols), LOOM__TF_ALL);
  if (!t) return;
  for (size_t i = 0; i < loom__mem_count(mem); i++) {
    const loom__mem_series *s = loom__mem_series_at(mem, i);
    size_t kept = s->nunknown < LOOM__MEM_EXAMPLES ? s->nunknown : LOOM__MEM_EXAMPLES;
    size_t n = limit(m, t, leaks ? s->nleaks : kept);
    for (size_t k = 0; k < n; k++) block_row(t, r, s, leaks ? &s->leaks[k] : &s->unknown[k]);
    if (!leaks) t->more += s->nunknown - kept;
  }
  if (leaks)
    loom__table_note(t, "op: the op open when it was allocated; time: when it was allocated");
  else
    loom__table_note(t, "counted in the series table (unknown frees), never dropped; the first "
                        "%d of each series are listed; bytes: what the free said (0: not said)",
                     LOOM__MEM_EXAMPLES);
}

static void timeline(const loom__report *r, loom__model *m, const loom__mem *mem) {
  loom__table *t = loom__model_add(m, "memory.timeline", "Memory in use over time", line_cols,
                                   NCOLS(line_cols), LOOM__TF_ALL | LOOM__TF_NOTEXT);
  if (!t) return;
  int64_t t0, t1;
  size_t nb;
  loom__mem_span(mem, &t0, &t1, &nb);
  t->chart = LOOM__CHART_LEVELS;
  t->chart_cols = 1u << 4;
  for (size_t i = 0; i < loom__mem_count(mem); i++) {
    const loom__mem_series *s = loom__mem_series_at(mem, i);
    char buf[64], label[256];
    snprintf(label, sizeof label, "%s, %s",
             loom__mem_device_name(r->meta, r->mem, s, buf, sizeof buf),
             loom__mem_kind_name(r->meta, s->device, s->kind));
    loom__table_str(t, label);
    series_key(t, r, s);
    loom__table_int(t, (int64_t)nb);
    loom__table_num(t, nb ? (double)(t1 - t0) / (double)nb : 0);
    loom__table_ints(t, (const int64_t *)s->bmax, nb);
    if (s->has_reserved) loom__table_ints(t, (const int64_t *)s->bres, nb);
    else loom__table_ints(t, NULL, 0);
  }
}

void loom__report_memory(const loom__report *r, loom__model *m) {
  const loom__mem *mem = r->mem;
  if (!loom__mem_count(mem)) return;
  loom__table *t = loom__model_add(m, "memory.series", "Memory by device and kind", series_cols,
                                   NCOLS(series_cols), LOOM__TF_ALL);
  if (!t) return;
  for (size_t i = 0; i < loom__mem_count(mem); i++)
    series_row(t, r, loom__mem_series_at(mem, i));
  loom__table_note(t, "peak: the most bytes in use at once, first reached at \"peak at\" by "
                      "an allocation in \"peak op\" (innermost framework op on its thread)");
  tops(r, m, mem, 0);
  tops(r, m, mem, 1);
  blocks(r, m, mem, 1);
  blocks(r, m, mem, 0);
  timeline(r, m, mem);
}
