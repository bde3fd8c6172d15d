/*
 * bench_report - cost of `loom report` on a big trace, next to the cost of
 * only reading the same file (the streaming reader with a sink that counts)
 * measured in the same run.  Each runs in its own child process so its peak
 * RSS is its own.
 *
 *   bench_report [EVENTS] [DIR] [ROUNDS]  (default 10,000,000 events, $TMPDIR, 3)
 *   bench_report --file PATH [ROUNDS]
 *   bench_report --memory [EVENTS] [DIR] [ROUNDS]
 *
 * The second form times an existing trace instead (read only and report,
 * interleaved, ROUNDS times, default 5; min and median): with
 * LD_LIBRARY_PATH set to another build's libloom in alternate runs it
 * compares two builds on the same file.  For a JSON file also yajl alone
 * and loom's own tokenizer alone (json_scan.h), in the same rounds.
 *
 * The trace is Kineto-like: per iteration an op, its launch call and the
 * kernel on one of four streams (every 16th a copy), a step range every 1000
 * iterations.  It is written as .json and converted to .pftrace; both are
 * analysed, with the default sort budget and with 32 MiB.  Prints seconds, ns
 * per event, peak RSS, and the ratio to the read-only baseline.  For the JSON
 * file also the tokenizers alone over the mapped file, callbacks that do
 * nothing, on one thread: yajl, and loom's own (json_scan.h), which the
 * reader's parser thread runs (tokens only, no model).
 *
 * Then the goals of issue 38.5, ROUNDS interleaved rounds of loom's
 * tokenizer alone and the report of the JSON file, the read-only pass and
 * the report of the .pftrace.  The clock is CPU time: user + sys of each
 * child, all its threads (wait4's rusage), since the report keeps two
 * threads busy where the floors use one.  R is the median over the rounds
 * of each round's ratio (the wall-clock ratios are printed too):
 *   goal report_json: R (target 1.5)     report / tokenizer alone, JSON
 *   goal report_pftrace: R (target 1.5)  report / read-only pass, .pftrace
 *   goal report_memory: PEAK MB          peak RSS of the reports with a
 *     32 MiB sort budget, the larger of the two files, against that budget
 *     plus 64 MB for the results and the reader (96 MB): the report's memory
 *     is the sort budget plus the results, whatever the trace's size.  The
 *     default 256 MiB budget's peak (bound 320 MB) is printed above it.
 * --file prints the goal line of its file's kind from its own rounds.
 *
 * --memory: the cost of memory events in the report.  Two traces of the
 * same iterations, the second with an allocation in each op and the free of
 * the allocation of 8 iterations before, as PyTorch's [memory] events (the
 * CUDA caching allocator on device 0, its reserved bytes on each); both
 * reports in interleaved rounds (default 3): ns per
 * memory event = (time with - time without) / memory events, min and
 * median, and both peak RSS (the live allocations stay few: memory must not
 * grow with the number of memory events).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "analysis/analysis.h"
#include "bench_trace.h"
#include "export/json_scan.h"
#include "loom/loom.h"
#include "export/export.h"
#include "trace/trace.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t mem_ev; /* memory events the last write_json wrote */

/* --memory: an allocation in the op of each iteration and the free of the
 * one of 8 iterations before (bench_trace.c). */
static int with_memory;

static size_t write_json(const char *path, size_t n) {
  return bench_write_kineto(path, n, 1, with_memory, &mem_ev);
}

typedef struct res {
  double secs, cpu; /* wall and CPU (user + sys) seconds */
  long rss_kb;
  int ok;
} res;

static int count_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *a) {
  (void)t, (void)e, (void)a;
  ++*(size_t *)ctx;
  return 0;
}

static int nop0(void *c) { return (void)c, 1; }
static int nop_bool(void *c, int b) { return (void)c, (void)b, 1; }
static int nop_num(void *c, const char *s, size_t n) { return (void)c, (void)s, (void)n, 1; }
static int nop_str(void *c, const unsigned char *s, size_t n) { return (void)c, (void)s, (void)n, 1; }

