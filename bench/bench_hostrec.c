/*
 * bench_hostrec.c - cost of host annotations, against the floor measured in
 * the same run: a 32-byte record plus two rdtsc reads written into a
 * thread-local array (what any recorder must at least do).
 *
 * Prints ns per begin/end pair while recording, ns per call when idle, ns per
 * instant and per counter, the ratio to the floor, bytes per event, and the
 * per-thread pair cost with 2 threads recording at once; then a framework op
 * as the PyTorch adapter records it (a sequence number and the inputs'
 * shapes, 8 shapes in turn): shape strings already formatted into a reused
 * buffer (loom_op_begin_args: interned per op) against the same inputs as 12
 * raw bytes (loom_op_begin_raw: formatted at collect), with the collect cost
 * per op of each; then loom_memory_alloc/free against loom_instant in
 * interleaved rounds (min and median), plain and in ring mode (where the
 * ledger of live allocations is kept), with the goal of issue 36 (at most
 * 100 ns added per allocation while recording).
 * usage: bench_hostrec [PAIRS]   (default 2,000,000)
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <x86intrin.h>

#include "loom/loom.h"

static long pairs = 2000000;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef struct rec { uint64_t ts, name, a, b; } rec;
static __thread rec *floor_buf;

/* The floor: two records (begin, end) with a timestamp each. */
__attribute__((noinline)) static void floor_pair(const char *name, long i) {
  rec *r = floor_buf + 2 * i;
  r[0] = (rec){__rdtsc(), (uint64_t)(uintptr_t)name, 1, 0};
  r[1] = (rec){__rdtsc(), 0, 2, 0};
}

static double run_floor(void) {
  floor_buf = malloc(sizeof(rec) * 2 * (size_t)pairs);
  memset(floor_buf, 0, sizeof(rec) * 2 * (size_t)pairs); /* fault pages in */
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) floor_pair("op", i);
  double t = (now_ns() - t0) / pairs;
  free(floor_buf);
  return t;
}

static loom_session *begin(void) {
  char opts[64];
  snprintf(opts, sizeof opts, "buffer_size=4m");
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = opts};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s)) {
    fprintf(stderr, "bench: %s\n", loom_last_error());
    exit(1);
  }
  return s;
}

static double stop_ns, save_ns, save_bytes;

/* Stops (timing collection + processing), and saves the first trace as
 * Chrome JSON (timing the writer). */
static void end(loom_session *s, size_t *events) {
  loom_trace *t;
  double t0 = now_ns();
  loom_session_stop(s, &t);
  double t1 = now_ns();
  loom_session_destroy(s);
  if (!stop_ns) {
    stop_ns = t1 - t0;
    char path[64];
    snprintf(path, sizeof path, "/tmp/bench_hostrec.%d.json", (int)getpid());
    t0 = now_ns();
    if (loom_trace_save(t, path) == LOOM_OK) {
      save_ns = now_ns() - t0;
      struct stat st;
      if (stat(path, &st) == 0) save_bytes = (double)st.st_size;
      unlink(path);
    }
  }
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  *events = sum.events;
  loom_trace_free(t);
}

static void *pair_loop(void *arg) {
  double *out = arg;
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    loom_range_push("op");
    loom_range_pop();
  }
  *out = (now_ns() - t0) / pairs;
  return NULL;
}

/* ---- framework ops with shapes -------------------------------------------- */
static const char *const dims[8] = {"[[4, 3, 16, 16], [8, 3, 3, 3], [8]]", "[[4, 8, 14, 14]]",
                                    "[[4, 1568], [10, 1568], [10]]", "[[4, 10], [4]]",
                                    "[[10, 1568]]", "[[8, 3, 3, 3], [], []]", "[[4, 10]]", "[]"};
static const char *const types[8] = {"[\"float\", \"float\", \"float\"]", "[\"float\"]",
                                     "[\"float\", \"float\", \"float\"]", "[\"float\", \"long int\"]",
                                     "[\"float\"]", "[\"float\", \"Scalar\", \"\"]", "[\"float\"]", "[]"};

static uint32_t bench_fmt(const void *raw, uint32_t n, char *buf, size_t cap, loom_arg *out,
                          uint32_t max_out) {
  (void)n, (void)cap, (void)max_out, (void)buf;
  unsigned k = ((const unsigned char *)raw)[0] & 7;
  out[0] = (loom_arg){.key = "Input Dims", .type = LOOM_ARG_STRING, .v.s = dims[k]};
  out[1] = (loom_arg){.key = "Input type", .type = LOOM_ARG_STRING, .v.s = types[k]};
  return 2;
}

