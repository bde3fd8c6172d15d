/*
 * bench_vulkan.c - what recording costs a Vulkan compute program, plain
 * against `loom record --devices cpu,vulkan`, alternating in the same run
 * (7 runs each; min and median):
 *   submit    ns per vkQueueSubmit of a command buffer holding one tiny
 *             dispatch (a queue wait every 32 submits, counted in);
 *   record    ns per vkCmdDispatch while recording a command buffer of
 *             DISPATCHES dispatches (the layer's timestamp writes around
 *             each);
 *   run       ns per dispatch to submit and wait for that command buffer
 *             (the device executing the timestamp writes too).
 * usage: bench_vulkan [SUBMITS [DISPATCHES]]   (default 4000 and 4000)
 *        bench_vulkan --child SUBMITS DISPATCHES  (the measured program)
 *        bench_vulkan alloc [PAIRS [ROUNDS]]  (default 20000, 9) what
 *          recording memory costs: PAIRS of vkAllocateMemory (4096 bytes)
 *          and vkFreeMemory, plain and under `loom record`, interleaved
 *          rounds; ns per pair (an allocation and its free: two memory
 *          records), min and median, of wall time and of the thread's CPU
 *          time, and the goal line of issue 36 (at most 100 ns added per
 *          allocation, on the thread's CPU time, median); with the floor of
 *          the same rounds: PAIRS pairs of loom's own host records
 *          (loom_memory_alloc/free) under `loom record`, no runtime
 *        bench_vulkan --child-floor N   (that floor's program)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include "memfloor.h"

#define OK(x) do { if ((x) != VK_SUCCESS) { fprintf(stderr, "bench_vulkan: %s failed\n", #x); exit(2); } } while (0)

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef struct ctx {
  VkDevice dev;
  VkQueue q;
  VkPipeline pipe;
  VkPipelineLayout layout;
  VkCommandPool pool;
} ctx;

static void setup(ctx *c) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  VkInstance inst;
  OK(vkCreateInstance(&ici, NULL, &inst));
  uint32_t n = 1;
  VkPhysicalDevice pd;
  if (vkEnumeratePhysicalDevices(inst, &n, &pd) < 0 || !n) {
    fprintf(stderr, "bench_vulkan: no Vulkan device\n");
    exit(2);
  }
  float prio = 1;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0,
                                 .queueCount = 1, .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  OK(vkCreateDevice(pd, &dci, NULL, &c->dev));
  vkGetDeviceQueue(c->dev, 0, 0, &c->q);
  /* a shader that does nothing (noop.comp): the cost measured is the layer's */
  static const uint32_t spv[] = {
#include "noop.spv.h"
  };
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = sizeof spv,
                                  .pCode = spv};
  VkShaderModule m;
  OK(vkCreateShaderModule(c->dev, &smi, NULL, &m));
  VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  OK(vkCreatePipelineLayout(c->dev, &pli, NULL, &c->layout));
  VkComputePipelineCreateInfo pci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, .layout = c->layout,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = m, .pName = "main"}};
  OK(vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &pci, NULL, &c->pipe));
  VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT};
  OK(vkCreateCommandPool(c->dev, &cpi, NULL, &c->pool));
}

static VkCommandBuffer cb_new(ctx *c) {
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = c->pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  VkCommandBuffer cb;
  OK(vkAllocateCommandBuffers(c->dev, &ai, &cb));
  return cb;
}

static void record(ctx *c, VkCommandBuffer cb, long dispatches) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  OK(vkBeginCommandBuffer(cb, &bi));
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe);
  for (long i = 0; i < dispatches; i++) vkCmdDispatch(cb, 1, 1, 1);
  OK(vkEndCommandBuffer(cb));
}

static void submit_wait(ctx *c, VkCommandBuffer cb) {
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  OK(vkQueueSubmit(c->q, 1, &si, VK_NULL_HANDLE));
  OK(vkQueueWaitIdle(c->q));
}

