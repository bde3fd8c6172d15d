/*
 * bench_hostile - the readers and the report stay near-linear on hostile
 * shapes (issue 20): per-event cost at 10k, 100k and 1M events of
 *   unclosed  "ph":"B" ranges never closed, one thread
 *   nested    N "B" then N "E": nesting N levels deep
 *   async     N "b" with distinct ids, then their "e" in the order opened
 *   names     N complete events, every name distinct
 *   string    one event whose name is 100 bytes per "event" (100 MB at 1M)
 *   frames    N CPU samples, each on a stack frame of its own (stackFrames of
 *             N entries, frame i's parent i / 2)
 * For each file: loom_trace_load (whole model), loom_report_open (the
 * report's analysis) and, as the floor, the streaming reader with a sink
 * that only counts, measured in the same run, interleaved, REPS times; the
 * min and the median of each, in CPU ns per event, and the ratio to the
 * floor.
 * Flat ns/event from 10k to 1M is linear; quadratic shows as x10 per step.
 *
 *   bench_hostile [MAX_EVENTS] [REPS] [DIR] [SHAPE...]
 *   (default 1000000, 3, $TMPDIR, every shape)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"
#include "export/export.h"
#include "trace/trace.h"

/* CPU time of the process (both of the report's threads): the machine is
 * shared, so wall time says more about the neighbours than about loom. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_shape(const char *path, const char *shape, size_t n) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(1);
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  fputs("{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"p\"}}", f);
  if (!strcmp(shape, "unclosed") || !strcmp(shape, "nested"))
    for (size_t i = 0; i < n; i++)
      fprintf(f, ",\n{\"ph\":\"B\",\"cat\":\"cpu_op\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":%zu}", i);
  if (!strcmp(shape, "nested"))
    for (size_t i = 0; i < n; i++) fprintf(f, ",\n{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":%zu}", n + i);
  if (!strcmp(shape, "async")) { /* N open async ranges, closed first-opened first */
    for (size_t i = 0; i < n; i++)
      fprintf(f, ",\n{\"ph\":\"b\",\"cat\":\"a\",\"name\":\"r\",\"id\":%zu,\"pid\":1,\"tid\":1,\"ts\":%zu}", i + 1, i);
    for (size_t i = 0; i < n; i++)
      fprintf(f, ",\n{\"ph\":\"e\",\"cat\":\"a\",\"name\":\"r\",\"id\":%zu,\"pid\":1,\"tid\":1,\"ts\":%zu}", i + 1, n + i);
  }
  if (!strcmp(shape, "names"))
    for (size_t i = 0; i < n; i++)
      fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op%zu\",\"pid\":1,\"tid\":1,\"ts\":%zu,\"dur\":1}",
              i, i);
  if (!strcmp(shape, "string")) {
    fputs(",\n{\"ph\":\"X\",\"cat\":\"cpu_op\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1,\"name\":\"", f);
    for (size_t i = 0; i < n * 100; i++) fputc('a' + (int)(i % 26), f);
    fputs("\"}", f);
  }
  fputs("]", f);
  if (!strcmp(shape, "frames")) {
    fputs(",\n\"stackFrames\":{\"0\":{\"name\":\"f0\",\"category\":\"m\"}", f);
    for (size_t i = 1; i < n; i++)
      fprintf(f, ",\n\"%zu\":{\"name\":\"f%zu\",\"category\":\"m\",\"parent\":\"%zu\"}", i, i, i / 2);
    fputs("},\n\"samples\":[", f);
    for (size_t i = 0; i < n; i++)
      fprintf(f, "%s\n{\"pid\":1,\"tid\":1,\"ts\":%zu,\"name\":\"cpu-clock\",\"weight\":1,\"sf\":\"%zu\"}",
              i ? "," : "", i + 1, i);
    fputs("]", f);
  }
  fputs("}\n", f);
  fclose(f);
}

static int count(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  (void)t, (void)e, (void)args;
  ++*(size_t *)ctx;
  return 0;
}

static double run(int what, const char *path) {
  double t0 = now();
  if (what == 0) {
    size_t n = 0;
    loom__sink sink = {.event = count, .ctx = &n};
    loom_trace *meta = NULL;
    if (loom__trace_stream(path, &sink, &meta) != LOOM_OK) goto bad;
    loom_trace_free(meta);
  } else if (what == 1) {
    loom_trace *t = NULL;
    if (loom_trace_load(path, &t) != LOOM_OK) goto bad;
    loom_trace_free(t);
  } else {
    loom_report_options o = {.struct_size = sizeof o, .top = 20};
    loom_report *r = NULL;
    if (loom_report_open(path, &o, &r) != LOOM_OK) goto bad;
    loom_report_free(r);
  }
  return now() - t0;
bad:
  fprintf(stderr, "bench_hostile: %s: %s\n", path, loom_last_error());
  exit(1);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  size_t max = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  const char *dir = argc > 3 ? argv[3] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  if (reps < 1 || reps > 64) reps = 3;
  static const char *shapes[] = {"unclosed", "nested", "async", "names", "string", "frames"};
  static const char *what[] = {"stream (floor)", "load", "report"};
  printf("%-9s %9s %-15s %12s %12s %10s %10s\n", "shape", "events", "step", "min ns/ev", "med ns/ev",
         "min ratio", "med ratio");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int wanted = argc <= 4;
    for (int a = 4; a < argc; a++) wanted |= !strcmp(argv[a], shapes[s]);
    if (!wanted) continue;
    for (size_t n = 10000; n <= max; n *= 10) {
      char path[512];
      snprintf(path, sizeof path, "%s/bench_hostile_%d_%s.json", dir, (int)getpid(), shapes[s]);
      write_shape(path, shapes[s], n);
      double t[3][64];
      for (int r = 0; r < reps; r++) /* interleaved: floor, load, report, floor, ... */
        for (int w = 0; w < 3; w++) t[w][r] = run(w, path);
      for (int w = 0; w < 3; w++) qsort(t[w], (size_t)reps, sizeof t[w][0], cmp_d);
      for (int w = 0; w < 3; w++)
        printf("%-9s %9zu %-15s %12.1f %12.1f %10.2f %10.2f\n", shapes[s], n, what[w], t[w][0] * 1e9 / (double)n,
               t[w][reps / 2] * 1e9 / (double)n, t[w][0] / t[0][0], t[w][reps / 2] / t[0][reps / 2]);
      fflush(stdout);
      unlink(path);
    }
  }
  return 0;
}
