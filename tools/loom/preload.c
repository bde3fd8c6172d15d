/*
 * preload.c - loom-preload.so, the host part that `loom record` injects
 * (LD_PRELOAD) into an unmodified program and, through the environment, into
 * every process it starts.
 *
 * Which processes record (LOOM_RECORD_FOLLOW): "all" (default) every process
 * that loads it (exec inherits LD_PRELOAD) and every child forked without
 * exec (a pthread_atfork handler drops the parent's session in the child and
 * starts a fresh one); "exec" only processes that exec'ed; "none" only the
 * one `loom record` started (LOOM_RECORD_PID).  Each process writes its own
 * trace into LOOM_RECORD_TRACEDIR (<program>-<pid>[-rank<R>].<ext>) and two
 * files into LOOM_RECORD_DIR for `loom record`: <pid>.started (its command
 * line, at start) and <pid>.done (its summary, once the trace is written): a
 * process with the first and not the second ended without writing a trace.
 *
 * A process writes its trace when it ends: on exit() or a return from main
 * (atexit), on _exit()/_Exit() (Python's forked workers end so), on
 * SIGINT/SIGTERM and on a crash (SIGSEGV, SIGBUS, SIGILL, SIGABRT; only where
 * the program left the default disposition), or after --duration.  The
 * signal handlers only write to a pipe; a watcher thread does the work and
 * then lets the signal take its default effect, so the exit status the
 * program would have had is kept.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"
#include "preload_id.h"

/* src/core/fork.c, private to loom-preload. */
void loom__fork_child(void);
/* src/record/arena.c, private to loom-preload: the records in shared memory
 * (docs/survival.md). */
int loom__arena_begin(const char *path, const char *out);
void loom__arena_end(void);
void loom__arena_maps(void);

static loom_session *session;
static atomic_int saved;
static pthread_mutex_t save_mu = PTHREAD_MUTEX_INITIALIZER;
static int sigpipe_fd[2] = {-1, -1}; /* handler -> watcher: the signal */
static int ackpipe_fd[2] = {-1, -1};  /* watcher -> handler: trace written */
static const int caught[] = {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGFPE};
enum { NCAUGHT = sizeof caught / sizeof caught[0] };

/* <dir>/<pid>.done: "events flows devices dropped warnings\tTRACE" or
 * "failed\tMESSAGE"; written to a temporary name first, so loom record never
 * reads half of it. */
static void summary(const char *out, loom_status st, const loom_trace *t) {
  char path[4096], tmp[4200];
  if (loom__rec_file(path, sizeof path, ".done") != 0) return;
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  if (st != LOOM_OK) {
    fprintf(f, "failed\tto write %s: %s\n", out, loom_last_error());
  } else {
    loom_trace_summary s = {.struct_size = sizeof s};
    loom_trace_summarize(t, &s);
    fprintf(f, "%llu %llu %llu %llu %llu\t%s\n", (unsigned long long)s.events,
            (unsigned long long)s.flows, (unsigned long long)s.devices,
            (unsigned long long)s.dropped, (unsigned long long)s.warnings, out);
  }
  if (fclose(f) == 0) rename(tmp, path);
  else unlink(tmp);
}

