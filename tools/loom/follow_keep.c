/*
 * follow_keep.c - the part of `loom record` that deals with processes that
 * wrote no trace and outputs that cannot be written (see follow_int.h): how
 * a process ended (the signal, the OOM killer), its trace rebuilt from its
 * shared-memory arena (src/salvage/salvage.c), and, when the output still
 * cannot be written (disk full, no permission, a failed merge), every
 * record kept in one folder for `loom salvage` (kept.h) with the command
 * printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "done.h"
#include "follow_int.h"
#include "loom/loom.h"

/* The kernel's count of OOM kills in loom record's memory cgroup (v2
 * memory.events, v1 memory.oom_control), or -1 when it cannot be read. */
long long follow_oom_kills(void) {
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
    long long k = WTERMSIG(st) == SIGKILL ? follow_oom_kills() : -1;
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
void follow_ended(const loom_follow *f, pid_t pid, pid_t top, int top_status, const char *failed,
                  char *how, size_t n) {
  const char *colon = strstr(failed, ": ");
  if (failed[0]) snprintf(how, n, "could not write its trace: %s", colon ? colon + 2 : failed);
  else death(f, pid, top, top_status, how, n);
}

/* <dir>/<pid>.mem for a rebuilt trace: the summary's lines about its
 * memory (tools.h memory_lines), as the preload writes them for a trace it
 * saved, so a program that died of memory names its peak and top holders
 * the same way (printed with the process's line). */
static void memory_note(const loom_follow *f, pid_t pid, const char *trace) {
  char lines[8192], path[PATH_MAX + 64];
  loom_trace *t = NULL;
  if (loom_trace_load(trace, &t) != LOOM_OK) return;
  int rc = cli_tools()->memory_lines(t, lines, sizeof lines);
  loom_trace_free(t);
  if (rc != 0 || !lines[0]) return;
  snprintf(path, sizeof path, "%s/%ld.mem", f->dir, (long)pid);
  FILE *o = fopen(path, "w");
  if (!o) return;
  fputs(lines, o);
  fclose(o);
}

/* Rebuilds p's trace from its arena into the session folder (-o FILE:
 * merged from there) or where it would have written it (-o DIR/), as its
 * .done line; a line about it in msg.  failed: its own save's message ("to
 * write X: why"), "" when it wrote none.  0; -1: no arena or nothing to
 * rebuild (msg says why); -2: the trace could not be written, the records
 * are whole in its arena (kept by the caller). */
int follow_rebuild(const loom_follow *f, proc *p, pid_t top, int top_status, const char *failed,
                   char *msg, size_t n) {
  char path[PATH_MAX + 64], how[4400], dest[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%d.arena", f->arenas, (int)p->pid);
  msg[0] = 0;
  if (access(path, F_OK) != 0) return -1;
  follow_ended(f, p->pid, top, top_status, failed, how, sizeof how);
  snprintf(dest, sizeof dest, "%s/rebuilt-%d%s", f->dir, (int)p->pid, follow_ext(f->out));
  loom_tools_salvage_opts o = {.death = how, .out = f->to_dir ? NULL : dest, .quiet_unused = 1,
                          .asked = f->asked};
  loom_tools_salvage_result r;
  if (cli_tools()->salvage_to(path, &o, &r) != LOOM_OK) {
    char comm[64], out[8], err[1024];
    int pid, pending = 0;
    snprintf(err, sizeof err, "%s", loom_last_error());
    if (cli_tools()->salvage_peek(path, &pid, comm, sizeof comm, out, sizeof out, &pending) == 0 &&
        pending) {
      snprintf(msg, n, "%s; its trace could not be rebuilt there: %s", failed[0] ? "" : how, err);
      return -2;
    }
    snprintf(msg, n, "%s; its records could not be rebuilt: %s", how, err);
    return -1;
  }
  unlink(path); /* rebuilt: its memory is not needed any more */
  if (failed[0]) snprintf(how, sizeof how, "could not write its trace");
  done_line d = {.kind = DONE_TRACE, .events = r.events, .flows = r.flows,
                 .devices = r.devices, .dropped = r.dropped, .warnings = r.warnings,
                 .text = r.out};
  done_format(p->done, sizeof p->done, &d);
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
  if (!failed[0]) memory_note(f, p->pid, r.out);
  snprintf(msg, n, "%s; loom rebuilt its trace from shared memory: %llu range%s and %llu "
           "op%s kept%s%s", how, (unsigned long long)r.ranges, r.ranges == 1 ? "" : "s",
           (unsigned long long)r.ops, r.ops == 1 ? "" : "s", open_at, unres);
  return 0;
}

/* Why pid wrote no trace, as far as loom record knows. */
void follow_why_lost(const loom_follow *f, pid_t pid, pid_t top, int top_status, char *out,
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

void follow_rm_rf(const char *dir) {
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
  if (strcmp(f->arenas, f->dir)) follow_rm_rf(f->arenas);
  follow_rm_rf(f->dir);
}

/* Moves a lone trace to the output: rename, else a copy through a
 * temporary file next to it, renamed over it when whole (a failed copy
 * leaves the output as it was).  The mode is what the umask allows, never
 * more than the file replaced had. */
int follow_move(const char *from, const char *to) {
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

/* -o FILE as an absolute path (for the kept folder's manifest). */
static void abs_out(const loom_follow *f, char *out, size_t n) {
  char cwd[PATH_MAX];
  int k = f->out[0] == '/' || !getcwd(cwd, sizeof cwd) ? snprintf(out, n, "%s", f->out)
                                                        : snprintf(out, n, "%s/%s", cwd, f->out);
  if (k < 0 || (size_t)k >= n) snprintf(out, n, "%s", f->out); /* too long: as given */
}

/* The output could not be written whole: every trace written (inputs) and
 * every arena not rebuilt (already in k) are kept in one folder, and the
 * command that writes them elsewhere is printed.  -o FILE never holds a
 * part of the run. */
void follow_keep_all(loom_follow *f, kept *k, const char **inputs, size_t ninputs,
                     const pid_t *pids, const char *prog, pid_t top) {
  int in_place = 0; /* the first program's trace could not leave -o */
  for (size_t i = 0; i < ninputs; i++) {
    char moved[PATH_MAX + 64];
    const char *path = inputs[i];
    if (!f->to_dir && !strcmp(path, f->out)) {
      /* into the session folder, else the arenas' (a full $TMPDIR) */
      snprintf(moved, sizeof moved, "%s/top-%d%s", f->dir, (int)pids[i], follow_ext(f->out));
      if (follow_move(path, moved) == 0) path = moved;
      else if (snprintf(moved, sizeof moved, "%s/top-%d%s", f->arenas, (int)pids[i],
                        follow_ext(f->out)) > 0 && follow_move(path, moved) == 0) path = moved;
      else in_place = 1;
    }
    char abs[PATH_MAX + 64];
    if (path[0] != '/') { /* only -o FILE itself, left in place, is relative */
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
void follow_drop_socket(pid_t pid) {
  char dir[4096], sock[4200];
  struct stat st;
  for (int i = 0; i < 2; i++) {
    const loom_tools *lt = cli_tools();
    lt->ctl_dir_name(dir, sizeof dir, i ? NULL : getenv("XDG_RUNTIME_DIR"), geteuid());
    if (lt->ctl_sock_path(sock, sizeof sock, dir, (long)pid) == 0 && lstat(sock, &st) == 0 &&
        S_ISSOCK(st.st_mode) && st.st_uid == geteuid() && kill(pid, 0) != 0 && errno == ESRCH)
      unlink(sock);
  }
}