static int child(long submits, long dispatches) {
  ctx c;
  setup(&c);
  VkCommandBuffer one = cb_new(&c), many = cb_new(&c);
  record(&c, one, 1);
  submit_wait(&c, one); /* warm up */
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &one};
  double t0 = now_ns();
  for (long i = 0; i < submits; i++) {
    /* one command buffer may not be pending twice: wait before each reuse */
    OK(vkQueueSubmit(c.q, 1, &si, VK_NULL_HANDLE));
    OK(vkQueueWaitIdle(c.q));
  }
  double t1 = now_ns();
  record(&c, many, dispatches);
  double t2 = now_ns();
  submit_wait(&c, many);
  double t3 = now_ns();
  printf("%.1f %.1f %.1f\n", (t1 - t0) / submits, (t2 - t1) / dispatches, (t3 - t2) / dispatches);
  vkDeviceWaitIdle(c.dev);
  return 0;
}

static double thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* PAIRS vkAllocateMemory + vkFreeMemory of 4096 bytes of memory type 0;
 * prints wall and thread CPU ns per pair (twice: run() reads three). */
static int child_alloc(long n) {
  ctx c;
  setup(&c);
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .allocationSize = 4096, .memoryTypeIndex = 0};
  VkDeviceMemory m;
  for (int i = 0; i < 64; i++) { /* warm up: the first describes the device to loom */
    OK(vkAllocateMemory(c.dev, &ai, NULL, &m));
    vkFreeMemory(c.dev, m, NULL);
  }
  double t0 = now_ns(), c0 = thread_ns();
  for (long i = 0; i < n; i++) {
    OK(vkAllocateMemory(c.dev, &ai, NULL, &m));
    vkFreeMemory(c.dev, m, NULL);
  }
  double t = now_ns() - t0, ct = thread_ns() - c0;
  printf("%.1f %.1f %.1f\n", t / n, ct / n, ct / n);
  return 0;
}

/* The floor (memfloor.h): the same figures. */
static int child_floor(long n) {
  memfloor f;
  if (memfloor_run(n, 4096, &f)) return 3;
  printf("%.1f %.1f %.1f\n", f.wall, f.thread, f.cpu);
  return 0;
}

