// app.cu - the CUDA program tests/gpu/run.sh records with `loom record`.
//
// What it does is fixed, so the trace can be checked with exact counts
// (tests/gpu/check.py has the same numbers; keep them in step):
//   - framework ops through loom's API: "step" (External id 100) around the
//     eager work, "graph step" (External id 200) around the graph launch;
//   - two streams; on each: one copy host -> device, KERNELS_PER_STREAM
//     kernels (scale, add, square in turn), one copy device -> host;
//   - an event recorded on stream 1, waited for by stream 2
//     (cudaStreamWaitEvent) and by the host (cudaEventSynchronize);
//   - a CUDA graph captured on stream 1 (GRAPH_KERNELS kernels), launched
//     once;
//   - cudaStreamSynchronize on both streams, then cudaDeviceSynchronize;
//   - memory: per stream a pinned host buffer (cudaMallocHost) and a device
//     buffer (cudaMalloc) of N floats, freed at the end; a managed buffer
//     (cudaMallocManaged, MANAGED_BYTES) freed with cudaFree; and a device
//     buffer of LEAK_BYTES never freed (a leak).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "loom/loom.h"

#define N (1 << 16)
#define MANAGED_BYTES (1 << 20)
#define LEAK_BYTES 4096
#define KERNELS_PER_STREAM 3
#define GRAPH_KERNELS 2

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "app: %s: %s\n", #x, cudaGetErrorString(e_));                    \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
__global__ void add(float *x, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += b;
}
__global__ void square(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= x[i];
}

static void launch(int k, float *d, cudaStream_t s) {
  dim3 grid((N + 255) / 256), block(256);
  if (k % 3 == 0) scale<<<grid, block, 0, s>>>(d, 2.0f, N);
  else if (k % 3 == 1) add<<<grid, block, 0, s>>>(d, 1.0f, N);
  else square<<<grid, block, 0, s>>>(d, N);
  CK(cudaGetLastError());
}

int main(void) {
  float *h[2], *d[2];
  cudaStream_t s[2];
  for (int i = 0; i < 2; i++) {
    CK(cudaMallocHost((void **)&h[i], N * sizeof(float)));
    CK(cudaMalloc((void **)&d[i], N * sizeof(float)));
    CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    for (int j = 0; j < N; j++) h[i][j] = (float)j;
  }
  cudaEvent_t ev;
  CK(cudaEventCreate(&ev));
  void *managed, *leak;
  CK(cudaMallocManaged(&managed, MANAGED_BYTES, cudaMemAttachGlobal));
  CK(cudaMalloc(&leak, LEAK_BYTES));

  loom_op_begin("step", 100);
  for (int i = 0; i < 2; i++) {
    CK(cudaMemcpyAsync(d[i], h[i], N * sizeof(float), cudaMemcpyHostToDevice, s[i]));
    for (int k = 0; k < KERNELS_PER_STREAM; k++) launch(k, d[i], s[i]);
    if (i == 0) {
      CK(cudaEventRecord(ev, s[0]));
      CK(cudaStreamWaitEvent(s[1], ev, 0));
    }
    CK(cudaMemcpyAsync(h[i], d[i], N * sizeof(float), cudaMemcpyDeviceToHost, s[i]));
  }
  CK(cudaEventSynchronize(ev));
  loom_op_end();

  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
  for (int k = 0; k < GRAPH_KERNELS; k++) launch(k, d[0], s[0]);
  CK(cudaStreamEndCapture(s[0], &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  loom_op_begin("graph step", 200);
  CK(cudaGraphLaunch(ge, s[0]));
  loom_op_end();

  CK(cudaStreamSynchronize(s[0]));
  CK(cudaStreamSynchronize(s[1]));
  CK(cudaDeviceSynchronize());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(ev));
  CK(cudaFree(managed));
  for (int i = 0; i < 2; i++) {
    CK(cudaStreamDestroy(s[i]));
    CK(cudaFree(d[i]));
    CK(cudaFreeHost(h[i]));
  }
  printf("app: done\n");
  return 0;
}
