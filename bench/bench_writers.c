/*
 * bench_writers.c - trace writers against a naive fprintf writer measured in
 * the same run.  Builds a synthetic trace (host ranges with framework ops,
 * runtime calls, kernels on two queues with flows; names from a realistic
 * vocabulary), then writes it in each format and prints ns per event, MB/s,
 * bytes per event and the growth of peak RSS per event.  Then memory events
 * (LOOM_KIND_MEMORY: Kineto's [memory] instants with running totals and a
 * counter value each) against plain instants with as many arguments, in
 * interleaved rounds of the same run: CPU ns per event (the process's CPU
 * time: the figure holds on a busy machine), min and median, and the cost a
 * [memory] event adds.
 * With "pftrace": the .pftrace's bytes per event of each event class (op
 * with its External id, launch call, kernel) against the smallest exact
 * encoding of the same events in Perfetto's track-event format, computed
 * from the protobuf encoding (pf_bound.c), on the Kineto-like and the
 * host-only trace; the write's CPU ns per event over interleaved rounds of
 * .pftrace and .pftrace.gz, min and median; the goal lines of issue 38.6.
 * usage: bench_writers [EVENTS...]   (default: 1000000 10000000)
 *        bench_writers memory [EVENTS [ROUNDS]]   (default: 1000000 5)
 *        bench_writers pftrace [EVENTS [ROUNDS]]  (default: 1000000 5)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pf_bound.h"
#include "trace/trace.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static long peak_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* Kineto-like: per op a cpu_op, its launch call and the kernel, with
 * External id, correlation, device and stream arguments and a flow.  With
 * host_only, just nested cpu_ops with an External id (smaller events). */
static loom_trace *synthetic(size_t n, int host_only) {
  static const char *ops[] = {"aten::mm", "aten::add", "aten::relu", "aten::conv2d",
                              "aten::softmax", "aten::layer_norm", "aten::copy_", "aten::view"};
  loom_trace *t = loom__trace_new();
  t->start_ns = 1764000000000000000ll;
  t->end_ns = t->start_ns + (int64_t)n * 1000;
  t->trace_name = loom__trace_str(t, "bench");
  loom__trace_add_proc(t, 4242, "python", "CPU", 0);
  loom__trace_add_proc(t, 0, "gpu 0", "Bench GPU", 1);
  uint32_t host, q[2];
  loom__trace_track(t, 4242, 4242, "thread 4242 (python)", LOOM_DEVICE_HOST, &host);
  loom__trace_track(t, 0, 7, "stream 7", 0, &q[0]);
  loom__trace_track(t, 0, 8, "stream 8", 0, &q[1]);
  uint32_t c_op = loom__trace_str(t, "cpu_op"), c_rt = loom__trace_str(t, "cuda_runtime"),
           c_k = loom__trace_str(t, "kernel"), launch = loom__trace_str(t, "cudaLaunchKernel");
  uint32_t opn[8], kn[8];
  for (int i = 0; i < 8; i++) {
    char k[96];
    opn[i] = loom__trace_str(t, ops[i]);
    snprintf(k, sizeof k, "void at::native::elementwise_kernel<128, 4, %s_functor>(int)", ops[i] + 6);
    kn[i] = loom__trace_str(t, k);
  }
  int64_t ts = t->start_ns;
  uint64_t corr = 1;
  if (host_only) {
    for (size_t i = 0; i < n; i++) {
      loom__ev op = {.ts = ts, .dur = 900, .external_id = i + 1, .name = opn[i % 8], .cat = c_op,
                     .track = host, .kind = LOOM_KIND_CPU_OP, .ph = LOOM__PH_COMPLETE};
      loom__trace_add_ev(t, &op);
      ts += 1000;
    }
    return t;
  }
  for (size_t i = 0; i + 3 <= n; i += 3, corr++) {
    int k = (int)(corr % 8);
    loom__ev op = {.ts = ts, .dur = 2500, .external_id = corr, .name = opn[k], .cat = c_op,
                   .track = host, .kind = LOOM_KIND_CPU_OP, .ph = LOOM__PH_COMPLETE};
    loom__ev rt = {.ts = ts + 500, .dur = 1200, .correlation = corr, .external_id = corr,
                   .name = launch, .cat = c_rt, .track = host, .kind = LOOM_KIND_RUNTIME,
                   .ph = LOOM__PH_COMPLETE};
    loom__ev kr = {.ts = ts + 3000, .dur = 1800, .correlation = corr, .external_id = corr,
                   .name = kn[k], .cat = c_k, .track = q[corr % 2], .kind = LOOM_KIND_KERNEL,
                   .ph = LOOM__PH_COMPLETE};
    loom__trace_add_ev(t, &op);
    loom__trace_add_ev(t, &rt);
    loom__trace_add_ev(t, &kr);
    loom__trace_add_arg_int(t, "device", 0);
    loom__trace_add_arg_int(t, "stream", 7 + (int64_t)(corr % 2));
    loom__flow f = {(uint32_t)(t->nev - 2), (uint32_t)(t->nev - 1), corr};
    LOOM__PUSH(t->flows, t->nflows, t->cap_flows, f);
    ts += 3000;
  }
  return t;
}

