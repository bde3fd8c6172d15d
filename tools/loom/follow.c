/*
 * follow.c - the multi-process part of `loom record` (see follow.h).
 *
 * Every process under loom record writes <pid>.started into the session
 * folder when it starts recording and <pid>.done once its trace is written
 * (tools/loom/preload.c).  A process with a marker and no summary ended
 * without writing a trace: killed by SIGKILL (loom record says so where it
 * reaped the process itself), or exec'ed into a program that does not load
 * the preload (a static binary).  Such a process's records are still in its
 * shared-memory arena, <pid>.arena: loom record rebuilds its trace from there
 * (src/core/salvage.c) and says how the process died.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/salvage.h"
#include "ctl/ctl.h"
#include "follow.h"
#include "kept.h"
#include "loom/loom.h"

static const char *ext_of(const char *out) {
  size_t n = strlen(out);
  if (n > 8 && !strcmp(out + n - 8, ".json.gz")) return ".json.gz";
  if (n > 8 && !strcmp(out + n - 8, ".pftrace")) return ".pftrace";
  if (n > 11 && !strcmp(out + n - 11, ".pftrace.gz")) return ".pftrace.gz";
  return ".json";
}

/* The kernel's count of OOM kills in loom record's memory cgroup (v2
 * memory.events, v1 memory.oom_control), or -1 when it cannot be read. */
static long long oom_kills(void) {
  FILE *cg = fopen("/proc/self/cgroup", "re");
  char line[2048], v2[2048] = "", v1[2048] = "";
  while (cg && fgets(line, sizeof line, cg)) {
    line[strcspn(line, "\n")] = 0;
    if (!strncmp(line, "0::", 3)) snprintf(v2, sizeof v2, "%s", line + 3);
    char *m = strstr(line, ":memory:");
    if (m) snprintf(v1, sizeof v1, "%s", m + 8);
  }
  if (cg) fclose(cg);
  char paths[3][2200];
  snprintf(paths[0], sizeof paths[0], "/sys/fs/cgroup%s/memory.events", v2);
  snprintf(paths[1], sizeof paths[1], "/sys/fs/cgroup/memory%s/memory.oom_control", v1);
  snprintf(paths[2], sizeof paths[2], "/sys/fs/cgroup/memory/memory.oom_control");
  for (int i = 0; i < 3; i++) {
    if ((i == 0 && !v2[0]) || (i == 1 && !v1[0])) continue;
    FILE *fp = fopen(paths[i], "re");
    long long n = -1;
    while (fp && fgets(line, sizeof line, fp))
      if (sscanf(line, "oom_kill %lld", &n) == 1) break;
    if (fp) fclose(fp);
    if (n >= 0) return n;
  }
  return -1;
}

/* The arenas' folder: in tmpfs (LOOM_SHM_DIR, default /dev/shm) when there
 * is one with room, since a file there is plain memory: on a disk
 * filesystem every page written is also written back to the disk (every 30
 * s), and each page written again after that faults again (measured in
 * docs/survival.md).  Else the session folder, said once. */
#define SHM_MIN_FREE (256ull << 20)
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
static void arenas_setup(loom_follow *f) {
  const char *set = getenv("LOOM_SHM_DIR"), *shm = set && *set ? set : "/dev/shm";
  struct statfs fs;
  char why[256] = "";
  if (statfs(shm, &fs) != 0)
    snprintf(why, sizeof why, "%s%s: %s", set ? "LOOM_SHM_DIR=" : "", shm, strerror(errno));
  else if (!set && fs.f_type != TMPFS_MAGIC)
    snprintf(why, sizeof why, "%s is not a tmpfs", shm);
  else if ((unsigned long long)fs.f_bavail * (unsigned long long)fs.f_bsize < SHM_MIN_FREE)
    snprintf(why, sizeof why, "%s has less than %llu MiB free", shm, SHM_MIN_FREE >> 20);
  if (!why[0]) {
    snprintf(f->arenas, sizeof f->arenas, "%s/loom-arenas-%d-XXXXXX", shm, (int)getpid());
    if (mkdtemp(f->arenas)) return;
    snprintf(why, sizeof why, "cannot create a folder in %s: %s", shm, strerror(errno));
  }
  fprintf(stderr, "loom record: %s; the shared-memory buffers go to %s instead, on its "
                  "filesystem (recording may cost more; LOOM_SHM_DIR names a tmpfs folder)\n",
          why, f->dir);
  snprintf(f->arenas, sizeof f->arenas, "%s", f->dir);
}

