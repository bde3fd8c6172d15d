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
 * the program left the default disposition).  With window options (--steps,
 * --duration, a schedule: src/window/trigger.c) the core writes each window
 * when it ends, through window_done.  The
 * signal handlers only write to a pipe; a watcher thread does the work and
 * then lets the signal take its default effect, so the exit status the
 * program would have had is kept.
 *
 * No loom thread runs in a process that did not ask for one: a program may
 * need to be single-threaded (unshare(CLONE_NEWUSER)) or change per-thread
 * state (capabilities, then setuid: glibc's set*id asks every thread to
 * follow, which fails in a thread that kept the old capabilities).  The
 * watcher starts only when a device runtime's backend first hands the core
 * a record or a device (its work may still be in the
 * runtime's buffers at a signal, and only a stop flushes it; such runtimes
 * run threads of their own anyway), or when the session takes loom
 * trigger's requests (window or ring mode, which serve a socket).  Before
 * that, the signal handlers (installed at start, no thread) let a signal
 * take its default effect at once, and loom record rebuilds the
 * trace from shared memory, where every record already is.  The library
 * snapshots the salvager needs are taken by loom record from outside.
 * Descriptors loom keeps here are high-numbered and checked before each
 * use (src/util/fd.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
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
#include "loom/tools.h"
#include "done.h"
#include "preload_id.h"
#include "util/util.h"

/* libloom's private table (the arena, the control socket, fork): set by the
 * constructor, before anything else here runs; NULL: this process records
 * nothing (the library is from another build, said on stderr). */
static const loom_tools *tools;

static loom_session *session;
static pid_t session_pid; /* the process the session records */
static void begin(void);
static atomic_int saved;
static pthread_mutex_t save_mu = PTHREAD_MUTEX_INITIALIZER;
static loom__fd sigpipe[2] = {{-1, 0, 0}, {-1, 0, 0}}; /* handler -> watcher: the signal */
static loom__fd ackpipe[2] = {{-1, 0, 0}, {-1, 0, 0}}; /* watcher -> handler: ACK_* */
static atomic_int watching;  /* the watcher was started in this process */
static int top;              /* this is the process loom record started */
enum { ACK_STOPPED = 'S', ACK_WRITTEN = 'W' };
static atomic_int serving_signal; /* the watcher saves for a signal handler */
static const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGFPE};
enum { NCAUGHT = sizeof caught / sizeof caught[0] };

/* <dir>/<pid>.done, one line per trace written (done.h): "events flows devices
 * dropped warnings\tTRACE", "window SEQ events ...\tTRACE" for each window
 * of a session that writes several (kept where they are, not merged),
 * "failed\tMESSAGE", or "none\tMESSAGE" (window mode, no window recorded).
 * Rewritten whole to a temporary name each time, so loom record never reads
 * half of it. */
static char done_lines[16384];
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;

static void add_done_line(const char *line) {
  char path[4096], tmp[4200];
  if (loom__rec_file(path, sizeof path, ".done") != 0) return;
  pthread_mutex_lock(&done_mu);
  size_t l = strlen(done_lines);
  snprintf(done_lines + l, sizeof done_lines - l, "%s\n", line);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f) {
    fputs(done_lines, f);
    if (fclose(f) == 0) rename(tmp, path);
    else unlink(tmp);
  }
  pthread_mutex_unlock(&done_mu);
}

/* The line (done.h) of trace t written to out. */
static done_line written(const loom_trace *t, const char *out) {
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  return (done_line){.kind = DONE_TRACE, .events = s.events, .flows = s.flows,
                     .devices = s.devices, .dropped = s.dropped, .warnings = s.warnings,
                     .text = out};
}

static void summary(const char *out, loom_status st, const loom_trace *t, unsigned window) {
  char line[4400];
  if (st != LOOM_OK) {
    snprintf(line, sizeof line, "failed\tto write %s: %s", out, loom_last_error());
  } else {
    done_line d = written(t, out);
    if (window) d.kind = DONE_WINDOW, d.seq = window;
    done_format(line, sizeof line, &d);
  }
  add_done_line(line);
}

/* <dir>/<pid>.mem: the summary's lines about the trace's memory (tools.h
 * memory_lines), when it has memory events; loom record prints them.  They
 * are worked out on a thread of their own while the trace is written (both
 * only read it; 50-60 ms after a PyTorch loop of 500k events), or after it
 * where no thread starts. */