/* n instants on one host thread: memory events (alloc and free pairs of
 * device memory, as a runtime's calls make them), or, for the baseline,
 * plain instants with the same four arguments. */
static loom_trace *instants(size_t n, int memory) {
  static const char *calls[] = {"cudaMalloc", "cudaFree", "clCreateBuffer", "clReleaseMemObject"};
  loom_trace *t = loom__trace_new();
  t->start_ns = 1764000000000000000ll;
  t->end_ns = t->start_ns + (int64_t)n * 1000;
  t->trace_name = loom__trace_str(t, "bench");
  loom__trace_add_proc(t, 4242, "python", "CPU", 0);
  loom__trace_add_proc(t, 0, "gpu 0", "Bench GPU", 1);
  uint32_t host, q;
  loom__trace_track(t, 4242, 4242, "thread 4242 (python)", LOOM_DEVICE_HOST, &host);
  loom__trace_track(t, 0, 7, "stream 7", 0, &q);
  uint32_t cat = loom__trace_str(t, "cpu_instant_event");
  for (size_t i = 0; i < n; i++) {
    int is_free = (int)(i & 1);
    uint64_t addr = 0x7f0000000000ull + ((i / 2) % 4096) * 0x100000ull;
    loom__ev e = {.ts = t->start_ns + (int64_t)i * 1000, .external_id = i / 2 + 1,
                  .name = loom__trace_str(t, calls[(i / 2 % 2) * 2 + (size_t)is_free]),
                  .cat = cat, .track = host, .ph = LOOM__PH_INSTANT,
                  .kind = memory ? LOOM_KIND_MEMORY : LOOM_KIND_INSTANT,
                  .flags = memory ? (uint16_t)((is_free ? LOOM_RECORD_F_FREE : LOOM_RECORD_F_ALLOC)
                                               << LOOM__EV_ROLE_SHIFT) : 0};
    loom__trace_add_ev(t, &e);
    loom__targ a = {.key = loom__trace_str(t, "addr"), .type = LOOM_ARG_UINT, .v.u = addr};
    loom__trace_add_arg(t, &a);
    a = (loom__targ){.key = loom__trace_str(t, "bytes"), .type = LOOM_ARG_UINT,
                     .v.u = 4096u << (i / 2 % 8)};
    loom__trace_add_arg(t, &a);
    loom__trace_add_arg_int(t, "device", 0);
    loom__trace_add_arg_str(t, "memory_kind", "device");
  }
  return t;
}

/* CPU time (user and system, all threads) in ns: what a write costs
 * whatever else the machine runs. */
static double cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Memory events against plain instants, rounds interleaved: per format,
 * ns per event (min and median over the rounds) and what a [memory] event
 * adds (its counter value included). */
