/*
 * report.c - the text and JSON forms of a report (the HTML page is in
 * report_html.c).  Both print the same figures from the same model; the
 * JSON schema is "loom-report/2", documented in docs/report.md: times are
 * integer nanoseconds relative to the trace's first event unless a key
 * says otherwise, shares are percentages.
 */
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export/outfile.h"
#include "table.h"

#define outf loom__outf

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

static const char *S(const loom__report *r, uint32_t id) { return loom__trace_cstr(r->meta, id); }

/* ---- shared helpers -------------------------------------------------------- */
static _Thread_local const loom__report *rows_rep;
static _Thread_local int rows_self;

static int cmp_rows(const void *pa, const void *pb) {
  const loom__rname *a = &rows_rep->names[*(const size_t *)pa], *b = &rows_rep->names[*(const size_t *)pb];
  int64_t x = rows_self ? a->self : a->total, y = rows_self ? b->self : b->total;
  if (x != y) return x > y ? -1 : 1;
  return strcmp(S(rows_rep, a->name), S(rows_rep, b->name));
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
  h->idle = h->kernel_time - d->m.u[7];
  h->compute = d->m.u[1];
  h->non_compute = h->kernel_time - h->compute - h->idle;
  double k = (double)h->kernel_time;
  h->idle_pct = k > 0 ? 100.0 * (double)h->idle / k : 0;
  h->compute_pct = k > 0 ? 100.0 * (double)h->compute / k : 0;
  h->non_compute_pct = k > 0 ? 100.0 * (double)h->non_compute / k : 0;
  int64_t comm = d->m.u[2];
  int64_t both = d->m.u[1] + d->m.u[2] - d->m.u[3];
  h->comm_comp_overlap_pct = comm > 0 ? 100.0 * (double)both / (double)comm : -1;
}

static const char *const class_label[8] = {
    NULL, "COMPUTATION", "COMMUNICATION", "COMPUTATION overlapping COMMUNICATION", "MEMORY",
    "COMPUTATION overlapping MEMORY", "COMMUNICATION overlapping MEMORY",
    "COMPUTATION overlapping COMMUNICATION overlapping MEMORY"};
static const char *const class_name[3] = {"compute", "communication", "memory"};
static const char *const idle_name[3] = {"host_wait", "kernel_wait", "other"};

static double pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * (double)a / (double)b : 0; }
static double us(int64_t ns) { return (double)ns / 1000.0; }
static double ms(int64_t ns) { return (double)ns / 1e6; }

static size_t limit(size_t n, size_t top) { return top && top < n ? top : n; }

/* Steps sorted by duration, longest first (ties: earlier first). */
static _Thread_local const loom__report *steps_rep;
static int cmp_step(const void *pa, const void *pb) {
  const loom__rstep *a = &steps_rep->steps[*(const size_t *)pa], *b = &steps_rep->steps[*(const size_t *)pb];
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return a->ts < b->ts ? -1 : a->ts > b->ts;
}

typedef struct step_stats {
  double mean, stddev, p50;
  int64_t min, max;
  size_t *slowest;
} step_stats;

static void steps_of(const loom__report *r, step_stats *s) {
  memset(s, 0, sizeof *s);
  if (!r->nsteps) return;
  loom__qs q;
  memset(&q, 0, sizeof q);
  for (size_t i = 0; i < r->nsteps; i++) loom__qs_add(&q, r->steps[i].dur);
  s->mean = loom__qs_mean(&q);
  s->stddev = loom__qs_stddev(&q);
  s->p50 = loom__qs_quantile(&q, 0.5);
  s->min = q.min;
  s->max = q.max;
  loom__qs_free(&q);
  s->slowest = malloc(r->nsteps * sizeof *s->slowest);
  if (!s->slowest) return;
  for (size_t i = 0; i < r->nsteps; i++) s->slowest[i] = i;
  steps_rep = r;
  qsort(s->slowest, r->nsteps, sizeof *s->slowest, cmp_step);
}

