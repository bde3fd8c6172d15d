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

#include "cli.h"
#include "done.h"
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
  if (cli_tools()->salvage_peek(path, &apid, p->cmd, sizeof p->cmd, out, sizeof out, &pending) != 0)
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

/* Reports the windows a process wrote (its .done has "window SEQ ..." or
 * "none" lines, or several lines: done.h) and marks it so; its files stay
 * where they are.  Otherwise only its first line counts, as without
 * windows. */
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
    done_line d;
    done_kind k = done_parse(line, &d);
    /* "none" of a helper process (a compiler the runtime ran) outside
     * every window is not said */
    if ((k == DONE_NONE && p->pid == top) || k == DONE_FAILED) {
      fprintf(stderr, "loom:   pid %d (%s) %s%s\n", (int)p->pid, p->cmd,
              k == DONE_FAILED ? "failed " : "", d.text);
    } else if (k == DONE_WINDOW || k == DONE_TRACE) {
      char path[PATH_MAX + 256];
      snprintf(path, sizeof path, "%s", d.text);
      keep_window(f, path, sizeof path);
      fprintf(stderr, "loom:   pid %d (%s) window %u: %llu events, %llu dropped, %llu "
              "warning%s -> %s\n", (int)p->pid, p->cmd, d.seq ? d.seq : 1, d.events, d.dropped,
              d.warnings, d.warnings == 1 ? "" : "s", path);
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
  if (cli_tools()->salvage_peek(path, &pid, comm, sizeof comm, out, sizeof out, &pending) != 0)
    return 0;
  return pending;
}

/* What the summary gathers while it goes through the processes. */
typedef struct finish {
  loom_follow *f;
  pid_t top;
  int top_status;
  size_t n;                /* processes */
  const char **inputs;     /* traces to merge (into .done lines, or owned by images) */
  pid_t *pids;             /* the process of each */
  size_t ninputs, room;
  size_t nprocs;           /* inputs that are processes' traces (then images') */
  unsigned long long total; /* their events */
  size_t lost;             /* processes without a trace or records */
  kept k;                  /* arenas kept: records that could not be written */
  quiet nothing;           /* processes that recorded nothing */
  char lone[PATH_MAX + 8448]; /* the lines of a lone trace, said once it is at -o */
} finish;

/* A process without a trace (killed, or its save failed): rebuilt from its
 * arena, kept there, or lost.  0 when it has a trace now (its .done line). */
static int finish_rebuild(finish *fi, proc *p, const done_line *d) {
  char failed[4200] = "", msg[6000];
  if (d->kind == DONE_FAILED) snprintf(failed, sizeof failed, "%s", d->text);
  if (failed[0]) fprintf(stderr, "loom:   pid %d (%s) failed %s\n", (int)p->pid, p->cmd, failed);
  int rc = follow_rebuild(fi->f, p, fi->top, fi->top_status, failed, msg, sizeof msg);
  if (rc == 0) {
    fprintf(stderr, "loom:   pid %d (%s) %s\n", (int)p->pid, p->cmd, msg);
    return 0;
  }
  if (rc == -2) {
    char arena[PATH_MAX + 64], how[4400];
    snprintf(arena, sizeof arena, "%s/%d.arena", fi->f->arenas, (int)p->pid);
    fprintf(stderr, "loom:   pid %d (%s) %s; its records are kept (below)\n", (int)p->pid,
            p->cmd, msg + (msg[0] == ';' ? 2 : 0));
    follow_ended(fi->f, p->pid, fi->top, fi->top_status, failed, how, sizeof how);
    kept_add(&fi->k, (int)p->pid, 1, arena, p->cmd, how);
    return -1;
  }
  char why[160];
  follow_why_lost(fi->f, p->pid, fi->top, fi->top_status, why, sizeof why);
  fprintf(stderr, "loom:   pid %d (%s) %s%s%s\n", (int)p->pid, p->cmd,
          failed[0] ? "wrote no trace" : why, msg[0] ? "; " : "", msg);
  fi->lost++;
  return -1;
}

