/*
 * ctl.c - the control socket's server in libloom: one thread per recording
 * process that answers `loom trigger` (see ctl.h for the folder and the
 * protocol) and hands trigger requests to the window controller
 * (src/window/trigger.h), or in ring mode dumps the ring.  Started by
 * loom-preload.so for every process under `loom record`, and by a library
 * user's session with on_demand=on (src/session/entry.c).
 *
 * The thread blocks every signal and serves one connection at a time, each
 * with a short read deadline, so a client that stalls can delay the next
 * request but never the program.  Only the process's own uid or root may
 * ask anything (SO_PEERCRED); the folder's mode keeps others out before
 * that, the credential check is what holds if they get past it.  A client
 * that waits for its window keeps its connection open: the thread answers it
 * when the window's file is written (loom__ctl_window_done) or the program
 * ends (loom__ctl_stop).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/base.h"
#include "core/meta.h"
#include "ctl.h"
#include "ctl_req.h"
#include "kineto_cfg.h"
#include "util/util.h"
#include "window/trigger.h"

enum { ST_IDLE, ST_ARMED, ST_RECORDING };
static const char *const state_names[] = {"idle", "armed", "recording"};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Descriptors at high numbers, checked before each use (util/fd.c): a
 * program that closes inherited descriptors and opens its own files must
 * never get loom's writes. */
static loom__fd lsock = {-1, 0, 0}, wake[2] = {{-1, 0, 0}, {-1, 0, 0}};
static loom__fd conn = {-1, 0, 0};   /* the connection being served */
static loom__fd waiter = {-1, 0, 0}; /* the client waiting for its window's end */
static int state;             /* of the window this server armed */
static char window_desc[256]; /* that window, for --list */
static char sock_path[108];
static pid_t owner_pid;
static char done_msg[4200]; /* "done FILE\n" / "failed WHY\n", for the waiter */
static int done_pending;
static int gen;          /* a stopped server's thread sees it change and ends */
static loom__fd old_sock = {-1, 0, 0}; /* the socket of the server stopped before */

static void say(int fd, const char *fmt, ...) {
  char line[4400];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
  /* MSG_NOSIGNAL: a client gone away must not raise SIGPIPE in the program */
  if (n > 0 && send(fd, line, (size_t)n, MSG_NOSIGNAL) < 0) {
  }
}

/* The request, up to its empty line, within 2 s; 0 or -1. */
static int read_request(int fd, char *buf, size_t n) {
  size_t len = 0;
  while (len < n - 1) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, 2000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    ssize_t k = recv(fd, buf + len, n - 1 - len, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    len += (size_t)k;
    buf[len] = 0;
    if (strstr(buf, "\n\n")) return 0;
  }
  return -1;
}

/* The program's name, safe in one word of the info line. */
static void program_name(char *out, size_t n) {
  snprintf(out, n, "%s", program_invocation_short_name);
  for (char *p = out; *p; p++)
    if (*p == ' ' || *p == '\n' || *p == '/') *p = '_';
  if (!*out) snprintf(out, n, "?");
}

static void answer_info(int fd) {
  char prog[256], desc[256], rk[32];
  program_name(prog, sizeof prog);
  /* the process's rank metadata (the preload sets it from the launcher's
   * environment), else RANK */
  const char *rank = loom__process_meta_get("rank", rk, sizeof rk) == 0 ? rk : getenv("RANK");
  /* the controller's: also windows loom record's options armed */
  int st = loom__trigger_state(desc, sizeof desc);
  if (st < ST_IDLE || st > ST_RECORDING) st = ST_IDLE;
  say(fd, "info pid=%ld program=%s rank=%s state=%s window=%s\n", (long)getpid(), prog,
      rank && *rank ? rank : "-", state_names[st], st == ST_IDLE ? "-" : desc);
}

/* A claimed window that did not come (mu not held). */
static void unclaim(void) {
  pthread_mutex_lock(&mu);
  state = ST_IDLE;
  waiter.fd = -1;
  pthread_mutex_unlock(&mu);
}

/* op=trigger on a process recording in ring mode: a dump of what the ring
 * holds now; a duration asked (asked=1) keeps its last seconds.  1 when fd
 * is kept open for the dump's file. */
static int answer_ring(int fd, const loom__ctl_req *q, loom__window_req *r) {
  int wait = q->wait;
  int64_t last = q->asked ? r->duration_ns : 0;
  r->duration_ns = 0;
  r->start_step = q->start_step;
  char desc[160] = "a dump of the ring (all it holds)";
  if (last > 0) snprintf(desc, sizeof desc, "a dump of the ring (its last %.3f s)", last * 1e-9);
  pthread_mutex_lock(&mu);
  int busy = state != ST_IDLE;
  if (!busy) {
    snprintf(window_desc, sizeof window_desc, "%s", desc);
    state = ST_RECORDING;
    done_pending = 0;
    waiter = conn;
    if (!wait) waiter.fd = -1;
  }
  pthread_mutex_unlock(&mu);
  if (busy) {
    say(fd, "busy a request of loom trigger is in progress: %s\n", window_desc);
    return 0;
  }
  /* This thread tells the waiter of the file only once back in its loop,
   * so "armed" still comes first. */
  if (loom__trigger_ring_dump(r, last) == LOOM_OK) {
    say(fd, "armed %s\n", desc);
    return wait;
  }
  unclaim();
  say(fd, "error %s\n", loom_last_error());
  return 0;
}

