/*
 * trigger.c - `loom trigger PID [--duration SEC | --steps K] [-o OUT] ...`
 * and `loom trigger --list`: asks a process recording under `loom record`
 * for a window from outside, through its control socket (ctl.h), or lists
 * the processes that accept such requests.
 *
 * The client finds the socket in its own runtime folder, or in the one of
 * the user the process belongs to (root triggering another user's job),
 * checks the folder's owner and mode, and that the process answering is the
 * one asked for (SO_PEERCRED).  By default it waits for the window to end
 * and prints the file written; --no-wait returns once the window is armed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"
#include "loom/tools.h"
#include "spec.h"

/* The synopsis (spec.c) on stderr; 2, the status of a wrong command line. */
static int usage(void) {
  cli_usage(stderr, cli_command("trigger"));
  return 2;
}

static void on_warn(const char *msg, void *ud) {
  (void)ud;
  fprintf(stderr, "loom trigger: warning: %s\n", msg);
}

/* ---- finding a process's socket ----------------------------------------- */
typedef struct where {
  char dirs[4][4096];
  uid_t owner[4];
  int n;
} where;

static void add_dir(where *w, const char *xdg, uid_t uid) {
  char d[4096];
  cli_tools()->ctl_dir_name(d, sizeof d, xdg, uid);
  for (int i = 0; i < w->n; i++)
    if (!strcmp(w->dirs[i], d)) return;
  if (w->n == 4) return;
  snprintf(w->dirs[w->n], sizeof w->dirs[0], "%s", d);
  w->owner[w->n++] = uid;
}

/* The process's $XDG_RUNTIME_DIR (readable by its user and root). */
static int proc_env(long pid, const char *key, char *out, size_t n) {
  char path[64], env[65536];
  size_t kl = strlen(key);
  snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t k = read(fd, env, sizeof env - 1);
  close(fd);
  if (k <= 0) return -1;
  env[k] = 0;
  for (char *p = env; p < env + k; p += strlen(p) + 1)
    if (!strncmp(p, key, kl) && p[kl] == '=') {
      snprintf(out, n, "%s", p + kl + 1);
      return 0;
    }
  return -1;
}

static int proc_xdg(long pid, char *out, size_t n) {
  return proc_env(pid, "XDG_RUNTIME_DIR", out, n);
}

/* Folders that may hold pid's socket (0 when there is no such process):
 * the caller's own, then those of the process's user. */
static int candidates(long pid, where *w) {
  char proc[64], xdg[4096];
  struct stat st;
  snprintf(proc, sizeof proc, "/proc/%ld", pid);
  w->n = 0;
  add_dir(w, getenv("XDG_RUNTIME_DIR"), geteuid());
  add_dir(w, NULL, geteuid());
  if (stat(proc, &st) != 0) return 0;
  if (proc_xdg(pid, xdg, sizeof xdg) == 0) add_dir(w, xdg, st.st_uid);
  add_dir(w, NULL, st.st_uid);
  return 1;
}

static int connect_to(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
  int e = errno;
  if (fd >= 0) close(fd);
  errno = e;
  return -1;
}

/* A process's socket, connected and checked; -1 after a message. */
static int open_process(long pid) {
  where w;
  char sock[4096], why[4400] = "";
  if (!candidates(pid, &w)) {
    fprintf(stderr, "loom trigger: process %ld is not recording with loom: no such process\n",
            pid);
    return -1;
  }
  for (int i = 0; i < w.n; i++) {
    struct stat st;
    if (cli_tools()->ctl_sock_path(sock, sizeof sock, w.dirs[i], pid) != 0) continue;
    if (lstat(sock, &st) != 0) {
      if (errno == EACCES && !why[0])
        snprintf(why, sizeof why, "cannot reach %s: %s (process %ld belongs to another user; "
                 "only that user or root may trigger it)", w.dirs[i], strerror(errno), pid);
      continue;
    }
    char bad[4400];
    if (!S_ISSOCK(st.st_mode) ||
        cli_tools()->ctl_dir_check(w.dirs[i], w.owner[i], 0, bad, sizeof bad)) {
      fprintf(stderr, "loom trigger: %s\n", S_ISSOCK(st.st_mode) ? bad : "not a socket");
      return -1;
    }
    int fd = connect_to(sock);
    if (fd < 0 && errno == ECONNREFUSED && kill((pid_t)pid, 0) != 0 && errno == ESRCH) break;
    if (fd < 0) {
      fprintf(stderr, "loom trigger: cannot connect to %s: %s\n", sock, strerror(errno));
      return -1;
    }
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.pid != (pid_t)pid) {
      fprintf(stderr, "loom trigger: %s is served by process %ld, not %ld: not used\n", sock,
              (long)cr.pid, pid);
      close(fd);
      return -1;
    }
    return fd;
  }
  char rec[8];
  if (why[0]) fprintf(stderr, "loom trigger: %s\n", why);
  else if (proc_env(pid, "LOOM_RECORD_DIR", rec, sizeof rec) == 0)
    fprintf(stderr, "loom trigger: process %ld records its whole run under loom record: no "
            "session in window mode, nothing to trigger (loom record --on-demand or --ring "
            "takes triggers)\n", pid);
  else fprintf(stderr, "loom trigger: process %ld is not recording with loom: no socket in %s\n",
               pid, w.dirs[0]);
  return -1;
}