/* The steps, slowest first: their table (text and JSON). */
static const loom__col slow_cols[] = {
    {"name", "step", LOOM__COL_STR}, {"start_ns", "start", LOOM__COL_NS}, {"dur_ns", "time", LOOM__COL_NS},
    {"device_time_ns", "device", LOOM__COL_NS}, {"device_work", "work", LOOM__COL_INT}};

static loom__table *slowest_table(const loom__report *r, const step_stats *s) {
  loom__table *t = loom__table_new("slowest", "Slowest steps", slow_cols, 5);
  for (size_t i = 0; t && s->slowest && i < r->nsteps; i++) {
    const loom__rstep *st = &r->steps[s->slowest[i]];
    loom__table_str(t, S(r, st->name));
    loom__table_int(t, st->ts - r->t0);
    loom__table_int(t, st->dur);
    loom__table_int(t, st->dev_time);
    loom__table_int(t, (int64_t)st->dev_count);
  }
  return t;
}

static int64_t kernel_time_total(const loom__report *r) {
  int64_t t = 0;
  for (size_t i = 0; i < r->nnames; i++)
    if (r->names[i].group == LOOM__G_KERNEL) t += r->names[i].total;
  return t;
}

/* ---- text ------------------------------------------------------------------ */
static void trunc_name(char *dst, size_t cap, const char *s) {
  size_t n = strlen(s);
  if (n < cap) {
    memcpy(dst, s, n + 1);
    return;
  }
  memcpy(dst, s, cap - 4);
  memcpy(dst + cap - 4, "...", 4);
}

