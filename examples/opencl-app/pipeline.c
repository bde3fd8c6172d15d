/*
 * pipeline.c - the bundled OpenCL workload: a small dense network (two
 * layers: matrix multiply, bias + ReLU, softmax) evaluated batch after batch
 * on an OpenCL device, with the batches' uploads on one queue and the
 * results' downloads plus a reduction on a second queue, double-buffered.
 * Every result is checked against a plain C computation on the host.
 *
 * (Layer 1 has a bias and ReLU; layer 2 feeds softmax directly.)
 *
 * The host marks its steps with loom's API (framework ops with ids, ranges,
 * iterations).  Run alone, those calls cost nothing; under
 * `loom record -- loom-opencl-pipeline` they appear in the trace, and the
 * OpenCL work they launch carries their External ids.
 *
 * usage: loom-opencl-pipeline [BATCHES]   (default 12)
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

enum { B = 64, IN = 256, HID = 128, OUT = 32 };

static const char *src =
    "__kernel void gemm(__global const float *x, __global const float *w, __global float *y,\n"
    "                   int n, int k) {\n"
    "  int r = get_global_id(1), c = get_global_id(0);\n"
    "  float s = 0.0f;\n"
    "  for (int i = 0; i < k; i++) s += x[r * k + i] * w[i * n + c];\n"
    "  y[r * n + c] = s;\n"
    "}\n"
    "__kernel void bias_relu(__global float *y, __global const float *b, int n) {\n"
    "  int i = get_global_id(0);\n"
    "  float v = y[i] + b[i % n];\n"
    "  y[i] = v > 0.0f ? v : 0.0f;\n"
    "}\n"
    "__kernel void softmax(__global float *y, int n) {\n"
    "  int r = get_global_id(0);\n"
    "  float m = -1e30f, s = 0.0f;\n"
    "  for (int i = 0; i < n; i++) m = fmax(m, y[r * n + i]);\n"
    "  for (int i = 0; i < n; i++) { float e = exp(y[r * n + i] - m); y[r * n + i] = e; s += e; }\n"
    "  for (int i = 0; i < n; i++) y[r * n + i] /= s;\n"
    "}\n"
    "__kernel void row_argmax(__global const float *y, __global int *out, int n) {\n"
    "  int r = get_global_id(0), best = 0;\n"
    "  for (int i = 1; i < n; i++) if (y[r * n + i] > y[r * n + best]) best = i;\n"
    "  out[r] = best;\n"
    "}\n";

#define CHECK(x)                                                                \
  do {                                                                          \
    cl_int e_ = (x);                                                            \
    if (e_ != CL_SUCCESS) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, e_);    \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static float w1[IN * HID], b1[HID], w2[HID * OUT];

static void reference(const float *x, float *y) {
  static float h[B * HID];
  for (int r = 0; r < B; r++)
    for (int c = 0; c < HID; c++) {
      float s = 0;
      for (int i = 0; i < IN; i++) s += x[r * IN + i] * w1[i * HID + c];
      s += b1[c];
      h[r * HID + c] = s > 0 ? s : 0;
    }
  for (int r = 0; r < B; r++) {
    float m = -1e30f, s = 0;
    for (int c = 0; c < OUT; c++) {
      float v = 0;
      for (int i = 0; i < HID; i++) v += h[r * HID + i] * w2[i * OUT + c];
      y[r * OUT + c] = v;
      m = fmaxf(m, y[r * OUT + c]);
    }
    for (int c = 0; c < OUT; c++) s += y[r * OUT + c] = expf(y[r * OUT + c] - m);
    for (int c = 0; c < OUT; c++) y[r * OUT + c] /= s;
  }
}

int main(int argc, char **argv) {
  int batches = argc > 1 ? atoi(argv[1]) : 12;
  unsigned seed = 7;
  for (int i = 0; i < IN * HID; i++) w1[i] = ((seed = seed * 1103515245u + 12345u) >> 16) % 2001 / 20000.0f - 0.05f;
  for (int i = 0; i < HID * OUT; i++) w2[i] = ((seed = seed * 1103515245u + 12345u) >> 16) % 2001 / 10000.0f - 0.1f;
  for (int i = 0; i < HID; i++) b1[i] = 0.01f * (i % 5);

  cl_platform_id plat;
  cl_device_id dev;
  cl_int err;
  CHECK(clGetPlatformIDs(1, &plat, NULL));
  CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue compute = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  cl_command_queue transfer = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  loom_op_begin("model::load", 1);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(prog, 1, &dev, "-cl-fast-relaxed-math", NULL, NULL));
  cl_kernel k_gemm = clCreateKernel(prog, "gemm", &err), k_bias = clCreateKernel(prog, "bias_relu", &err);
  cl_kernel k_soft = clCreateKernel(prog, "softmax", &err), k_arg = clCreateKernel(prog, "row_argmax", &err);
  CHECK(err);
  cl_mem d_w1 = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof w1, w1, &err);
  cl_mem d_b1 = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof b1, b1, &err);
  cl_mem d_w2 = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof w2, w2, &err);
  CHECK(err);
  cl_mem d_x[2], d_h[2], d_y[2], d_arg[2];
  for (int i = 0; i < 2; i++) {
    d_x[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * B * IN, NULL, &err);
    d_h[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * B * HID, NULL, &err);
    d_y[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * B * OUT, NULL, &err);
    d_arg[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(int) * B, NULL, &err);
    CHECK(err);
  }
  loom_op_end();

  float *x = malloc(sizeof(float) * B * IN), *y = malloc(sizeof(float) * B * OUT);
  float *ref = malloc(sizeof(float) * B * OUT);
  int args[B];
  double max_err = 0;
  long agree = 0;
  cl_event computed[2] = {NULL, NULL};
  for (int it = 0; it < batches; it++) {
    loom_step();
    int s = it % 2;
    loom_range_push("load batch");
    for (int i = 0; i < B * IN; i++) x[i] = (float)((it * 7919 + i * 31) % 1000) / 1000.0f;
    loom_range_pop();
    loom_op_begin("aten::to(device)", 100 + (uint64_t)it * 10);
    cl_event uploaded;
    CHECK(clEnqueueWriteBuffer(transfer, d_x[s], CL_FALSE, 0, sizeof(float) * B * IN, x, 0, NULL, &uploaded));
    loom_op_end();
    loom_range_push("forward");
    int in = IN, hid = HID, out = OUT;
    size_t g1[2] = {HID, B}, g2[2] = {OUT, B}, gb = B * HID, gr = B;
    loom_op_begin("aten::linear", 101 + (uint64_t)it * 10);
    CHECK(clSetKernelArg(k_gemm, 0, sizeof(cl_mem), &d_x[s]));
    CHECK(clSetKernelArg(k_gemm, 1, sizeof(cl_mem), &d_w1));
    CHECK(clSetKernelArg(k_gemm, 2, sizeof(cl_mem), &d_h[s]));
    CHECK(clSetKernelArg(k_gemm, 3, sizeof(int), &hid));
    CHECK(clSetKernelArg(k_gemm, 4, sizeof(int), &in));
    CHECK(clEnqueueNDRangeKernel(compute, k_gemm, 2, NULL, g1, NULL, 1, &uploaded, NULL));
    CHECK(clSetKernelArg(k_bias, 0, sizeof(cl_mem), &d_h[s]));
    CHECK(clSetKernelArg(k_bias, 1, sizeof(cl_mem), &d_b1));
    CHECK(clSetKernelArg(k_bias, 2, sizeof(int), &hid));
    CHECK(clEnqueueNDRangeKernel(compute, k_bias, 1, NULL, &gb, NULL, 0, NULL, NULL));
    loom_op_end();
    loom_op_begin("aten::linear", 102 + (uint64_t)it * 10);
    CHECK(clSetKernelArg(k_gemm, 0, sizeof(cl_mem), &d_h[s]));
    CHECK(clSetKernelArg(k_gemm, 1, sizeof(cl_mem), &d_w2));
    CHECK(clSetKernelArg(k_gemm, 2, sizeof(cl_mem), &d_y[s]));
    CHECK(clSetKernelArg(k_gemm, 3, sizeof(int), &out));
    CHECK(clSetKernelArg(k_gemm, 4, sizeof(int), &hid));
    CHECK(clEnqueueNDRangeKernel(compute, k_gemm, 2, NULL, g2, NULL, 0, NULL, NULL));
    loom_op_end();
    loom_op_begin("aten::softmax", 103 + (uint64_t)it * 10);
    CHECK(clSetKernelArg(k_soft, 0, sizeof(cl_mem), &d_y[s]));
    CHECK(clSetKernelArg(k_soft, 1, sizeof(int), &out));
    CHECK(clEnqueueNDRangeKernel(compute, k_soft, 1, NULL, &gr, NULL, 0, NULL, NULL));
    CHECK(clSetKernelArg(k_arg, 0, sizeof(cl_mem), &d_y[s]));
    CHECK(clSetKernelArg(k_arg, 1, sizeof(cl_mem), &d_arg[s]));
    CHECK(clSetKernelArg(k_arg, 2, sizeof(int), &out));
    if (computed[s]) clReleaseEvent(computed[s]);
    CHECK(clEnqueueNDRangeKernel(compute, k_arg, 1, NULL, &gr, NULL, 0, NULL, &computed[s]));
    loom_op_end();
    loom_range_pop();
    clReleaseEvent(uploaded);
    loom_op_begin("aten::to(cpu)", 104 + (uint64_t)it * 10);
    CHECK(clEnqueueReadBuffer(transfer, d_y[s], CL_FALSE, 0, sizeof(float) * B * OUT, y, 1, &computed[s], NULL));
    CHECK(clEnqueueReadBuffer(transfer, d_arg[s], CL_TRUE, 0, sizeof args, args, 0, NULL, NULL));
    loom_op_end();
    loom_range_push("check");
    reference(x, ref);
    for (int i = 0; i < B * OUT; i++) {
      double e = fabs((double)y[i] - ref[i]);
      if (e > max_err) max_err = e;
    }
    for (int r = 0; r < B; r++) {
      int best = 0;
      for (int c = 1; c < OUT; c++)
        if (ref[r * OUT + c] > ref[r * OUT + best]) best = c;
      agree += best == args[r];
    }
    loom_counter("max abs error", max_err);
    loom_range_pop();
  }
  clFinish(compute);
  clFinish(transfer);
  printf("%d batches of %d rows: max |device - host| = %.2e, argmax agreement %ld/%ld\n",
         batches, B, max_err, agree, (long)batches * B);
  for (int i = 0; i < 2; i++) {
    if (computed[i]) clReleaseEvent(computed[i]);
    clReleaseMemObject(d_x[i]);
    clReleaseMemObject(d_h[i]);
    clReleaseMemObject(d_y[i]);
    clReleaseMemObject(d_arg[i]);
  }
  clReleaseMemObject(d_w1);
  clReleaseMemObject(d_b1);
  clReleaseMemObject(d_w2);
  clReleaseKernel(k_gemm);
  clReleaseKernel(k_bias);
  clReleaseKernel(k_soft);
  clReleaseKernel(k_arg);
  clReleaseProgram(prog);
  clReleaseCommandQueue(compute);
  clReleaseCommandQueue(transfer);
  clReleaseContext(ctx);
  free(x);
  free(y);
  free(ref);
  return max_err < 1e-3 && agree > (long)batches * B * 95 / 100 ? 0 : 1;
}