int loom__follow_setup(loom_follow *f, const char *out, const char *mode) {
  memset(f, 0, sizeof *f);
  if (strcmp(mode, "none") && strcmp(mode, "exec") && strcmp(mode, "all")) {
    fprintf(stderr, "loom record: --follow takes none, exec or all, not '%s'\n", mode);
    return 2;
  }
  struct stat st;
  size_t n = strlen(out);
  f->to_dir = (n && out[n - 1] == '/') || (stat(out, &st) == 0 && S_ISDIR(st.st_mode));
  snprintf(f->out, sizeof f->out, "%s", out);
  for (size_t k = strlen(f->out); f->to_dir && k > 1 && f->out[k - 1] == '/'; k--)
    f->out[k - 1] = 0; /* names inside it read DIR/NAME */
  if (f->to_dir && mkdir(out, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "loom record: cannot create folder %s: %s\n", out, strerror(errno));
    return 2;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof f->dir, "%s/loom-record-%d-XXXXXX", tmp && *tmp ? tmp : "/tmp",
           (int)getpid());
  if (!mkdtemp(f->dir)) {
    fprintf(stderr, "loom record: cannot create a session folder in %s: %s\n",
            tmp && *tmp ? tmp : "/tmp", strerror(errno));
    return 2;
  }
  /* Orphans (a daemonized helper, workers whose parent died) come to loom
   * record, so it sees them end and can wait for their traces. */
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  /* Absolute: the processes may change their working folder. */
  char *abs = f->to_dir ? realpath(f->out, NULL) : NULL;
  if (abs && strlen(abs) < sizeof f->out) snprintf(f->out, sizeof f->out, "%s", abs);
  free(abs);
  f->oom_kills = oom_kills();
  arenas_setup(f);
  setenv("LOOM_RECORD_DIR", f->dir, 1);
  setenv("LOOM_RECORD_ARENAS", f->arenas, 1);
  setenv("LOOM_RECORD_TRACEDIR", f->to_dir ? f->out : f->dir, 1);
  setenv("LOOM_RECORD_EXT", f->to_dir ? ".json" : ext_of(out), 1);
  setenv("LOOM_RECORD_FOLLOW", mode, 1);
  if (!f->to_dir) setenv("LOOM_RECORD_TOP_OUTPUT", "1", 1);
  return 0;
}

static void note_end(loom_follow *f, pid_t pid, int status) {
  if (f->nended == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 16;
    void *p = realloc(f->ended, cap * sizeof *f->ended);
    if (!p) return;
    f->ended = p;
    f->cap = cap;
  }
  f->ended[f->nended].pid = pid;
  f->ended[f->nended++].status = status;
}

int loom__follow_wait(loom_follow *f, pid_t top) {
  int top_status = 0, top_done = 0;
  time_t since = 0;
  for (;;) {
    int st;
    pid_t p = waitpid(-1, &st, top_done ? WNOHANG : 0);
    if (p < 0 && errno == EINTR) continue;
    if (p < 0) break; /* ECHILD: nobody left */
    if (p == 0) {     /* descendants still running after the program ended */
      if (!since) since = time(NULL);
      else if (since > 0 && time(NULL) - since >= 5) {
        fprintf(stderr, "loom: the program ended; waiting for the processes it left running\n");
        since = -1;
      }
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
      continue;
    }
    if (p == top) {
      top_status = st;
      top_done = 1;
    } else {
      note_end(f, p, st);
    }
  }
  return top_status;
}

typedef struct proc {
  pid_t pid;
  int windows; /* wrote window files (or none), reported by windows_of */
  char cmd[512];
  char done[16384]; /* <pid>.done's lines, "" when none */
} proc;

/* Processes that recorded nothing (a compiler or linker a runtime ran, a
 * shell), said on one line by program name instead of one line each. */
enum { QUIET_NAMES = 6 };
typedef struct quiet {
  size_t n, nnames, other;
  char name[QUIET_NAMES][64];
  size_t count[QUIET_NAMES];
} quiet;