static void memory_bench(size_t n, int rounds) {
  loom_trace *t[2] = {instants(n, 0), instants(n, 1)};
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  const char *ext[] = {".json", ".pftrace"};
  printf("%zu instants, %d rounds (interleaved), CPU time: plain instants vs [memory] events\n",
         n, rounds);
  for (int f = 0; f < 2; f++) {
    double ns[2][64];
    char path[512];
    snprintf(path, sizeof path, "%s/bench_writers.%d%s", dir, (int)getpid(), ext[f]);
    for (int r = 0; r < rounds; r++)
      for (int k = 0; k < 2; k++) {
        double t0 = cpu_ns();
        if (loom_trace_save(t[k], path) != LOOM_OK) printf("  failed: %s\n", loom_last_error());
        ns[k][r] = (cpu_ns() - t0) / (double)n;
      }
    unlink(path);
    for (int k = 0; k < 2; k++) qsort(ns[k], (size_t)rounds, sizeof ns[k][0], cmp_double);
    double med[2] = {ns[0][rounds / 2], ns[1][rounds / 2]};
    printf("  %-8s instant %6.1f ns/event (min %6.1f)  [memory] %6.1f ns/event (min %6.1f)  "
           "ratio %.2f  added %+.1f ns/event (median), %+.1f (min)\n", ext[f] + 1, med[0],
           ns[0][0], med[1], ns[1][0], med[1] / med[0], med[1] - med[0], ns[1][0] - ns[0][0]);
  }
  loom_trace_free(t[0]);
  loom_trace_free(t[1]);
}

/* Per class, loom's .pftrace bytes per event against the smallest exact
 * encoding (pf_bound.c); with total, the whole mix and the file. */
static void print_classes(const pfb_sizes *s, size_t nev) {
  printf("  %-18s %8s %10s %10s %6s   bound per event: end args flows\n", "class", "events",
         "loom B/ev", "bound B/ev", "ratio");
  uint64_t loom = 0, bound = 0;
  for (int c = 0; c < PFB_NCLASS; c++) {
    double n = (double)s->events[c];
    loom += s->loom[c];
    bound += s->bound[c];
    if (!s->events[c]) continue;
    printf("  %-18s %8llu %10.2f %10.2f %6.3f   %16.2f %4.2f %5.2f\n", pfb_class_name(c),
           (unsigned long long)s->events[c], s->loom[c] / n, s->bound[c] / n,
           (double)s->loom[c] / (double)s->bound[c], s->bound_end[c] / n,
           s->bound_args[c] / n, s->bound_flows[c] / n);
  }
  printf("  %-18s %8zu %10.2f %10.2f %6.3f   (interning entries in the bound: %llu bytes)\n",
         "all events", nev, (double)loom / nev, (double)bound / nev, (double)loom / bound,
         (unsigned long long)s->bound_interned);
  printf("  packets of no event (descriptors, clock snapshots, header): %llu bytes, %.4f B/event, "
         "not in the bound\n", (unsigned long long)s->loom_fixed, (double)s->loom_fixed / nev);
  printf("  whole file %.2f bytes/event: %.3fx the bound; %llu slices of whole microseconds\n",
         (double)s->loom_total / nev, (double)s->loom_total / bound,
         (unsigned long long)s->whole_us);
}

/* Writes t as .pftrace and .pftrace.gz in interleaved rounds (CPU ns per
 * event, min and median), the sizes into bytes[2] and the bound and loom's
 * classes into s.  -1 when a write or the analysis fails. */
static int pftrace_rounds(const loom_trace *t, int rounds, pfb_sizes *s, double bytes[2],
                          double ns[2][64]) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  const char *ext[] = {".pftrace", ".pftrace.gz"};
  char path[2][512];
  int rc = pfb_bound(t, s);
  for (int f = 0; f < 2; f++)
    snprintf(path[f], sizeof path[f], "%s/bench_writers.%d%s", dir, (int)getpid(), ext[f]);
  for (int r = 0; r < rounds && !rc; r++)
    for (int f = 0; f < 2 && !rc; f++) {
      double t0 = cpu_ns();
      if (loom_trace_save(t, path[f]) != LOOM_OK) {
        printf("  failed: %s\n", loom_last_error());
        rc = -1;
      }
      ns[f][r] = (cpu_ns() - t0) / (double)t->nev;
      struct stat st;
      bytes[f] = stat(path[f], &st) ? 0 : (double)st.st_size / (double)t->nev;
    }
  if (!rc && pfb_attribute(path[0], s)) {
    printf("  cannot take %s apart\n", path[0]);
    rc = -1;
  }
  for (int f = 0; f < 2; f++) unlink(path[f]);
  for (int f = 0; f < 2; f++) qsort(ns[f], (size_t)rounds, sizeof ns[f][0], cmp_double);
  return rc;
}

/* .pftrace size against the smallest exact track-event encoding of the
 * same events, per class, on the Kineto-like mix (the goals) and the
 * host-only one; .pftrace.gz bytes per event. */
