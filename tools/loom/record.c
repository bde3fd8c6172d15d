/*
 * record.c - `loom record [-o FILE] [--devices LIST] [--duration SEC]
 *            [--option K=V] -- PROGRAM ARGS...`
 *
 * Runs an unmodified program with loom injected: loom-preload.so through
 * LD_PRELOAD (the host part: it records and writes the trace when the
 * program ends), and the OpenCL layer through OPENCL_LAYERS (also loaded as a
 * plug-in, so its backend is registered before the session starts).
 * SIGINT and SIGTERM are forwarded to the program; its exit status (or the
 * signal that ended it) is passed through.  Every process the program starts
 * records too (follow.c); prints a summary.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "follow.h"
#include "loom/loom.h"

static pid_t child;

static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

/* The folder holding loom's injected libraries: LOOM_LIBEXEC, else the
 * build tree's plugins/ next to this binary, else <prefix>/lib/loom (or lib64, lib/<arch>). */
static int find_libdir(char *out, size_t n) {
  const char *env = getenv("LOOM_LIBEXEC");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return 0;
  }
  char exe[PATH_MAX - 64];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k <= 0) return -1;
  exe[k] = 0;
  char *dir = dirname(exe);
  const char *cands[] = {"%s/plugins", "%s/../lib/loom", "%s/../lib64/loom",
                         "%s/../lib/x86_64-linux-gnu/loom"};
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
    char p[PATH_MAX + 64], probe[PATH_MAX + 128];
    snprintf(p, sizeof p, cands[i], dir);
    snprintf(probe, sizeof probe, "%s/loom-preload.so", p);
    if (access(probe, R_OK) == 0) {
      char *real = realpath(p, NULL);
      const char *use = real ? real : p;
      int fits = strlen(use) < n;
      if (fits) memcpy(out, use, strlen(use) + 1);
      free(real);
      return fits ? 0 : -1;
    }
  }
  return -1;
}

static void prepend_env(const char *name, const char *value, char sep) {
  const char *old = getenv(name);
  if (!old || !*old) {
    setenv(name, value, 1);
    return;
  }
  size_t n = strlen(old) + strlen(value) + 2;
  char *v = malloc(n);
  snprintf(v, n, "%s%c%s", value, sep, old);
  setenv(name, v, 1);
  free(v);
}

static int usage(void) {
  fprintf(stderr, "usage: loom record [-o FILE|DIR/] [--follow none|exec|all] [--devices LIST]\n"
                  "                   [--duration SECONDS] [--option KEY=VALUE]... -- PROGRAM [ARGS...]\n"
                  "  -o FILE          trace to write (.json, .json.gz, .pftrace), every process\n"
                  "                   merged into it; default loom-PROGRAM.json\n"
                  "  -o DIR/          one trace per process: DIR/PROGRAM-PID[-rankR].json\n"
                  "  --follow MODE    processes to record: all (default; also children forked\n"
                  "                   without exec), exec (those that exec'ed), none (PROGRAM)\n"
                  "  --devices LIST   device types to record (default cpu,opencl, and cuda\n"
                  "                   where a CUDA driver is installed, xpu where a\n"
                  "                   Level Zero driver is)\n"
                  "  --duration SEC   stop recording after SEC seconds\n"
                  "  --option K=V     session option (repeatable)\n");
  return 2;
}