void loom__report_text(const loom__report *r, loom__out *o, size_t top) {
  char nm[56];
  outf(o, "loom report: %s\n", r->path);
  outf(o, "  %llu events read, %llu analysed, span %.3f ms, %zu device(s)\n",
       (unsigned long long)r->nevents, (unsigned long long)r->nkept, ms(r->t1 - r->t0), r->ndevs);

  if (r->ndevs) {
    outf(o, "\nDevices and queues (times in ms; idle split: waiting for the host / other)\n");
    outf(o, "  %-28s %10s %10s %7s %10s %10s %9s\n", "device / queue", "window", "busy", "util%",
         "idle host", "idle other", "work");
    for (size_t i = 0; i < r->ndevs; i++) {
      const loom__rdev *d = &r->devs[i];
      char label[64];
      snprintf(label, sizeof label, "%lld %s", (long long)d->pid, S(r, d->name));
      trunc_name(nm, 29, label);
      int64_t win = d->last - d->first;
      outf(o, "  %-28s %10.3f %10.3f %7.2f %10.3f %10.3f %9llu\n", nm, ms(win), ms(d->m.u[7]),
           pct(d->m.u[7], win), ms(d->idle_host), ms(d->idle_other), (unsigned long long)d->nwork);
      for (size_t k = d->q0; k < d->q0 + d->nq; k++) {
        const loom__rq *q = &r->queues[k];
        if (q->name && *S(r, q->name)) snprintf(label, sizeof label, "  %s", S(r, q->name));
        else snprintf(label, sizeof label, "  queue %lld", (long long)q->tid);
        trunc_name(nm, 29, label);
        int64_t qw = q->last - q->first;
        outf(o, "  %-28s %10.3f %10.3f %7.2f %10.3f %10.3f %9llu\n", nm, ms(qw), ms(q->busy),
             pct(q->busy, qw), ms(q->idle_host), ms(q->idle_other), (unsigned long long)q->nwork);
      }
    }
    outf(o, "\nOverlap per device (ms; share of busy time)\n");
    outf(o, "  %-10s %10s %10s %10s %16s %16s %16s\n", "device", "compute", "comm", "memory",
         "compute+memory", "compute+comm", "comm+memory");
    for (size_t i = 0; i < r->ndevs; i++) {
      const loom__rdev *d = &r->devs[i];
      int64_t cm = d->m.u[1] + d->m.u[4] - d->m.u[5], cc = d->m.u[1] + d->m.u[2] - d->m.u[3],
              xm = d->m.u[2] + d->m.u[4] - d->m.u[6];
      outf(o, "  %-10lld %10.3f %10.3f %10.3f %9.3f %5.1f%% %9.3f %5.1f%% %9.3f %5.1f%%\n",
           (long long)d->pid, ms(d->m.u[1]), ms(d->m.u[2]), ms(d->m.u[4]), ms(cm), pct(cm, d->m.u[7]),
           ms(cc), pct(cc, d->m.u[7]), ms(xm), pct(xm, d->m.u[7]));
    }
  }

  size_t n, *rows = loom__report_rows(r, LOOM__G_KERNEL, &n, 0);
  int64_t ktot = kernel_time_total(r);
  if (n) {
    outf(o, "\nKernels (%zu names; top %zu by total time; us)\n", n, limit(n, top));
    outf(o, "  %-54s %8s %12s %10s %10s %10s %10s %6s\n", "name", "count", "total", "mean", "p50",
         "p95", "max", "share");
    for (size_t i = 0; i < limit(n, top); i++) {
      loom__rname *k = &r->names[rows[i]];
      trunc_name(nm, sizeof nm - 1, S(r, k->name));
      outf(o, "  %-54s %8llu %12.3f %10.3f %10.3f %10.3f %10.3f %5.1f%%\n", nm,
           (unsigned long long)k->count, us(k->total), loom__qs_mean(&k->q) / 1000,
           loom__qs_quantile(&k->q, 0.5) / 1000, loom__qs_quantile(&k->q, 0.95) / 1000, us(k->max),
           pct(k->total, ktot));
    }
  }
  free(rows);

  loom__table *mv = loom__report_moves(r, 3, "Transfers and fills (bandwidth in GB/s)");
  if (mv && loom__table_rows(mv)) loom__table_text(mv, o, 0);
  loom__table_free(mv);

  if (r->ndevs) {
    outf(o, "\nLaunch latency: host call start -> device start (us)\n");
    outf(o, "  %-10s %8s %10s %10s %10s %10s %10s\n", "device", "count", "mean", "p50", "p95", "max",
         "min");
    for (size_t i = 0; i < r->ndevs; i++) {
      loom__qs *q = (loom__qs *)&r->devs[i].launch;
      outf(o, "  %-10lld %8llu %10.3f %10.3f %10.3f %10.3f %10.3f\n", (long long)r->devs[i].pid,
           (unsigned long long)q->n, loom__qs_mean(q) / 1000, loom__qs_quantile(q, 0.5) / 1000,
           loom__qs_quantile(q, 0.95) / 1000, us(q->max), us(q->min));
    }
  }

  static const struct { int g; const char *title; } host[] = {
      {LOOM__G_OP, "Framework ops"}, {LOOM__G_RANGE, "User ranges"}, {LOOM__G_CALL, "Runtime calls"}};
  for (size_t h = 0; h < 3; h++)
    for (int by_self = 0; by_self < 2 - (host[h].g == LOOM__G_CALL); by_self++) {
      char title[96];
      snprintf(title, sizeof title, "%s by %s time", host[h].title, by_self ? "self" : "total");
      loom__table *t = loom__report_host(r, host[h].g, by_self, title);
      if (t && loom__table_rows(t)) loom__table_text(t, o, top);
      loom__table_free(t);
    }

  if (r->nsteps) {
    step_stats s;
    steps_of(r, &s);
    outf(o, "\nSteps: %zu, mean %.3f ms, stddev %.3f ms, min %.3f, p50 %.3f, max %.3f ms\n",
         r->nsteps, s.mean / 1e6, s.stddev / 1e6, ms(s.min), s.p50 / 1e6, ms(s.max));
    loom__table *t = slowest_table(r, &s);
    if (t) loom__table_text(t, o, top ? (top < 5 ? top : 5) : 0);
    loom__table_free(t);
    free(s.slowest);
  }

  const loom__rhta *H = &r->hta;
  if (H->nevents) {
    loom__hta_temporal h;
    loom__hta_temporal_of(H, &h);
    outf(o, "\nHolistic Trace Analysis figures (its definitions, docs/report.md; us%s)\n",
         H->last_step_dropped ? "; the last profiler step left out, as HTA does" : "");
    outf(o, "  temporal breakdown: kernel_time %.3f, idle %.3f (%.2f%%), compute %.3f (%.2f%%), "
         "non-compute %.3f (%.2f%%)\n", us(h.kernel_time), us(h.idle), h.idle_pct, us(h.compute),
         h.compute_pct, us(h.non_compute), h.non_compute_pct);
    if (h.comm_comp_overlap_pct >= 0)
      outf(o, "  comm/comp overlap: %.2f%% of communication time\n", h.comm_comp_overlap_pct);
    else
      outf(o, "  comm/comp overlap: no communication kernels\n");
    int64_t tot = 0;
    for (unsigned m = 1; m < 8; m++) tot += loom__umeas_exact(&H->m, m);
    for (unsigned m = 1; m < 8; m++) {
      int64_t x = loom__umeas_exact(&H->m, m);
      if (x > 0) outf(o, "  kernel type: %-58s %14.3f %6.1f%%\n", class_label[m], us(x), pct(x, tot));
    }
    loom__qs *q = (loom__qs *)&H->delay;
    outf(o, "  launch delay: %llu launches, mean %.3f, p50 %.3f, p95 %.3f, max %.3f; runtime > 50 us: "
         "%llu, delay > 100 us: %llu, short kernels: %llu\n", (unsigned long long)H->launches,
         loom__qs_mean(q) / 1000, loom__qs_quantile(q, 0.5) / 1000, loom__qs_quantile(q, 0.95) / 1000,
         us(q->max), (unsigned long long)H->long_runtime, (unsigned long long)H->long_delay,
         (unsigned long long)H->short_kernels);
    for (size_t k = 0; k < H->nstreams; k++) {
      const loom__hstream *st = &H->streams[k];
      int64_t all = st->idle[0] + st->idle[1] + st->idle[2];
      for (int c = 0; c < 3; c++)
        if (st->seen[c])
          outf(o, "  idle time: stream %-12lld %-11s %14.3f %6.2f\n", (long long)st->stream, idle_name[c],
               us(st->idle[c]), all ? (double)st->idle[c] / (double)all : NAN);
    }
  }

  loom__report_ranks_text(r, o, top);

  if (r->nunknown || r->orphan_work || r->unclosed) {
    outf(o, "\nNot understood or incomplete\n");
    for (size_t i = 0; i < r->nunknown; i++)
      outf(o, "  category \"%s\": %llu events (kind unknown, not analysed)\n",
           r->unknown[i].cat ? S(r, r->unknown[i].cat) : "(none)",
           (unsigned long long)r->unknown[i].count);
    if (r->orphan_work)
      outf(o, "  %llu device work items with no launch call in the trace (no latency, no range)\n",
           (unsigned long long)r->orphan_work);
    if (r->unclosed) outf(o, "  %llu ranges still open when the trace ended\n", (unsigned long long)r->unclosed);
  }
}

