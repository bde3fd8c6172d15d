/*
 * clapp.c - an ordinary OpenCL program (it knows nothing of loom) used by
 * the OpenCL tests in several modes.  Built twice: linked against
 * libOpenCL, and with -DUSE_DLOPEN, loading libOpenCL.so.1 at run time.
 * It prints a checksum of its results so runs with and without loom can be
 * compared byte for byte.
 *
 * usage: clapp MODE [KERNELS]
 *   basic      one queue: write, KERNELS kernels, read; no events
 *   events     every command with an event; callbacks of its own; waits
 *   profiling  its own queue has profiling on; it reads its own times
 *   threads    two queues, each driven by its own thread
 *   ooo        an out-of-order queue: KERNELS kernels, each on a buffer of
 *              its own, then clFinish and a read of the last one
 *   burst      ooo, with every kernel waiting on one user event that is set
 *              after the last is enqueued: all are ready at once
 *   exit       exit(3) after enqueueing, before reading
 *   crash      a segmentation fault after the first read
 *   sleep      basic, then prints "ready" and sleeps 30 s (for signals)
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#ifdef USE_DLOPEN
#include <dlfcn.h>
#endif

#define FNS(X)                                                                             \
  X(clGetPlatformIDs) X(clGetDeviceIDs) X(clCreateContext) X(clCreateCommandQueue)        \
  X(clCreateCommandQueueWithProperties) X(clCreateProgramWithSource) X(clBuildProgram)    \
  X(clCreateKernel) X(clCreateBuffer) X(clSetKernelArg) X(clEnqueueWriteBuffer)           \
  X(clEnqueueReadBuffer) X(clEnqueueNDRangeKernel) X(clFinish) X(clGetCommandQueueInfo)   \
  X(clGetEventProfilingInfo) X(clSetEventCallback) X(clWaitForEvents) X(clReleaseEvent)   \
  X(clReleaseKernel) X(clReleaseProgram) X(clReleaseMemObject) X(clReleaseCommandQueue)   \
  X(clReleaseContext) X(clEnqueueCopyBuffer) X(clEnqueueFillBuffer) X(clCreateUserEvent)     \
  X(clSetUserEventStatus)

#define DECL(f) static __typeof__(&f) p_##f;
FNS(DECL)
#undef DECL

static void load(void) {
#ifdef USE_DLOPEN
  void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    exit(2);
  }
#define LOAD(f) p_##f = (__typeof__(&f))dlsym(h, #f);
#else
#define LOAD(f) p_##f = &f;
#endif
  FNS(LOAD)
#undef LOAD
}

#define CHECK(x)                                                         \
  do {                                                                   \
    cl_int e_ = (x);                                                     \
    if (e_ != CL_SUCCESS) {                                              \
      fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_);   \
      exit(2);                                                           \
    }                                                                    \
  } while (0)

enum { N = 4096 };
static const char *src =
    "__kernel void scale(__global float *a, float f) { int i = get_global_id(0); a[i] = a[i] * f + 1.0f; }\n"
    "__kernel void square(__global float *a) { int i = get_global_id(0); a[i] = a[i] * a[i] * 0.5f; }\n";

static cl_context ctx;
static cl_device_id dev;
static cl_program prog;
static atomic_int callbacks;

static void CL_CALLBACK on_done(cl_event e, cl_int st, void *u) {
  (void)e;
  (void)u;
  if (st == CL_COMPLETE) atomic_fetch_add(&callbacks, 1);
}

static double checksum(const float *h) {
  double s = 0;
  for (int i = 0; i < N; i++) s += h[i] * (1 + i % 7);
  return s;
}

/* write, kernels, read on q; with_events: each command gets an event. */
static double run(cl_command_queue q, int kernels, int with_events, int exit_early) {
  cl_int err;
  float *h = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) h[i] = (float)(i % 100) / 100.0f;
  cl_mem m = p_clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * N, NULL, &err);
  CHECK(err);
  cl_kernel ks = p_clCreateKernel(prog, "scale", &err), kq = p_clCreateKernel(prog, "square", &err);
  CHECK(err);
  float f = 1.5f;
  CHECK(p_clSetKernelArg(ks, 0, sizeof m, &m));
  CHECK(p_clSetKernelArg(ks, 1, sizeof f, &f));
  CHECK(p_clSetKernelArg(kq, 0, sizeof m, &m));
  cl_event ev[64];
  int ne = 0;
  CHECK(p_clEnqueueWriteBuffer(q, m, CL_FALSE, 0, sizeof(float) * N, h, 0, NULL,
                               with_events ? &ev[ne++] : NULL));
  size_t g = N, l = 64;
  for (int k = 0; k < kernels; k++)
    CHECK(p_clEnqueueNDRangeKernel(q, k % 2 ? kq : ks, 1, NULL, &g, k % 3 ? &l : NULL, 0, NULL,
                                   with_events && ne < 60 ? &ev[ne++] : NULL));
  if (exit_early) exit(3);
  CHECK(p_clEnqueueReadBuffer(q, m, CL_TRUE, 0, sizeof(float) * N, h, 0, NULL,
                              with_events ? &ev[ne++] : NULL));
  if (with_events) {
    for (int i = 0; i < ne; i++) CHECK(p_clSetEventCallback(ev[i], CL_COMPLETE, on_done, NULL));
    CHECK(p_clWaitForEvents((cl_uint)ne, ev));
    CHECK(p_clFinish(q));
    for (int i = 0; i < ne; i++) p_clReleaseEvent(ev[i]);
  }
  double s = checksum(h);
  p_clReleaseKernel(ks);
  p_clReleaseKernel(kq);
  p_clReleaseMemObject(m);
  free(h);
  return s;
}

