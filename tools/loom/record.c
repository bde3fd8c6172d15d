/*
 * record.c - `loom record [options] -- PROGRAM ARGS...` (options:
 * record_opts.c)
 *
 * Runs an unmodified program with loom injected: loom-preload.so through
 * LD_PRELOAD (the host part: it records and writes the trace when the
 * program ends), and every plug-in found, enabled as its backend's table
 * says (enable.c).
 * SIGINT, SIGTERM and SIGHUP are forwarded to the program; its exit status
 * (or the signal that ended it) is passed through, or 74 when the program
 * succeeded and its trace could not be written (the records are kept for
 * `loom salvage`, follow.c).  The output is checked before the program
 * starts.  Every process the program starts records too (follow.c); prints
 * a summary.
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
#include "mapsnap.h"
#include "loom/loom.h"
#include "record_opts.h"

static pid_t child;
/* Passed on to the program; loom record goes on to collect its traces. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
/* The exit status when the program succeeded but its trace could not be
 * written (kept for `loom salvage`): EX_IOERR. */
#define LOOM_RECORD_KEPT 74

static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

/* A backend's option ("NAME.KEY") names a backend loom knows (checked once
 * the plug-ins are loaded). */
typedef struct ns_check {
  const char *ns;
  size_t len;
  int found;
  char names[512];
} ns_check;

static void match_backend(const loom_backend_info *b, void *user) {
  ns_check *c = user;
  if (strlen(b->name) == c->len && !strncmp(b->name, c->ns, c->len)) c->found = 1;
  size_t l = strlen(c->names);
  snprintf(c->names + l, sizeof c->names - l, "%s%s", l ? ", " : "", b->name);
}

static int check_namespaces(const char *options) {
  for (const char *p = options; *p;) {
    size_t n = strcspn(p, ",;");
    const char *eq = memchr(p, '=', n), *dot = eq ? memchr(p, '.', (size_t)(eq - p)) : NULL;
    while (dot && p < dot && (*p == ' ' || *p == '\t')) p++, n--;
    if (dot && !(dot - p == 4 && !strncmp(p, "meta", 4))) {
      ns_check c = {p, (size_t)(dot - p), 0, ""};
      loom_backends_list(match_backend, &c);
      if (!c.found) {
        fprintf(stderr, "loom record: option '%.*s': no backend is named '%.*s' (backends: %s; "
                "meta.KEY adds trace metadata)\n", (int)(eq - p), p, (int)c.len, p, c.names);
        return 2;
      }
    }
    p += n;
    if (*p) p++;
  }
  return 0;
}

/* The core checks the session options (window options among them) the way
 * the program's session will, so a mistake is told before it starts. */
static int check_options(const char *options) {
  if (!*options) return 0;
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = options};
  loom_session *s = NULL;
  if (loom_session_create(&cfg, &s) != LOOM_OK) {
    fprintf(stderr, "loom record: %s\n", loom_last_error());
    return 2;
  }
  loom_session_destroy(s);
  return 0;
}

/* The output: -o, else loom-PROGRAM.json; to_dir: a folder (-o DIR/, or
 * one that exists).  NULL after a message when -o FILE cannot be written. */
static const char *record_output(const record_opts *ro, char **argv, char *buf, size_t n,
                                 int *to_dir) {
  const char *out = ro->out;
  if (!out) {
    char *prog = strdup(argv[ro->prog]);
    snprintf(buf, n, "loom-%s.json", basename(prog));
    free(prog);
    out = buf;
  }
  struct stat ost;
  size_t olen = strlen(out);
  *to_dir = (olen && out[olen - 1] == '/') || (stat(out, &ost) == 0 && S_ISDIR(ost.st_mode));
  if (!*to_dir && record_opts_check_out(out, 0)) return NULL;
  return out;
}

/* Every plug-in, enabled in the program as its backend's table says, and
 * the options checked with every plug-in registered (their declared
 * options too); default_devices: what they serve.  0, or 2 after a
 * message. */
