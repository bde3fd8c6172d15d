/*
 * bench_merge - throughput and peak memory of `loom merge` on 8 ranks,
 * next to `loom convert` of the same events (each rank's trace converted
 * on its own: the same bytes read and written, no merging), measured in
 * the same run, interleaved and repeated.  Each command runs as a child
 * process (the loom binary), so its peak RSS is its own (wait4).
 *
 *   bench_merge [--quick] [EVENTS_PER_RANK] [DIR]
 *     (default 1,000,000 per rank; --quick 100,000; DIR default $TMPDIR)
 *
 * A rank's trace (Chrome JSON as loom writes it): per iteration an op with
 * a send to the next rank and a receive from the previous one inside it,
 * and an instant; clock_sync points at both ends, each rank on its own
 * "host" with its own clock offset, so the merge aligns, matches 7 x N/4
 * messages and renumbers nothing.  Prints min and median ns per event, the
 * merge/convert ratio, and the merge's peak RSS with the input size and
 * the sort budget, for the default budget and a smaller one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RANKS 8
#define REPS 3

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void us(FILE *f, const char *key, long long ns) {
  fprintf(f, ",\"%s\":%lld.%03lld", key, ns / 1000, ns % 1000);
}

static void ev(FILE *f, int pid, const char *ph, const char *name, const char *cat, long long ts, long long dur,
               const char *args) {
  fprintf(f, "{\"ph\":\"%s\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d", ph, cat, name, pid, pid);
  us(f, "ts", ts);
  if (dur >= 0) us(f, "dur", dur);
  else fprintf(f, ",\"s\":\"t\"");
  fprintf(f, ",\"args\":{%s}},\n", args);
}

/* Rank r's trace of n events; its clock is r ms ahead of rank 0's. */
static long long write_rank(const char *path, int r, size_t n) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(1);
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  int pid = 1000 + r;
  long long shift = r * 1000000LL, t0 = 1700000000000000000LL + shift;
  fprintf(f, "{\"schemaVersion\":1,\"rank\":\"%d\",\"world_size\":\"%d\",\"hostname\":\"host%d\","
             "\"command_line\":\"./app --rank %d\",\"traceEvents\":[\n"
             "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"app\"}},\n",
          r, RANKS, r, r, pid);
  char a[256];
  size_t iters = n >= 2 ? (n - 2) / 4 : 0;
  snprintf(a, sizeof a, "\"reference_rank\":0,\"offset_ns\":%lld,\"rtt_ns\":20000,\"phase\":\"init\"", -shift);
  ev(f, pid, "i", "clock_sync", "loom", t0, -1, a);
  long long ts = t0 + 1000;
  for (size_t i = 0; i < iters; i++, ts += 10000) {
    ev(f, pid, "X", "aten::mm", "cpu_op", ts, 8000, "\"Input Dims\":\"[[64, 64], [64, 64]]\"");
    snprintf(a, sizeof a, "\"comm\":1,\"dst\":%d,\"tag\":7,\"bytes\":4096", (r + 1) % RANKS);
    ev(f, pid, "X", "MPI_Send", "mpi", ts + 500, 1500, a);
    snprintf(a, sizeof a, "\"comm\":1,\"src\":%d,\"recv_tag\":7,\"recv_bytes\":4096", (r + RANKS - 1) % RANKS);
    ev(f, pid, "X", "MPI_Recv", "mpi", ts + 3000, 4000, a);
    ev(f, pid, "i", "iteration", "user_annotation", ts + 7500, -1, "\"i\":1");
  }
  snprintf(a, sizeof a, "\"reference_rank\":0,\"offset_ns\":%lld,\"rtt_ns\":20000,\"phase\":\"finalize\"", -shift);
  fprintf(f, "{\"ph\":\"i\",\"cat\":\"loom\",\"name\":\"clock_sync\",\"pid\":%d,\"tid\":%d", pid, pid);
  us(f, "ts", ts);
  fprintf(f, ",\"s\":\"t\",\"args\":{%s}}\n]}\n", a);
  long long bytes = ftell(f);
  fclose(f);
  return bytes;
}

/* Runs argv (the loom binary) quietly; wall seconds, *cpu its CPU seconds
 * (user + system: what a loaded machine's other work does not inflate),
 * *rss_kb its peak. */