static void quiet_add(quiet *q, const char *cmd) {
  size_t len = strcspn(cmd, " ");
  const char *base = cmd;
  for (const char *c = cmd; c < cmd + len; c++)
    if (*c == '/') base = c + 1;
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)(cmd + len - base), base);
  q->n++;
  for (size_t i = 0; i < q->nnames; i++)
    if (!strcmp(q->name[i], name)) {
      q->count[i]++;
      return;
    }
  if (q->nnames == QUIET_NAMES) {
    q->other++;
    return;
  }
  snprintf(q->name[q->nnames], sizeof q->name[0], "%s", name);
  q->count[q->nnames++] = 1;
}

static void quiet_say(const quiet *q) {
  if (!q->n) return;
  fprintf(stderr, "loom:   %zu other process%s recorded nothing:", q->n, q->n == 1 ? "" : "es");
  for (size_t i = 0; i < q->nnames; i++)
    fprintf(stderr, "%s %s x%zu", i ? "," : "", q->name[i], q->count[i]);
  if (q->other) fprintf(stderr, ", %zu more", q->other);
  fputc('\n', stderr);
}

static int by_pid(const void *a, const void *b) {
  const proc *x = a, *y = b;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

static void read_line(const char *path, char *out, size_t n) {
  out[0] = 0;
  FILE *fp = fopen(path, "r");
  if (!fp) return;
  if (!fgets(out, (int)n, fp)) out[0] = 0;
  fclose(fp);
  out[strcspn(out, "\n")] = 0;
}

/* Every line of path (the .done file has one per trace written). */
static void read_lines(const char *path, char *out, size_t n) {
  out[0] = 0;
  FILE *fp = fopen(path, "r");
  if (!fp) return;
  size_t k = fread(out, 1, n - 1, fp);
  out[k] = 0;
  fclose(fp);
}

static void read_proc(const loom_follow *f, proc *p, long pid) {
  memset(p, 0, sizeof *p);
  char path[PATH_MAX + 64];
  p->pid = (pid_t)pid;
  snprintf(path, sizeof path, "%s/%ld.started", f->dir, pid);
  read_line(path, p->cmd, sizeof p->cmd);
  snprintf(path, sizeof path, "%s/%ld.done", f->dir, pid);
  read_lines(path, p->done, sizeof p->done);
  if (p->cmd[0]) return;
  char out[8]; /* the marker is empty or missing: the command's name from its arena */
  int apid, pending;
  snprintf(path, sizeof path, "%s/%ld.arena", f->arenas, pid);
  if (loom__salvage_peek(path, &apid, p->cmd, sizeof p->cmd, out, sizeof out, &pending) != 0)
    snprintf(p->cmd, sizeof p->cmd, "?");
}

/* A process is known by its <pid>.started marker, or by its arena alone
 * (the marker could not be written: the session folder's disk is full). */
static int known(const proc *v, size_t n, long pid) {
  for (size_t i = 0; i < n; i++)
    if (v[i].pid == pid) return 1;
  return 0;
}

static proc *scan(const loom_follow *f, size_t *np) {
  proc *v = NULL;
  size_t n = 0, cap = 0;
  for (int pass = 0; pass < 2; pass++) {
    DIR *d = opendir(pass ? f->arenas : f->dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      char *end;
      long pid = strtol(e->d_name, &end, 10);
      if (end == e->d_name || strcmp(end, pass ? ".arena" : ".started")) continue;
      if (pass && known(v, n, pid)) continue;
      if (n == cap) {
        cap = cap ? cap * 2 : 16;
        proc *w = realloc(v, cap * sizeof *v);
        if (!w) break;
        v = w;
      }
      read_proc(f, &v[n++], pid);
    }
    if (d) closedir(d);
  }
  if (n) qsort(v, n, sizeof *v, by_pid);
  *np = n;
  return v;
}


/* How pid ended, as loom record knows it: 1 and *st when it reaped it. */
static int end_status(const loom_follow *f, pid_t pid, pid_t top, int top_status, int *st) {
  if (pid == top) return *st = top_status, 1;
  for (size_t i = 0; i < f->nended; i++)
    if (f->ended[i].pid == pid) return *st = f->ended[i].status, 1;
  return 0;
}

/* How a process that wrote no trace died, as a phrase after its name. */
static void death(const loom_follow *f, pid_t pid, pid_t top, int top_status, char *out,
                  size_t n) {
  int st = 0;
  if (!end_status(f, pid, top, top_status, &st)) {
    snprintf(out, n, "ended without writing a trace");
  } else if (WIFSIGNALED(st)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(st));
    long long k = WTERMSIG(st) == SIGKILL ? oom_kills() : -1;
    const char *oom = WTERMSIG(st) != SIGKILL ? ""
                      : k < 0 || f->oom_kills < 0 ? " (possibly out of memory)"
                      : k > f->oom_kills ? " (out of memory: the kernel's OOM killer)" : "";
    snprintf(out, n, "was killed by SIG%s%s", abbrev ? abbrev : "?", oom);
  } else if (WIFEXITED(st)) {
    snprintf(out, n, "exited with status %d without writing a trace", WEXITSTATUS(st));
  } else {
    snprintf(out, n, "ended without writing a trace");
  }
}

