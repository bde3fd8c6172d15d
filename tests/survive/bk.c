/*
 * bk.c - survive_bk MODE N M: a program with a device backend of its own
 * ("survbk", device type "survbk", through loom's plug-in ABI) that dies by
 * SIGKILL while `loom record --devices cpu,survbk` records it, for
 * tests/survive/survive.sh.
 *
 * It names its thread ("survivor main"), sets metadata with loom_meta_set
 * (survive_key=kept, survive_over=old then new, survive_gone set then
 * removed), then N times: a range "step" of 12 us around a runtime call
 * "survLaunch" (host, correlation i, 1 us) whose kernel "survKernel"
 * (device, queue "survq", correlation i, 3 us from 2 us after the call
 * began, arguments seq=i and note="k") the backend hands to loom at once.  M more kernels it keeps as a runtime keeps its
 * buffers, never handing them over: they are lost at death, unknown to
 * loom.  Then SIGKILL.
 *   MODE kill   as above
 *   MODE exit   the same, then a normal exit (the trace a live session
 *               writes, the M kernels in it)
 *   MODE child  a child forked without exec does it all (the parent has
 *               registered the backend); the parent waits and exits 0
 *   MODE bare   the N calls and kernels without the ranges around them (the
 *               process records nothing on its own: every record is the
 *               backend's, the last ones after any host record)
 *   MODE locked the program holds its "runtime's" lock, which the backend's
 *               flush takes, when SIGTERM comes (raise): the stop that the
 *               signal starts cannot finish while the handler waits
 */
#include <loom/loom.h>
#include <loom/plugin.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEV_OFFSET 5000000000ull /* device ticks = host ns + this */

static const loom_host *host;
static loom_backend *bk;
static loom_clock host_clk, dev_clk;
static uint32_t dev, queue;

static uint64_t raw_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static loom_status b_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  loom_arg props[1] = {{.key = "queues", .type = LOOM_ARG_INT, .v.i = 1}};
  loom_device_info info = {.struct_size = sizeof info, .name = "Survivor Device",
                           .vendor = "loom tests", .type = "accelerator",
                           .props = props, .nprops = 1};
  if (host->clock_declare(b, LOOM_CLOCK_MONOTONIC_RAW, "host", &host_clk) ||
      host->clock_declare(b, LOOM_CLOCK_DEVICE, "survivor clock", &dev_clk) ||
      host->clock_set_rate(b, dev_clk, 1.0) || host->device_add(b, &info, &dev) ||
      host->resource_add(b, dev, "survq", 7, &queue))
    return LOOM_EBACKEND;
  return LOOM_OK;
}

static loom_status b_start(loom_backend *b) {
  uint64_t raw = raw_now();
  bk = b;
  return host->clock_sync(b, dev_clk, raw + DEV_OFFSET, LOOM_CLOCK_MONOTONIC_RAW, raw);
}

static loom_status b_stop(loom_backend *b) {
  (void)b;
  bk = NULL;
  return LOOM_OK;
}

static int pending; /* kernels the "runtime" still buffers: handed over at flush */
static uint64_t pending_t;
static pthread_mutex_t rt_mu = PTHREAD_MUTEX_INITIALIZER; /* the "runtime's" lock */

static loom_status b_flush(loom_backend *b) {
  pthread_mutex_lock(&rt_mu); /* as a runtime's flush takes its lock */
  pthread_mutex_unlock(&rt_mu);
  for (; pending > 0; pending--) {
    /* ran before the program's work ended (after the last step's kernel):
     * work timed after the session's end would be outside it */
    uint64_t t = pending_t + DEV_OFFSET - (uint64_t)pending * 1000;
    loom_record k = {.struct_size = sizeof k, .kind = LOOM_KIND_KERNEL, .clock = dev_clk,
                     .device = dev, .resource = queue, .start = t, .end = t + 800,
                     .name = host->intern(b, "survPending", SIZE_MAX)};
    host->emit(b, &k);
  }
  return LOOM_OK;
}