typedef struct mem_note {
  const loom_trace *t;
  pthread_t th;
  int started, rc;
  char lines[8192];
} mem_note;

static void *mem_note_run(void *p) {
  mem_note *m = p;
  m->rc = tools->memory_lines(m->t, m->lines, sizeof m->lines);
  return NULL;
}

static mem_note *mem_note_start(const loom_trace *t) {
  mem_note *m = calloc(1, sizeof *m);
  if (m) m->t = t, m->started = loom__thread_start(&m->th, mem_note_run, m) == 0;
  return m;
}

/* Writes the lines (the trace was written) and frees m. */
static void mem_note_end(mem_note *m, int written) {
  char path[4096];
  if (!m) return;
  if (m->started) pthread_join(m->th, NULL);
  else if (written) mem_note_run(m);
  FILE *f = written && m->rc == 0 && m->lines[0] && loom__rec_file(path, sizeof path, ".mem") == 0
                ? fopen(path, "w") : NULL;
  if (f) {
    fputs(m->lines, f);
    fclose(f);
  }
  free(m);
}

static atomic_uint windows_written, windows_failed;

/* The trace is written: this process's arena is not needed any more (its
 * memory goes when the process ends, not when loom record does). */
static void arena_free(void) {
  char path[4096];
  if (loom__rec_file(path, sizeof path, ".arena") == 0) unlink(path);
}

/* A ring dump (metadata ring_dump_reason): the ring goes on recording. */
static int ring_dump(const loom_trace *t) {
  for (size_t i = 0; i < loom_trace_meta_count(t); i++) {
    const char *k = NULL, *v = NULL;
    if (loom_trace_meta(t, i, &k, &v) == LOOM_OK && k && !strcmp(k, "ring_dump_reason")) return 1;
  }
  return 0;
}

/* A window ended (trigger.c): its trace goes to out.  A window written to
 * this process's trace name is its trace, as without windows; the others are
 * "window" lines for loom record. */
static void window_done(loom_trace *t, const char *out, unsigned seq, void *ud) {
  (void)ud;
  char plain[4096];
  const char *p = loom__rec_trace_path(plain, sizeof plain);
  loom_status st = loom_trace_save(t, out);
  if (st != LOOM_OK) fprintf(stderr, "loom: %s\n", loom_last_error());
  summary(out, st, t, strcmp(p, out) ? seq : 0);
  /* written: not to be rebuilt; but after a dump the ring records on, and
   * a death is rebuilt from it as without the dump */
  if (st == LOOM_OK && !ring_dump(t)) tools->arena_end();
  else if (st != LOOM_OK) atomic_fetch_add(&windows_failed, 1);
  atomic_fetch_add(&windows_written, 1);
  tools->ctl_window_done(out, st == LOOM_OK, st == LOOM_OK ? NULL : loom_last_error());
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
  loom_session *s = session;
  session = NULL;
  loom_status st = loom_session_stop(s, &t);
  unsigned char stopped = ACK_STOPPED; /* the handler waits for the rest without a limit */
  if (atomic_load(&serving_signal) && loom__fd_ok(&ackpipe[1]) &&
      write(ackpipe[1].fd, &stopped, 1) != 1) {
  }
  if (st == LOOM_OK && !t) { /* window mode: each window went to its file */
    if (!atomic_load(&windows_written))
      add_done_line("none\trecorded no window (the program ended before its window began)");
    loom_session_destroy(s);
    if (!atomic_load(&windows_failed)) arena_free();
    tools->ctl_stop("the program ended before the window did");
    pthread_mutex_unlock(&save_mu);
    return;
  }
  mem_note *mem = NULL;
  if (st == LOOM_OK) {
    loom_trace_summary sum = {.struct_size = sizeof sum};
    loom_trace_summarize(t, &sum);
    if (sum.events > 1000000)
      fprintf(stderr, "loom: writing %s (%llu events)...\n", out, (unsigned long long)sum.events);
    mem = mem_note_start(t);
    st = loom_trace_save(t, out);
  }
  mem_note_end(mem, st == LOOM_OK);
  summary(out, st, t, 0);
  /* written: nothing for loom record to rebuild, and its shared memory is
   * freed now.  Else the session is not destroyed (that would free the
   * backends' records in the arena): loom record rebuilds the whole trace
   * from there (src/salvage/salvage.c) or keeps it; the process is ending. */
  if (st == LOOM_OK) {
    tools->arena_end();
    loom_session_destroy(s);
    arena_free();
  }
  if (st != LOOM_OK) fprintf(stderr, "loom: %s\n", loom_last_error());
  loom_trace_free(t);
  tools->ctl_stop("the program ended before the window did");
  pthread_mutex_unlock(&save_mu);
}

