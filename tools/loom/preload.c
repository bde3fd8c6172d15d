/*
 * preload.c - loom-preload.so, the host part that `loom record` injects
 * (LD_PRELOAD) into an unmodified program.
 *
 * In the process `loom record` started (LOOM_RECORD_PID; children the program
 * starts are left alone) it starts a session at load time and writes the
 * trace when the program ends: on exit() or a return from main (atexit), on
 * SIGINT/SIGTERM and on a crash (SIGSEGV, SIGBUS, SIGILL, SIGABRT; only where
 * the program left the default disposition), or after --duration.  The
 * signal handlers only write to a pipe; a watcher thread does the work and
 * then lets the signal take its default effect, so the exit status the
 * program would have had is kept.  A one-line summary goes to the file named
 * by LOOM_RECORD_SUMMARY for `loom record` to print.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"

static loom_session *session;
static atomic_int saved;
static pthread_mutex_t save_mu = PTHREAD_MUTEX_INITIALIZER;
static int sigpipe_fd[2] = {-1, -1}; /* handler -> watcher: the signal */
static int ackpipe_fd[2] = {-1, -1};  /* watcher -> handler: trace written */
static const int caught[] = {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGFPE};
enum { NCAUGHT = sizeof caught / sizeof caught[0] };

static void summary(const char *out, loom_status st, const loom_trace *t) {
  const char *path = getenv("LOOM_RECORD_SUMMARY");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  if (st != LOOM_OK) {
    fprintf(f, "failed to write %s: %s\n", out, loom_last_error());
  } else {
    loom_trace_summary s = {.struct_size = sizeof s};
    loom_trace_summarize(t, &s);
    fprintf(f, "%s: %llu events, %llu flows, %llu device%s, %llu dropped, %llu warning%s\n", out,
            (unsigned long long)s.events, (unsigned long long)s.flows,
            (unsigned long long)s.devices, s.devices == 1 ? "" : "s",
            (unsigned long long)s.dropped, (unsigned long long)s.warnings,
            s.warnings == 1 ? "" : "s");
  }
  fclose(f);
}

/* Stops the session and writes the trace, once. */
static void save(void) {
  pthread_mutex_lock(&save_mu);
  if (atomic_exchange(&saved, 1) || !session) {
    pthread_mutex_unlock(&save_mu);
    return;
  }
  const char *out = getenv("LOOM_RECORD_OUTPUT");
  if (!out || !*out) out = "loom-trace.json";
  loom_trace *t = NULL;
  loom_status st = loom_session_stop(session, &t);
  loom_session_destroy(session);
  session = NULL;
  if (st == LOOM_OK) {
    loom_trace_summary s = {.struct_size = sizeof s};
    loom_trace_summarize(t, &s);
    if (s.events > 1000000)
      fprintf(stderr, "loom: writing %s (%llu events)...\n", out, (unsigned long long)s.events);
    st = loom_trace_save(t, out);
  }
  summary(out, st, t);
  if (st != LOOM_OK) fprintf(stderr, "loom: %s\n", loom_last_error());
  loom_trace_free(t);
  pthread_mutex_unlock(&save_mu);
}

/* Only async-signal-safe calls: hand the signal to the watcher, wait until
 * it wrote the trace, then let the signal take its default effect (on
 * return, or at once for a fault that repeats). */
static void on_signal(int sig) {
  unsigned char b = (unsigned char)sig, ack;
  if (write(sigpipe_fd[1], &b, 1) == 1)
    while (read(ackpipe_fd[0], &ack, 1) < 0 && errno == EINTR) {
    }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  raise(sig);
}

/* Waits for the duration to pass (then writes the trace, and the program goes
 * on) and for signals (writes the trace if not yet done, then lets each
 * signal's handler continue).  It serves signals until the process ends, so
 * a handler never waits for a watcher that is gone. */
static void *watcher(void *arg) {
  double duration = arg ? *(double *)arg : 0;
  int timeout = duration > 0 ? (int)(duration * 1000) : -1;
  struct pollfd p = {sigpipe_fd[0], POLLIN, 0};
  for (;;) {
    int r = poll(&p, 1, timeout);
    if (r == 0) {
      save();
      timeout = -1;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    unsigned char sig = 0, ack = 1;
    if (r < 0 || read(sigpipe_fd[0], &sig, 1) != 1) return NULL;
    save();
    if (write(ackpipe_fd[1], &ack, 1) != 1) return NULL;
  }
}

__attribute__((constructor)) static void loom_record_start(void) {
  const char *pid = getenv("LOOM_RECORD_PID");
  if (!pid || atol(pid) != (long)getpid()) return;
  loom_session_config cfg = {.struct_size = sizeof cfg,
                             .devices = getenv("LOOM_RECORD_DEVICES"),
                             .options = getenv("LOOM_RECORD_OPTIONS"),
                             .name = getenv("LOOM_RECORD_NAME")};
  if (loom_session_create(&cfg, &session) != LOOM_OK || loom_session_start(session) != LOOM_OK) {
    fprintf(stderr, "loom: cannot start recording: %s\n", loom_last_error());
    loom_session_destroy(session);
    session = NULL;
    return;
  }
  atexit(save);
  static double duration;
  const char *d = getenv("LOOM_RECORD_DURATION");
  duration = d ? atof(d) : 0;
  if (pipe2(sigpipe_fd, O_CLOEXEC) != 0 || pipe2(ackpipe_fd, O_CLOEXEC) != 0) return;
  for (int i = 0; i < NCAUGHT; i++) {
    struct sigaction old;
    if (sigaction(caught[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO)) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_signal;
      sa.sa_flags = SA_RESTART;
      sigaction(caught[i], &sa, NULL);
    }
  }
  pthread_t th;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  /* The watcher must not receive the signals itself. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_create(&th, &at, watcher, duration > 0 ? &duration : NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&at);
}
