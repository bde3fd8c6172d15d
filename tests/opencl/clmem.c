/*
 * clmem.c - an ordinary OpenCL program (it knows nothing of loom) that
 * allocates and frees memory in every way the OpenCL backend follows, for
 * test_opencl's memory test: buffers of each memory kind, one made with
 * properties (OpenCL 3.0), a sub-buffer that outlives its buffer's last
 * release, retains and releases, a 2D image, an image over a buffer (a view),
 * coarse-grained SVM freed by clSVMFree and by clEnqueueSVMFree, a thousand
 * buffers alive at once released in a scrambled order, and one buffer it
 * never releases (a leak).  It prints what it did: "svm yes", or
 * "svm no: REASON" where the device has no SVM (then no SVM call is made).
 * Each step's figures are in test_opencl.c.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                         \
  do {                                                                   \
    cl_int e_ = (x);                                                     \
    if (e_ != CL_SUCCESS) {                                              \
      fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_);   \
      exit(2);                                                           \
    }                                                                    \
  } while (0)

static cl_int err;
static cl_context ctx;

static cl_mem buffer(cl_mem_flags f, size_t size, void *host) {
  cl_mem m = clCreateBuffer(ctx, f, size, host, &err);
  CHECK(err);
  return m;
}

/* A sub-buffer keeps its buffer: the buffer's free comes with the view's
 * last release (after a retain, so two releases).  Each clFinish marks a
 * point in the trace: a buffer's free must come after it. */
static void views(cl_command_queue q) {
  cl_mem big = buffer(CL_MEM_READ_WRITE, 1 << 20, NULL);
  cl_buffer_region r = {0, 4096};
  cl_mem sub = clCreateSubBuffer(big, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  CHECK(err);
  CHECK(clReleaseMemObject(big));
  CHECK(clFinish(q));
  CHECK(clRetainMemObject(sub));
  CHECK(clReleaseMemObject(sub));
  CHECK(clReleaseMemObject(sub));
  /* an image over a buffer: a view too */
  cl_mem base = buffer(CL_MEM_READ_WRITE, 4096, NULL);
  cl_image_format fmt = {CL_RGBA, CL_UNSIGNED_INT8};
  cl_image_desc d = {.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER, .image_width = 1024,
                     .buffer = base};
  cl_mem img = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &d, NULL, &err);
  CHECK(err);
  CHECK(clReleaseMemObject(base));
  CHECK(clFinish(q));
  CHECK(clReleaseMemObject(img));
}

/* MANY buffers of 96 bytes alive at once, a third of them retained, all
 * released in a scrambled order (the layer's table grows and deletes among
 * collisions). */
enum { MANY = 1000 };
static void many(void) {
  static cl_mem m[MANY];
  for (int i = 0; i < MANY; i++) {
    m[i] = buffer(CL_MEM_READ_WRITE, 96, NULL);
    if (i % 3 == 0) CHECK(clRetainMemObject(m[i]));
  }
  for (int k = 0; k < MANY; k++) {
    int i = (k * 7) % MANY; /* 7 and MANY are coprime: each once */
    CHECK(clReleaseMemObject(m[i]));
    if (i % 3 == 0) CHECK(clReleaseMemObject(m[i]));
  }
}

static void svm(cl_device_id dev, cl_command_queue q) {
  cl_device_svm_capabilities caps = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL) != CL_SUCCESS ||
      !(caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER)) {
    printf("svm no: the device reports no coarse-grained buffer SVM\n");
    return;
  }
  void *a = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 65536, 0);
  void *b = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 32768, 0);
  if (!a || !b) {
    printf("svm no: clSVMAlloc failed\n");
    exit(2);
  }
  clSVMFree(ctx, a);
  CHECK(clEnqueueSVMFree(q, 1, &b, NULL, NULL, 0, NULL, NULL));
  CHECK(clFinish(q));
  printf("svm yes\n");
}

int main(void) {
  cl_platform_id p;
  cl_device_id dev;
  CHECK(clGetPlatformIDs(1, &p, NULL));
  CHECK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  views(q);
  static char host[4096];
  cl_mem pinned = buffer(CL_MEM_ALLOC_HOST_PTR, 65536, NULL);
  cl_mem mine = buffer(CL_MEM_USE_HOST_PTR, sizeof host, host);
  cl_mem_properties none[] = {0};
  cl_mem props = clCreateBufferWithProperties(ctx, none, CL_MEM_READ_ONLY, 8192, NULL, &err);
  CHECK(err);
  cl_image_format fmt = {CL_RGBA, CL_UNSIGNED_INT8};
  cl_image_desc d = {.image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = 64, .image_height = 32};
  cl_mem img = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &d, NULL, &err);
  CHECK(err);
  cl_mem leak = buffer(CL_MEM_READ_WRITE, 2048, NULL);
  (void)leak;
  CHECK(clRetainMemObject(pinned));
  CHECK(clReleaseMemObject(pinned));
  CHECK(clFinish(q));
  CHECK(clReleaseMemObject(pinned));
  CHECK(clReleaseMemObject(mine));
  CHECK(clReleaseMemObject(props));
  CHECK(clReleaseMemObject(img));
  many();
  svm(dev, q);
  CHECK(clReleaseCommandQueue(q));
  return 0;
}