static int run(const char *cmd, double v[3]) {
  FILE *f = popen(cmd, "r");
  int ok = f && fscanf(f, "%lf %lf %lf", &v[0], &v[1], &v[2]) == 3;
  if (f) ok = pclose(f) == 0 && ok;
  return ok;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define RUNS 7

/* bench_vulkan alloc [PAIRS [ROUNDS]]: plain and under loom record, in
 * interleaved rounds. */
static int alloc_main(int argc, char **argv) {
  long n = argc > 2 ? atol(argv[2]) : 20000;
  int rounds = argc > 3 ? atoi(argv[3]) : 9;
  if (n < 1 || rounds < 1 || rounds > 101) {
    fprintf(stderr, "usage: bench_vulkan alloc [PAIRS >= 1 [ROUNDS 1..101]]\n");
    return 2;
  }
  char self[512], cmd[3][1536], trace[64];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) return 1;
  self[k] = 0;
  snprintf(trace, sizeof trace, "/tmp/bench_vulkan_alloc.%d.json", (int)getpid());
  snprintf(cmd[0], sizeof cmd[0], "'%s' --child-alloc %ld", self, n);
  snprintf(cmd[1], sizeof cmd[1],
           "'%s' record --devices cpu,vulkan -o %s -- '%s' --child-alloc %ld 2>/dev/null",
           LOOM_BIN, trace, self, n);
  snprintf(cmd[2], sizeof cmd[2], "'%s' record -o %s -- '%s' --child-floor %ld 2>/dev/null",
           LOOM_BIN, trace, self, n);
  static double v[3][2][101]; /* way (plain, loom, floor), metric (wall, thread CPU), round */
  for (int r = 0; r < rounds; r++)
    for (int w = 0; w < 3; w++) {
      double x[3];
      if (!run(cmd[w], x)) {
        fprintf(stderr, "bench_vulkan: a run failed (is a Vulkan driver installed?)\n");
        return 1;
      }
      v[w][0][r] = x[0], v[w][1][r] = x[1];
    }
  remove(trace);
  double mn[3][2], md[3][2];
  for (int w = 0; w < 3; w++)
    for (int m = 0; m < 2; m++) {
      qsort(v[w][m], (size_t)rounds, sizeof v[w][m][0], cmp);
      mn[w][m] = v[w][m][0];
      md[w][m] = rounds % 2 ? v[w][m][rounds / 2]
                            : (v[w][m][rounds / 2 - 1] + v[w][m][rounds / 2]) / 2;
    }
  static const char *metric[2] = {"wall time", "CPU time, the thread"};
  printf("Vulkan, %ld vkAllocateMemory (4096 bytes) + vkFreeMemory, %d interleaved rounds;\n"
         "ns per allocation and its free, min / median:\n", n, rounds);
  for (int m = 0; m < 2; m++)
    printf("%s\n  %-26s %8.1f / %8.1f\n  %-26s %8.1f / %8.1f\n  %-26s %8.1f / %8.1f\n",
           metric[m], "without loom", mn[0][m], md[0][m], "under loom record", mn[1][m], md[1][m],
           "added by loom", mn[1][m] - mn[0][m], md[1][m] - md[0][m]);
  printf("floor: two of loom's own memory records (loom_memory_alloc/free) per pair under loom\n"
         "record, no runtime, the thread's CPU time  %8.1f / %8.1f\n", mn[2][1], md[2][1]);
  double added = md[1][1] - md[0][1];
  printf("goal alloc_cost: %.0f ns (target 100 ns) %s\n", added, added <= 100 ? "met" : "missed");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 3 && !strcmp(argv[1], "--child")) return child(atol(argv[2]), atol(argv[3]));
  if (argc > 2 && !strcmp(argv[1], "--child-alloc")) return child_alloc(atol(argv[2]));
  if (argc > 2 && !strcmp(argv[1], "--child-floor")) return child_floor(atol(argv[2]));
  if (argc > 1 && !strcmp(argv[1], "alloc")) return alloc_main(argc, argv);
  long submits = argc > 1 ? atol(argv[1]) : 4000, dispatches = argc > 2 ? atol(argv[2]) : 4000;
  char self[512], plain[1024], rec[2048], trace[64];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0 || submits <= 0 || dispatches <= 0) return 1;
  self[k] = 0;
  snprintf(trace, sizeof trace, "/tmp/bench_vulkan.%d.json", (int)getpid());
  snprintf(plain, sizeof plain, "'%s' --child %ld %ld", self, submits, dispatches);
  snprintf(rec, sizeof rec, "'%s' record --devices cpu,vulkan -o %s -- '%s' --child %ld %ld 2>/dev/null",
           LOOM_BIN, trace, self, submits, dispatches);
  double p[3][RUNS], r[3][RUNS];
  for (int i = 0; i < RUNS; i++) {
    double a[3], b[3];
    if (!run(plain, a) || !run(rec, b)) {
      fprintf(stderr, "bench_vulkan: a run failed (is a Vulkan driver installed?)\n");
      return 1;
    }
    for (int m = 0; m < 3; m++) p[m][i] = a[m], r[m][i] = b[m];
  }
  remove(trace);
  static const char *const what[3] = {"per vkQueueSubmit (+ wait)", "per recorded dispatch",
                                      "per dispatch run"};
  printf("Vulkan on this machine: %ld submits of one dispatch, one command buffer of %ld dispatches;\n"
         "%d runs each, alternating (ns):\n", submits, dispatches, RUNS);
  printf("  %-28s %10s %10s %10s %10s %10s %7s\n", "", "plain min", "loom min", "plain med", "loom med",
         "added med", "ratio");
  for (int m = 0; m < 3; m++) {
    qsort(p[m], RUNS, sizeof p[m][0], cmp);
    qsort(r[m], RUNS, sizeof r[m][0], cmp);
    double pm = p[m][RUNS / 2], rm = r[m][RUNS / 2];
    printf("  %-28s %10.1f %10.1f %10.1f %10.1f %10.1f %6.2fx\n", what[m], p[m][0], r[m][0], pm, rm, rm - pm,
           rm / pm);
  }
  return 0;
}