/* ---- exec (preload_exec.c) --------------------------------------------- */
static unsigned exec_images; /* images of this process that ended by exec */

/* out: the trace path with "-execN" before its extension. */
static void exec_path(char *out, size_t n, const char *trace, unsigned seq) {
  static const char *const exts[] = {".json.gz", ".pftrace.gz", ".json", ".pftrace"};
  size_t l = strlen(trace), el = 0;
  for (size_t i = 0; i < sizeof exts / sizeof exts[0] && !el; i++) {
    size_t k = strlen(exts[i]);
    if (l > k && !strcmp(trace + l - k, exts[i])) el = k;
  }
  snprintf(out, n, "%.*s-exec%u%s", (int)(l - el), trace, seq, trace + l - el);
}

/* <pid>.exec, one line per image that ended by exec: "events flows devices
 * dropped warnings\tTRACE" (loom record adds TRACE to the merge). */
static void exec_line(const loom_trace *t, const char *out) {
  char path[4096], line[4400];
  if (loom__rec_file(path, sizeof path, ".exec") != 0) return;
  done_line d = written(t, out);
  int k = done_format(line, sizeof line - 1, &d); /* then its newline */
  int fits = k > 0 && (size_t)k < sizeof line - 1;
  if (fits) line[k++] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (fits && write(fd, line, (size_t)k) != k) {
  }
  close(fd);
}

/* A trace without a record (a shell, or a launcher's child, between fork
 * and exec) is not written: such an exec costs no file. */
static int worth_writing(const loom_trace *t) {
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  return s.events || s.dropped;
}

void loom__rec_before_exec(void) {
  if (!session || getpid() != session_pid) return;
  pthread_mutex_lock(&save_mu);
  if (atomic_exchange(&saved, 1) || !session) {
    pthread_mutex_unlock(&save_mu);
    return;
  }
  loom_session *s = session;
  session = NULL;
  loom_trace *t = NULL;
  /* the merge keeps this trace's pid: one process with the next image's
   * (the arena is off first: launchers close every descriptor before an
   * exec, and a new block there would warn of it for nothing) */
  tools->arena_off();
  loom_meta_set("loom_exec_image", "1");
  loom_status st = loom_session_stop(s, &t);
  loom_meta_set("loom_exec_image", NULL);
  char started[4096];
  if (st == LOOM_OK && t && !worth_writing(t) &&
      loom__rec_file(started, sizeof started, ".started") == 0)
    unlink(started); /* nothing to say of this image: the next one marks the process */
  if (st == LOOM_OK && t && worth_writing(t)) {
    char base[4096], out[4200];
    exec_path(out, sizeof out, loom__rec_trace_path(base, sizeof base), ++exec_images);
    st = loom_trace_save(t, out);
    if (st == LOOM_OK) exec_line(t, out);
    else fprintf(stderr, "loom: %s (the records this process made before its exec are lost)\n",
                 loom_last_error());
  }
  tools->arena_end();
  loom_session_destroy(s);
  arena_free();
  loom_trace_free(t);
  tools->ctl_stop("the program replaced itself (exec)");
  pthread_mutex_unlock(&save_mu);
}

void loom__rec_exec_failed(void) {
  if (session || !atomic_load(&saved) || getpid() != session_pid) return;
  atomic_store(&saved, 0);
  begin();
}

/* How long a signal waits for the session to stop (ms): the thread the
 * signal interrupted may hold a lock the stop needs (a runtime's, a
 * backend's), and would then wait for ever.  LOOM_RECORD_STOP_WAIT (s). */
static int stop_wait_ms = 15000;

static void say(const char *a, const char *b) {
  if (write(2, a, strlen(a)) < 0 || write(2, b, strlen(b)) < 0) return;
}

/* Only async-signal-safe calls: hand the signal to the watcher, wait until
 * it stopped the session (ACK_STOPPED, at most stop_wait_ms) and wrote the
 * trace (ACK_WRITTEN), then let the signal take its default effect (on
 * return, or at once for a fault that repeats).  A stop that does not come
 * is left: the process ends and loom record rebuilds its trace from shared
 * memory, as for a killed one. */