static const loom_backend_ops ops = {
    .struct_size = sizeof ops, .abi_major = LOOM_ABI_MAJOR, .abi_minor = LOOM_ABI_MINOR,
    .name = "survbk", .device_type = "survbk",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_RUNTIME) | LOOM_KIND_BIT(LOOM_KIND_KERNEL),
    .configure = b_configure, .start = b_start, .stop = b_stop, .flush = b_flush};

/* One step: its call, and its kernel 2 us after the call began; the step
 * lasts 10 us so that neither overlaps the next step's. */
static void launch(uint64_t i) {
  uint64_t t0 = raw_now();
  loom_record call = {.struct_size = sizeof call, .kind = LOOM_KIND_RUNTIME,
                      .flags = LOOM_RECORD_F_LAUNCH, .clock = host_clk,
                      .device = LOOM_DEVICE_HOST, .start = t0, .end = t0 + 1000,
                      .name = host->intern(bk, "survLaunch", SIZE_MAX), .correlation = i + 1};
  host->emit(bk, &call);
  loom_arg args[2] = {{.key = "seq", .type = LOOM_ARG_UINT, .v.u = i},
                      {.key = "note", .type = LOOM_ARG_STRING, .v.s = "k"}};
  loom_record k = {.struct_size = sizeof k, .kind = LOOM_KIND_KERNEL, .clock = dev_clk,
                   .device = dev, .resource = queue, .start = t0 + DEV_OFFSET + 2000,
                   .end = t0 + DEV_OFFSET + 5000,
                   .name = host->intern(bk, "survKernel", SIZE_MAX), .correlation = i + 1,
                   .nargs = 2, .args = args};
  host->emit(bk, &k);
  while (raw_now() < t0 + 10000) {
  }
}

static void work(int n, int m, int die, int locked, int bare) {
  if (!bk) {
    fprintf(stderr, "survive_bk: the backend did not start (run under loom record "
                    "--devices cpu,survbk)\n");
    exit(2);
  }
  loom_thread_name(0, "survivor main");
  loom_meta_set("survive_key", "kept");
  loom_meta_set("survive_over", "old");
  loom_meta_set("survive_over", "new");
  loom_meta_set("survive_gone", "soon");
  loom_meta_set("survive_gone", NULL);
  for (int i = 0; i < n; i++) {
    if (!bare) {
      loom_range_push("step");
      /* the call starts 2 us into its step: the step is on the recorder's
       * clock and the call on CLOCK_MONOTONIC_RAW, whose conversions to the
       * timeline may differ by a little (more on a loaded machine); a call
       * placed before its step's start would not nest */
      for (uint64_t s = raw_now(); raw_now() < s + 2000;) {
      }
    }
    launch((uint64_t)i);
    if (!bare) loom_range_pop();
  }
  pending_t = raw_now();
  pending = m; /* never handed to loom: lost at death, not known to it */
  if (!die) return;
  if (locked) {
    pthread_mutex_lock(&rt_mu);
    raise(SIGTERM);
  }
  raise(SIGKILL);
}

#ifndef SURVIVE_BK_LIB /* tests/survive/test_bk.c takes the backend without main */
int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: survive_bk kill|exit|child|locked|bare N M\n");
    return 2;
  }
  int n = atoi(argv[2]), m = atoi(argv[3]);
  host = loom_host_get(LOOM_ABI_MAJOR);
  if (!host || host->backend_register(&ops, "survive_bk") != LOOM_OK) return 2;
  if (!strcmp(argv[1], "child")) {
    pid_t c = fork();
    if (c == 0) {
      work(n, m, 1, 0, 0);
      _exit(1);
    }
    int st = 0;
    waitpid(c, &st, 0);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
  }
  int die = strcmp(argv[1], "exit") != 0;
  work(n, m, die, !strcmp(argv[1], "locked"), !strcmp(argv[1], "bare"));
  return die;
}
#endif