static int pftrace_bench(size_t n, int rounds) {
  double ratio = 0, gz = 0;
  for (int host_only = 0; host_only < 2; host_only++) {
    loom_trace *t = synthetic(n, host_only);
    pfb_sizes s;
    double bytes[2], ns[2][64];
    printf("%zu events (%zu flows), %s; %d rounds (interleaved), CPU time:\n", t->nev, t->nflows,
           host_only ? "host cpu_ops only" : "Kineto-like: cpu_op + launch + kernel, args, flows",
           rounds);
    int rc = pftrace_rounds(t, rounds, &s, bytes, ns);
    if (!rc) {
      for (int f = 0; f < 2; f++)
        printf("  %-12s %6.1f bytes/event  write %6.1f ns/event median, %6.1f min\n",
               f ? ".pftrace.gz" : ".pftrace", bytes[f], ns[f][rounds / 2], ns[f][0]);
      print_classes(&s, t->nev);
    }
    uint64_t bound = 0;
    for (int c = 0; c < PFB_NCLASS; c++) bound += s.bound[c];
    if (!host_only && !rc) ratio = (double)s.loom_total / (double)bound, gz = bytes[1];
    loom_trace_free(t);
    if (rc) return 1;
  }
  printf("goal pftrace_size: %.3f (target 1.05) %s\n", ratio, ratio <= 1.05 ? "met" : "missed");
  printf("goal pftrace_gz: %.1f bytes/event (target 10) %s\n", gz, gz <= 10 ? "met" : "missed");
  return 0;
}

/* What people write first: fprintf per event, no escaping, no caching. */
static double naive(const loom_trace *t, const char *path) {
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"traceEvents\":[\n");
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    const loom__track *k = &t->tracks[e->track];
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%lld,\"tid\":%lld,"
               "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"External id\":%llu}},\n",
            loom__trace_cstr(t, e->cat), loom__trace_cstr(t, e->name), (long long)k->pid,
            (long long)k->tid, (e->ts - t->start_ns) / 1e3, e->dur / 1e3,
            (unsigned long long)e->external_id);
  }
  fprintf(f, "{}]}\n");
  fclose(f);
  return 0;
}

static void run(const loom_trace *t, const char *label, const char *path, int is_naive) {
  long rss0 = peak_rss_kb();
  double t0 = now_ns();
  if (is_naive) naive(t, path);
  else if (loom_trace_save(t, path) != LOOM_OK) {
    printf("  %-10s failed: %s\n", label, loom_last_error());
    return;
  }
  double dt = now_ns() - t0;
  struct stat st;
  stat(path, &st);
  long rss1 = peak_rss_kb();
  printf("  %-12s%7.1f ns/event %8.1f MB/s %7.1f bytes/event %6.1f peak-RSS bytes/event\n",
         label, dt / t->nev, st.st_size / (dt / 1e9) / 1e6, (double)st.st_size / t->nev,
         (rss1 - rss0) * 1024.0 / t->nev);
  unlink(path);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "pftrace")) {
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    return pftrace_bench(argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000,
                         rounds < 1 ? 1 : rounds > 64 ? 64 : rounds);
  }
  if (argc > 1 && !strcmp(argv[1], "memory")) {
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    memory_bench(argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000,
                 rounds < 1 ? 1 : rounds > 64 ? 64 : rounds);
    return 0;
  }
  size_t sizes[8] = {1000000, 10000000};
  int nsizes = 2;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = strtoull(argv[i], NULL, 10);
  }
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  for (int s = 0; s < 2 * nsizes; s++) {
    int host_only = s % 2;
    loom_trace *t = synthetic(sizes[s / 2], host_only);
    printf("%zu events (%zu flows), %s:\n", t->nev, t->nflows,
           host_only ? "host cpu_ops only" : "cpu_op + launch + kernel with args and flows");
    char path[512];
    const char *ext[] = {".naive.json", ".json", ".json.gz", ".pftrace", ".pftrace.gz"};
    const char *only = getenv("BENCH_ONLY");
    for (int f = 0; f < 5; f++) {
      if (only && strcmp(only, ext[f] + 1)) continue;
      snprintf(path, sizeof path, "%s/bench_writers.%d%s", dir, (int)getpid(), ext[f]);
      run(t, f == 0 ? "fprintf" : ext[f] + 1, path, f == 0);
    }
    loom_trace_free(t);
  }
  return 0;
}