/* ns per op (begin + end) recording, and ns per op to collect. */
static void op_loop(int raw, double *rec_ns, double *collect) {
  loom_session *s = begin();
  char bd[128], bt[128];
  unsigned char rb[12] = {0, 1, 6, 4, 3, 16, 16, 1, 6, 4, 8, 3};
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    unsigned k = (unsigned)i & 7;
    loom_arg a[3] = {{.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = i}};
    if (raw) {
      rb[0] = (unsigned char)k;
      loom_op_begin_raw("aten::conv2d", (uint64_t)i + 1, a, 1, rb, sizeof rb, bench_fmt);
    } else {
      strcpy(bd, dims[k]), strcpy(bt, types[k]); /* the adapter's reused buffers */
      a[1] = (loom_arg){.key = "Input Dims", .type = LOOM_ARG_STRING, .v.s = bd};
      a[2] = (loom_arg){.key = "Input type", .type = LOOM_ARG_STRING, .v.s = bt};
      loom_op_begin_args("aten::conv2d", (uint64_t)i + 1, a, 3);
    }
    loom_op_end();
  }
  *rec_ns = (now_ns() - t0) / pairs;
  loom_trace *t;
  t0 = now_ns();
  loom_session_stop(s, &t);
  *collect = (now_ns() - t0) / pairs;
  loom_session_destroy(s);
  loom_trace_free(t);
}

/* ---- memory calls ------------------------------------------------------------- */
enum { MEM_ROUNDS = 7 };

static loom_session *begin_opts(const char *opts) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = opts};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s)) {
    fprintf(stderr, "bench: %s\n", loom_last_error());
    exit(1);
  }
  return s;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One round: n instants, then n allocations each freed (2n memory calls)
 * from a working set of 1024 live blocks; ns per call of each, and the
 * memory events the trace holds. */
static void mem_round(const char *opts, long n, double *inst, double *mem, size_t *nmem) {
  loom_session *s = begin_opts(opts);
  double t0 = now_ns();
  for (long i = 0; i < n; i++) loom_instant("tick");
  *inst = (now_ns() - t0) / n;
  t0 = now_ns();
  for (long i = 0; i < n; i++) {
    uint64_t a = 0x10000000u + (uint64_t)(i & 1023) * 4096;
    if (i >= 1024) loom_memory_free(a, 0, LOOM_MEMORY_HOST, -1, 0);
    loom_memory_alloc(a, 4096, LOOM_MEMORY_HOST, -1, 0);
  }
  *mem = (now_ns() - t0) / (2.0 * n - 1024);
  loom_trace *t;
  loom_session_stop(s, &t);
  loom_session_destroy(s);
  *nmem = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    *nmem += v.kind == LOOM_KIND_MEMORY;
  }
  loom_trace_free(t);
}

/* Prints the memory calls' figures; 0 when every trace held every call. */
static int mem_bench(void) {
  long n = pairs / 4;
  /* chunks stay in the heap between sessions: rounds after the first write
   * into pages already faulted in, so the figures are the calls' own (a
   * fresh page costs more than a record on a loaded VM) */
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  double idle0 = now_ns();
  for (long i = 0; i < n; i++) loom_memory_alloc((uint64_t)i, 64, LOOM_MEMORY_HOST, -1, 0);
  double idle = (now_ns() - idle0) / n;
  /* ring mode in its steady state: a ring small enough to recycle its
   * chunks (new chunks cost page faults, which dominate on a loaded VM) */
  static const char *const modes[2] = {"buffer_size=4m", "mode=ring,ring_size=16m"};
  static const char *const label[2] = {"recording", "ring mode (ledger)"};
  double inst[2][MEM_ROUNDS], mem[2][MEM_ROUNDS];
  int bad = 0;
  for (int r = 0; r < MEM_ROUNDS; r++)
    for (int m = 0; m < 2; m++) {
      size_t got;
      mem_round(modes[m], n, &inst[m][r], &mem[m][r], &got);
      bad |= m == 0 && got != (size_t)(2 * n - 1024); /* a ring keeps its last part */
    }
  printf("memory calls, %d interleaved rounds of %ld allocations (each freed later)\n",
         MEM_ROUNDS, n);
  printf("  loom_memory_alloc, no session              %6.2f ns/call\n", idle);
  double added = 0;
  for (int m = 0; m < 2; m++) {
    qsort(inst[m], MEM_ROUNDS, sizeof(double), cmp_d);
    qsort(mem[m], MEM_ROUNDS, sizeof(double), cmp_d);
    printf("  %-20s instant min %6.2f med %6.2f | alloc/free min %6.2f med %6.2f ns/call"
           " (%.2fx instant)\n", label[m], inst[m][0], inst[m][MEM_ROUNDS / 2], mem[m][0],
           mem[m][MEM_ROUNDS / 2], mem[m][MEM_ROUNDS / 2] / inst[m][MEM_ROUNDS / 2]);
    if (mem[m][MEM_ROUNDS / 2] > added) added = mem[m][MEM_ROUNDS / 2];
  }
  printf("goal memory_alloc: %.1f ns added per allocation while recording, the worse mode's "
         "median (target 100) %s\n", added, added <= 100 ? "met" : "missed");
  if (bad) printf("  a trace lacked memory events\n");
  return bad;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
  if (f) fclose(f);
  return kb;
}