/* How a process that wrote no trace ended: its save failed (failed: the
 * .done line's message, "to write X: why") or it died. */
static void ended(const loom_follow *f, pid_t pid, pid_t top, int top_status, const char *failed,
                  char *how, size_t n) {
  const char *colon = strstr(failed, ": ");
  if (failed[0]) snprintf(how, n, "could not write its trace: %s", colon ? colon + 2 : failed);
  else death(f, pid, top, top_status, how, n);
}

/* Rebuilds p's trace from its arena into the session folder (-o FILE:
 * merged from there) or where it would have written it (-o DIR/), as its
 * .done line; a line about it in msg.  failed: its own save's message ("to
 * write X: why"), "" when it wrote none.  0; -1: no arena or nothing to
 * rebuild (msg says why); -2: the trace could not be written, the records
 * are whole in its arena (kept by the caller). */
static int salvage(const loom_follow *f, proc *p, pid_t top, int top_status, const char *failed,
                   char *msg, size_t n) {
  char path[PATH_MAX + 64], how[4400], dest[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%d.arena", f->arenas, (int)p->pid);
  msg[0] = 0;
  if (access(path, F_OK) != 0) return -1;
  ended(f, p->pid, top, top_status, failed, how, sizeof how);
  snprintf(dest, sizeof dest, "%s/rebuilt-%d%s", f->dir, (int)p->pid, ext_of(f->out));
  loom__salvage_opts o = {.death = how, .out = f->to_dir ? NULL : dest, .quiet_unused = 1,
                          .asked = f->asked};
  loom__salvage_result r;
  if (loom__salvage_to(path, &o, &r) != LOOM_OK) {
    char comm[64], out[8], err[1024];
    int pid, pending = 0;
    snprintf(err, sizeof err, "%s", loom_last_error());
    if (loom__salvage_peek(path, &pid, comm, sizeof comm, out, sizeof out, &pending) == 0 &&
        pending) {
      snprintf(msg, n, "%s; its trace could not be rebuilt there: %s", failed[0] ? "" : how, err);
      return -2;
    }
    snprintf(msg, n, "%s; its records could not be rebuilt: %s", how, err);
    return -1;
  }
  unlink(path); /* rebuilt: its memory is not needed any more */
  if (failed[0]) snprintf(how, sizeof how, "could not write its trace");
  snprintf(p->done, sizeof p->done, "%llu %llu %llu %llu %llu\t%s",
           (unsigned long long)r.events, (unsigned long long)r.flows,
           (unsigned long long)r.devices, (unsigned long long)r.dropped,
           (unsigned long long)r.warnings, r.out);
  char open_at[96] = "";
  if (r.unclosed)
    snprintf(open_at, sizeof open_at, ", %llu open at death (ended at its last record)",
             (unsigned long long)r.unclosed);
  char unres[1280] = "";
  if (r.unresolved)
    snprintf(unres, sizeof unres, ", %llu names unreadable", (unsigned long long)r.unresolved);
  if (r.bk_summary[0]) /* per backend: records kept and lost */
    snprintf(unres + strlen(unres), sizeof unres - strlen(unres), "%s", r.bk_summary);
  else if (r.bk_lost)
    snprintf(unres + strlen(unres), sizeof unres - strlen(unres),
             ", %llu backend records lost with its memory", (unsigned long long)r.bk_lost);
  snprintf(msg, n, "%s; loom rebuilt its trace from shared memory: %llu range%s and %llu "
           "op%s kept%s%s", how, (unsigned long long)r.ranges, r.ranges == 1 ? "" : "s",
           (unsigned long long)r.ops, r.ops == 1 ? "" : "s", open_at, unres);
  return 0;
}

/* Why pid wrote no trace, as far as loom record knows. */
static void why_lost(const loom_follow *f, pid_t pid, pid_t top, int top_status, char *out,
                     size_t n) {
  int known = 0, st = 0;
  if (pid == top) known = 1, st = top_status;
  for (size_t i = 0; i < f->nended && !known; i++)
    if (f->ended[i].pid == pid) known = 1, st = f->ended[i].status;
  if (known && WIFSIGNALED(st)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(st));
    snprintf(out, n, "was killed by SIG%s before it could write a trace", abbrev ? abbrev : "?");
  } else {
    snprintf(out, n, "ended without writing a trace (killed by SIGKILL, or it exec'ed a "
                     "program that does not load loom)");
  }
}

