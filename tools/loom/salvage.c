/*
 * salvage.c - `loom salvage [DIR] -o OUT`: writes the records a `loom
 * record` run kept because its trace could not be written (disk full, no
 * permission, a failed merge; kept.h) to OUT, as the run would have: every
 * process merged into OUT (.json, .json.gz, .pftrace[.gz]), or one trace
 * per process into OUT/.  Each kept arena is rebuilt (src/salvage/salvage.c)
 * with its host and device records; the traces the run did write are taken
 * as they are.  DIR defaults to this user's newest kept folder.  The kept
 * folder (and the session folder it names) is removed once OUT is
 * written; on any failure everything stays and the reason is printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "follow_int.h" /* follow_rm_rf */
#include "kept.h"
#include "loom/loom.h"
#include "record_opts.h"
#include "spec.h"

/* The synopsis (spec.c) on stderr; 2, the status of a wrong command line. */
static int usage(void) {
  cli_usage(stderr, cli_command("salvage"));
  return 2;
}

/* The inputs of the merge (or the traces of OUT/), and the files this run
 * made, removed whatever happens. */
typedef struct plan {
  const char **in;
  char (*made)[PATH_MAX + 64];
  size_t nin, nmade;
  unsigned long long events, flows;
} plan;

/* Where item i goes: OUT itself (one process, -o FILE), OUT/<its name>, or
 * a file next to OUT that is merged into it. */
static void dest_of(const kept *k, size_t i, const char *out, int to_dir, char *d, size_t n) {
  const kept_item *it = &k->v[i];
  char name[PATH_MAX], path[PATH_MAX * 2 + 2], comm[64];
  int pid, pending;
  snprintf(path, sizeof path, "%s/%s", k->dir, it->path);
  if (to_dir) {
    if (!it->arena || cli_tools()->salvage_peek(path, &pid, comm, sizeof comm, name, sizeof name,
                                         &pending) != 0)
      snprintf(name, sizeof name, "%s", it->path);
    const char *b = strrchr(name, '/');
    snprintf(d, n, "%s/%s", out, b ? b + 1 : name);
  } else if (k->n == 1) {
    snprintf(d, n, "%s", out);
  } else {
    snprintf(d, n, "%s.salvage-%d.json", out, it->pid);
  }
}

/* Copies a trace the run wrote to dest, in dest's format. */
static int copy_trace(const char *from, const char *dest, plan *p) {
  loom_trace *t;
  if (loom_trace_load(from, &t) != LOOM_OK) return -1;
  loom_status st = loom_trace_save(t, dest);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  p->events += s.events;
  p->flows += s.flows;
  loom_trace_free(t);
  return st == LOOM_OK ? 0 : -1;
}

/* Item i rebuilt (an arena) or copied (one trace, -o FILE or OUT/) to its
 * destination, or taken as an input of the merge. */
static int take(const kept *k, size_t i, const char *out, int to_dir, plan *p) {
  const kept_item *it = &k->v[i];
  char *d = p->made[p->nmade];
  dest_of(k, i, out, to_dir, d, sizeof p->made[0]);
  if (!it->arena && !to_dir && k->n > 1) { /* merged as it is */
    p->in[p->nin++] = it->path;
    return 0;
  }
  if (!it->arena) {
    if (copy_trace(it->path, d, p)) return -1;
  } else {
    char path[PATH_MAX * 2 + 2];
    snprintf(path, sizeof path, "%s/%s", k->dir, it->path);
    loom_tools_salvage_opts o = {.death = it->how[0] ? it->how : "could not write its trace",
                            .out = d, .quiet_unused = 1};
    loom_tools_salvage_result r;
    if (cli_tools()->salvage_to(path, &o, &r) != LOOM_OK) return -1;
    p->events += r.events;
    p->flows += r.flows;
    fprintf(stderr, "loom salvage: pid %d (%s): rebuilt, %llu events, %llu flows%s%s\n", it->pid,
            it->cmd[0] ? it->cmd : "?", (unsigned long long)r.events,
            (unsigned long long)r.flows, to_dir ? " -> " : "", to_dir ? d : "");
  }
  if (!to_dir && k->n > 1) p->in[p->nin++] = d;
  p->nmade++;
  return 0;
}

