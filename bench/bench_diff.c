/*
 * bench_diff - cost of `loom diff` on bench_report's trace (bench_trace.c,
 * 10,000,000 events by default), next to the cost of `loom report` of the
 * same file measured in the same run: the diff of the trace against
 * itself, and against a variant in which one kernel is twice as slow
 * (the diff must name it, and only it).  Each measurement runs in its own
 * child process so that its peak RSS is its own; rounds are interleaved
 * (report, diff with itself, diff with the variant), min and median kept.
 * Then once more with a 32 MiB sort budget: the diff's memory follows the
 * budget, as the report's does, not the trace.
 *
 *   bench_diff [EVENTS] [ROUNDS] [DIR]     (default 10,000,000 events, 3 rounds, $TMPDIR)
 *
 * Prints wall and CPU seconds (every thread of the child: robust on a
 * shared machine, where wall time follows the load), CPU ns per event (of
 * the two traces a diff reads), peak RSS, and the goal lines: a diff reads
 * two traces, so it may take twice the report's CPU time (target: at most
 * 2.5x, the callback's cost included) and its peak RSS stays within the
 * report's plus 64 MiB (names, quantiles and per-step cells).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/analysis.h"
#include "analysis/diff.h"
#include "bench_trace.h"
#include "loom/loom.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct res {
  double secs, cpu; /* wall clock; CPU time of every thread of the child */
  long rss_kb;
  int ok;
} res;

/* In the child: the report of a (what 0), or the diff of a against b
 * (what 1), with budget bytes of sort memory (0: the default).  For the
 * variant (check set) the diff must find exactly the slowed kernel. */
static int child(int what, const char *a, const char *b, size_t budget, int check) {
  if (what == 0) {
    loom__report *rep = NULL;
    loom__report_opts o = {.sort_budget = budget};
    if (loom__analyze(a, &o, &rep) != LOOM_OK) return 1;
    loom__report_free(rep);
    return 0;
  }
  loom__diff *d = NULL;
  loom__diff_opts o = {.sort_budget = budget};
  if (loom__diff_run(&a, 1, &b, 1, &o, &d) != LOOM_OK) {
    fprintf(stderr, "diff: %s\n", loom_last_error());
    return 1;
  }
  size_t flagged = 0, first = d->nrows;
  for (size_t i = 0; i < d->nrows; i++)
    if (d->rows[i].verdict) flagged++, first = first < i ? first : i;
  const char *name = first < d->nrows ? loom__strtab_get(&d->strs, d->rows[first].sid) : "";
  int ok = check ? flagged == 1 && !strcmp(name, "ampere_sgemm_128x64_tn") : flagged == 0;
  if (!ok) fprintf(stderr, "diff: %zu flagged, first '%s'\n", flagged, name);
  loom__diff_free(d);
  return !ok;
}

static res run_child(int what, const char *a, const char *b, size_t budget, int check) {
  res r = {0, 0, 0, 0};
  fflush(stdout);
  double t0 = now();
  pid_t pid = fork();
  if (pid == 0) _exit(child(what, a, b, budget, check));
  int status;
  struct rusage ru;
  wait4(pid, &status, 0, &ru);
  r.secs = now() - t0;
  r.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
          (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  r.rss_kb = ru.ru_maxrss;
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return r;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Min and median of wall v and CPU c [0..n) (sorted in place); *min gets
 * the least CPU time. */
static void line(const char *what, double *v, double *c, long rss_kb, int n, size_t events,
                 double *min) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  qsort(c, (size_t)n, sizeof *c, cmp_double);
  *min = c[0];
  printf("  %-27s %7.2f / %7.2f s, CPU %7.2f / %7.2f s (min / median) %5.0f CPU ns/event %5.0f MB "
         "peak RSS\n", what, v[0], v[n / 2], c[0], c[n / 2], c[0] * 1e9 / (double)events,
         rss_kb / 1024.0);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  const char *dir = argc > 3 ? argv[3] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  rounds = rounds < 1 ? 1 : rounds > 32 ? 32 : rounds;
  char base[512], slow[512];
  snprintf(base, sizeof base, "%s/bench_diff.%d.json", dir, (int)getpid());
  snprintf(slow, sizeof slow, "%s/bench_diff.%d.slow.json", dir, (int)getpid());
  double t0 = now();
  n = bench_write_kineto(base, n, 1, 0, NULL);
  bench_write_kineto(slow, n, 2, 0, NULL);
  printf("bench_diff: %zu events a trace (two generated in %.1f s), %d rounds\n", n, now() - t0,
         rounds);
  double rep[32], self[32], var[32], crep[32], cself[32], cvar[32];
  long rss[3] = {0, 0, 0};
  for (int i = 0; i < rounds; i++) {
    res r = run_child(0, base, NULL, 0, 0), s = run_child(1, base, base, 0, 0),
        v = run_child(1, base, slow, 0, 1);
    if (!r.ok || !s.ok || !v.ok) {
      fprintf(stderr, "a child failed (report %d, diff %d, variant %d)\n", r.ok, s.ok, v.ok);
      return 1;
    }
    rep[i] = r.secs, self[i] = s.secs, var[i] = v.secs;
    crep[i] = r.cpu, cself[i] = s.cpu, cvar[i] = v.cpu;
    rss[0] = r.rss_kb > rss[0] ? r.rss_kb : rss[0];
    rss[1] = s.rss_kb > rss[1] ? s.rss_kb : rss[1];
    rss[2] = v.rss_kb > rss[2] ? v.rss_kb : rss[2];
  }
  double mr, ms, mv;
  line("report (baseline)", rep, crep, rss[0], rounds, n, &mr);
  line("diff, trace against itself", self, cself, rss[1], rounds, 2 * n, &ms);
  line("diff, one kernel 2x slower", var, cvar, rss[2], rounds, 2 * n, &mv);
  res r32 = run_child(0, base, NULL, (size_t)32 << 20, 0);
  res d32 = run_child(1, base, slow, (size_t)32 << 20, 1);
  printf("  with a 32 MiB sort budget: report %.2f s %.0f MB peak RSS | diff %.2f s %.0f MB "
         "peak RSS%s\n", r32.secs, r32.rss_kb / 1024.0, d32.secs, d32.rss_kb / 1024.0,
         r32.ok && d32.ok ? "" : " (FAILED)");
  double ratio = mv / mr, extra = (double)(rss[2] - rss[0]) / 1024.0;
  printf("goal diff_time: %.2fx the report's CPU time (target 2.5x, two traces read) %s\n",
         ratio, ratio <= 2.5 ? "met" : "missed");
  printf("goal diff_memory: report's peak RSS + %.0f MB (target + 64 MB) %s\n", extra,
         extra <= 64 ? "met" : "missed");
  printf("goal diff_memory_32m: report's peak RSS + %.0f MB with a 32 MiB budget (target + 64 MB) "
         "%s\n", (double)(d32.rss_kb - r32.rss_kb) / 1024.0,
         d32.rss_kb - r32.rss_kb <= 64 * 1024 ? "met" : "missed");
  unlink(base);
  unlink(slow);
  return 0;
}