static void rm_rf(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[PATH_MAX + 256];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

void loom__follow_abandon(loom_follow *f) {
  if (strcmp(f->arenas, f->dir)) rm_rf(f->arenas);
  rm_rf(f->dir);
}

/* Moves a lone trace to the output: rename, else a copy through a
 * temporary file next to it, renamed over it when whole (a failed copy
 * leaves the output as it was).  The mode is what the umask allows, never
 * more than the file replaced had. */
static int move_to(const char *from, const char *to) {
  if (rename(from, to) == 0) return 0;
  char tmp[PATH_MAX + 32];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", to) >= sizeof tmp) return -1;
  FILE *in = fopen(from, "rb");
  int fd = in ? mkostemp(tmp, O_CLOEXEC) : -1;
  FILE *o = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!o) {
    int e = errno;
    if (in) fclose(in);
    if (fd >= 0) close(fd), unlink(tmp);
    errno = e;
    return -1;
  }
  mode_t um = umask(0);
  umask(um);
  mode_t mode = 0666 & ~um;
  struct stat st;
  if (stat(to, &st) == 0 && S_ISREG(st.st_mode)) mode &= st.st_mode;
  fchmod(fd, mode & 0777);
  char buf[65536];
  size_t k;
  int bad = 0;
  while ((k = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, k, o) != k) bad = errno ? errno : EIO;
  fclose(in);
  if (fclose(o) != 0 && !bad) bad = errno;
  if (!bad && rename(tmp, to) != 0) bad = errno;
  if (bad) {
    unlink(tmp);
    errno = bad;
    return -1;
  }
  unlink(from);
  return 0;
}

/* A window file in the session folder (a process other than the first with
 * -o FILE) is moved next to FILE: windows are kept as they are, not merged. */
static void keep_window(const loom_follow *f, char *path, size_t n) {
  size_t dl = strlen(f->dir);
  if (strncmp(path, f->dir, dl) || path[dl] != '/') return;
  char to[PATH_MAX + 256];
  const char *slash = strrchr(f->out, '/');
  snprintf(to, sizeof to, "%.*s%s", slash ? (int)(slash - f->out + 1) : 0, f->out, path + dl + 1);
  if (move_to(path, to) == 0 && strlen(to) < n) snprintf(path, n, "%s", to);
}

/* Reports the windows a process wrote ("window SEQ ..." lines, or "none")
 * and marks it so; its files stay where they are. */
/* Reports the windows a process wrote (its .done has "window SEQ ..." or
 * "none" lines, or several lines) and marks it so; its files stay where
 * they are.  Otherwise only its first line counts, as without windows. */