/* ---- one request ----------------------------------------------------------- */
static int send_all(int fd, const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    s += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Reads the next answer line into buf; 0 at the end. */
static int read_line(int fd, char *buf, size_t n) {
  size_t l = 0;
  while (l < n - 1) {
    ssize_t k = read(fd, buf + l, 1);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    if (buf[l] == '\n') break;
    l++;
  }
  buf[l] = 0;
  return l > 0;
}

static const char *rest(const char *line) {
  const char *sp = strchr(line, ' ');
  return sp ? sp + 1 : "";
}

/* ---- loom trigger --list ------------------------------------------------- */
/* info line "info pid=.. program=.. ..." -> value of key */
static void info_value(const char *line, const char *key, char *out, size_t n) {
  char pat[32];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *p = strstr(line, pat);
  out[0] = 0;
  if (!p) return;
  p += strlen(pat);
  size_t l = strcspn(p, key[0] == 'w' ? "\n" : " \n"); /* window= runs to the end */
  snprintf(out, n, "%.*s", (int)(l < n ? l : n - 1), p);
}

static int list_dir(const char *dir, uid_t owner, int *shown) {
  char why[4400];
  if (cli_tools()->ctl_dir_check(dir, owner, 0, why, sizeof why) != 0)
    return errno == ENOENT ? 0 : -1;
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (pid <= 0 || strcmp(end, ".sock")) continue;
    char sock[4096], line[4096];
    if (cli_tools()->ctl_sock_path(sock, sizeof sock, dir, pid) != 0) continue;
    int fd = connect_to(sock);
    if (fd < 0) {
      if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) { /* left by a killed process */
        if (owner == geteuid()) unlink(sock);
      } else {
        fprintf(stderr, "loom trigger: process %ld does not answer on %s\n", pid, sock);
      }
      continue;
    }
    if (send_all(fd, LOOM_TOOLS_CTL_MAGIC "\nop=info\n\n") == 0 &&
        read_line(fd, line, sizeof line) &&
        !strncmp(line, "info ", 5)) {
      char prog[256], rank[64], st[32], win[512];
      info_value(line, "program", prog, sizeof prog);
      info_value(line, "rank", rank, sizeof rank);
      info_value(line, "state", st, sizeof st);
      info_value(line, "window", win, sizeof win);
      if (!(*shown)++) printf("%-8s %-20s %-5s %-10s %s\n", "PID", "PROGRAM", "RANK", "STATE",
                              "WINDOW");
      printf("%-8ld %-20s %-5s %-10s %s\n", pid, prog, rank, st, win);
    } else {
      fprintf(stderr, "loom trigger: process %ld: %s\n", pid, line[0] ? rest(line) : "no answer");
    }
    close(fd);
  }
  closedir(d);
  return 0;
}

static int cmd_list(void) {
  where w = {.n = 0};
  add_dir(&w, getenv("XDG_RUNTIME_DIR"), geteuid());
  add_dir(&w, NULL, geteuid());
  int shown = 0;
  for (int i = 0; i < w.n; i++) list_dir(w.dirs[i], w.owner[i], &shown);
  if (geteuid() == 0) { /* root: every user's /tmp folder too */
    DIR *t = opendir("/tmp");
    struct dirent *e;
    while (t && (e = readdir(t))) {
      char *end, d[300];
      if (strncmp(e->d_name, "loom-", 5)) continue;
      long uid = strtol(e->d_name + 5, &end, 10);
      if (*end || uid <= 0) continue;
      snprintf(d, sizeof d, "/tmp/%s", e->d_name);
      list_dir(d, (uid_t)uid, &shown);
    }
    if (t) closedir(t);
  }
  if (!shown) printf("no process accepts triggers (no socket in %s%s%s)\n", w.dirs[0],
                     w.n > 1 ? " or " : "", w.n > 1 ? w.dirs[1] : "");
  return 0;
}

/* ---- loom trigger PID ---------------------------------------------------- */
static int seconds_ns(const char *flag, const char *v, int64_t *out) {
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end || !(d > 0) || d > 1e9) {
    fprintf(stderr, "loom trigger: %s takes a positive number of seconds, not '%s'\n", flag, v);
    return -1;
  }
  *out = (int64_t)(d * 1e9 + 0.5);
  return 0;
}

static int steps_value(const char *flag, const char *v, long long lo, int64_t *out) {
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (end == v || *end || errno || n < lo || n > 2147483647LL) { /* Kineto's int32 */
    fprintf(stderr, "loom trigger: %s takes a whole number from %lld to 2147483647, not '%s'\n",
            flag, lo, v);
    return -1;
  }
  *out = n;
  return 0;
}

