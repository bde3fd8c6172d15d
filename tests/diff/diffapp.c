/*
 * diffapp.c - a training-loop-shaped OpenCL program for `loom diff`'s test:
 * STEPS steps, each marked with loom_step(), each uploading a buffer and
 * running three kernels (light, heavy, tail) before waiting for them;
 * one unmarked step first warms up (POCL compiles a kernel at its first run).
 * SLOW multiplies the heavy kernel's loop count and nothing else, so two
 * recordings with SLOW 1 and 2 differ in that kernel's time only.
 *
 * usage: diffapp STEPS SLOW
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#include "loom/loom.h"

#define CHECK(x)                                                       \
  do {                                                                 \
    cl_int e_ = (x);                                                   \
    if (e_ != CL_SUCCESS) {                                            \
      fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); \
      exit(2);                                                         \
    }                                                                  \
  } while (0)

enum { N = 1024, LIGHT = 100, HEAVY = 600, TAIL = 200 };
static const char *src =
    "__kernel void spin(__global float *a, int reps) {\n"
    "  int i = get_global_id(0); float x = a[i];\n"
    "  for (int r = 0; r < reps; r++) x = x * 0.999f + 0.5f;\n"
    "  a[i] = x; }\n";

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 20, slow = argc > 2 ? atoi(argv[2]) : 1;
  cl_platform_id plat;
  cl_device_id dev;
  cl_int err;
  CHECK(clGetPlatformIDs(1, &plat, NULL));
  CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  CHECK(err);
  /* three programs of one source: the kernels get three names */
  const char *names[3] = {"light", "heavy", "tail"};
  int reps[3] = {LIGHT, HEAVY * slow, TAIL};
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * N, NULL, &err);
  CHECK(err);
  cl_kernel k[3];
  cl_program prog[3];
  for (int i = 0; i < 3; i++) {
    char buf[512];
    snprintf(buf, sizeof buf, "#define spin %s\n%s", names[i], src);
    const char *s = buf;
    prog[i] = clCreateProgramWithSource(ctx, 1, &s, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(prog[i], 1, &dev, NULL, NULL, NULL));
    cl_kernel kk = clCreateKernel(prog[i], names[i], &err);
    CHECK(err);
    CHECK(clSetKernelArg(kk, 0, sizeof m, &m));
    CHECK(clSetKernelArg(kk, 1, sizeof reps[i], &reps[i]));
    k[i] = kk;
  }
  static float h[N];
  size_t g = N;
  for (int s = -1; s < steps; s++) { /* -1: warming up (the kernels' first run compiles them) */
    if (s >= 0) loom_step();
    /* nothing runs until every command is enqueued: on a CPU device the
     * host's calls would otherwise share the cores with the kernels */
    cl_event go = clCreateUserEvent(ctx, &err);
    CHECK(err);
    CHECK(clEnqueueWriteBuffer(q, m, CL_FALSE, 0, sizeof h, h, 1, &go, NULL));
    for (int i = 0; i < 3; i++)
      CHECK(clEnqueueNDRangeKernel(q, k[i], 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clSetUserEventStatus(go, CL_COMPLETE));
    CHECK(clFinish(q));
    clReleaseEvent(go);
  }
  for (int i = 0; i < 3; i++) {
    clReleaseKernel(k[i]);
    clReleaseProgram(prog[i]);
  }
  clReleaseMemObject(m);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}
