/*
 * record.c - `loom record [-o FILE] [--devices LIST] [--duration SEC]
 *            [--option K=V] [--plugin PATH] -- PROGRAM ARGS...`
 *
 * Runs an unmodified program with loom injected: loom-preload.so through
 * LD_PRELOAD (the host part: it records and writes the trace when the
 * program ends), and every plug-in found, enabled as its backend's table
 * says (enable.c).
 * SIGINT and SIGTERM are forwarded to the program; its exit status (or the
 * signal that ended it) is passed through.  Every process the program starts
 * records too (follow.c); prints a summary.
 */
#define _GNU_SOURCE
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

#include "enable.h"
#include "follow.h"
#include "loom/loom.h"

static pid_t child;

static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

static int usage(void) {
  fprintf(stderr, "usage: loom record [-o FILE|DIR/] [--follow none|exec|all] [--devices LIST]\n"
                  "                   [--duration SECONDS] [--option KEY=VALUE]... [--plugin PATH]...\n"
                  "                   -- PROGRAM [ARGS...]\n"
                  "  -o FILE          trace to write (.json, .json.gz, .pftrace), every process\n"
                  "                   merged into it; default loom-PROGRAM.json\n"
                  "  -o DIR/          one trace per process: DIR/PROGRAM-PID[-rankR].json\n"
                  "  --follow MODE    processes to record: all (default; also children forked\n"
                  "                   without exec), exec (those that exec'ed), none (PROGRAM)\n"
                  "  --devices LIST   device types to record (default: cpu and each plug-in's\n"
                  "                   type that asks to be recorded by default where its\n"
                  "                   runtime is installed; `loom backends` shows which)\n"
                  "  --duration SEC   stop recording after SEC seconds\n"
                  "  --option K=V     session option (repeatable)\n"
                  "  --plugin PATH    load this plug-in too (repeatable); the installed ones,\n"
                  "                   LOOM_PLUGIN_PATH folders and LOOM_PLUGINS files always load\n");
  return 2;
}

int cmd_record(int argc, char **argv) {
  const char *out = NULL, *devices = NULL, *duration = NULL, *follow = "all";
  char options[4096] = "";
  char *plugins[64];
  size_t nplugins = 0;
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
    else if (!strcmp(argv[i], "--plugin") && i + 1 < argc) {
      if (nplugins == sizeof plugins / sizeof plugins[0]) {
        fprintf(stderr, "loom record: more than %zu --plugin options\n", nplugins);
        return 2;
      }
      plugins[nplugins++] = argv[++i];
    }
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
  if (tool_libdir(libdir, sizeof libdir) != 0) {
    fprintf(stderr, "loom record: cannot find loom-preload.so (set LOOM_LIBEXEC to its folder)\n");
    return 2;
  }
  char preload[PATH_MAX + 32], outbuf[PATH_MAX], default_devices[1024];
  snprintf(preload, sizeof preload, "%s/loom-preload.so", libdir);
  if (!out) {
    char *prog = strdup(argv[i]);
    snprintf(outbuf, sizeof outbuf, "loom-%s.json", basename(prog));
    free(prog);
    out = outbuf;
  }
  loom_follow fw;
  if (loom__follow_setup(&fw, out, follow) != 0) return 2;
  /* Every plug-in, enabled in the program as its backend's table says. */
  plugin_set found = {0};
  int bad = plugins_discover(&found, libdir, plugins, nplugins, "loom record");
  if (bad || plugins_enable(&found, preload, default_devices, sizeof default_devices) != 0) {
    plugins_free(&found);
    rmdir(fw.dir);
    return 2;
  }
  plugins_free(&found);
  if (!devices) devices = default_devices;
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
