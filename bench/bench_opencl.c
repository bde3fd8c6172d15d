/*
 * bench_opencl.c - what recording costs an OpenCL program: many tiny
 * kernels and small copies, run plain and under `loom record` in the same
 * run, and with profiling, an event per command and its times read, but no
 * loom (what the layer asks of the driver), in interleaved rounds, each in a
 * fresh process.
 * It prints min and median ns per enqueue of wall time, of the process's CPU
 * time (every thread) and of the enqueuing thread's CPU time (steadiest on a
 * shared machine), the time loom adds, and its split into the driver's part
 * (profiling and events) and loom's own code; then issue 38's goal line
 * (`goal opencl_enqueue`: loom's own code on the enqueuing thread over the
 * plain enqueue's, by median, at most 0.25x).
 * usage: bench_opencl [--loom-bin LOOM]... [ENQUEUES [ROUNDS]]
 *          (default 20000, 7; half kernels, half copies; --loom-bin, up to four
 *          times, measures those builds' loom in the same rounds, e.g. before
 *          and after a change; else this build's)
 *        bench_opencl --child N    (the measured program itself)
 *        bench_opencl alloc [PAIRS [ROUNDS]]
 *          (default 20000, 9) what recording memory costs: PAIRS of
 *          clCreateBuffer (256 bytes) and clReleaseMemObject, plain and under
 *          `loom record`, interleaved rounds; ns per pair (one allocation and
 *          its free: two memory records), min and median, of wall time and
 *          of the thread's CPU time, and the goal line of issue 36 (at most
 *          100 ns added per allocation, on the thread's CPU time, median);
 *          with the floor of the same rounds: PAIRS pairs of loom's own
 *          host records (loom_memory_alloc/free) under `loom record`, no
 *          runtime, in a process with a second thread as the runtime's
 *          (so loom's pager runs for both): what two records cost
 *        bench_opencl --child-floor N   (that floor's program)
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "memfloor.h"

/* CPU time of the whole process (every thread, user and system), ns. */
static double cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

/* CPU time of the calling thread, ns. */
static double thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* profiled: the queue has profiling on and every command gets an event whose
 * times are read (start and end; a kernel's also queued) and that is then
 * released: what loom's layer asks of the driver, without loom. */
static int child(long n, int profiled) {
  cl_platform_id p;
  cl_device_id d;
  cl_int err;
  if (clGetPlatformIDs(1, &p, NULL) || clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL)) return 2;
  cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
  cl_queue_properties prof[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, profiled ? prof : NULL, &err);
  cl_event ev[128];
  int ne = 0;
  const char *src = "__kernel void inc(__global int *a) { a[get_global_id(0)] += 1; }";
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  clBuildProgram(prog, 1, &d, NULL, NULL, NULL);
  cl_kernel k = clCreateKernel(prog, "inc", &err);
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256, NULL, &err);
  clSetKernelArg(k, 0, sizeof m, &m);
  int host[64] = {0};
  size_t g = 64;
  /* warm up: first enqueue of a kernel compiles it */
  clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
  clFinish(q);
  double t0 = now_ns(), c0 = cpu_ns(), mt0 = thread_ns();
  for (long i = 0; i < n; i += 2) {
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, profiled ? &ev[ne++] : NULL);
    clEnqueueWriteBuffer(q, m, CL_FALSE, 0, sizeof host, host, 0, NULL, profiled ? &ev[ne++] : NULL);
    if (i % 128 == 126) {
      clFinish(q);
      for (int e = 0; e < ne; e++) { /* the queries loom's layer makes: kernels (even) also QUEUED */
        cl_ulong t;
        clGetEventProfilingInfo(ev[e], CL_PROFILING_COMMAND_START, sizeof t, &t, NULL);
        clGetEventProfilingInfo(ev[e], CL_PROFILING_COMMAND_END, sizeof t, &t, NULL);
        if (e % 2 == 0) clGetEventProfilingInfo(ev[e], CL_PROFILING_COMMAND_QUEUED, sizeof t, &t, NULL);
        clReleaseEvent(ev[e]);
      }
      ne = 0;
    }
  }
  for (int e = 0; e < ne; e++) clReleaseEvent(ev[e]);
  clFinish(q);
  double t = now_ns() - t0, c = cpu_ns() - c0, mt = thread_ns() - mt0;
  printf("%.1f %.1f %.1f\n", t / n, c / n, mt / n);
  clReleaseMemObject(m);
  clReleaseKernel(k);
  clReleaseProgram(prog);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}

/* PAIRS clCreateBuffer + clReleaseMemObject; prints wall, process CPU and
 * thread CPU ns per pair. */