/* ---- JSON --------------------------------------------------------------------- */
static void js(loom__out *o, const char *s) { loom__json_str(o, s, strlen(s)); }

static void jnum(loom__out *o, double v) {
  if (!isfinite(v)) v = 0;
  if (v == (double)(int64_t)v && fabs(v) < 1e15) outf(o, "%lld", (long long)v);
  else outf(o, "%.6f", v);
}

static void jqs(loom__out *o, loom__qs *q) {
  outf(o, "{\"count\":%llu,\"mean_ns\":", (unsigned long long)q->n);
  jnum(o, loom__qs_mean(q));
  outf(o, ",\"p50_ns\":");
  jnum(o, loom__qs_quantile(q, 0.5));
  outf(o, ",\"p95_ns\":");
  jnum(o, loom__qs_quantile(q, 0.95));
  outf(o, ",\"min_ns\":%lld,\"max_ns\":%lld,\"exact\":%s}", (long long)q->min, (long long)q->max,
       loom__qs_exact(q) ? "true" : "false");
}

/* Copies (1) or fills (2): the rows of their table. */
static void json_moves(loom__out *o, const loom__report *r, int which) {
  loom__table *t = loom__report_moves(r, which, "");
  if (t) loom__table_json_rows(t, o, 0);
  else outf(o, "[]");
  loom__table_free(t);
}