/* Stops the session and writes the trace, once. */
static void save(void) {
  pthread_mutex_lock(&save_mu);
  if (atomic_exchange(&saved, 1) || !session) {
    pthread_mutex_unlock(&save_mu);
    return;
  }
  char outbuf[4096];
  const char *out = loom__rec_trace_path(outbuf, sizeof outbuf);
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
  /* written: nothing for loom record to rebuild (else it rebuilds the trace
   * from the arena) */
  if (st == LOOM_OK) loom__arena_end();
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
/* The loaded objects changed (dlopen, dlclose): a new snapshot of the
 * mappings, so that the salvager can read the string literals of a library
 * loaded while recording.  Checked once a second from the watcher (not by
 * interposing dlopen: that would change which object's search path a
 * program's dlopen uses). */
static int count_objects(struct dl_phdr_info *info, size_t size, void *data) {
  unsigned long long *n = data;
  *n = size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs
           ? info->dlpi_adds * 1000003ull + info->dlpi_subs : 0;
  return 1; /* the counters are the same in every entry */
}

static void check_objects(void) {
  static unsigned long long seen;
  unsigned long long n = 0;
  dl_iterate_phdr(count_objects, &n);
  if (n != seen) {
    if (seen) loom__arena_maps();
    seen = n;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *watcher(void *arg) {
  double duration = arg ? *(double *)arg : 0;
  double deadline = duration > 0 ? now_s() + duration : 0;
  struct pollfd p = {sigpipe_fd[0], POLLIN, 0};
  check_objects();
  for (;;) {
    int timeout = 1000;
    if (deadline > 0) {
      double left = deadline - now_s();
      if (left < 1.0) timeout = left > 0 ? (int)(left * 1000) : 0;
    }
    int r = poll(&p, 1, timeout);
    if (r == 0) {
      check_objects();
      if (deadline > 0 && now_s() >= deadline) {
        save();
        deadline = 0;
      }
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    unsigned char sig = 0, ack = 1;
    if (r < 0 || read(sigpipe_fd[0], &sig, 1) != 1) return NULL;
    save();
    if (write(ackpipe_fd[1], &ack, 1) != 1) return NULL;
  }
}

/* 0: only LOOM_RECORD_PID, 1: processes that exec'ed, 2: also forks. */
static int follow_mode(void) {
  const char *f = getenv("LOOM_RECORD_FOLLOW");
  if (f && !strcmp(f, "none")) return 0;
  if (f && !strcmp(f, "exec")) return 1;
  return 2;
}

static pid_t session_pid; /* the process the session records */
static double duration;

/* Starts this process's session, labelled with who it is. */
static void begin(void) {
  static char opts[16384];
  if (loom__rec_options(opts, sizeof opts, getenv("LOOM_RECORD_OPTIONS")) != 0) {
    fprintf(stderr, "loom: session options too long; recording without process labels\n");
    snprintf(opts, sizeof opts, "%s", getenv("LOOM_RECORD_OPTIONS") ? getenv("LOOM_RECORD_OPTIONS") : "");
  }
  loom_session_config cfg = {.struct_size = sizeof cfg,
                             .devices = getenv("LOOM_RECORD_DEVICES"),
                             .options = opts,
                             .name = getenv("LOOM_RECORD_NAME")};
  char arena[4096], outbuf[4096];
  if (loom__rec_file(arena, sizeof arena, ".arena") == 0 &&
      loom__arena_begin(arena, loom__rec_trace_path(outbuf, sizeof outbuf)) != 0)
    fprintf(stderr, "loom: cannot create %s (%s); recording goes on, but if this process "
            "is killed its records are lost\n", arena, strerror(errno));
  loom__rec_mark_started();
  if (loom_session_create(&cfg, &session) != LOOM_OK || loom_session_start(session) != LOOM_OK) {
    fprintf(stderr, "loom: cannot start recording (pid %d): %s\n", (int)getpid(),
            loom_last_error());
    loom_session_destroy(session);
    session = NULL;
    return;
  }
  session_pid = getpid();
}

static void start_watcher(void) {
  if (pipe2(sigpipe_fd, O_CLOEXEC) != 0 || pipe2(ackpipe_fd, O_CLOEXEC) != 0) return;
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

static void close_pipes(void) {
  for (int i = 0; i < 2; i++) {
    if (sigpipe_fd[i] >= 0) close(sigpipe_fd[i]);
    if (ackpipe_fd[i] >= 0) close(ackpipe_fd[i]);
    sigpipe_fd[i] = ackpipe_fd[i] = -1;
  }
}

/* In the child of a fork (without exec yet): the session, its records and
 * the watcher's pipes are the parent's.  Drop them; with --follow all start
 * the child's own session (a worker pool's workers record), else the child
 * records nothing until it execs.  A signal handler finding no pipe lets the
 * signal take its default effect at once. */
static void forked_child(void) {
  session = NULL;
  atomic_store(&saved, 0);
  pthread_mutex_init(&save_mu, NULL);
  close_pipes();
  loom__fork_child();
  if (follow_mode() < 2) return;
  begin();
  if (session) start_watcher();
}

/* Python's forked workers (multiprocessing "fork"), and many C worker
 * pools, end with _exit: no atexit handler runs.  Write the trace first (in
 * the process the session records only: not in a vfork child sharing its
 * memory). */
typedef void (*exit_fn)(int);
static void save_then(const char *name, int status) __attribute__((noreturn));
static void save_then(const char *name, int status) {
  if (session && getpid() == session_pid) save();
  exit_fn real = (exit_fn)dlsym(RTLD_NEXT, name);
  if (real) real(status);
  syscall(SYS_exit_group, status);
  for (;;) {
  }
}
void _exit(int status) { save_then("_exit", status); }
void _Exit(int status) { save_then("_Exit", status); }

__attribute__((constructor)) static void loom_record_start(void) {
  const char *pid = getenv("LOOM_RECORD_PID");
  int top = pid && atol(pid) == (long)getpid();
  if (!getenv("LOOM_RECORD_DIR") && !top) return;
  int follow = follow_mode();
  if (follow > 0) pthread_atfork(NULL, NULL, forked_child);
  if (!top && follow == 0) return;
  const char *d = getenv("LOOM_RECORD_DURATION");
  duration = d ? atof(d) : 0;
  begin();
  if (!session) return;
  atexit(save);
  for (int i = 0; i < NCAUGHT; i++) {
    /* SIGINT only in the program loom record started: a process that found
     * a handler it did not install there behaves differently (Python then
     * installs no KeyboardInterrupt handler, and its forkserver fails to
     * restore it in each child). */
    if (caught[i] == SIGINT && !top) continue;
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
  start_watcher();
}