int cmd_record(int argc, char **argv) {
  const char *out = NULL, *devices = NULL, *duration = NULL, *follow = "all";
  char options[4096] = "";
  int i = 2;
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "--")) {
      i++;
      break;
    }
    if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--devices") && i + 1 < argc) devices = argv[++i];
    else if (!strcmp(argv[i], "--follow") && i + 1 < argc) follow = argv[++i];
    else if (!strcmp(argv[i], "--duration") && i + 1 < argc) duration = argv[++i];
    else if (!strcmp(argv[i], "--option") && i + 1 < argc) {
      size_t l = strlen(options);
      snprintf(options + l, sizeof options - l, "%s%s", l ? "," : "", argv[++i]);
    } else if (argv[i][0] == '-') return usage();
    else break; /* the program, without "--" */
  }
  if (i >= argc) return usage();
  if (duration && !(atof(duration) > 0)) {
    fprintf(stderr, "loom record: --duration needs a positive number of seconds\n");
    return 2;
  }
  char libdir[PATH_MAX];
  if (find_libdir(libdir, sizeof libdir) != 0) {
    fprintf(stderr, "loom record: cannot find loom-preload.so (set LOOM_LIBEXEC to its folder)\n");
    return 2;
  }
  char preload[PATH_MAX + 32], layer[PATH_MAX + 32], outbuf[PATH_MAX];
  snprintf(preload, sizeof preload, "%s/loom-preload.so", libdir);
  snprintf(layer, sizeof layer, "%s/libloom-opencl.so", libdir);
  char cupti[PATH_MAX + 32];
  snprintf(cupti, sizeof cupti, "%s/libloom-cupti.so", libdir);
  if (!out) {
    char *prog = strdup(argv[i]);
    snprintf(outbuf, sizeof outbuf, "loom-%s.json", basename(prog));
    free(prog);
    out = outbuf;
  }
  loom_follow fw;
  if (loom__follow_setup(&fw, out, follow) != 0) return 2;
  prepend_env("LD_PRELOAD", preload, ':');
  if (access(layer, R_OK) == 0) {
    prepend_env("OPENCL_LAYERS", layer, ':');
    prepend_env("LOOM_PLUGINS", layer, ':');
  }
  /* By default: the host, OpenCL, and CUDA where a CUDA driver is installed
   * (asking for it elsewhere would only warn that there is none). */
  char default_devices[64] = "cpu,opencl";
  if (!devices) {
    void *drv = access(cupti, R_OK) == 0 ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) : NULL;
    if (drv) {
      strcat(default_devices, ",cuda");
      dlclose(drv);
    }
    /* Level Zero (xpu): where a driver is installed or named (an alternate
     * driver through ZE_ENABLE_ALT_DRIVERS). */
    char zeplug[PATH_MAX + 32];
    snprintf(zeplug, sizeof zeplug, "%s/libloom-levelzero.so", libdir);
    if (access(zeplug, R_OK) == 0) {
      const char *alt = getenv("ZE_ENABLE_ALT_DRIVERS");
      void *zd = alt && *alt ? NULL : dlopen("libze_intel_gpu.so.1", RTLD_LAZY | RTLD_LOCAL);
      if ((alt && *alt) || zd) strcat(default_devices, ",xpu");
      if (zd) dlclose(zd);
    }
    devices = default_devices;
  }
  if (access(cupti, R_OK) == 0) { /* CUDA: a plug-in and the driver's injection */
    prepend_env("LOOM_PLUGINS", cupti, ':');
    setenv("CUDA_INJECTION64_PATH", cupti, 0);
  }
  /* Annotation APIs: loom is the ITT collector and the NVTX tool (unless the
   * user chose others); both are plug-ins too, so their backends are
   * registered before the session starts.  The PyTorch adapter is preloaded:
   * it stays inert until the program loads libtorch. */
  char annot[PATH_MAX + 32];
  snprintf(annot, sizeof annot, "%s/libloom-itt.so", libdir);
  if (access(annot, R_OK) == 0) {
    prepend_env("LOOM_PLUGINS", annot, ':');
    setenv("INTEL_LIBITTNOTIFY64", annot, 0);
  }
  snprintf(annot, sizeof annot, "%s/libloom-nvtx.so", libdir);
  if (access(annot, R_OK) == 0) {
    prepend_env("LOOM_PLUGINS", annot, ':');
    setenv("NVTX_INJECTION64_PATH", annot, 0);
  }
  snprintf(annot, sizeof annot, "%s/loom-pytorch.so", libdir);
  if (access(annot, R_OK) == 0) prepend_env("LD_PRELOAD", annot, ':');
  /* Level Zero: a plug-in on the loader's tracing layer, which the loader
   * only enables when this is set before the program starts. */
  char levelzero[PATH_MAX + 32];
  snprintf(levelzero, sizeof levelzero, "%s/libloom-levelzero.so", libdir);
  if (access(levelzero, R_OK) == 0) {
    prepend_env("LOOM_PLUGINS", levelzero, ':');
    setenv("ZE_ENABLE_TRACING_LAYER", "1", 0);
  }
  setenv("LOOM_RECORD_OUTPUT", out, 1);
  setenv("LOOM_RECORD_DEVICES", devices, 1);
  setenv("LOOM_RECORD_NAME", argv[i], 1);
  if (*options) setenv("LOOM_RECORD_OPTIONS", options, 1);
  if (duration) setenv("LOOM_RECORD_DURATION", duration, 1);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  child = fork();
  if (child < 0) {
    perror("loom record: fork");
    rmdir(fw.dir);
    return 2;
  }
  if (child == 0) {
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("LOOM_RECORD_PID", pid, 1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "loom record: cannot run %s: %s\n", argv[i], strerror(errno));
    _exit(127);
  }
  int status = loom__follow_wait(&fw, child);
  loom__follow_finish(&fw, argv[i], status, child);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    kill(getpid(), sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