/* op=trigger: 1 when fd is kept open for the window's end. */
static int answer_trigger(int fd, const char *req) {
  loom__ctl_req q;
  char err[256];
  int ring = loom__ring_active();
  if (loom__ctl_parse(req, loom__trigger_next_step(), ring, &q, err, sizeof err) != 0) {
    say(fd, "error %s\n", err);
    return 0;
  }
  loom__window_req r = q.win;
  if (ring) return answer_ring(fd, &q, &r);
  int wait = q.wait;
  char desc[256];
  loom__ctl_describe(&r, desc, sizeof desc);
  /* Claimed before the request, so that a window ending at once finds its
   * waiter; not under the lock, which the done function takes. */
  pthread_mutex_lock(&mu);
  int mine = state != ST_IDLE;
  if (!mine) {
    snprintf(window_desc, sizeof window_desc, "%s", desc);
    state = r.steps > 0 || r.delay_ns > 0 ? ST_ARMED : ST_RECORDING;
    done_pending = 0;
    waiter = conn;
    if (!wait) waiter.fd = -1;
  }
  pthread_mutex_unlock(&mu);
  if (mine) {
    say(fd, "busy a window asked by loom trigger is in progress: %s\n", window_desc);
    return 0;
  }
  int rc = loom__trigger_request(&r);
  char why[512];
  snprintf(why, sizeof why, "%s", loom_last_error());
  if (rc != 0) unclaim();
  if (rc == LOOM_EBUSY) say(fd, "busy %s\n", why);
  else if (rc != 0) say(fd, "error %s\n", why);
  else say(fd, "armed %s\n", desc);
  return rc == 0 && wait;
}

static void serve(int fd) {
  struct ucred cr;
  socklen_t cl = sizeof cr;
  char req[8192];
  if (read_request(fd, req, sizeof req) != 0 || strncmp(req, LOOM_TOOLS_CTL_MAGIC "\n",
                                                        sizeof LOOM_TOOLS_CTL_MAGIC)) {
    say(fd, "error not a loom-ctl request (or none within 2 s)\n");
  } else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
    say(fd, "refused cannot tell who is asking: %s\n", strerror(errno));
  } else if (cr.uid != 0 && cr.uid != geteuid()) {
    char who[32] = "root";
    if (geteuid() != 0) snprintf(who, sizeof who, "uid %u or root", (unsigned)geteuid());
    say(fd, "refused uid %u may not control process %ld (only %s may)\n", (unsigned)cr.uid,
        (long)getpid(), who);
  } else {
    char op[32];
    if (!loom__ctl_field(req, "op", op, sizeof op)) op[0] = 0;
    if (!strcmp(op, "info")) answer_info(fd);
    else if (!strcmp(op, "trigger")) {
      if (answer_trigger(fd, req)) return; /* kept for the window's end */
    } else say(fd, "error unknown op '%s'\n", op);
  }
  loom__fd_close(&conn);
}

/* Tells the waiting client why, then closes its connection (mu held). */
static void release_waiter(const char *why) {
  if (loom__fd_ok(&waiter)) say(waiter.fd, "%s", why);
  loom__fd_close(&waiter);
}

/* The window ended: tell the waiting client. */
static void finish_window(void) {
  char b[64];
  while (loom__fd_ok(&wake[0]) && read(wake[0].fd, b, sizeof b) > 0) {
  }
  pthread_mutex_lock(&mu);
  if (done_pending) {
    release_waiter(done_msg);
    done_pending = 0;
    state = ST_IDLE;
  }
  pthread_mutex_unlock(&mu);
}

/* The program closed (or closed and reused) a descriptor of the server:
 * it stops, and never touches those numbers again. */