/* A tokenizer alone over the mapped file in 1 MiB chunks, callbacks that
 * do nothing: yajl (scan 0) or loom's own (json_scan.h).  0 when the
 * document was whole and valid. */
static int tokens_only(const char *path, int scan) {
  static const yajl_callbacks nop = {nop0, nop_bool, NULL, NULL, nop_num, nop_str,
                                     nop0, nop_str, nop0, nop0, nop0};
  int fd = open(path, O_RDONLY);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) return 1;
  size_t size = (size_t)sb.st_size;
  unsigned char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return 1;
  madvise(m, size, MADV_SEQUENTIAL);
  yajl_handle y = scan ? NULL : yajl_alloc(&nop, NULL, NULL);
  loom__jscan *s = scan ? loom__jscan_new(&nop, NULL) : NULL;
  int ok = y || s;
  for (size_t at = 0, used; ok && at < size; at += 1 << 20) {
    size_t n = size - at < (1u << 20) ? size - at : 1u << 20;
    ok = s ? loom__jscan_feed(s, m + at, n, &used) == LOOM__JSCAN_MORE : yajl_parse(y, m + at, n) == yajl_status_ok;
  }
  ok = ok && (s ? loom__jscan_done(s) : yajl_complete_parse(y) == yajl_status_ok);
  if (y) yajl_free(y);
  loom__jscan_free(s);
  munmap(m, size);
  return !ok;
}

/* Runs what (0 = read only, 1 = analyse, 2 = analyse with a 32 MiB sort
 * budget, 3 = yajl alone, 4 = loom's tokenizer alone, 5 and 6 = 1 and 2
 * without the critical path) on path in a child. */
