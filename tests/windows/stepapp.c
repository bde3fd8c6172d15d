/*
 * stepapp.c - a training-loop-shaped OpenCL program for the window tests:
 * STEPS steps, each marked with loom_step(), each enqueueing one upload and
 * one kernel without waiting for them; a step waits (clFinish) for the
 * previous step's work first, so every step's kernel completes during the
 * next step: a window that ends at a step boundary must still get the last
 * step's kernel (the flush waits for it), and one that begins at a step must
 * not get the kernel launched just before it.
 *
 * usage: stepapp STEPS [SLEEP_MS]
 * Prints "start NS" and "end NS" (CLOCK_REALTIME) around the loop.
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"

#define CHECK(x)                                                       \
  do {                                                                 \
    cl_int e_ = (x);                                                   \
    if (e_ != CL_SUCCESS) {                                            \
      fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); \
      exit(2);                                                         \
    }                                                                  \
  } while (0)

enum { N = 1024 };
static const char *src =
    "__kernel void work(__global float *a, float f) { int i = get_global_id(0); a[i] = a[i] * f + 1.0f; }\n";

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 200, sleep_ms = argc > 2 ? atoi(argv[2]) : 0;
  cl_platform_id plat;
  cl_device_id dev;
  cl_int err;
  CHECK(clGetPlatformIDs(1, &plat, NULL));
  CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  CHECK(err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
  cl_kernel k = clCreateKernel(prog, "work", &err);
  CHECK(err);
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * N, NULL, &err);
  CHECK(err);
  static float h[N];
  float f = 0.5f;
  CHECK(clSetKernelArg(k, 0, sizeof m, &m));
  CHECK(clSetKernelArg(k, 1, sizeof f, &f));
  size_t g = N;
  printf("start %lld\n", now_ns());
  for (int s = 0; s < steps; s++) {
    loom_step();
    CHECK(clFinish(q)); /* the previous step's work */
    loom_range_push("train_step");
    CHECK(clEnqueueWriteBuffer(q, m, CL_FALSE, 0, sizeof h, h, 0, NULL, NULL));
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clFlush(q));
    if (sleep_ms) usleep((useconds_t)sleep_ms * 1000);
    loom_range_pop();
  }
  CHECK(clFinish(q));
  printf("end %lld\n", now_ns());
  clReleaseMemObject(m);
  clReleaseKernel(k);
  clReleaseProgram(prog);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}
