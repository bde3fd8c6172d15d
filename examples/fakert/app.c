/*
 * app.c - fakert-app: a program that uses the fake runtime, and nothing of
 * loom.  It loads the runtime itself, as frameworks load device runtimes:
 *
 *   fakert-app [--late] [STEPS]
 *
 * Each of STEPS (default 3) steps: an upload (HtoD, 1 MiB) on queue "copy";
 * kernels fill, scale and reduce on queue "compute"; a device-to-device copy
 * (256 KiB) and a download (DtoH, 64 KiB) on "copy"; each batch finished.
 * With --late it first does 200 ms of host work only, then loads the runtime
 * (which loads its tools, FRT_TOOLS), and prints the CLOCK_REALTIME ns of
 * the load: "fakert-app: runtime loaded at NS".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakert.h"

static struct {
  int (*init)(void);
  frt_queue *(*queue_create)(const char *);
  uint64_t (*kernel)(frt_queue *, const char *, uint32_t);
  uint64_t (*copy)(frt_queue *, enum frt_dir, uint64_t);
  void (*finish)(frt_queue *);
} frt;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int load_runtime(void) {
  void *h = dlopen("libfakert.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "fakert-app: %s\n", dlerror());
    return -1;
  }
#define SYM(field, name) *(void **)&frt.field = dlsym(h, name)
  SYM(init, "frt_init");
  SYM(queue_create, "frt_queue_create");
  SYM(kernel, "frt_enqueue_kernel");
  SYM(copy, "frt_enqueue_copy");
  SYM(finish, "frt_finish");
  return frt.init && frt.queue_create && frt.kernel && frt.copy && frt.finish ? 0 : -1;
}

int main(int argc, char **argv) {
  int late = argc > 1 && !strcmp(argv[1], "--late");
  int steps = argc > 1 + late ? atoi(argv[1 + late]) : 3;
  if (late) { /* host work only: nothing for a device profiler to see */
    volatile double x = 0;
    for (double t0 = now_s(); now_s() - t0 < 0.2;) x += 1;
  }
  if (load_runtime() || frt.init()) return 1;
  if (late) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("fakert-app: runtime loaded at %lld\n",
           (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec);
  }
  frt_queue *compute = frt.queue_create("compute"), *copy = frt.queue_create("copy");
  for (int s = 0; s < steps; s++) {
    frt.copy(copy, FRT_HTOD, 1 << 20);
    frt.finish(copy);
    frt.kernel(compute, "fill", 200);
    frt.kernel(compute, "scale", 300);
    frt.kernel(compute, "reduce", 100);
    frt.finish(compute);
    frt.copy(copy, FRT_DTOD, 256 << 10);
    frt.copy(copy, FRT_DTOH, 64 << 10);
    frt.finish(copy);
  }
  printf("fakert-app: %d steps done\n", steps);
  return 0;
}