static void *server_lost(void) {
  fprintf(stderr, "loom: process %ld closed the descriptors of loom's trigger socket; it no "
          "longer accepts loom trigger (the recording goes on)\n", (long)getpid());
  pthread_mutex_lock(&mu);
  if (owner_pid == getpid() && sock_path[0]) unlink(sock_path);
  sock_path[0] = 0;
  lsock.fd = wake[0].fd = wake[1].fd = waiter.fd = -1;
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void *server(void *arg) {
  int mine = (int)(intptr_t)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    loom__fd w = waiter, l = lsock;
    int g = gen;
    pthread_mutex_unlock(&mu);
    if (l.fd < 0 || g != mine) return NULL;
    if (!loom__fd_ok(&l) || !loom__fd_ok(&wake[0])) return server_lost();
    struct pollfd p[3] = {{l.fd, POLLIN, 0}, {wake[0].fd, POLLIN, 0}, {w.fd, POLLIN, 0}};
    int r = poll(p, w.fd >= 0 ? 3 : 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return NULL;
    if ((p[0].revents | p[1].revents) & POLLNVAL) return server_lost();
    if (p[1].revents) finish_window();
    if (w.fd >= 0 && p[2].revents) { /* the waiting client left; the window goes on */
      pthread_mutex_lock(&mu);
      if (waiter.fd == w.fd) loom__fd_close(&waiter);
      pthread_mutex_unlock(&mu);
    }
    if (p[0].revents & POLLIN) {
      int fd = accept4(l.fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0 && loom__fd_keep(&conn, fd) == 0) serve(conn.fd);
    }
  }
}

/* Binds <dir>/<pid>.sock; 0 or -1 with why. */
static int open_socket(const char *dir, char *why, size_t n) {
  char path[sizeof sock_path];
  if (loom__ctl_dir_check(dir, geteuid(), 1, why, n) != 0) return -1;
  if (loom__ctl_sock_path(path, sizeof path, dir, (long)getpid()) != 0) {
    snprintf(why, n, "%s: too long for a socket name", dir);
    return -1;
  }
  unlink(path); /* a dead process's with our pid: the folder is ours */
  loom__fd k;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (fd < 0 || loom__fd_keep(&k, fd) != 0 || (fd = k.fd, 0) ||
      bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || chmod(path, 0600) != 0 ||
      listen(fd, 8) != 0) {
    snprintf(why, n, "%s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  /* a server stopped before may still have a thread reading these */
  pthread_mutex_lock(&mu);
  snprintf(sock_path, sizeof sock_path, "%s", path);
  lsock = k;
  pthread_mutex_unlock(&mu);
  return 0;
}

/* The pipe that wakes the server (window ended, stop): 0 or -1. */
static int open_wake(void) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  if (loom__fd_keep(&wake[0], p[0]) == 0 && loom__fd_keep(&wake[1], p[1]) == 0) return 0;
  loom__fd_close(&wake[0]);
  loom__fd_close(&wake[1]);
  return -1;
}

void loom__ctl_start(void) {
  char dir[4096], why[4400], why2[4400];
  pthread_mutex_lock(&mu);
  int serving = lsock.fd >= 0 && owner_pid == getpid();
  pthread_mutex_unlock(&mu);
  if (serving) return; /* the preload's and an on_demand=on session's, once */
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  loom__ctl_dir_name(dir, sizeof dir, xdg, geteuid());
  if (open_socket(dir, why, sizeof why) != 0) {
    /* an unusable $XDG_RUNTIME_DIR: the /tmp folder `loom trigger` also tries */
    loom__ctl_dir_name(dir, sizeof dir, NULL, geteuid());
    if (!xdg || open_socket(dir, why2, sizeof why2) != 0) {
      fprintf(stderr, "loom: no trigger socket for process %ld: %s\n", (long)getpid(),
              xdg ? why2 : why);
      return;
    }
  }
  if (wake[0].fd < 0 && open_wake() != 0) {
    loom__ctl_stop(NULL);
    return;
  }
  owner_pid = getpid();
  pthread_mutex_lock(&mu);
  int g = ++gen;
  pthread_mutex_unlock(&mu);
  if (loom__thread_start(NULL, server, (void *)(intptr_t)g) != 0) loom__ctl_stop(NULL);
}

void loom__ctl_window_done(const char *out, int ok, const char *why) {
  pthread_mutex_lock(&mu);
  if (ok) snprintf(done_msg, sizeof done_msg, "done %s\n", out);
  else snprintf(done_msg, sizeof done_msg, "failed %s: %s\n", out, why ? why : "not written");
  done_pending = 1;
  pthread_mutex_unlock(&mu);
  if (loom__fd_ok(&wake[1]) && write(wake[1].fd, "w", 1) < 0) {
  }
}

void loom__ctl_stop(const char *why) {
  pthread_mutex_lock(&mu);
  if (owner_pid == getpid() && sock_path[0]) unlink(sock_path);
  sock_path[0] = 0;
  if (waiter.fd >= 0) {
    char line[4400];
    snprintf(line, sizeof line, "failed %s\n",
             why ? why : "the recording ended before the window did");
    release_waiter(done_pending ? done_msg : line);
  }
  /* The thread sees the socket gone when it next wakes; the socket is closed
   * at the next start (it may be polling it now). */
  loom__fd_close(&old_sock);
  old_sock = lsock;
  lsock.fd = -1;
  pthread_mutex_unlock(&mu);
  if (loom__fd_ok(&wake[1]) && write(wake[1].fd, "s", 1) < 0) {
  }
}

void loom__ctl_forked(void) {
  pthread_mutex_init(&mu, NULL);
  loom__fd_close(&lsock);
  loom__fd_close(&old_sock);
  loom__fd_close(&waiter);
  loom__fd_close(&conn);
  for (int i = 0; i < 2; i++) loom__fd_close(&wake[i]);
  sock_path[0] = 0;
  state = ST_IDLE;
  done_pending = 0;
  owner_pid = 0;
}
