/*
 * zeapp.c - an ordinary Level Zero program (it knows nothing of loom), linked
 * against libze_loader, used by tests/test_levelzero.c.  It prints a checksum
 * of its results so runs with and without loom can be compared.
 *
 * usage: zeapp [KERNELS [SLEEP_MS [RUNS]]]
 *   RUNS: how many times the queue executes the regular list (default 1);
 *   the program resets its own event before each further run.
 *   SLEEP_MS: sleeps that long before and after the work (so a device clock
 *   that drifts against the host drifts measurably meanwhile).
 *   An immediate command list: copy in, KERNELS x "scale", fill, barrier,
 *   copy out.  Then a regular command list executed on a command queue:
 *   copy in, "square", "scale" signalling an event of the program's own
 *   (from a pool without timestamps, waited on with zeEventHostSynchronize),
 *   fill, barrier, copy out; zeCommandQueueSynchronize.
 */
#include <level_zero/ze_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                              \
  do {                                                                        \
    ze_result_t r_ = (x);                                                     \
    if (r_ != ZE_RESULT_SUCCESS) {                                            \
      fprintf(stderr, "%s:%d: %s = 0x%x\n", __FILE__, __LINE__, #x, (unsigned)r_); \
      exit(2);                                                                \
    }                                                                         \
  } while (0)

enum { N = 4096 };

int main(int argc, char **argv) {
  int kernels = argc > 1 ? atoi(argv[1]) : 3;
  long sleep_ms = argc > 2 ? atol(argv[2]) : 0;
  int runs = argc > 3 ? atoi(argv[3]) : 1;
  struct timespec nap = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
  if (sleep_ms) nanosleep(&nap, NULL);
  ze_result_t r = zeInit(0);
  if (r != ZE_RESULT_SUCCESS) {
    fprintf(stderr, "zeInit: 0x%x\n", (unsigned)r);
    return 3;
  }
  uint32_t n = 1;
  ze_driver_handle_t drv;
  CHECK(zeDriverGet(&n, &drv));
  n = 1;
  ze_device_handle_t dev;
  CHECK(zeDeviceGet(drv, &n, &dev));
  ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
  ze_context_handle_t ctx;
  CHECK(zeContextCreate(drv, &cd, &ctx));
  ze_module_desc_t md = {.stype = ZE_STRUCTURE_TYPE_MODULE_DESC, .format = ZE_MODULE_FORMAT_IL_SPIRV,
                         .inputSize = 4, .pInputModule = (const uint8_t *)"SPIR"};
  ze_module_handle_t mod;
  CHECK(zeModuleCreate(ctx, dev, &md, &mod, NULL));
  ze_kernel_desc_t kd = {.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC, .pKernelName = "scale"};
  ze_kernel_handle_t scale, square;
  CHECK(zeKernelCreate(mod, &kd, &scale));
  kd.pKernelName = "square";
  CHECK(zeKernelCreate(mod, &kd, &square));
  CHECK(zeKernelSetGroupSize(scale, 64, 1, 1));
  CHECK(zeKernelSetGroupSize(square, 32, 2, 1));

  ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
  void *buf;
  CHECK(zeMemAllocDevice(ctx, &dd, N * sizeof(float), 64, dev, &buf));
  CHECK(zeKernelSetArgumentValue(scale, 0, sizeof buf, &buf));
  CHECK(zeKernelSetArgumentValue(square, 0, sizeof buf, &buf));
  float *host = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) host[i] = (float)i;
  float pattern = 1.5f;
  ze_group_count_t g1 = {N / 64, 1, 1}, g2 = {N / 64, 1, 1};

  /* immediate command list */
  ze_command_queue_desc_t qd = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                .mode = ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS};
  ze_command_list_handle_t imm;
  CHECK(zeCommandListCreateImmediate(ctx, dev, &qd, &imm));
  CHECK(zeCommandListAppendMemoryCopy(imm, buf, host, N * sizeof(float), NULL, 0, NULL));
  for (int k = 0; k < kernels; k++) CHECK(zeCommandListAppendLaunchKernel(imm, scale, &g1, NULL, 0, NULL));
  CHECK(zeCommandListAppendMemoryFill(imm, buf, &pattern, sizeof pattern, 256 * sizeof(float), NULL, 0, NULL));
  CHECK(zeCommandListAppendBarrier(imm, NULL, 0, NULL));
  CHECK(zeCommandListAppendMemoryCopy(imm, host, buf, N * sizeof(float), NULL, 0, NULL));
  double sum1 = 0;
  for (int i = 0; i < N; i++) sum1 += host[i];

  /* regular command list on a queue, one event of the program's own */
  ze_event_pool_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                             .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE, .count = 2};
  ze_event_pool_handle_t pool;
  CHECK(zeEventPoolCreate(ctx, &pd, 1, &dev, &pool));
  ze_event_desc_t ed = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC, .index = 0,
                        .signal = ZE_EVENT_SCOPE_FLAG_HOST, .wait = ZE_EVENT_SCOPE_FLAG_HOST};
  ze_event_handle_t ev;
  CHECK(zeEventCreate(pool, &ed, &ev));
  qd.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  ze_command_queue_handle_t q;
  CHECK(zeCommandQueueCreate(ctx, dev, &qd, &q));
  ze_command_list_desc_t ld = {.stype = ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC};
  ze_command_list_handle_t list;
  CHECK(zeCommandListCreate(ctx, dev, &ld, &list));
  CHECK(zeCommandListAppendMemoryCopy(list, buf, host, N * sizeof(float), NULL, 0, NULL));
  CHECK(zeCommandListAppendLaunchKernel(list, square, &g2, NULL, 0, NULL));
  CHECK(zeCommandListAppendLaunchKernel(list, scale, &g1, ev, 0, NULL));
  CHECK(zeCommandListAppendMemoryFill(list, buf, &pattern, sizeof pattern, 128 * sizeof(float), NULL, 0, NULL));
  CHECK(zeCommandListAppendBarrier(list, NULL, 0, NULL));
  CHECK(zeCommandListAppendMemoryCopy(list, host, buf, N * sizeof(float), NULL, 0, NULL));
  CHECK(zeCommandListClose(list));
  for (int run = 0; run < runs; run++) {
    if (run) CHECK(zeEventHostReset(ev));
    CHECK(zeCommandQueueExecuteCommandLists(q, 1, &list, NULL));
    CHECK(zeEventHostSynchronize(ev, UINT64_MAX));
    CHECK(zeCommandQueueSynchronize(q, UINT64_MAX));
  }
  double sum2 = 0;
  for (int i = 0; i < N; i++) sum2 += host[i];
  printf("zeapp: %d kernels, checksums %.1f %.1f\n", kernels, sum1, sum2);

  if (sleep_ms) nanosleep(&nap, NULL);
  CHECK(zeEventDestroy(ev));
  CHECK(zeEventPoolDestroy(pool));
  CHECK(zeCommandListDestroy(list));
  CHECK(zeCommandListDestroy(imm));
  CHECK(zeCommandQueueDestroy(q));
  CHECK(zeMemFree(ctx, buf));
  CHECK(zeKernelDestroy(scale));
  CHECK(zeKernelDestroy(square));
  CHECK(zeModuleDestroy(mod));
  CHECK(zeContextDestroy(ctx));
  free(host);
  return 0;
}