/* KERNELS independent kernels on an out-of-order queue (each squares its own
 * buffer, so any order gives the same result). */
static double run_ooo(int kernels, int burst) {
  cl_int err;
  cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  cl_command_queue q = p_clCreateCommandQueueWithProperties(ctx, dev, props, &err);
  CHECK(err);
  cl_command_queue_properties seen = 0;
  CHECK(p_clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof seen, &seen, NULL));
  printf("out of order: %s\n", seen & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE ? "yes" : "no");
  float *h = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) h[i] = (float)(i % 100) / 100.0f;
  cl_mem *m = calloc((size_t)kernels, sizeof *m);
  cl_kernel k = p_clCreateKernel(prog, "square", &err);
  CHECK(err);
  size_t g = N;
  cl_event gate = NULL;
  if (burst) {
    gate = p_clCreateUserEvent(ctx, &err);
    CHECK(err);
  }
  for (int i = 0; i < kernels; i++) {
    m[i] = p_clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(float) * N, h, &err);
    CHECK(err);
    CHECK(p_clSetKernelArg(k, 0, sizeof m[i], &m[i]));
    CHECK(p_clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, gate ? 1 : 0, gate ? &gate : NULL, NULL));
  }
  if (gate) {
    CHECK(p_clSetUserEventStatus(gate, CL_COMPLETE));
    p_clReleaseEvent(gate);
  }
  CHECK(p_clFinish(q));
  CHECK(p_clEnqueueReadBuffer(q, m[kernels - 1], CL_TRUE, 0, sizeof(float) * N, h, 0, NULL, NULL));
  double s = checksum(h);
  for (int i = 0; i < kernels; i++) p_clReleaseMemObject(m[i]);
  p_clReleaseKernel(k);
  p_clReleaseCommandQueue(q);
  free(m);
  free(h);
  return s;
}

typedef struct job { cl_command_queue q; int kernels; double sum; } job;
static void *thread_main(void *a) {
  job *j = a;
  j->sum = run(j->q, j->kernels, 0, 0);
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "basic";
  int kernels = argc > 2 ? atoi(argv[2]) : 4;
  load();
  cl_platform_id plat;
  cl_int err;
  CHECK(p_clGetPlatformIDs(1, &plat, NULL));
  CHECK(p_clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  ctx = p_clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  prog = p_clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CHECK(err);
  CHECK(p_clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
  int profiling = !strcmp(mode, "profiling");
  cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  cl_command_queue q = p_clCreateCommandQueueWithProperties(ctx, dev, profiling ? props : NULL, &err);
  CHECK(err);
  cl_command_queue_properties seen = 0;
  CHECK(p_clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof seen, &seen, NULL));
  printf("queue profiling: %s\n", seen & CL_QUEUE_PROFILING_ENABLE ? "on" : "off");
  double sum = 0;
  if (!strcmp(mode, "threads")) {
    cl_command_queue q2 = p_clCreateCommandQueue(ctx, dev, 0, &err);
    CHECK(err);
    job a = {q, kernels, 0}, b = {q2, kernels, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, thread_main, &a);
    pthread_create(&tb, NULL, thread_main, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    sum = a.sum + b.sum;
    p_clReleaseCommandQueue(q2);
  } else if (!strcmp(mode, "ooo") || !strcmp(mode, "burst")) {
    sum = run_ooo(kernels > 0 ? kernels : 1, !strcmp(mode, "burst"));
  } else if (profiling) {
    cl_event e;
    cl_mem m = p_clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    float zero = 0;
    CHECK(p_clEnqueueFillBuffer(q, m, &zero, sizeof zero, 0, 4096, 0, NULL, &e));
    CHECK(p_clWaitForEvents(1, &e));
    cl_ulong s = 0, t = 0;
    CHECK(p_clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL));
    CHECK(p_clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL));
    printf("own profiling: %s\n", t >= s && s > 0 ? "ok" : "broken");
    p_clReleaseEvent(e);
    p_clReleaseMemObject(m);
    sum = run(q, kernels, 0, 0);
  } else {
    int events = !strcmp(mode, "events");
    sum = run(q, kernels, events, !strcmp(mode, "exit"));
    if (events) printf("callbacks: %d\n", atomic_load(&callbacks));
    if (!strcmp(mode, "crash")) {
      printf("checksum %.6f\n", sum);
      fflush(stdout);
      *(volatile int *)(uintptr_t)argc = 1; /* a real fault: writes near address 0 */
    }
    if (!strcmp(mode, "sleep")) {
      printf("ready\n");
      fflush(stdout);
      sleep(30);
    }
  }
  printf("checksum %.6f\n", sum);
  p_clReleaseCommandQueue(q);
  p_clReleaseProgram(prog);
  p_clReleaseContext(ctx);
  return 0;
}