/* The summary's memory lines of process p's trace, as its preload wrote
 * them, or its rebuild for a killed program (<pid>.mem).  Printed now, or
 * kept with the lone line (one process: said once the trace is at -o). */
static void finish_memory(finish *fi, const proc *p) {
  char path[PATH_MAX + 64], lines[8192] = "";
  snprintf(path, sizeof path, "%s/%ld.mem", fi->f->dir, (long)p->pid);
  read_lines(path, lines, sizeof lines);
  if (!lines[0]) return;
  if (fi->lone[0]) {
    size_t l = strlen(fi->lone);
    snprintf(fi->lone + l, sizeof fi->lone - l, "%s", lines);
  } else {
    fputs(lines, stderr);
  }
}

/* One process's trace: an input of the merge, said (or counted among those
 * that recorded nothing, or kept for the end when it is the only one). */
static void finish_proc(finish *fi, proc *p) {
  const loom_follow *f = fi->f;
  if (p->windows && !windows_unsaved(f, p)) return;
  if (p->windows) p->done[0] = 0; /* its windows are said above; its last records are rebuilt */
  done_line d;
  done_parse(p->done, &d);
  if ((!p->done[0] || !d.text || d.kind == DONE_FAILED) && finish_rebuild(fi, p, &d) != 0)
    return;
  done_parse(p->done, &d); /* rebuilt: its line is new */
  fi->total += d.events;
  fi->pids[fi->ninputs] = p->pid;
  fi->inputs[fi->ninputs++] = d.text;
  if (fi->n > 1 && !f->to_dir && !d.events && !d.dropped && !d.warnings && p->pid != fi->top)
    quiet_add(&fi->nothing, p->cmd);
  else if (fi->n > 1 || f->to_dir)
    fprintf(stderr, "loom:   pid %d (%.160s%s): %llu events, %llu dropped, %llu warning%s%s%s\n",
            (int)p->pid, p->cmd, strlen(p->cmd) > 160 ? " ..." : "", d.events, d.dropped,
            d.warnings, d.warnings == 1 ? "" : "s", f->to_dir ? " -> " : "",
            f->to_dir ? d.text : "");
  else /* said once the trace is at -o */
    snprintf(fi->lone, sizeof fi->lone, "loom: %s: %llu events, %llu flows, %llu device%s, %llu "
             "dropped, %llu warning%s\n", f->out, d.events, d.flows, d.devices,
             d.devices == 1 ? "" : "s", d.dropped, d.warnings, d.warnings == 1 ? "" : "s");
  finish_memory(fi, p);
}

/* Several traces into -o FILE.  0, or -1 (said; the caller keeps them). */
static int finish_merge(finish *fi) {
  const loom_follow *f = fi->f;
  /* The first program's trace is at the output: an input, not the output. */
  char top_in[PATH_MAX + 32];
  snprintf(top_in, sizeof top_in, "%s/top%s", f->dir, follow_ext(f->out));
  for (size_t j = 0; j < fi->ninputs; j++)
    if (!strcmp(fi->inputs[j], f->out) && rename(f->out, top_in) == 0) fi->inputs[j] = top_in;
  loom_merge_config mc = {.struct_size = sizeof mc, .ninputs = (uint32_t)fi->ninputs,
                          .inputs = fi->inputs, .output = f->out};
  loom_merge_result mr = {.struct_size = sizeof mr};
  if (loom_merge(&mc, &mr) != LOOM_OK) {
    fprintf(stderr, "loom: cannot merge the %zu traces into %s: %s\n", fi->ninputs, f->out,
            loom_last_error());
    return -1;
  }
  /* mr.processes counts device processes too: say the programs' traces */
  char images[64] = "";
  size_t np = fi->nprocs;
  if (fi->ninputs > np)
    snprintf(images, sizeof images, " (and %zu of images before an exec)", fi->ninputs - np);
  fi->lone[0] = 0; /* said here */
  fprintf(stderr, "loom: %s: traces of %zu process%s%s merged, %llu events, %llu flows, "
          "%llu warning%s\n", f->out, np, np == 1 ? "" : "es", images,
          (unsigned long long)mr.events, (unsigned long long)mr.flows,
          (unsigned long long)mr.warnings, mr.warnings == 1 ? "" : "s");
  return 0;
}

