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
 * (src/salvage/salvage.c) and says how the process died.  A process that wrote
 * its trace removed its arena.  When the output cannot be written, nothing
 * is lost: every record is kept for `loom salvage` (follow_keep.c, kept.h).
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

#include "salvage/salvage.h"
#include "follow_int.h"
#include "loom/loom.h"

const char *follow_ext(const char *out) {
  size_t n = strlen(out);
  if (n > 8 && !strcmp(out + n - 8, ".json.gz")) return ".json.gz";
  if (n > 8 && !strcmp(out + n - 8, ".pftrace")) return ".pftrace";
  if (n > 11 && !strcmp(out + n - 11, ".pftrace.gz")) return ".pftrace.gz";
  return ".json";
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
  f->oom_kills = follow_oom_kills();
  arenas_setup(f);
  setenv("LOOM_RECORD_DIR", f->dir, 1);
  setenv("LOOM_RECORD_ARENAS", f->arenas, 1);
  setenv("LOOM_RECORD_TRACEDIR", f->to_dir ? f->out : f->dir, 1);
  setenv("LOOM_RECORD_EXT", f->to_dir ? ".json" : follow_ext(out), 1);
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


/* A window file in the session folder (a process other than the first with
 * -o FILE) is moved next to FILE: windows are kept as they are, not merged. */
static void keep_window(const loom_follow *f, char *path, size_t n) {
  size_t dl = strlen(f->dir);
  if (strncmp(path, f->dir, dl) || path[dl] != '/') return;
  char to[PATH_MAX + 256];
  const char *slash = strrchr(f->out, '/');
  snprintf(to, sizeof to, "%.*s%s", slash ? (int)(slash - f->out + 1) : 0, f->out, path + dl + 1);
  if (follow_move(path, to) == 0 && strlen(to) < n) snprintf(path, n, "%s", to);
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

int loom__follow_finish(loom_follow *f, const char *prog, int top_status, pid_t top) {
  size_t n = 0;
  proc *v = scan(f, &n);
  size_t room = n + 1, ninputs = 0, lost = 0;
  for (size_t i = 0; i < n; i++) room += follow_exec_count(f, v[i].pid);
  const char **inputs = calloc(room, sizeof *inputs);
  pid_t *pids = calloc(room, sizeof *pids);
  follow_images im = {.inputs = inputs, .pids = pids, .ninputs = &ninputs, .cap = room};
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
      int rc = follow_rebuild(f, p, top, top_status, failed, msg, sizeof msg);
      if (rc == 0) {
        fprintf(stderr, "loom:   pid %d (%s) %s\n", (int)p->pid, p->cmd, msg);
        tab = strchr(p->done, '\t');
      } else if (rc == -2) {
        char arena[PATH_MAX + 64];
        snprintf(arena, sizeof arena, "%s/%d.arena", f->arenas, (int)p->pid);
        fprintf(stderr, "loom:   pid %d (%s) %s; its records are kept (below)\n", (int)p->pid,
                p->cmd, msg + (msg[0] == ';' ? 2 : 0));
        char how[4400];
        follow_ended(f, p->pid, top, top_status, failed, how, sizeof how);
        kept_add(&k, (int)p->pid, 1, arena, p->cmd, how);
        continue;
      } else {
        char why[160];
        follow_why_lost(f, p->pid, top, top_status, why, sizeof why);
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
  size_t nprocs = ninputs; /* then the images that ended by exec, after their processes */
  for (size_t i = 0; inputs && pids && i < n; i++)
    total += follow_exec_add(f, &v[i], n > 1 || f->to_dir, &im);
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
    if (strcmp(inputs[0], f->out) && follow_move(inputs[0], f->out) != 0) {
      fprintf(stderr, "loom: cannot write %s: %s\n", f->out, strerror(errno));
      keep = 1;
    }
  } else if (ninputs > 1) {
    /* The first program's trace is at the output: an input, not the output. */
    char top_in[PATH_MAX + 32];
    snprintf(top_in, sizeof top_in, "%s/top%s", f->dir, follow_ext(f->out));
    for (size_t j = 0; j < ninputs; j++)
      if (!strcmp(inputs[j], f->out) && rename(f->out, top_in) == 0) inputs[j] = top_in;
    loom_merge_config mc = {.struct_size = sizeof mc, .ninputs = (uint32_t)ninputs,
                            .inputs = inputs, .output = f->out};
    loom_merge_result mr = {.struct_size = sizeof mr};
    if (loom_merge(&mc, &mr) == LOOM_OK) {
      /* mr.processes counts device processes too: say the programs' traces */
      char images[64] = "";
      if (ninputs > nprocs)
        snprintf(images, sizeof images, " (and %zu of images before an exec)", ninputs - nprocs);
      lone[0] = 0; /* said here */
      fprintf(stderr, "loom: %s: traces of %zu process%s%s merged, %llu events, %llu flows, "
              "%llu warning%s\n", f->out, nprocs, nprocs == 1 ? "" : "es", images,
              (unsigned long long)mr.events,
              (unsigned long long)mr.flows, (unsigned long long)mr.warnings,
              mr.warnings == 1 ? "" : "s");
    } else {
      fprintf(stderr, "loom: cannot merge the %zu traces into %s: %s\n", ninputs, f->out,
              loom_last_error());
      keep = 1;
    }
  }
  if (keep) follow_keep_all(f, &k, inputs, f->to_dir ? 0 : ninputs, pids, prog, top);
  else fputs(lone, stderr);
  /* the arenas are not needed once every trace is written or rebuilt; the
   * session folder once the traces in it are merged (or none is kept) */
  if (!keep && strcmp(f->arenas, f->dir)) follow_rm_rf(f->arenas);
  if (!keep || (strcmp(f->arenas, f->dir) && !k.session[0])) follow_rm_rf(f->dir);
  for (size_t i = 0; i < n; i++) follow_drop_socket(v[i].pid);
  kept_free(&k);
  follow_exec_free(&im);
  free(inputs);
  free(pids);
  free(v);
  free(f->ended);
  return keep;
}