static void windows_of(const loom_follow *f, proc *p, pid_t top, size_t *nwin) {
  char *nl = strchr(p->done, '\n');
  int many = nl && nl[1];
  if (!many && strncmp(p->done, "window ", 7) && strncmp(p->done, "none\t", 5)) {
    if (nl) *nl = 0;
    return;
  }
  p->windows = 1;
  for (char *line = p->done; line && *line;) {
    nl = strchr(line, '\n');
    if (nl) *nl = 0;
    char *tab = strchr(line, '\t');
    unsigned seq = 0;
    unsigned long long ev = 0, dr = 0, wn = 0, fl = 0, dv = 0;
    if (!tab) {
    } else if (!strncmp(line, "none\t", 5) && p->pid != top) {
      /* a helper process (a compiler the runtime ran) outside every window */
    } else if (!strncmp(line, "none\t", 5) || !strncmp(line, "failed\t", 7)) {
      fprintf(stderr, "loom:   pid %d (%s) %s%s\n", (int)p->pid, p->cmd,
              line[0] == 'f' ? "failed " : "", tab + 1);
    } else if (sscanf(line, "window %u %llu %llu %llu %llu %llu", &seq, &ev, &fl, &dv, &dr,
                      &wn) == 6 ||
               sscanf(line, "%llu %llu %llu %llu %llu", &ev, &fl, &dv, &dr, &wn) == 5) {
      char path[PATH_MAX + 256];
      snprintf(path, sizeof path, "%s", tab + 1);
      keep_window(f, path, sizeof path);
      fprintf(stderr, "loom:   pid %d (%s) window %u: %llu events, %llu dropped, %llu "
              "warning%s -> %s\n", (int)p->pid, p->cmd, seq ? seq : 1, ev, dr, wn,
              wn == 1 ? "" : "s", path);
      (*nwin)++;
    }
    line = nl ? nl + 1 : NULL;
  }
}

/* Whether a process that wrote windows ended without its last trace (a
 * ring-mode process killed after a dump): its arena is still recording. */
static int windows_unsaved(const loom_follow *f, const proc *p) {
  char path[PATH_MAX + 64], comm[64], out[8];
  int pid, pending = 0;
  snprintf(path, sizeof path, "%s/%d.arena", f->arenas, (int)p->pid);
  return loom__salvage_peek(path, &pid, comm, sizeof comm, out, sizeof out, &pending) == 0 && pending;
}

