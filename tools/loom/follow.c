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
#include "follow.h"
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

static proc *scan(const loom_follow *f, size_t *np) {
  proc *v = NULL;
  size_t n = 0, cap = 0;
  DIR *d = opendir(f->dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (end == e->d_name || strcmp(end, ".started")) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      proc *w = realloc(v, cap * sizeof *v);
      if (!w) break;
      v = w;
    }
    proc *p = &v[n++];
    memset(p, 0, sizeof *p);
    char path[PATH_MAX + 64];
    p->pid = (pid_t)pid;
    snprintf(path, sizeof path, "%s/%ld.started", f->dir, pid);
    read_line(path, p->cmd, sizeof p->cmd);
    snprintf(path, sizeof path, "%s/%ld.done", f->dir, pid);
    read_lines(path, p->done, sizeof p->done);
  }
  if (d) closedir(d);
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

/* The trace of p rebuilt from its arena, as its .done line; a line about it
 * in msg.  0, or -1 (no arena, or it could not be rebuilt: msg says why). */
static int salvage(const loom_follow *f, proc *p, pid_t top, int top_status, char *msg,
                   size_t n) {
  char path[PATH_MAX + 64], how[160];
  snprintf(path, sizeof path, "%s/%d.arena", f->arenas, (int)p->pid);
  msg[0] = 0;
  if (access(path, F_OK) != 0) return -1;
  death(f, p->pid, top, top_status, how, sizeof how);
  loom__salvage_result r;
  if (loom__salvage(path, how, &r) != LOOM_OK) {
    snprintf(msg, n, "%s; its records could not be rebuilt: %s", how, loom_last_error());
    return -1;
  }
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

/* Moves a lone trace to the output (rename, else copy). */
static int move_to(const char *from, const char *to) {
  if (rename(from, to) == 0) return 0;
  FILE *in = fopen(from, "rb"), *o = in ? fopen(to, "wb") : NULL;
  if (!o) {
    if (in) fclose(in);
    return -1;
  }
  char buf[65536];
  size_t k;
  int bad = 0;
  while ((k = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, k, o) != k) bad = 1;
  fclose(in);
  if (fclose(o) != 0 || bad) return -1;
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

void loom__follow_finish(loom_follow *f, const char *prog, int top_status, pid_t top) {
  size_t n = 0;
  proc *v = scan(f, &n);
  const char **inputs = calloc(n ? n : 1, sizeof *inputs);
  size_t ninputs = 0, lost = 0;
  unsigned long long total = 0;
  if (n == 0 && !(WIFEXITED(top_status) && WEXITSTATUS(top_status) == 127))
    fprintf(stderr, "loom: %s ended before loom could write a trace\n", prog);
  if (n > 1) fprintf(stderr, "loom: %zu processes:\n", n);
  size_t nwin = 0;
  quiet nothing = {0};
  for (size_t i = 0; i < n; i++) windows_of(f, &v[i], top, &nwin);
  for (size_t i = 0; i < n; i++) {
    proc *p = &v[i];
    if (p->windows) continue;
    char *tab = strchr(p->done, '\t');
    if (!p->done[0] || !tab || !strncmp(p->done, "failed\t", 7)) {
      /* no trace (killed, or its save failed): rebuilt from its arena */
      char failed[4200] = "", msg[1024];
      if (p->done[0] && tab) snprintf(failed, sizeof failed, "%s", tab + 1);
      if (salvage(f, p, top, top_status, msg, sizeof msg) == 0) {
        if (failed[0]) fprintf(stderr, "loom:   pid %d (%s) failed %s\n", (int)p->pid, p->cmd, failed);
        fprintf(stderr, "loom:   pid %d (%s) %s\n", (int)p->pid, p->cmd, msg);
        tab = strchr(p->done, '\t');
      } else if (failed[0]) {
        fprintf(stderr, "loom:   pid %d (%s) failed %s%s%s\n", (int)p->pid, p->cmd, failed,
                msg[0] ? "; " : "", msg);
        lost++;
        continue;
      } else {
        char why[160];
        why_lost(f, p->pid, top, top_status, why, sizeof why);
        fprintf(stderr, "loom:   pid %d (%s) %s%s%s\n", (int)p->pid, p->cmd, why,
                msg[0] ? "; " : "", msg);
        lost++;
        continue;
      }
    }
    *tab = 0;
    const char *path = tab + 1;
    unsigned long long ev = 0, fl = 0, dv = 0, dr = 0, wn = 0;
    sscanf(p->done, "%llu %llu %llu %llu %llu", &ev, &fl, &dv, &dr, &wn);
    total += ev;
    inputs[ninputs++] = path;
    if (n > 1 && !f->to_dir && !ev && !dr && !wn && p->pid != top)
      quiet_add(&nothing, p->cmd);
    else if (n > 1 || f->to_dir)
      fprintf(stderr, "loom:   pid %d (%.160s%s): %llu events, %llu dropped, %llu warning%s%s%s\n",
              (int)p->pid, p->cmd, strlen(p->cmd) > 160 ? " ..." : "", ev, dr, wn,
              wn == 1 ? "" : "s", f->to_dir ? " -> " : "", f->to_dir ? path : "");
    else
      fprintf(stderr, "loom: %s: %llu events, %llu flows, %llu device%s, %llu dropped, "
                      "%llu warning%s\n", f->out, ev, fl, dv, dv == 1 ? "" : "s", dr, wn,
              wn == 1 ? "" : "s");
  }
  quiet_say(&nothing);
  if (nwin) fprintf(stderr, "loom: %zu window%s written\n", nwin, nwin == 1 ? "" : "s");
  int keep = 0;
  if (f->to_dir) {
    if ((n > 1 || lost) && !(nwin && !ninputs))
      fprintf(stderr, "loom: %zu trace%s in %s (%llu events)%s\n", ninputs, ninputs == 1 ? "" : "s",
              f->out, total, lost ? "; some processes wrote none (above)" : "");
  } else if (ninputs == 1) {
    if (strcmp(inputs[0], f->out) && move_to(inputs[0], f->out) != 0) {
      fprintf(stderr, "loom: cannot write %s: %s; the trace is kept in %s\n", f->out,
              strerror(errno), f->dir);
      keep = 1;
    }
  } else if (ninputs > 1) {
    /* The first program's trace is at the output: an input, not the output. */
    char top_in[PATH_MAX + 32];
    snprintf(top_in, sizeof top_in, "%s/top%s", f->dir, ext_of(f->out));
    size_t ti = ninputs;
    for (size_t k = 0; k < ninputs; k++)
      if (!strcmp(inputs[k], f->out) && rename(f->out, top_in) == 0) ti = k;
    if (ti < ninputs) inputs[ti] = top_in;
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
      fprintf(stderr, "loom: cannot merge the %zu traces into %s: %s\n"
                      "loom: the per-process traces are kept in %s\n",
              ninputs, f->out, loom_last_error(), f->dir);
      if (ti < ninputs && rename(top_in, f->out) == 0)
        fprintf(stderr, "loom: %s holds the trace of %s alone\n", f->out, prog);
      keep = 1;
    }
  }
  if (!keep) rm_rf(f->dir);
  /* the arenas are not needed once every trace is written or rebuilt */
  if (strcmp(f->arenas, f->dir)) rm_rf(f->arenas);
  free(inputs);
  free(v);
  free(f->ended);
}