static res run_child(int what, const char *path) {
  res r = {0, 0, 0, 0};
  double t0 = now();
  pid_t pid = fork();
  if (pid == 0) {
    if (what == 3 || what == 4) _exit(tokens_only(path, what == 4));
    if (what == 0) {
      size_t n = 0;
      loom__sink sink = {.event = count_event, .ctx = &n};
      loom_trace *meta = NULL;
      int st = loom__trace_stream(path, &sink, &meta);
      loom_trace_free(meta);
      _exit(st == LOOM_OK && n > 0 ? 0 : 1);
    }
    loom__report *rep = NULL;
    loom__report_opts o = {.sort_budget = what == 2 || what == 6 ? (size_t)32 << 20 : 0,
                           .no_critical_path = what >= 5};
    if (loom__analyze(path, &o, &rep) != LOOM_OK) {
      fprintf(stderr, "analyse: %s\n", loom_last_error());
      _exit(1);
    }
    loom__report_free(rep);
    _exit(0);
  }
  int status;
  struct rusage ru;
  wait4(pid, &status, 0, &ru);
  r.secs = now() - t0;
  r.rss_kb = ru.ru_maxrss;
  r.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
          (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return r;
}

/* Peak RSS (KiB) of the reports measure() ran with a 32 MiB sort budget,
 * and of those with the default budget in the goal rounds. */
static long peak_small_kb, peak_default_kb;

static void measure(const char *label, const char *path, size_t n) {
  struct stat st;
  stat(path, &st);
  res base = run_child(0, path), an = run_child(1, path), sm = run_child(2, path);
  if (!base.ok || !an.ok || !sm.ok) {
    fprintf(stderr, "%s: a child failed\n", label);
    exit(1);
  }
  peak_small_kb = sm.rss_kb > peak_small_kb ? sm.rss_kb : peak_small_kb;
  printf("%-8s %6.0f MB  read only: %6.2f s %5.0f ns/event %6.0f MB RSS | report: %6.2f s %5.0f ns/event "
         "%6.0f MB RSS | ratio %.2fx\n",
         label, (double)st.st_size / 1e6, base.secs, base.secs * 1e9 / (double)n, base.rss_kb / 1024.0,
         an.secs, an.secs * 1e9 / (double)n, an.rss_kb / 1024.0, an.secs / base.secs);
  printf("%-8s %9s  with a 32 MiB sort budget: %6.2f s %5.0f ns/event %6.0f MB RSS | ratio %.2fx\n", "", "",
         sm.secs, sm.secs * 1e9 / (double)n, sm.rss_kb / 1024.0, sm.secs / base.secs);
  res nb = run_child(5, path), ns = run_child(6, path); /* without the critical path */
  if (!nb.ok || !ns.ok) {
    fprintf(stderr, "%s: a child failed\n", label);
    exit(1);
  }
  printf("%-8s %9s  without the critical path: %6.2f s %6.0f MB RSS, 32 MiB: %6.2f s %6.0f MB RSS "
         "| the critical path adds %+.2f s %+.0f MB, 32 MiB: %+.2f s %+.0f MB\n", "", "",
         nb.secs, nb.rss_kb / 1024.0, ns.secs, ns.rss_kb / 1024.0, an.secs - nb.secs,
         (an.rss_kb - nb.rss_kb) / 1024.0, sm.secs - ns.secs, (sm.rss_kb - ns.rss_kb) / 1024.0);
  printf("%-8s %9s  CPU time (user + sys), report with / without the critical path: "
         "%.2f / %.2f s, 32 MiB: %.2f / %.2f s\n", "", "", an.cpu, nb.cpu, sm.cpu, ns.cpu);
  if (strstr(path, ".json")) {
    res y = run_child(3, path), sc = run_child(4, path);
    printf("%-8s %9s  yajl alone (no callbacks, one thread): %6.2f s %5.0f ns/event%s\n", "", "",
           y.secs, y.secs * 1e9 / (double)n, y.ok ? "" : " (FAILED)");
    printf("%-8s %9s  loom's tokenizer alone (the same):    %6.2f s %5.0f ns/event%s\n", "", "",
           sc.secs, sc.secs * 1e9 / (double)n, sc.ok ? "" : " (FAILED)");
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void min_median(const char *what, double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  printf("  %-34s %.3f / %.3f s (min / median)\n", what, v[0], v[n / 2]);
}

/* The median over the rounds of num[i] / den[i] (the pairs of one round). */
static double median_ratio(const double *num, const double *den, int rounds) {
  double r[64];
  for (int i = 0; i < rounds; i++) r[i] = num[i] / den[i];
  qsort(r, (size_t)rounds, sizeof *r, cmp_double);
  return r[rounds / 2];
}

static void goal_ratio(const char *name, double r) {
  printf("goal %s: %.2f (target 1.5) %s\n", name, r, r <= 1.5 ? "met" : "missed");
}

/* The goal rounds of the default form (header comment): CPU times. */
static int goal_rounds(const char *json, const char *pf, int rounds) {
  double tj[64], rj[64], bp[64], rp[64], wj[64], wp[64];
  rounds = rounds < 1 ? 1 : rounds > 64 ? 64 : rounds;
  for (int i = 0; i < rounds; i++) {
    res t = run_child(4, json), a = run_child(1, json), b = run_child(0, pf), p = run_child(1, pf);
    if (!t.ok || !a.ok || !b.ok || !p.ok) {
      fprintf(stderr, "goal rounds: a child failed\n");
      return 1;
    }
    tj[i] = t.cpu, rj[i] = a.cpu, bp[i] = b.cpu, rp[i] = p.cpu;
    wj[i] = a.secs / t.secs, wp[i] = p.secs / b.secs;
    peak_default_kb = a.rss_kb > peak_default_kb ? a.rss_kb : peak_default_kb;
    peak_default_kb = p.rss_kb > peak_default_kb ? p.rss_kb : peak_default_kb;
  }
  double gj = median_ratio(rj, tj, rounds), gp = median_ratio(rp, bp, rounds);
  printf("goals, %d rounds interleaved, CPU time (user + sys, all threads of each child):\n",
         rounds);
  min_median("json: loom's tokenizer alone", tj, rounds);
  min_median("json: report", rj, rounds);
  min_median("pftrace: read only", bp, rounds);
  min_median("pftrace: report", rp, rounds);
  qsort(wj, (size_t)rounds, sizeof *wj, cmp_double);
  qsort(wp, (size_t)rounds, sizeof *wp, cmp_double);
  printf("  wall-clock ratios instead (median): json %.2f, pftrace %.2f\n", wj[rounds / 2],
         wp[rounds / 2]);
  double pd = peak_default_kb / 1024.0, ps = peak_small_kb / 1024.0;
  printf("  peak RSS of the report, default 256 MiB sort budget: %.0f MB (bound 256 + 64 = 320 MB, "
         "%s)\n", pd, pd <= 320 ? "within" : "over");
  goal_ratio("report_json", gj);
  goal_ratio("report_pftrace", gp);
  printf("goal report_memory: %.0f MB (target: at most the 32 MiB sort budget + 64 MB of results "
         "and reader = 96 MB) %s\n", ps, ps <= 96 ? "met" : "missed");
  return 0;
}

static int time_file(const char *path, int rounds) {
  double rd[64], an[64], ya[64], sc[64], nc[64], ac[64], ncc[64], rdc[64], scc[64];
  int json = strstr(path, ".json") != NULL;
  rounds = rounds < 1 ? 1 : rounds > 64 ? 64 : rounds;
  for (int i = 0; i < rounds; i++) {
    res a = run_child(0, path), b = run_child(1, path), d = run_child(5, path);
    res y = json ? run_child(3, path) : a, c = json ? run_child(4, path) : a;
    if (!a.ok || !b.ok || !y.ok || !c.ok || !d.ok) {
      fprintf(stderr, "%s: a child failed\n", path);
      return 1;
    }
    rd[i] = a.secs, an[i] = b.secs, ya[i] = y.secs, sc[i] = c.secs, nc[i] = d.secs;
    ac[i] = b.cpu, ncc[i] = d.cpu, rdc[i] = a.cpu, scc[i] = c.cpu;
  }
  double g = median_ratio(ac, json ? scc : rdc, rounds); /* before the sorts below */
  printf("%s, %d rounds interleaved:\n", path, rounds);
  min_median("read only", rd, rounds);
  min_median("report", an, rounds);
  min_median("report without the critical path", nc, rounds);
  min_median("report, CPU time", ac, rounds);
  min_median("report without it, CPU time", ncc, rounds);
  if (json) min_median("yajl alone", ya, rounds);
  if (json) min_median("loom's tokenizer alone", sc, rounds);
  min_median(json ? "tokenizer alone, CPU time" : "read only, CPU time", json ? scc : rdc, rounds);
  goal_ratio(json ? "report_json" : "report_pftrace", g);
  return 0;
}

/* --memory: reports of the same iterations without and with memory events. */
static int time_memory(size_t n, const char *dir, int rounds) {
  char base[512], mem[512];
  snprintf(base, sizeof base, "%s/bench_report_nomem.%d.json", dir, (int)getpid());
  snprintf(mem, sizeof mem, "%s/bench_report_mem.%d.json", dir, (int)getpid());
  with_memory = 0;
  size_t nb = write_json(base, n);
  with_memory = 1;
  size_t nm = write_json(mem, n), nmem = mem_ev;
  printf("bench_report --memory: %zu events without, %zu with (%zu memory events)\n", nb, nm, nmem);
  rounds = rounds < 1 ? 1 : rounds > 64 ? 64 : rounds;
  double tb[64], tm[64], per[64], rper[64], cper[64], crper[64], cbase[64];
  long rss_b = 0, rss_m = 0;
  for (int i = 0; i < rounds; i++) {
    res b = run_child(1, base), m = run_child(1, mem), rb = run_child(0, base),
        rm = run_child(0, mem);
    if (!b.ok || !m.ok || !rb.ok || !rm.ok) {
      fprintf(stderr, "a report failed\n");
      return 1;
    }
    tb[i] = b.secs, tm[i] = m.secs, per[i] = (m.secs - b.secs) * 1e9 / (double)nmem;
    rper[i] = (rm.secs - rb.secs) * 1e9 / (double)nmem;
    cper[i] = (m.cpu - b.cpu) * 1e9 / (double)nmem;
    crper[i] = (rm.cpu - rb.cpu) * 1e9 / (double)nmem;
    cbase[i] = b.cpu * 1e9 / (double)nb;
    rss_b = b.rss_kb > rss_b ? b.rss_kb : rss_b;
    rss_m = m.rss_kb > rss_m ? m.rss_kb : rss_m;
  }
  printf("%d rounds interleaved:\n", rounds);
  min_median("report without memory events", tb, rounds);
  min_median("report with memory events", tm, rounds);
  qsort(per, (size_t)rounds, sizeof *per, cmp_double);
  printf("  %-34s %.1f / %.1f ns (min / median)\n", "per memory event", per[0], per[rounds / 2]);
  qsort(rper, (size_t)rounds, sizeof *rper, cmp_double);
  printf("  %-34s %.1f / %.1f ns (min / median)\n", "of which reading it", rper[0],
         rper[rounds / 2]);
  qsort(cper, (size_t)rounds, sizeof *cper, cmp_double);
  printf("  %-34s %.1f / %.1f ns (min / median; CPU time, all threads)\n",
         "per memory event, CPU", cper[0], cper[rounds / 2]);
  qsort(crper, (size_t)rounds, sizeof *crper, cmp_double);
  printf("  %-34s %.1f / %.1f ns (min / median)\n", "of which reading it, CPU", crper[0],
         crper[rounds / 2]);
  qsort(cbase, (size_t)rounds, sizeof *cbase, cmp_double);
  printf("  %-34s %.1f / %.1f ns (min / median)\n", "per other event, CPU (baseline)", cbase[0],
         cbase[rounds / 2]);
  printf("  %-34s %.0f / %.0f MB (without / with)\n", "peak RSS", rss_b / 1024.0, rss_m / 1024.0);
  res sb = run_child(2, base), sm = run_child(2, mem); /* memory bounded by the budget */
  printf("  %-34s %.0f / %.0f MB (without / with)\n", "peak RSS, 32 MiB sort budget",
         sb.rss_kb / 1024.0, sm.rss_kb / 1024.0);
  if (!getenv("BENCH_REPORT_KEEP")) {
    unlink(base);
    unlink(mem);
  } else {
    printf("kept %s and %s\n", base, mem);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--file")) return time_file(argv[2], argc > 3 ? atoi(argv[3]) : 5);
  if (argc > 1 && !strcmp(argv[1], "--memory"))
    return time_memory(argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000,
                       argc > 3 ? argv[3] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                       argc > 4 ? atoi(argv[4]) : 3);
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
  const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char json[512], pf[512];
  snprintf(json, sizeof json, "%s/bench_report.%d.json", dir, (int)getpid());
  snprintf(pf, sizeof pf, "%s/bench_report.%d.pftrace", dir, (int)getpid());
  double t0 = now();
  n = write_json(json, n);
  printf("bench_report: %zu events (generated in %.1f s)\n", n, now() - t0);
  pid_t c = fork();
  if (c == 0) { /* the conversion loads the whole model: keep it out of our RSS */
    loom_trace *t = NULL;
    _exit(loom_trace_load(json, &t) == LOOM_OK && loom_trace_save(t, pf) == LOOM_OK ? 0 : 1);
  }
  int status;
  waitpid(c, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "conversion to .pftrace failed\n");
    return 1;
  }
  measure("json", json, n);
  measure("pftrace", pf, n);
  int rc = goal_rounds(json, pf, argc > 3 ? atoi(argv[3]) : 3);
  if (!getenv("BENCH_REPORT_KEEP")) { /* kept for profiling when set */
    unlink(json);
    unlink(pf);
  } else {
    printf("kept %s and %s\n", json, pf);
  }
  return rc;
}