static void on_signal(int sig) {
  unsigned char b = (unsigned char)sig, ack = 0;
  if (loom__fd_ok(&sigpipe[1]) && loom__fd_ok(&ackpipe[0]) && write(sigpipe[1].fd, &b, 1) == 1) {
    struct pollfd p = {ackpipe[0].fd, POLLIN, 0};
    int stopped = 0;
    for (;;) {
      int n = poll(&p, 1, stopped ? -1 : stop_wait_ms);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0)
        say("loom: the session did not stop within LOOM_RECORD_STOP_WAIT of the signal (the "
            "thread it interrupted may hold a lock the stop needs): the program ends now and "
            "loom record ",
            "rebuilds its trace from shared memory\n");
      if (n <= 0) break;
      ssize_t r = read(ackpipe[0].fd, &ack, 1);
      if (r < 0 && errno == EINTR) continue;
      if (r != 1 || ack != ACK_STOPPED) break;
      stopped = 1;
    }
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  raise(sig);
}

/* Waits for signals (writes the trace if not yet done, then lets each
 * signal's handler continue).  It serves signals until the process ends, so
 * a handler never waits for a watcher that is gone.  (--duration and the
 * other windows are the core's: src/window/trigger.c.) */
static void *watcher(void *arg) {
  (void)arg;
  struct pollfd p = {sigpipe[0].fd, POLLIN, 0};
  for (;;) {
    if (!loom__fd_ok(&sigpipe[0]) || !loom__fd_ok(&ackpipe[1])) {
      fprintf(stderr, "loom: process %ld closed loom's signal pipes; a signal now ends it "
              "without writing its trace (loom record rebuilds it from shared memory)\n",
              (long)getpid());
      sigpipe[0].fd = sigpipe[1].fd = ackpipe[0].fd = ackpipe[1].fd = -1;
      return NULL;
    }
    int r = poll(&p, 1, 1000); /* a second: the checks above again */
    if (r == 0 || (r < 0 && errno == EINTR)) continue;
    unsigned char sig = 0, ack = ACK_WRITTEN;
    if (r < 0) return NULL;
    if ((p.revents & POLLNVAL) || read(sigpipe[0].fd, &sig, 1) != 1) continue;
    atomic_store(&serving_signal, 1);
    save();
    atomic_store(&serving_signal, 0);
    if (!loom__fd_ok(&ackpipe[1]) || write(ackpipe[1].fd, &ack, 1) != 1) continue;
  }
}

static void start_watcher(void);

/* 0: only LOOM_RECORD_PID, 1: processes that exec'ed, 2: also forks. */
static int follow_mode(void) {
  const char *f = getenv("LOOM_RECORD_FOLLOW");
  if (f && !strcmp(f, "none")) return 0;
  if (f && !strcmp(f, "exec")) return 1;
  return 2;
}


/* Starts this process's session, labelled with who it is. */
/* A process that changed its ids (setpriv, su, a daemon dropping root)
 * cannot write into the folders of the loom record that started it: said
 * once, and it is not recorded (its files would fail one by one). */
static int may_record(void) {
  const char *dir = getenv("LOOM_RECORD_DIR");
  if (!dir || faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0) return 1;
  char prog[256];
  loom__rec_program(prog, sizeof prog);
  fprintf(stderr, "loom: process %d (%s) runs as uid %u, which cannot write loom record's folder "
          "%s: it is not recorded\n", (int)getpid(), prog, (unsigned)geteuid(), dir);
  return 0;
}

