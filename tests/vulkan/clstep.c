/*
 * clstep.c - the OpenCL half of vkapp_cl (vkapp.c built with WITH_OPENCL):
 * one write, one kernel and one read on the first OpenCL device, finished
 * before it returns, so one process drives OpenCL and Vulkan in turn.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#define N 1024
#define CL_CHECK(x)                                                       \
  do {                                                                    \
    cl_int e_ = (x);                                                      \
    if (e_ != CL_SUCCESS) {                                               \
      fprintf(stderr, "vkapp: %s failed: %d\n", #x, (int)e_);             \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

static const char *src = "__kernel void twice(__global uint *a) { size_t i = get_global_id(0); a[i] = a[i] * 2u + 1u; }";

void cl_step(const char *tag) {
  cl_platform_id plat;
  cl_device_id dev;
  cl_int err;
  CL_CHECK(clGetPlatformIDs(1, &plat, NULL));
  CL_CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CL_CHECK(err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CL_CHECK(err);
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CL_CHECK(err);
  CL_CHECK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
  cl_kernel k = clCreateKernel(p, "twice", &err);
  CL_CHECK(err);
  cl_uint host[N];
  for (cl_uint i = 0; i < N; i++) host[i] = i;
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &err);
  CL_CHECK(err);
  CL_CHECK(clEnqueueWriteBuffer(q, m, CL_FALSE, 0, sizeof host, host, 0, NULL, NULL));
  CL_CHECK(clSetKernelArg(k, 0, sizeof m, &m));
  size_t gws = N;
  CL_CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, NULL, 0, NULL, NULL));
  CL_CHECK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL));
  CL_CHECK(clFinish(q));
  unsigned long long sum = 0;
  for (cl_uint i = 0; i < N; i++) sum += host[i];
  printf("opencl %s: %llu\n", tag, sum);
  clReleaseMemObject(m);
  clReleaseKernel(k);
  clReleaseProgram(p);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
}
