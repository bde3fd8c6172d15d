/*
 * nvtxapp.c - an ordinary program instrumented with NVTX v3 (header-only):
 * what a CUDA library or a framework does.  It knows nothing of loom.
 *   nvtxapp [N]   main: range "outer" around N x { push "step", mark "tick",
 *                 pop }; a domain "app.io" with a registered string range and
 *                 a mark; a wide-string range; a start/end range begun here
 *                 and ended by a worker thread, which also pushes "worker"
 *                 ranges; category names (category 7 "compute" on the
 *                 steps, the domain's category 3 "disk" on its range and
 *                 mark) and the worker's thread name "nvtx worker".
 *   nvtxapp N deep  also 300 nested "level" ranges at the end.
 * Prints what it did, so runs with and without loom can be compared.
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static nvtxRangeId_t across;

static void *worker(void *arg) {
  (void)arg;
  nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "nvtx worker");
  for (int i = 0; i < 2; i++) {
    nvtxRangePushA("worker");
    nvtxRangePop();
  }
  nvtxRangeEnd(across);
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3;
  nvtxNameCategoryA(7, "compute");
  nvtxRangePushA("outer");
  for (int i = 0; i < n; i++) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 7;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "step";
    nvtxRangePushEx(&a);
    nvtxMarkA("tick");
    nvtxRangePop();
  }
  nvtxRangePop();

  nvtxDomainHandle_t d = nvtxDomainCreateA("app.io");
  nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "read");
  nvtxDomainNameCategoryA(d, 3, "disk");
  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 3;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = s;
  nvtxDomainRangePushEx(d, &a);
  nvtxDomainMarkEx(d, &a);
  nvtxDomainRangePop(d);

  nvtxRangePushW(L"wide");
  nvtxRangePop();

  across = nvtxRangeStartA("across");
  pthread_t th;
  pthread_create(&th, NULL, worker, NULL);
  pthread_join(th, NULL);
  nvtxDomainDestroy(d);
  if (argc > 2 && !strcmp(argv[2], "deep")) {
    for (int i = 0; i < 300; i++) nvtxRangePushA("level");
    for (int i = 0; i < 300; i++) nvtxRangePop();
  }
  printf("nvtxapp: %d steps\n", n);
  return 0;
}