/* -o FILE as an absolute path (for the kept folder's manifest). */
static void abs_out(const loom_follow *f, char *out, size_t n) {
  char cwd[PATH_MAX];
  if (f->out[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(out, n, "%s", f->out);
  else snprintf(out, n, "%s/%s", cwd, f->out);
}

/* The output could not be written whole: every trace written (inputs) and
 * every arena not rebuilt (already in k) are kept in one folder, and the
 * command that writes them elsewhere is printed.  -o FILE never holds a
 * part of the run. */
static void keep_all(loom_follow *f, kept *k, const char **inputs, size_t ninputs,
                     const pid_t *pids, const char *prog, pid_t top) {
  int in_place = 0; /* the first program's trace could not leave -o */
  for (size_t i = 0; i < ninputs; i++) {
    char moved[PATH_MAX + 64];
    const char *path = inputs[i];
    if (!f->to_dir && !strcmp(path, f->out)) {
      /* into the session folder, else the arenas' (a full $TMPDIR) */
      snprintf(moved, sizeof moved, "%s/top-%d%s", f->dir, (int)pids[i], ext_of(f->out));
      if (move_to(path, moved) == 0) path = moved;
      else if (snprintf(moved, sizeof moved, "%s/top-%d%s", f->arenas, (int)pids[i],
                        ext_of(f->out)) > 0 && move_to(path, moved) == 0) path = moved;
      else in_place = 1;
    }
    char abs[PATH_MAX + 64];
    if (path[0] != '/' && !f->to_dir) {
      snprintf(abs, sizeof abs, "%s", path);
      abs_out(f, abs, sizeof abs);
      path = abs;
    }
    kept_add(k, (int)pids[i], 0, path, "", NULL);
  }
  if (f->to_dir) snprintf(k->out, sizeof k->out, "%s", f->out);
  else abs_out(f, k->out, sizeof k->out);
  k->to_dir = f->to_dir;
  size_t dl = strlen(f->dir);
  for (size_t i = 0; i < k->n && strcmp(f->arenas, f->dir); i++)
    if (!k->v[i].arena && !strncmp(k->v[i].path, f->dir, dl) && k->v[i].path[dl] == '/')
      snprintf(k->session, sizeof k->session, "%s", f->dir);
  char err[PATH_MAX + 128] = "", qd[PATH_MAX * 2], qo[PATH_MAX * 2];
  if (kept_save(k, f->arenas, err, sizeof err) != 0)
    fprintf(stderr, "loom: %s (loom salvage then rebuilds the arenas in %s only)\n", err, k->dir);
  kept_quote(qd, sizeof qd, k->dir);
  kept_quote(qo, sizeof qo, f->to_dir ? k->out : f->out);
  size_t l = strlen(qo);
  if (f->to_dir && l + 1 < sizeof qo && qo[l - 1] != '/' && qo[l - 1] != '\'') strcat(qo, "/");
  fprintf(stderr, "loom: nothing recorded is lost: the records of %zu process%s are kept in %s%s\n"
          "loom: write them with: loom salvage %s -o %s   (or -o another path, where there is "
          "room)\n", k->n, k->n == 1 ? "" : "es", k->dir, strncmp(k->dir, "/dev/shm/", 9) ? ""
          : " (in memory until it is removed)", qd, qo);
  if (in_place)
    fprintf(stderr, "loom: %s holds the trace of %s (pid %d) alone\n", f->out, prog, (int)top);
}

/* The control socket a killed process left (it could not remove it). */
static void drop_socket(pid_t pid) {
  char dir[4096], sock[4200];
  struct stat st;
  for (int i = 0; i < 2; i++) {
    loom__ctl_dir_name(dir, sizeof dir, i ? NULL : getenv("XDG_RUNTIME_DIR"), geteuid());
    if (loom__ctl_sock_path(sock, sizeof sock, dir, (long)pid) == 0 && lstat(sock, &st) == 0 &&
        S_ISSOCK(st.st_mode) && st.st_uid == geteuid() && kill(pid, 0) != 0 && errno == ESRCH)
      unlink(sock);
  }
}

int loom__follow_finish(loom_follow *f, const char *prog, int top_status, pid_t top) {
  size_t n = 0;
  proc *v = scan(f, &n);
  const char **inputs = calloc(n ? n : 1, sizeof *inputs);
  pid_t *pids = calloc(n ? n : 1, sizeof *pids);
  size_t ninputs = 0, lost = 0;
  unsigned long long total = 0;
  kept k = {0};
  char lone[PATH_MAX + 256] = "";
  if (n == 0 && !(WIFEXITED(top_status) && WEXITSTATUS(top_status) == 127))
    fprintf(stderr, "loom: %s ended before loom could write a trace\n", prog);
  if (n > 1) fprintf(stderr, "loom: %zu processes:\n", n);
  size_t nwin = 0;
  quiet nothing = {0};
  for (size_t i = 0; i < n; i++) windows_of(f, &v[i], top, &nwin);
  for (size_t i = 0; i < n; i++) {
    proc *p = &v[i];
    if (p->windows && !windows_unsaved(f, p)) continue;
    if (p->windows) p->done[0] = 0; /* its windows are said above; its last records are rebuilt */
    char *tab = strchr(p->done, '\t');
    if (!p->done[0] || !tab || !strncmp(p->done, "failed\t", 7)) {
      /* no trace (killed, or its save failed): rebuilt from its arena */
      char failed[4200] = "", msg[6000];
      if (p->done[0] && tab) snprintf(failed, sizeof failed, "%s", tab + 1);
      if (failed[0]) fprintf(stderr, "loom:   pid %d (%s) failed %s\n", (int)p->pid, p->cmd, failed);
      int rc = salvage(f, p, top, top_status, failed, msg, sizeof msg);
      if (rc == 0) {
        fprintf(stderr, "loom:   pid %d (%s) %s\n", (int)p->pid, p->cmd, msg);
        tab = strchr(p->done, '\t');
      } else if (rc == -2) {
        char arena[PATH_MAX + 64];
        snprintf(arena, sizeof arena, "%s/%d.arena", f->arenas, (int)p->pid);
        fprintf(stderr, "loom:   pid %d (%s) %s; its records are kept (below)\n", (int)p->pid,
                p->cmd, msg + (msg[0] == ';' ? 2 : 0));
        char how[4400];
        ended(f, p->pid, top, top_status, failed, how, sizeof how);
        kept_add(&k, (int)p->pid, 1, arena, p->cmd, how);
        continue;
      } else {
        char why[160];
        why_lost(f, p->pid, top, top_status, why, sizeof why);
        fprintf(stderr, "loom:   pid %d (%s) %s%s%s\n", (int)p->pid, p->cmd,
                failed[0] ? "wrote no trace" : why, msg[0] ? "; " : "", msg);
        lost++;
        continue;
      }
    }
    *tab = 0;
    const char *path = tab + 1;
    unsigned long long ev = 0, fl = 0, dv = 0, dr = 0, wn = 0;
    sscanf(p->done, "%llu %llu %llu %llu %llu", &ev, &fl, &dv, &dr, &wn);
    total += ev;
    pids[ninputs] = p->pid;
    inputs[ninputs++] = path;
    if (n > 1 && !f->to_dir && !ev && !dr && !wn && p->pid != top)
      quiet_add(&nothing, p->cmd);
    else if (n > 1 || f->to_dir)
      fprintf(stderr, "loom:   pid %d (%.160s%s): %llu events, %llu dropped, %llu warning%s%s%s\n",
              (int)p->pid, p->cmd, strlen(p->cmd) > 160 ? " ..." : "", ev, dr, wn,
              wn == 1 ? "" : "s", f->to_dir ? " -> " : "", f->to_dir ? path : "");
    else /* said once the trace is at -o */
      snprintf(lone, sizeof lone, "loom: %s: %llu events, %llu flows, %llu device%s, %llu "
               "dropped, %llu warning%s\n", f->out, ev, fl, dv, dv == 1 ? "" : "s", dr, wn,
               wn == 1 ? "" : "s");
  }
  quiet_say(&nothing);
  if (nwin) fprintf(stderr, "loom: %zu window%s written\n", nwin, nwin == 1 ? "" : "s");
  int keep = k.n > 0; /* some records are only in their arena: nothing merged */
  if (f->to_dir) {
    if ((n > 1 || lost || keep) && !(nwin && !ninputs))
      fprintf(stderr, "loom: %zu trace%s in %s (%llu events)%s\n", ninputs, ninputs == 1 ? "" : "s",
              f->out, total, lost ? "; some processes wrote none (above)" : "");
    ninputs = 0; /* they are the output, in place */
  } else if (keep) {
    fprintf(stderr, "loom: %s was not written: the traces of %zu process%s could not be written\n",
            f->out, k.n, k.n == 1 ? "" : "es");
  } else if (ninputs == 1) {
    if (strcmp(inputs[0], f->out) && move_to(inputs[0], f->out) != 0) {
      fprintf(stderr, "loom: cannot write %s: %s\n", f->out, strerror(errno));
      keep = 1;
    }
  } else if (ninputs > 1) {
    /* The first program's trace is at the output: an input, not the output. */
    char top_in[PATH_MAX + 32];
    snprintf(top_in, sizeof top_in, "%s/top%s", f->dir, ext_of(f->out));
    for (size_t j = 0; j < ninputs; j++)
      if (!strcmp(inputs[j], f->out) && rename(f->out, top_in) == 0) inputs[j] = top_in;
    loom_merge_config mc = {.struct_size = sizeof mc, .ninputs = (uint32_t)ninputs,
                            .inputs = inputs, .output = f->out};
    loom_merge_result mr = {.struct_size = sizeof mr};
    if (loom_merge(&mc, &mr) == LOOM_OK) {
      /* mr.processes counts device processes too: say the programs' traces */
      fprintf(stderr, "loom: %s: traces of %zu processes merged, %llu events, %llu flows, "
              "%llu warning%s\n", f->out, ninputs, (unsigned long long)mr.events,
              (unsigned long long)mr.flows, (unsigned long long)mr.warnings,
              mr.warnings == 1 ? "" : "s");
    } else {
      fprintf(stderr, "loom: cannot merge the %zu traces into %s: %s\n", ninputs, f->out,
              loom_last_error());
      keep = 1;
    }
  }
  if (keep) keep_all(f, &k, inputs, f->to_dir ? 0 : ninputs, pids, prog, top);
  else fputs(lone, stderr);
  /* the arenas are not needed once every trace is written or rebuilt; the
   * session folder once the traces in it are merged (or none is kept) */
  if (!keep && strcmp(f->arenas, f->dir)) rm_rf(f->arenas);
  if (!keep || (strcmp(f->arenas, f->dir) && !k.session[0])) rm_rf(f->dir);
  for (size_t i = 0; i < n; i++) drop_socket(v[i].pid);
  kept_free(&k);
  free(inputs);
  free(pids);
  free(v);
  free(f->ended);
  return keep;
}
