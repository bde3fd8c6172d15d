/*
 * bench_opencl.c - what recording costs an OpenCL program: many tiny
 * kernels and small copies, run plain and under `loom record` in the same
 * run (alternating, best of 5 each), printing ns per enqueue for both, the
 * time loom adds per enqueue, and the ratio.
 * usage: bench_opencl [ENQUEUES]   (default 20000; half kernels, half copies)
 *        bench_opencl --child N    (the measured program itself)
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* profiled: the queue has profiling on and every command gets an event that
 * is released later: what loom's layer asks of the driver, without loom. */
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
  double t0 = now_ns();
  for (long i = 0; i < n; i += 2) {
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, profiled ? &ev[ne++] : NULL);
    clEnqueueWriteBuffer(q, m, CL_FALSE, 0, sizeof host, host, 0, NULL, profiled ? &ev[ne++] : NULL);
    if (i % 128 == 126) {
      clFinish(q);
      for (int e = 0; e < ne; e++) {
        cl_ulong t;
        clGetEventProfilingInfo(ev[e], CL_PROFILING_COMMAND_END, sizeof t, &t, NULL);
        clReleaseEvent(ev[e]);
      }
      ne = 0;
    }
  }
  for (int e = 0; e < ne; e++) clReleaseEvent(ev[e]);
  clFinish(q);
  double t = now_ns() - t0;
  printf("%.1f\n", t / n);
  clReleaseMemObject(m);
  clReleaseKernel(k);
  clReleaseProgram(prog);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}

static double run(const char *cmd) {
  FILE *f = popen(cmd, "r");
  double v = -1;
  if (f && fscanf(f, "%lf", &v) != 1) v = -1;
  if (f) pclose(f);
  return v;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--child")) return child(atol(argv[2]), 0);
  if (argc > 2 && !strcmp(argv[1], "--child-profiled")) return child(atol(argv[2]), 1);
  long n = argc > 1 ? atol(argv[1]) : 20000;
  char self[512], plain[1024], rec[1536], prof[1024];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) return 1;
  self[k] = 0;
  snprintf(plain, sizeof plain, "'%s' --child %ld", self, n);
  snprintf(prof, sizeof prof, "'%s' --child-profiled %ld", self, n);
  snprintf(rec, sizeof rec, "'%s' record -o /tmp/bench_opencl.%d.json -- '%s' --child %ld 2>/dev/null",
           LOOM_BIN, (int)getpid(), self, n);
  double best_plain = 1e18, best_rec = 1e18, best_prof = 1e18;
  for (int i = 0; i < 5; i++) {
    double a = run(plain), b = run(rec), c = run(prof);
    if (c >= 0 && c < best_prof) best_prof = c;
    if (a < 0 || b < 0) {
      fprintf(stderr, "bench_opencl: a run failed (is an OpenCL device available?)\n");
      return 1;
    }
    if (a < best_plain) best_plain = a;
    if (b < best_rec) best_rec = b;
  }
  char trace[64];
  snprintf(trace, sizeof trace, "/tmp/bench_opencl.%d.json", (int)getpid());
  remove(trace);
  printf("OpenCL on this machine, %ld enqueues (tiny kernels and 256-byte writes), best of 5:\n", n);
  printf("  without loom                %8.1f ns per enqueue\n", best_plain);
  printf("  without loom, profiling on and an event per command (what the layer asks\n"
         "  of the driver)              %8.1f ns per enqueue\n", best_prof);
  printf("  under loom record           %8.1f ns per enqueue\n", best_rec);
  printf("  added by loom               %8.1f ns per enqueue (%.2fx), of which the driver's\n"
         "  profiling and events        %8.1f ns, loom's own code %.1f ns\n",
         best_rec - best_plain, best_rec / best_plain, best_prof - best_plain, best_rec - best_prof);
  return 0;
}