void loom__report_json(const loom__report *r, loom__out *o, size_t top) {
  outf(o, "{\"schema\":\"loom-report/2\",\"input\":{\"path\":");
  js(o, r->path);
  outf(o, ",\"events\":%llu,\"analysed\":%llu,\"start_epoch_ns\":%lld,\"span_ns\":%lld,"
       "\"events_by_kind\":{", (unsigned long long)r->nevents, (unsigned long long)r->nkept,
       (long long)(r->t0 + r->meta->base_ns), (long long)(r->t1 - r->t0));
  for (int k = 0, first = 1; k < LOOM_KIND_COUNT_; k++) {
    if (!r->by_kind[k]) continue;
    outf(o, "%s", first ? "" : ",");
    js(o, loom_kind_name((loom_kind)k));
    outf(o, ":%llu", (unsigned long long)r->by_kind[k]);
    first = 0;
  }
  outf(o, "}},\"devices\":[");
  for (size_t i = 0; i < r->ndevs; i++) {
    const loom__rdev *d = &r->devs[i];
    int64_t win = d->last - d->first;
    outf(o, "%s{\"pid\":%lld,\"name\":", i ? "," : "", (long long)d->pid);
    js(o, S(r, d->name));
    outf(o, ",\"work\":%llu,\"kernels\":%llu,\"start_ns\":%lld,\"window_ns\":%lld,\"busy_ns\":%lld,"
         "\"utilization_pct\":", (unsigned long long)d->nwork, (unsigned long long)d->nkernels,
         (long long)(d->first - r->t0), (long long)win, (long long)d->m.u[7]);
    jnum(o, pct(d->m.u[7], win));
    outf(o, ",\"idle_ns\":%lld,\"idle_waiting_for_host_ns\":%lld,\"idle_other_ns\":%lld,\"busy_by_class_ns\":{",
         (long long)(win - d->m.u[7]), (long long)d->idle_host, (long long)d->idle_other);
    for (int c = 0; c < 3; c++)
      outf(o, "%s\"%s\":%lld", c ? "," : "", class_name[c], (long long)d->m.u[1u << c]);
    int64_t cm = d->m.u[1] + d->m.u[4] - d->m.u[5], cc = d->m.u[1] + d->m.u[2] - d->m.u[3],
            xm = d->m.u[2] + d->m.u[4] - d->m.u[6];
    outf(o, "},\"overlap_ns\":{\"compute_memory\":%lld,\"compute_communication\":%lld,"
         "\"communication_memory\":%lld,\"all_three\":%lld},\"launch_latency\":",
         (long long)cm, (long long)cc, (long long)xm, (long long)loom__umeas_exact(&d->m, 7));
    jqs(o, (loom__qs *)&d->launch);
    outf(o, ",\"timeline\":{\"buckets\":%d,\"bucket_ns\":", LOOM__NBUCKETS);
    jnum(o, (double)(r->t1 - r->t0) / LOOM__NBUCKETS);
    outf(o, ",\"busy_ns\":[");
    for (int b = 0; b < LOOM__NBUCKETS; b++) outf(o, "%s%lld", b ? "," : "", (long long)d->bucket[b]);
    outf(o, "],\"compute_ns\":[");
    for (int b = 0; b < LOOM__NBUCKETS; b++) outf(o, "%s%lld", b ? "," : "", (long long)d->bucket_c[b]);
    outf(o, "]},\"queues\":[");
    for (size_t k = d->q0; k < d->q0 + d->nq; k++) {
      const loom__rq *q = &r->queues[k];
      int64_t qw = q->last - q->first;
      outf(o, "%s{\"tid\":%lld,\"name\":", k > d->q0 ? "," : "", (long long)q->tid);
      js(o, S(r, q->name));
      outf(o, ",\"work\":%llu,\"start_ns\":%lld,\"window_ns\":%lld,\"busy_ns\":%lld,\"utilization_pct\":",
           (unsigned long long)q->nwork, (long long)(q->first - r->t0), (long long)qw, (long long)q->busy);
      jnum(o, pct(q->busy, qw));
      outf(o, ",\"idle_waiting_for_host_ns\":%lld,\"idle_other_ns\":%lld}", (long long)q->idle_host,
           (long long)q->idle_other);
    }
    outf(o, "]}");
  }
  outf(o, "],\"kernels\":{\"total_ns\":%lld,\"names\":", (long long)kernel_time_total(r));
  size_t n, *rows = loom__report_rows(r, LOOM__G_KERNEL, &n, 0);
  int64_t ktot = kernel_time_total(r);
  outf(o, "%zu,\"top\":[", n);
  for (size_t i = 0; i < limit(n, top); i++) {
    loom__rname *k = &r->names[rows[i]];
    outf(o, "%s{\"name\":", i ? "," : "");
    js(o, S(r, k->name));
    outf(o, ",\"class\":\"%s\",\"count\":%llu,\"total_ns\":%lld,\"share_pct\":", class_name[k->cls],
         (unsigned long long)k->count, (long long)k->total);
    jnum(o, pct(k->total, ktot));
    outf(o, ",\"stddev_ns\":");
    jnum(o, loom__qs_stddev(&k->q));
    outf(o, ",\"durations\":");
    jqs(o, &k->q);
    outf(o, "}");
  }
  free(rows);
  outf(o, "]},\"transfers\":");
  json_moves(o, r, 1);
  outf(o, ",\"fills\":");
  json_moves(o, r, 2);
  outf(o, ",\"host\":{");
  static const struct { int g; const char *key; } host[] = {
      {LOOM__G_OP, "ops"}, {LOOM__G_RANGE, "user_ranges"}, {LOOM__G_CALL, "runtime_calls"}};
  for (size_t h = 0; h < 3; h++) {
    loom__table *t = loom__report_host(r, host[h].g, 0, "");
    outf(o, "%s\"%s\":{\"names\":%zu,\"top\":", h ? "," : "", host[h].key, t ? loom__table_rows(t) : 0);
    if (t) loom__table_json_rows(t, o, top);
    else outf(o, "[]");
    outf(o, "}");
    loom__table_free(t);
  }
  outf(o, "},\"steps\":{\"count\":%zu", r->nsteps);
  if (r->nsteps) {
    step_stats s;
    steps_of(r, &s);
    outf(o, ",\"mean_ns\":");
    jnum(o, s.mean);
    outf(o, ",\"stddev_ns\":");
    jnum(o, s.stddev);
    outf(o, ",\"p50_ns\":");
    jnum(o, s.p50);
    outf(o, ",\"min_ns\":%lld,\"max_ns\":%lld,\"slowest\":", (long long)s.min, (long long)s.max);
    loom__table *t = slowest_table(r, &s);
    if (t) loom__table_json_rows(t, o, top);
    else outf(o, "[]");
    loom__table_free(t);
    free(s.slowest);
  }
  const loom__rhta *H = &r->hta;
  loom__hta_temporal h;
  loom__hta_temporal_of(H, &h);
  outf(o, "},\"hta\":{\"last_step_left_out\":%s,\"events\":%llu,\"temporal_breakdown\":{"
       "\"kernel_time_ns\":%lld,\"idle_time_ns\":%lld,\"compute_time_ns\":%lld,\"non_compute_time_ns\":%lld,"
       "\"idle_time_pctg\":%.2f,\"compute_time_pctg\":%.2f,\"non_compute_time_pctg\":%.2f},"
       "\"comp_comm_overlap_pctg\":", H->last_step_dropped ? "true" : "false",
       (unsigned long long)H->nevents, (long long)h.kernel_time, (long long)h.idle, (long long)h.compute,
       (long long)h.non_compute, h.idle_pct, h.compute_pct, h.non_compute_pct);
  if (h.comm_comp_overlap_pct >= 0) outf(o, "%.2f", h.comm_comp_overlap_pct);
  else outf(o, "null");
  outf(o, ",\"kernel_types\":[");
  int64_t tot = 0;
  for (unsigned m = 1; m < 8; m++) tot += loom__umeas_exact(&H->m, m);
  for (unsigned m = 1, first = 1; m < 8; m++) {
    int64_t x = loom__umeas_exact(&H->m, m);
    if (x <= 0) continue;
    outf(o, "%s{\"kernel_type\":\"%s\",\"sum_ns\":%lld,\"percentage\":%.1f}", first ? "" : ",",
         class_label[m], (long long)x, pct(x, tot));
    first = 0;
  }
  outf(o, "],\"launch_stats\":{\"launches\":%llu,\"launch_delay\":", (unsigned long long)H->launches);
  jqs(o, (loom__qs *)&H->delay);
  outf(o, ",\"runtime_over_50us\":%llu,\"launch_delay_over_100us\":%llu,\"short_kernels\":%llu},"
       "\"idle_time_breakdown\":[", (unsigned long long)H->long_runtime,
       (unsigned long long)H->long_delay, (unsigned long long)H->short_kernels);
  for (size_t k = 0, first = 1; k < H->nstreams; k++) {
    const loom__hstream *st = &H->streams[k];
    int64_t all = st->idle[0] + st->idle[1] + st->idle[2];
    for (int c = 0; c < 3; c++) {
      if (!st->seen[c]) continue;
      outf(o, "%s{\"stream\":%lld,\"idle_category\":\"%s\",\"idle_time_ns\":%lld,\"intervals\":%llu,"
           "\"idle_time_ratio\":", first ? "" : ",", (long long)st->stream, idle_name[c],
           (long long)st->idle[c], (unsigned long long)st->nidle[c]);
      if (all) outf(o, "%.2f}", (double)st->idle[c] / (double)all);
      else outf(o, "null}"); /* 0 / 0, NaN in HTA */
      first = 0;
    }
  }
  outf(o, "]}");
  loom__report_ranks_json(r, o, top);
  outf(o, ",\"not_understood\":{\"categories\":[");
  for (size_t i = 0; i < r->nunknown; i++) {
    outf(o, "%s{\"category\":", i ? "," : "");
    js(o, S(r, r->unknown[i].cat));
    outf(o, ",\"events\":%llu}", (unsigned long long)r->unknown[i].count);
  }
  outf(o, "],\"device_work_without_launch\":%llu,\"unclosed_ranges\":%llu}}\n",
       (unsigned long long)r->orphan_work, (unsigned long long)r->unclosed);
}

