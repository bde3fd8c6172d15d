/*
 * work.cpp - kineto_drive's workloads (work.h): OpenCL (linked, run on
 * whatever ICD is installed: POCL here) and the example vendor runtime
 * fakert, dlopen()ed when the workload is made, after Kineto's init.
 */
#include "work.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif

namespace {

struct None : Work {
  void op(int) override {}
};

#ifdef HAVE_OPENCL
const char *kSrc = "__kernel void scale(__global float *x) { x[get_global_id(0)] *= 2.0f; }";
constexpr size_t kN = 1024;

struct OpenCL : Work {
  cl_context ctx{};
  cl_command_queue q{};
  cl_kernel k{};
  cl_mem buf{};
  std::vector<float> host = std::vector<float>(kN, 1.0f);
  bool ok = false;

  OpenCL() {
    cl_platform_id p;
    cl_device_id d;
    cl_int err;
    if (clGetPlatformIDs(1, &p, nullptr) || clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, nullptr))
      return;
    ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
    q = clCreateCommandQueue(ctx, d, 0, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &kSrc, nullptr, &err);
    if (clBuildProgram(prog, 1, &d, "", nullptr, nullptr)) return;
    k = clCreateKernel(prog, "scale", &err);
    buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, kN * sizeof(float), nullptr, &err);
    clSetKernelArg(k, 0, sizeof buf, &buf);
    ok = err == CL_SUCCESS;
  }
  void op(int) override {
    size_t n = kN;
    clEnqueueWriteBuffer(q, buf, CL_FALSE, 0, kN * sizeof(float), host.data(), 0, nullptr, nullptr);
    clEnqueueNDRangeKernel(q, k, 1, nullptr, &n, nullptr, 0, nullptr, nullptr);
    clEnqueueReadBuffer(q, buf, CL_TRUE, 0, kN * sizeof(float), host.data(), 0, nullptr, nullptr);
  }
};
#endif

/* fakert's API (examples/fakert/fakert.h), reached through dlsym. */
struct FakeRT : Work {
  int (*init)();
  void *(*queue_create)(const char *);
  uint64_t (*kernel)(void *, const char *, uint32_t);
  uint64_t (*copy)(void *, int, uint64_t);
  void (*finish)(void *);
  void *q = nullptr;
  bool ok = false;

  FakeRT() {
    const char *path = std::getenv("FAKERT_LIB");
    void *h = dlopen(path ? path : "libfakert.so.1", RTLD_NOW);
    if (!h) {
      std::fprintf(stderr, "kineto_drive: %s\n", dlerror());
      return;
    }
    init = reinterpret_cast<int (*)()>(dlsym(h, "frt_init"));
    queue_create = reinterpret_cast<void *(*)(const char *)>(dlsym(h, "frt_queue_create"));
    kernel = reinterpret_cast<uint64_t (*)(void *, const char *, uint32_t)>(
        dlsym(h, "frt_enqueue_kernel"));
    copy = reinterpret_cast<uint64_t (*)(void *, int, uint64_t)>(dlsym(h, "frt_enqueue_copy"));
    finish = reinterpret_cast<void (*)(void *)>(dlsym(h, "frt_finish"));
    ok = init && queue_create && kernel && copy && finish && init() == 0 &&
         (q = queue_create("compute")) != nullptr;
  }
  void op(int i) override {
    kernel(q, i % 2 ? "scale" : "fill", 50);
    copy(q, 2 /* FRT_DTOH */, 4096);
    finish(q);
  }
};

} // namespace

std::unique_ptr<Work> make_vulkan_work(); /* work_vk.cpp */

/* "a,b": both workloads in each op, in turn. */
struct Both : Work {
  std::unique_ptr<Work> a, b;
  void op(int i) override {
    a->op(i);
    b->op(i);
  }
  void sync() override {
    a->sync();
    b->sync();
  }
};

std::unique_ptr<Work> make_work(const char *name) {
  if (const char *comma = std::strchr(name, ',')) {
    auto w = std::make_unique<Both>();
    w->a = make_work(std::string(name, comma).c_str());
    w->b = make_work(comma + 1);
    if (w->a && w->b) return w;
    return nullptr;
  }
  if (!std::strcmp(name, "none")) return std::make_unique<None>();
#ifdef HAVE_OPENCL
  if (!std::strcmp(name, "opencl")) {
    auto w = std::make_unique<OpenCL>();
    if (w->ok) return w;
    std::fprintf(stderr, "kineto_drive: no usable OpenCL device\n");
    return nullptr;
  }
#endif
#ifdef HAVE_VULKAN
  if (!std::strcmp(name, "vulkan")) return make_vulkan_work();
#endif
  if (!std::strcmp(name, "fakert")) {
    auto w = std::make_unique<FakeRT>();
    if (w->ok) return w;
    std::fprintf(stderr, "kineto_drive: fakert could not be started\n");
    return nullptr;
  }
  return nullptr;
}