static int record_plugins(const record_opts *ro, const char *libdir, const char *preload,
                          const char *also, char *default_devices, size_t n) {
  plugin_set found = {0};
  int bad = plugins_discover(&found, libdir, (char *const *)ro->plugins, ro->nplugins,
                             "loom record");
  if (!bad && (check_namespaces(ro->options) || check_options(ro->options))) bad = 1;
  if (!bad && plugins_enable(&found, preload, ro->devices, also, default_devices, n) != 0) bad = 1;
  plugins_free(&found);
  return bad ? 2 : 0;
}

/* Runs the program (argv from prog) with signals forwarded, waits for it
 * and every process it starts, and writes or keeps their traces; loom
 * record's exit status (the program's, or LOOM_RECORD_KEPT; a signal that
 * ended it ends loom record too). */
static int record_run(loom_follow *fw, char **argv, int prog) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  sa.sa_flags = SA_RESTART;
  for (size_t k = 0; k < sizeof forwarded / sizeof forwarded[0]; k++)
    sigaction(forwarded[k], &sa, NULL);
  child = fork();
  if (child < 0) {
    perror("loom record: fork");
    loom__follow_abandon(fw);
    return 2;
  }
  if (child == 0) {
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("LOOM_RECORD_PID", pid, 1);
    for (size_t k = 0; k < sizeof forwarded / sizeof forwarded[0]; k++)
      signal(forwarded[k], SIG_DFL);
    execvp(argv[prog], &argv[prog]);
    fprintf(stderr, "loom record: cannot run %s: %s\n", argv[prog], strerror(errno));
    _exit(127);
  }
  /* the terminal may be gone (SIGHUP): a message that cannot be written
   * must not end loom record before the traces are */
  signal(SIGPIPE, SIG_IGN);
  loom__mapsnap_start(fw->arenas); /* libraries loaded while recording, for the salvager */
  int status = loom__follow_wait(fw, child);
  loom__mapsnap_stop();
  int kept = loom__follow_finish(fw, argv[prog], status, child);
  if (kept && WIFEXITED(status) && WEXITSTATUS(status) == 0) return LOOM_RECORD_KEPT;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    kill(getpid(), sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int cmd_record(int argc, char **argv) {
  record_opts ro;
  int rc = record_opts_parse(&ro, argc, argv), to_dir;
  if (rc) return rc;
  char libdir[PATH_MAX];
  if (tool_libdir(libdir, sizeof libdir) != 0) {
    fprintf(stderr, "loom record: cannot find loom-preload.so (set LOOM_LIBEXEC to its folder)\n");
    return 2;
  }
  char preload[PATH_MAX + 32], outbuf[PATH_MAX], default_devices[1024];
  snprintf(preload, sizeof preload, "%s/loom-preload.so", libdir);
  const char *out = record_output(&ro, argv, outbuf, sizeof outbuf, &to_dir);
  if (!out) return 2;
  loom_follow fw;
  if (loom__follow_setup(&fw, out, ro.follow) != 0) return 2;
  /* --memory host: the type "heap" beside the others */
  const char *also = ro.memory_host ? "heap" : NULL;
  char asked[1100];
  if (ro.devices && also) snprintf(asked, sizeof asked, "%s,%s", ro.devices, also);
  fw.asked = ro.devices && also ? asked : ro.devices;
  if (to_dir && record_opts_check_out(out, 1)) {
    loom__follow_abandon(&fw);
    rmdir(out); /* made by the setup (or empty) */
    return 2;
  }
  if (record_plugins(&ro, libdir, preload, also, default_devices, sizeof default_devices) != 0) {
    loom__follow_abandon(&fw);
    return 2;
  }
  setenv("LOOM_RECORD_OUTPUT", out, 1);
  const char *devices = ro.devices ? ro.devices : default_devices;
  if (also) snprintf(asked, sizeof asked, "%s,%s", devices, also);
  setenv("LOOM_RECORD_DEVICES", also ? asked : devices, 1);
  setenv("LOOM_RECORD_NAME", argv[ro.prog], 1);
  if (*ro.options) setenv("LOOM_RECORD_OPTIONS", ro.options, 1);
  return record_run(&fw, argv, ro.prog);
}