/* The traces to the output: left in -o DIR/, moved or merged into -o FILE.
 * 1 when the records must be kept instead (nothing at -o FILE). */
static int finish_output(finish *fi, size_t nwin) {
  const loom_follow *f = fi->f;
  int keep = fi->k.n > 0; /* some records are only in their arena: nothing merged */
  if (f->to_dir) {
    if ((fi->n > 1 || fi->lost || keep) && !(nwin && !fi->ninputs))
      fprintf(stderr, "loom: %zu trace%s in %s (%llu events)%s\n", fi->ninputs,
              fi->ninputs == 1 ? "" : "s", f->out, fi->total,
              fi->lost ? "; some processes wrote none (above)" : "");
    fi->ninputs = 0; /* they are the output, in place */
  } else if (keep) {
    fprintf(stderr, "loom: %s was not written: the traces of %zu process%s could not be written\n",
            f->out, fi->k.n, fi->k.n == 1 ? "" : "es");
  } else if (fi->ninputs == 1) {
    if (strcmp(fi->inputs[0], f->out) && follow_move(fi->inputs[0], f->out) != 0) {
      fprintf(stderr, "loom: cannot write %s: %s\n", f->out, strerror(errno));
      keep = 1;
    }
  } else if (fi->ninputs > 1) {
    keep = finish_merge(fi) != 0;
  }
  return keep;
}

int loom__follow_finish(loom_follow *f, const char *prog, int top_status, pid_t top) {
  finish fi = {.f = f, .top = top, .top_status = top_status};
  proc *v = scan(f, &fi.n);
  size_t n = fi.n, nwin = 0;
  fi.room = n + 1;
  for (size_t i = 0; i < n; i++) fi.room += follow_exec_count(f, v[i].pid);
  fi.inputs = calloc(fi.room, sizeof *fi.inputs);
  fi.pids = calloc(fi.room, sizeof *fi.pids);
  follow_images im = {.inputs = fi.inputs, .pids = fi.pids, .ninputs = &fi.ninputs,
                      .cap = fi.room};
  if (n == 0 && !(WIFEXITED(top_status) && WEXITSTATUS(top_status) == 127))
    fprintf(stderr, "loom: %s ended before loom could write a trace\n", prog);
  if (n > 1) fprintf(stderr, "loom: %zu processes:\n", n);
  for (size_t i = 0; i < n; i++) windows_of(f, &v[i], top, &nwin);
  for (size_t i = 0; i < n; i++) finish_proc(&fi, &v[i]);
  fi.nprocs = fi.ninputs; /* then the images that ended by exec, after their processes */
  for (size_t i = 0; fi.inputs && fi.pids && i < n; i++)
    fi.total += follow_exec_add(f, &v[i], n > 1 || f->to_dir, &im);
  quiet_say(&fi.nothing);
  if (nwin) fprintf(stderr, "loom: %zu window%s written\n", nwin, nwin == 1 ? "" : "s");
  int keep = finish_output(&fi, nwin);
  if (keep) follow_keep_all(f, &fi.k, fi.inputs, f->to_dir ? 0 : fi.ninputs, fi.pids, prog, top);
  else fputs(fi.lone, stderr);
  /* the arenas are not needed once every trace is written or rebuilt; the
   * session folder once the traces in it are merged (or none is kept) */
  if (!keep && strcmp(f->arenas, f->dir)) follow_rm_rf(f->arenas);
  if (!keep || (strcmp(f->arenas, f->dir) && !fi.k.session[0])) follow_rm_rf(f->dir);
  for (size_t i = 0; i < n; i++) follow_drop_socket(v[i].pid);
  kept_free(&fi.k);
  follow_exec_free(&im);
  free(fi.inputs);
  free(fi.pids);
  free(v);
  free(f->ended);
  return keep;
}