/* ---- public API ------------------------------------------------------------ */
#include "core/core.h"

struct loom_report {
  loom__report *r;
  size_t top;
};

loom_status loom_report_open(const char *path, const loom_report_options *opts, loom_report **out) {
  loom__clear_error();
  if (!path || !out) return loom__fail(LOOM_EINVAL, "loom_report_open: NULL path or out");
  *out = NULL;
  if (opts && opts->struct_size < sizeof(size_t) * 3 + sizeof(int))
    return loom__fail(LOOM_EINVAL, "loom_report_open: options from an unknown version (struct_size %zu)",
                      opts->struct_size);
  loom__report_opts o = {0};
  if (opts) {
    o.sort_budget = opts->sort_memory;
    o.hta_include_last_step = opts->hta_include_last_step;
    if (opts->struct_size >= offsetof(loom_report_options, nmore_traces) + sizeof opts->nmore_traces) {
      o.more = opts->more_traces;
      o.nmore = opts->nmore_traces;
    }
    if (opts->struct_size >= offsetof(loom_report_options, wait_threshold_ns) + sizeof(int64_t))
      o.wait_threshold_ns = opts->wait_threshold_ns;
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
  if (!h || format > LOOM_REPORT_HTML) return loom__fail(LOOM_EINVAL, "loom_report_write: bad report or format");
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