static int write_out(const kept *k, const char *out, int to_dir, plan *p) {
  for (size_t i = 0; i < k->n; i++)
    if (take(k, i, out, to_dir, p)) return -1;
  if (to_dir || k->n < 2) return 0;
  loom_merge_config mc = {.struct_size = sizeof mc, .ninputs = (uint32_t)p->nin, .inputs = p->in,
                          .output = out};
  loom_merge_result mr = {.struct_size = sizeof mr};
  if (loom_merge(&mc, &mr) != LOOM_OK) return -1;
  p->events = mr.events;
  p->flows = mr.flows;
  return 0;
}

/* Finds DIR and OUT in argv; 0, or 2 after a message. */
static int parse(int argc, char **argv, char *dir, size_t n, const char **out) {
  const char *given = NULL;
  *out = NULL;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) *out = argv[++i];
    else if (argv[i][0] == '-' || given) return usage();
    else given = argv[i];
  }
  if (!*out || !**out) return usage();
  if (given) {
    snprintf(dir, n, "%s", given);
    return 0;
  }
  size_t others = 0;
  if (kept_find(dir, n, &others) != 0) {
    fprintf(stderr, "loom salvage: no kept records of yours (no loom-kept-* folder in the "
            "shared-memory folder or $TMPDIR); name the folder loom record printed\n");
    return 2;
  }
  fprintf(stderr, "loom salvage: %s (the newest of yours%s)\n", dir,
          others ? "; older ones are left, name them to write them" : "");
  return 0;
}

int cmd_salvage(int argc, char **argv) {
  char dir[PATH_MAX], err[PATH_MAX + 256];
  const char *out;
  int rc = parse(argc, argv, dir, sizeof dir, &out);
  if (rc) return rc;
  kept k;
  if (kept_load(&k, dir, err, sizeof err) != 0) {
    fprintf(stderr, "loom salvage: %s\n", err);
    return 1;
  }
  if (!k.n) {
    fprintf(stderr, "loom salvage: %s holds no records (no arena, no trace)\n", dir);
    kept_free(&k);
    return 1;
  }
  size_t ol = strlen(out);
  struct stat st;
  int to_dir = out[ol - 1] == '/' || (stat(out, &st) == 0 && S_ISDIR(st.st_mode));
  if (to_dir && mkdir(out, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "loom salvage: cannot create folder %s: %s\n", out, strerror(errno));
    kept_free(&k);
    return 1;
  }
  if (record_opts_check_out(out, to_dir)) {
    kept_free(&k);
    return 2;
  }
  plan p = {calloc(k.n, sizeof *p.in), calloc(k.n, sizeof *p.made), 0, 0, 0, 0};
  if (!p.in || !p.made) rc = -1;
  else rc = write_out(&k, out, to_dir, &p);
  for (size_t i = 0; i < p.nmade && !to_dir && k.n > 1; i++) unlink(p.made[i]);
  if (rc) {
    fprintf(stderr, "loom salvage: cannot write %s: %s\nloom salvage: nothing was removed: the "
            "records stay in %s\n", out, p.in ? loom_last_error() : "out of memory", k.dir);
    if (to_dir)
      for (size_t i = 0; i < p.nmade; i++) unlink(p.made[i]);
  } else {
    fprintf(stderr, "loom salvage: %s: %s%zu process%s, %llu events, %llu flows; %s removed\n",
            out, to_dir ? "traces of " : "", k.n, k.n == 1 ? "" : "es", p.events, p.flows, k.dir);
    follow_rm_rf(k.dir);
    if (k.session[0]) follow_rm_rf(k.session);
  }
  free(p.in);
  free(p.made);
  kept_free(&k);
  return rc ? 1 : 0;
}