/* Relative names are the caller's: the process has its own working folder. */
static void absolute(char *path, size_t n) {
  if (!path[0] || path[0] == '/') return;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return;
  size_t c = strlen(cwd), p = strlen(path);
  if (c + 1 + p >= n) return; /* too long: the process resolves it */
  memmove(path + c + 1, path, p + 1);
  memcpy(path, cwd, c);
  path[c] = '/';
}

typedef struct cli {
  loom_tools_ondemand r;
  int64_t delay_ns;
  int wait, has_config;
  int asked; /* a window was asked (not only Kineto's default duration) */
} cli;

static int parse_args(cli *c, int argc, char **argv, long *pid) {
  int64_t dur = 0, steps = 0, start = -1;
  const char *out = NULL, *config = NULL;
  char *end;
  cli_tools()->ondemand_init(&c->r);
  c->wait = 1;
  c->delay_ns = 0;
  *pid = strtol(argv[2], &end, 10);
  if (*end || *pid <= 0) {
    fprintf(stderr, "loom trigger: '%s' is not a process id\n", argv[2]);
    return usage();
  }
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-wait")) {
      c->wait = 0;
      continue;
    }
    if (!v) return usage();
    i++;
    if (!strcmp(a, "--duration")) {
      if (seconds_ns(a, v, &dur)) return 2;
    } else if (!strcmp(a, "--delay")) {
      if (seconds_ns(a, v, &c->delay_ns)) return 2;
    } else if (!strcmp(a, "--steps")) {
      if (steps_value(a, v, 1, &steps)) return 2;
    } else if (!strcmp(a, "--start-step")) {
      if (steps_value(a, v, 0, &start)) return 2;
    } else if (!strcmp(a, "-o")) out = v;
    else if (!strcmp(a, "--config")) config = v;
    else return usage();
  }
  if (dur && steps) {
    fprintf(stderr, "loom trigger: --duration and --steps: give one of them\n");
    return 2;
  }
  if (start >= 0 && !steps && !config) {
    fprintf(stderr, "loom trigger: --start-step needs --steps\n");
    return 2;
  }
  if (config) {
    char err[4400];
    if (cli_tools()->kineto_load(config, &c->r, on_warn, NULL, err, sizeof err) != 0) {
      fprintf(stderr, "loom trigger: --config: %s\n", err);
      return 2;
    }
  }
  c->asked = dur || steps || (config && !c->r.defaulted);
  /* the command line wins over the configuration */
  if (dur) c->r.duration_ns = dur, c->r.steps = 0, c->r.start_step = -1;
  if (steps) c->r.steps = steps, c->r.duration_ns = 0;
  if (start >= 0) c->r.start_step = start;
  if (out) snprintf(c->r.out, sizeof c->r.out, "%s", out);
  absolute(c->r.out, sizeof c->r.out);
  if (strchr(c->r.out, '\n')) {
    fprintf(stderr, "loom trigger: the output file name holds a newline\n");
    return 2;
  }
  return 0;
}

/* Prints the server's answers; the exit status. */
static int follow_answers(int fd, long pid, int wait) {
  char line[4400];
  int armed = 0;
  while (read_line(fd, line, sizeof line)) {
    if (!strncmp(line, "armed ", 6)) {
      armed = 1;
      fprintf(stderr, "loom trigger: process %ld: window armed: %s%s\n", pid, rest(line),
              wait ? "; waiting for it to end" : "");
      if (!wait) return 0;
    } else if (!strncmp(line, "done ", 5)) {
      printf("wrote %s\n", rest(line));
      return 0;
    } else {
      const char *word = strncmp(line, "busy ", 5) ? strncmp(line, "refused ", 8) ? "" :
                         "refused: " : "busy: ";
      fprintf(stderr, "loom trigger: process %ld: %s%s\n", pid, word, rest(line));
      return 1;
    }
  }
  fprintf(stderr, "loom trigger: process %ld: %s\n", pid,
          armed ? "the connection closed before the window ended (the process ended?)"
                : "no answer");
  return 1;
}

int cmd_trigger(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[2], "--list")) return cmd_list();
  if (argc < 3 || argv[2][0] == '-') return usage();
  cli c;
  long pid;
  int rc = parse_args(&c, argc, argv, &pid);
  if (rc) return rc;
  int fd = open_process(pid);
  if (fd < 0) return 1;
  char req[8192];
  snprintf(req, sizeof req,
           LOOM_TOOLS_CTL_MAGIC "\nop=trigger\ndelay_ns=%lld\nduration_ns=%lld\nsteps=%lld\n"
                          "start_step=%lld\nroundup=%lld\nwarmup=%lld\nwait=%d\nkinds=%u\n"
                          "asked=%d\nout=%s\n\n",
           (long long)c.delay_ns, (long long)c.r.duration_ns, (long long)c.r.steps,
           (long long)c.r.start_step, (long long)c.r.roundup, (long long)c.r.warmup, c.wait,
           c.r.kinds, c.asked, c.r.out);
  if (send_all(fd, req) != 0) {
    fprintf(stderr, "loom trigger: process %ld: %s\n", pid, strerror(errno));
    close(fd);
    return 1;
  }
  rc = follow_answers(fd, pid, c.wait);
  close(fd);
  return rc;
}