int main(int argc, char **argv) {
  if (argc > 1) pairs = atol(argv[1]);
  double fl = run_floor();
  fl = run_floor(); /* second run: warm */

  /* idle: no session */
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    loom_range_push("op");
    loom_range_pop();
  }
  double idle = (now_ns() - t0) / (2.0 * pairs);

  /* one thread recording pairs */
  size_t events;
  loom_session *s = begin();
  double pair1;
  long rss0 = rss_kb();
  pair_loop(&pair1);
  long rss1 = rss_kb();
  end(s, &events);
  double bytes = (rss1 - rss0) * 1024.0 / (2.0 * pairs);

  s = begin();
  t0 = now_ns();
  for (long i = 0; i < pairs; i++) loom_instant("tick");
  double inst = (now_ns() - t0) / pairs;
  t0 = now_ns();
  for (long i = 0; i < pairs; i++) loom_counter("value", (double)i);
  double ctr = (now_ns() - t0) / pairs;
  size_t ev2;
  end(s, &ev2);

  /* two threads at once */
  s = begin();
  pthread_t th[2];
  double per[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, pair_loop, &per[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  size_t ev3;
  end(s, &ev3);

  double op_args, op_args_c, op_raw, op_raw_c;
  op_loop(0, &op_args, &op_args_c);
  op_loop(1, &op_raw, &op_raw_c);

  printf("host recording, %ld begin/end pairs per run\n", pairs);
  printf("  floor (32-byte record + rdtsc, TLS array)  %6.2f ns/pair\n", fl);
  printf("  loom range push/pop, recording             %6.2f ns/pair  (%.2fx floor)\n", pair1, pair1 / fl);
  printf("  loom call, no session                      %6.2f ns/call\n", idle);
  printf("  loom instant, recording                    %6.2f ns/event\n", inst);
  printf("  loom counter, recording                    %6.2f ns/event\n", ctr);
  printf("  memory while recording                     %6.1f bytes/event\n", bytes);
  printf("  2 threads at once                          %6.2f / %6.2f ns/pair (%.2fx, %.2fx single)\n",
         per[0], per[1], per[0] / pair1, per[1] / pair1);
  printf("  stop: collect + process (1 thread)        %6.1f ns/event\n", stop_ns / events);
  printf("  save as Chrome JSON                        %6.1f ns/event, %.0f bytes/event\n",
         save_ns / events, save_bytes / events);
  printf("  op + seq + shape strings (begin_args)      %6.2f ns/op, collect %6.1f ns/op\n",
         op_args, op_args_c);
  printf("  op + seq + 12 raw bytes (begin_raw)        %6.2f ns/op, collect %6.1f ns/op\n",
         op_raw, op_raw_c);
  printf("  events in traces: %zu (expected %ld), %zu (expected %ld), %zu (expected %ld)\n",
         events, pairs, ev2, 2 * pairs, ev3, 2 * pairs);
  int bad = mem_bench();
  return !bad && events == (size_t)pairs && ev2 == (size_t)(2 * pairs) &&
                 ev3 == (size_t)(2 * pairs) ? 0 : 1;
}
