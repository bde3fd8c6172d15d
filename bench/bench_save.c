/*
 * bench_save - what loom costs after the program, per event: the session's
 * stop (the records collected into a trace, put in order, linked) and the
 * save of that trace as Chrome JSON, for a recording shaped like a PyTorch
 * loop's under loom record: ops two deep, each with its input shapes and
 * types as two string arguments, an allocation in each inner op and its
 * free after it.  The floor, measured in the same rounds: writing as many
 * bytes as the trace has to a new file in the same folder (what any writer
 * of that file pays).
 *
 * Each way runs in a child process of its own (fresh memory, as at a
 * program's end); rounds interleave the ways; min and median.  With
 * LD_LIBRARY_PATH set to another build's libloom in alternate runs it
 * compares two builds.
 *
 *   bench_save [OPS] [ROUNDS] [DIR]   (default 200000 outer ops, 7, /tmp)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct res {
  double stop, save; /* seconds */
  double events, bytes;
} res;

static const char *const names[] = {"aten::conv2d", "aten::linear", "aten::relu", "aten::add_",
                                    "aten::mm", "aten::empty", "aten::sum", "aten::view"};

static void record(long ops) {
  for (long i = 0; i < ops; i++) {
    char dims[64];
    snprintf(dims, sizeof dims, "[[8, %ld, 32, 32], [%ld]]", 1 + i % 61, 1 + i % 7);
    static const char *const types = "[\"float\", \"float\"]";
    loom_arg outer[] = {{.key = "Input Dims", .type = LOOM_ARG_STRING, .v.s = dims},
                        {.key = "Input type", .type = LOOM_ARG_STRING, .v.s = types}};
    loom_op_begin_args(names[i % 8], (uint64_t)(2 * i + 1), outer, 2);
    loom_op_begin_args("aten::empty", (uint64_t)(2 * i + 2), outer, 2);
    uint64_t addr = 0x10000000ull + (uint64_t)(i % 64) * 65536;
    loom_memory_alloc(addr, 4096 + (uint64_t)(i % 13) * 64, LOOM_MEMORY_HOST, -1, 0);
    loom_op_end();
    loom_memory_free(addr, 0, LOOM_MEMORY_HOST, -1, 0);
    loom_op_end();
  }
}

/* A child: records, stops and saves (way 0), or writes bytes bytes to a new
 * file (way 1, the floor); the result back through fd. */
static void child(int way, long ops, const char *dir, double bytes, int fd) {
  res r = {0};
  char path[4096];
  snprintf(path, sizeof path, "%s/bench_save-%d.json", dir, (int)getpid());
  if (way == 0) {
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu"};
    loom_session *s = NULL;
    loom_trace *t = NULL;
    if (loom_session_create(&cfg, &s) != LOOM_OK || loom_session_start(s) != LOOM_OK) _exit(1);
    record(ops);
    double t0 = now();
    if (loom_session_stop(s, &t) != LOOM_OK) _exit(1);
    double t1 = now();
    if (loom_trace_save(t, path) != LOOM_OK) _exit(1);
    r.stop = t1 - t0, r.save = now() - t1;
    r.events = (double)loom_trace_event_count(t);
  } else {
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    double t0 = now();
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    for (double left = bytes; out >= 0 && left > 0; left -= sizeof buf)
      if (write(out, buf, left < sizeof buf ? (size_t)left : sizeof buf) < 0) _exit(1);
    if (out < 0 || close(out) != 0) _exit(1);
    r.save = now() - t0;
  }
  struct stat st;
  r.bytes = stat(path, &st) == 0 ? (double)st.st_size : 0;
  unlink(path);
  if (write(fd, &r, sizeof r) != sizeof r) _exit(1);
  _exit(0);
}

static res run(int way, long ops, const char *dir, double bytes) {
  int p[2];
  res r = {0};
  if (pipe(p) != 0) exit(1);
  pid_t pid = fork();
  if (pid == 0) child(way, ops, dir, bytes, p[1]);
  close(p[1]);
  int status, ok = read(p[0], &r, sizeof r) == sizeof r;
  close(p[0]);
  waitpid(pid, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "bench_save: a child failed: %s\n", loom_last_error());
    exit(1);
  }
  return r;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void line(const char *what, double *v, int n, double events) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  printf("%-34s %8.1f ms %8.1f ms %7.0f ns/event %7.0f ns/event\n", what, v[0] * 1e3,
         v[n / 2] * 1e3, v[0] * 1e9 / events, v[n / 2] * 1e9 / events);
}

int main(int argc, char **argv) {
  long ops = argc > 1 ? atol(argv[1]) : 200000;
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  const char *dir = argc > 3 ? argv[3] : "/tmp";
  if (ops < 1 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "usage: bench_save [OPS] [ROUNDS] [DIR]\n");
    return 2;
  }
  double stop[64], save[64], floor[64], total[64], ratio[64], events = 0, bytes = 0;
  for (int i = 0; i < rounds; i++) {
    res a = run(0, ops, dir, 0), b = run(1, ops, dir, a.bytes);
    stop[i] = a.stop, save[i] = a.save, floor[i] = b.save, total[i] = a.stop + a.save;
    ratio[i] = a.save / b.save;
    events = a.events, bytes = a.bytes;
  }
  printf("%ld outer ops: %.0f events, %.1f MB of JSON (%.0f bytes/event), %d rounds\n", ops, events,
         bytes / 1e6, bytes / events, rounds);
  printf("%-34s %11s %11s %15s %15s\n", "", "min", "median", "min", "median");
  line("stop (collect, order, link)", stop, rounds, events);
  line("save (Chrome JSON)", save, rounds, events);
  line("stop + save", total, rounds, events);
  line("floor: write as many bytes", floor, rounds, events);
  qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_d);
  printf("save / floor, per round: min %.2fx median %.2fx\n", ratio[0], ratio[rounds / 2]);
  return 0;
}