static double run(char *const *argv, double *cpu, long *rss_kb) {
  fflush(stdout);
  double t = now();
  pid_t p = fork();
  if (p == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (p < 0 || wait4(p, &status, 0, &ru) != p || !WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "bench_merge: %s %s failed\n", argv[0], argv[1]);
    exit(1);
  }
  *rss_kb = ru.ru_maxrss;
  *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
  return now() - t;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  size_t n = 1000000;
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  int ai = 1;
  if (ai < argc && !strcmp(argv[ai], "--quick")) n = 100000, ai++;
  if (ai < argc && argv[ai][0] >= '0' && argv[ai][0] <= '9') n = strtoull(argv[ai++], NULL, 10);
  if (ai < argc) dir = argv[ai++];
  char in[RANKS][512], conv[512], out[512], tmp[512];
  long long bytes = 0;
  for (int r = 0; r < RANKS; r++) {
    snprintf(in[r], sizeof in[r], "%s/bench_merge_r%d.json", dir, r);
    bytes += write_rank(in[r], r, n);
  }
  snprintf(conv, sizeof conv, "%s/bench_merge_conv.json", dir);
  snprintf(out, sizeof out, "%s/bench_merge_out.json", dir);
  snprintf(tmp, sizeof tmp, "TMPDIR=%s", dir);
  putenv(tmp);
  double total = (double)n * RANKS;
  printf("bench_merge: %d ranks x %zu events = %.0f events, %.1f MiB of JSON in %s\n", RANKS, n, total,
         (double)bytes / (1 << 20), dir);

  char *margv[RANKS + 8];
  int k = 0;
  margv[k++] = LOOM_BIN;
  margv[k++] = "merge";
  for (int r = 0; r < RANKS; r++) margv[k++] = in[r];
  margv[k++] = "-o";
  margv[k++] = out;
  margv[k++] = "--sort-memory";
  char budget[32] = "256m";
  margv[k++] = budget;
  margv[k] = NULL;

  double tm[REPS], tc[REPS], cm[REPS], cc[REPS];
  long rss_m = 0, rss_c = 0;
  for (int rep = 0; rep < REPS; rep++) {
    double t = 0, c = 0, cpu;
    long kb;
    for (int r = 0; r < RANKS; r++) { /* the baseline: the same events converted */
      char *cargv[] = {LOOM_BIN, "convert", in[r], conv, NULL};
      t += run(cargv, &cpu, &kb);
      c += cpu;
      if (kb > rss_c) rss_c = kb;
    }
    tc[rep] = t, cc[rep] = c;
    tm[rep] = run(margv, &cm[rep], &kb);
    if (kb > rss_m) rss_m = kb;
  }
  qsort(tm, REPS, sizeof *tm, cmp_d);
  qsort(tc, REPS, sizeof *tc, cmp_d);
  qsort(cm, REPS, sizeof *cm, cmp_d);
  qsort(cc, REPS, sizeof *cc, cmp_d);
  struct stat st;
  long long out_bytes = stat(out, &st) == 0 ? (long long)st.st_size : 0;
  const int md = REPS / 2;
  printf("%d runs each, interleaved; ns per event (wall | CPU)\n", REPS);
  printf("convert (8 traces, one by one): min %7.1f | %7.1f  median %7.1f | %7.1f  peak RSS %.1f MiB\n",
         tc[0] / total * 1e9, cc[0] / total * 1e9, tc[md] / total * 1e9, cc[md] / total * 1e9, rss_c / 1024.0);
  printf("merge (8 traces into one):      min %7.1f | %7.1f  median %7.1f | %7.1f  peak RSS %.1f MiB\n",
         tm[0] / total * 1e9, cm[0] / total * 1e9, tm[md] / total * 1e9, cm[md] / total * 1e9, rss_m / 1024.0);
  printf("ratio merge/convert: wall min %.2fx median %.2fx, CPU min %.2fx median %.2fx (goal: within 1.5x)\n",
         tm[0] / tc[0], tm[md] / tc[md], cm[0] / cc[0], cm[md] / cc[md]);
  printf("merge peak RSS %.1f MiB with --sort-memory 256m; input %.1f MiB, output %.1f MiB\n",
         rss_m / 1024.0, (double)bytes / (1 << 20), (double)out_bytes / (1 << 20));
  /* smaller budgets: the peak follows the budget, not the input */
  static const char *small[] = {"64m", "16m"};
  for (int i = 0; i < 2; i++) {
    snprintf(budget, sizeof budget, "%s", small[i]);
    long kb;
    double cpu, t = run(margv, &cpu, &kb);
    printf("merge with --sort-memory %s: %.1f | %.1f ns/event, peak RSS %.1f MiB (input %.1f MiB)\n", budget,
           t / total * 1e9, cpu / total * 1e9, kb / 1024.0, (double)bytes / (1 << 20));
  }
  for (int r = 0; r < RANKS; r++) unlink(in[r]);
  unlink(conv);
  unlink(out);
  return 0;
}