static void begin(void) {
  static char opts[16384];
  if (!may_record()) return;
  if (loom__rec_options(opts, sizeof opts, getenv("LOOM_RECORD_OPTIONS")) != 0) {
    fprintf(stderr, "loom: session options too long; recording without process labels\n");
    const char *given = getenv("LOOM_RECORD_OPTIONS");
    snprintf(opts, sizeof opts, "%s", given ? given : "");
  }
  /* the rank the launcher gave ({rank} in window names, src/window/trigger.c) */
  if (loom__rec_rank()) loom_meta_set("rank", loom__rec_rank());
  /* Windows are named after this process's trace (session option output,
   * unless the user gave one: a pattern with {pid} {rank} {seq} {program}). */
  const char *user = getenv("LOOM_RECORD_OPTIONS"), *o = user ? strstr(user, "output=") : NULL;
  while (o && o > user && o[-1] != ',' && o[-1] != ';') o = strstr(o + 1, "output=");
  if (!o) {
    char tp[4096];
    const char *p = loom__rec_trace_path(tp, sizeof tp);
    size_t l = strlen(opts);
    l += (size_t)snprintf(opts + l, sizeof opts - l, "%soutput=", l ? "," : "");
    /* percent-encoded: a ',' or ';' in the name is not an option separator */
    for (; *p && l + 4 < sizeof opts; p++) {
      if (*p == ',' || *p == ';' || *p == '%') l += (size_t)snprintf(opts + l, 4, "%%%02X", *p);
      else opts[l++] = *p;
    }
    opts[l] = 0;
  }
  loom_window_callback_set(window_done, NULL);
  loom_session_config cfg = {.struct_size = sizeof cfg,
                             .devices = getenv("LOOM_RECORD_DEVICES"),
                             .options = opts,
                             .name = getenv("LOOM_RECORD_NAME")};
  char arena[4096], outbuf[4096];
  if (loom__rec_file(arena, sizeof arena, ".arena") == 0 &&
      tools->arena_begin(arena, loom__rec_trace_path(outbuf, sizeof outbuf)) != 0)
    fprintf(stderr, "loom: cannot create %s (%s); recording goes on, but if this process "
            "is killed its records are lost\n", arena, strerror(errno));
  loom__rec_mark_started();
  session_pid = getpid(); /* before the start: a backend may use the device hook in it */
  if (loom_session_create(&cfg, &session) != LOOM_OK || loom_session_start(session) != LOOM_OK) {
    fprintf(stderr, "loom: cannot start recording (pid %d): %s\n", (int)getpid(),
            loom_last_error());
    loom_session_destroy(session);
    session = NULL;
    return;
  }
  if (tools->trigger_wanted()) { /* window or ring mode: loom trigger's socket (ctl.c) */
    tools->ctl_start();
    start_watcher();
  }
}

static int keep_pipe(loom__fd p[2]) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  if (loom__fd_keep(&p[0], fds[0]) == 0 && loom__fd_keep(&p[1], fds[1]) == 0) return 0;
  loom__fd_close(&p[0]);
  loom__fd_close(&p[1]);
  return -1;
}

/* The signals whose default effect ends the process get a handler that has
 * the watcher write the trace first (only where the program left the
 * default disposition), installed at start as before any library of the
 * program (LLVM's, in an OpenCL driver) chains to it.  Without a watcher
 * the handler lets the signal take its default effect at once. */
static void catch_signals(void) {
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
}

/* Starts the watcher, once per process: the device
 * hook (src/core/bkarena.c) or a session in window or ring mode asks for
 * it, in a thread of the program, never in a signal handler. */
static void start_watcher(void) {
  if (!session || getpid() != session_pid || atomic_exchange(&watching, 1)) return;
  if (keep_pipe(sigpipe) != 0 || keep_pipe(ackpipe) != 0) return;
  loom__thread_start(NULL, watcher, NULL); /* it must not receive the signals itself */
}

static void close_pipes(void) {
  for (int i = 0; i < 2; i++) {
    loom__fd_close(&sigpipe[i]);
    loom__fd_close(&ackpipe[i]);
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
  atomic_store(&windows_written, 0);
  atomic_store(&windows_failed, 0);
  done_lines[0] = 0;
  pthread_mutex_init(&done_mu, NULL);
  pthread_mutex_init(&save_mu, NULL);
  close_pipes();
  atomic_store(&watching, 0); /* the parent's watcher is not here */
  top = 0;
  tools->ctl_forked();
  tools->fork_child();
  if (follow_mode() < 2) return;
  begin(); /* the watcher as in any process: when a device runtime is used */
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
  top = pid && atol(pid) == (long)getpid();
  if (!getenv("LOOM_RECORD_DIR") && !top) return;
  int follow = follow_mode();
  if (!top && follow == 0) return;
  if (!(tools = LOOM_TOOLS_GET())) {
    fprintf(stderr, "loom: not recording (pid %d): %s\n", (int)getpid(), loom_last_error());
    return;
  }
  if (follow > 0) pthread_atfork(NULL, NULL, forked_child);
  const char *wait = getenv("LOOM_RECORD_STOP_WAIT");
  if (wait && atof(wait) > 0) stop_wait_ms = (int)(atof(wait) * 1000);
  tools->device_hook_set(start_watcher);
  begin();
  if (!session) return;
  atexit(save);
  catch_signals();
}