static int child_alloc(long n) {
  cl_platform_id p;
  cl_device_id d;
  cl_int err;
  if (clGetPlatformIDs(1, &p, NULL) || clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL)) return 2;
  cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
  for (int i = 0; i < 64; i++) /* warm up: the first ones describe the device to loom */
    clReleaseMemObject(clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256, NULL, &err));
  double t0 = now_ns(), c0 = cpu_ns(), mt0 = thread_ns();
  for (long i = 0; i < n; i++) {
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256, NULL, &err);
    if (!m) return 3;
    clReleaseMemObject(m);
  }
  double t = now_ns() - t0, c = cpu_ns() - c0, mt = thread_ns() - mt0;
  printf("%.1f %.1f %.1f\n", t / n, c / n, mt / n);
  clReleaseContext(ctx);
  return 0;
}

/* The floor (memfloor.h): the same figures. */
static int child_floor(long n) {
  memfloor f;
  if (memfloor_run(n, 256, &f)) return 3;
  printf("%.1f %.1f %.1f\n", f.wall, f.cpu, f.thread);
  return 0;
}

/* One child: fills wall, process CPU and main-thread CPU ns per enqueue. */
static int run(const char *cmd, double v[3]) {
  FILE *f = popen(cmd, "r");
  int ok = f && fscanf(f, "%lf %lf %lf", &v[0], &v[1], &v[2]) == 3;
  if (f) pclose(f);
  return ok ? 0 : -1;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* min and median of n values (sorted in place) */
static void stats(double *v, int n, double *mn, double *med) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  *mn = v[0];
  *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Ways: plain, the floor, then one per loom binary (--loom-bin, given up to
 * four times to compare builds in the same rounds; else this build's). */
enum { MAXBIN = 4, WAYS = 2 + MAXBIN, MAXR = 101 };

/* bench_opencl alloc [PAIRS [ROUNDS]]: plain and under loom record, in
 * interleaved rounds. */
static int alloc_main(int argc, char **argv) {
  long n = argc > 2 ? atol(argv[2]) : 20000;
  int rounds = argc > 3 ? atoi(argv[3]) : 9;
  if (n < 1 || rounds < 1 || rounds > MAXR) {
    fprintf(stderr, "usage: bench_opencl alloc [PAIRS >= 1 [ROUNDS 1..%d]]\n", MAXR);
    return 2;
  }
  char self[512], cmd[3][1536], trace[64];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) return 1;
  self[k] = 0;
  snprintf(trace, sizeof trace, "/tmp/bench_opencl_alloc.%d.json", (int)getpid());
  snprintf(cmd[0], sizeof cmd[0], "'%s' --child-alloc %ld", self, n);
  snprintf(cmd[1], sizeof cmd[1], "'%s' record -o %s -- '%s' --child-alloc %ld 2>/dev/null",
           LOOM_BIN, trace, self, n);
  snprintf(cmd[2], sizeof cmd[2], "'%s' record -o %s -- '%s' --child-floor %ld 2>/dev/null",
           LOOM_BIN, trace, self, n);
  static double v[3][3][MAXR];
  for (int r = 0; r < rounds; r++)
    for (int w = 0; w < 3; w++) {
      double x[3];
      if (run(cmd[w], x) != 0) {
        fprintf(stderr, "bench_opencl: a run failed (is an OpenCL device available?)\n");
        return 1;
      }
      for (int m = 0; m < 3; m++) v[w][m][r] = x[m];
    }
  remove(trace);
  double mn[3][3], md[3][3];
  for (int w = 0; w < 3; w++)
    for (int m = 0; m < 3; m++) stats(v[w][m], rounds, &mn[w][m], &md[w][m]);
  static const char *metric[3] = {"wall time", "CPU time, all threads", "CPU time, the thread"};
  printf("OpenCL, %ld clCreateBuffer (256 bytes) + clReleaseMemObject, %d interleaved rounds;\n"
         "ns per allocation and its free, min / median:\n", n, rounds);
  for (int m = 0; m < 3; m++)
    printf("%s\n  %-26s %8.1f / %8.1f\n  %-26s %8.1f / %8.1f\n  %-26s %8.1f / %8.1f\n",
           metric[m], "without loom", mn[0][m], md[0][m], "under loom record", mn[1][m], md[1][m],
           "added by loom", mn[1][m] - mn[0][m], md[1][m] - md[0][m]);
  printf("floor: two of loom's own memory records (loom_memory_alloc/free) per pair under loom\n"
         "record, no runtime, the thread's CPU time  %8.1f / %8.1f\n"
         "  (all threads' CPU time, loom's pager included  %8.1f / %8.1f)\n", mn[2][2], md[2][2],
         mn[2][1], md[2][1]);
  double added = md[1][2] - md[0][2];
  printf("goal alloc_cost: %.0f ns (target 100 ns) %s\n", added, added <= 100 ? "met" : "missed");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--child")) return child(atol(argv[2]), 0);
  if (argc > 2 && !strcmp(argv[1], "--child-alloc")) return child_alloc(atol(argv[2]));
  if (argc > 2 && !strcmp(argv[1], "--child-floor")) return child_floor(atol(argv[2]));
  if (argc > 1 && !strcmp(argv[1], "alloc")) return alloc_main(argc, argv);
  if (argc > 2 && !strcmp(argv[1], "--child-profiled")) return child(atol(argv[2]), 1);
  const char *bins[MAXBIN];
  int nbins = 0;
  while (argc > 2 && !strcmp(argv[1], "--loom-bin") && nbins < MAXBIN) {
    bins[nbins++] = argv[2];
    argv += 2, argc -= 2;
  }
  if (!nbins) bins[nbins++] = LOOM_BIN;
  long n = argc > 1 ? atol(argv[1]) : 20000;
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  if (n < 2 || rounds < 1 || rounds > MAXR) {
    fprintf(stderr, "usage: bench_opencl [--loom-bin LOOM]... [ENQUEUES >= 2 [ROUNDS 1..%d]]\n", MAXR);
    return 2;
  }
  int ways = 2 + nbins;
  char self[512], cmd[WAYS][1536];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) return 1;
  self[k] = 0;
  snprintf(cmd[0], sizeof cmd[0], "'%s' --child %ld", self, n);
  snprintf(cmd[1], sizeof cmd[1], "'%s' --child-profiled %ld", self, n);
  for (int b = 0; b < nbins; b++)
    snprintf(cmd[2 + b], sizeof cmd[2 + b],
             "'%s' record -o /tmp/bench_opencl.%d.json -- '%s' --child %ld 2>/dev/null", bins[b],
             (int)getpid(), self, n);
  static double v[WAYS][3][MAXR]; /* way, metric, round */
  for (int r = 0; r < rounds; r++) /* interleaved: drift hits every way alike */
    for (int w = 0; w < ways; w++) {
      double x[3];
      if (run(cmd[w], x) != 0) {
        fprintf(stderr, "bench_opencl: a run failed (is an OpenCL device available?)\n");
        return 1;
      }
      for (int m = 0; m < 3; m++) v[w][m][r] = x[m];
    }
  char trace[64];
  snprintf(trace, sizeof trace, "/tmp/bench_opencl.%d.json", (int)getpid());
  remove(trace);
  double mn[WAYS][3], md[WAYS][3];
  for (int w = 0; w < ways; w++)
    for (int m = 0; m < 3; m++) stats(v[w][m], rounds, &mn[w][m], &md[w][m]);
  static const char *metric[3] = {"wall time", "CPU time, all threads", "CPU time, enqueuing thread"};
  printf("OpenCL, %ld enqueues (tiny kernels and 256-byte writes), %d interleaved rounds;\n"
         "ns per enqueue, min / median:\n", n, rounds);
  for (int m = 0; m < 3; m++) {
    printf("%s\n", metric[m]);
    printf("  %-44s %8.1f / %8.1f\n", "without loom", mn[0][m], md[0][m]);
    printf("  %-44s %8.1f / %8.1f\n", "profiling, events and their times, no loom", mn[1][m], md[1][m]);
    printf("    the driver's profiling, events and queries %8.1f / %8.1f\n", mn[1][m] - mn[0][m],
           md[1][m] - md[0][m]);
    for (int w = 2; w < ways; w++) {
      printf("  under loom record%s%-26.26s %8.1f / %8.1f\n", nbins > 1 ? ": " : "",
             nbins > 1 ? bins[w - 2] : "", mn[w][m], md[w][m]);
      printf("    added by loom                              %8.1f / %8.1f (%.2fx / %.2fx)\n"
             "    loom's own code (over the floor)           %8.1f / %8.1f\n",
             mn[w][m] - mn[0][m], md[w][m] - md[0][m], mn[w][m] / mn[0][m], md[w][m] / md[0][m],
             mn[w][m] - mn[1][m], md[w][m] - md[1][m]);
    }
  }
  /* issue 38: loom's own code on the enqueuing thread, over the floor of
   * profiling with the same queries, against the plain enqueue (medians;
   * the last build given) */
  double own = (md[ways - 1][2] - md[1][2]) / md[0][2];
  printf("goal opencl_enqueue: %.3fx (target 0.25x of the plain enqueue's thread CPU time) %s\n",
         own, own <= 0.25 ? "met" : "missed");
  return 0;
}
