/*
 * follow_exec.c - the traces of a process's earlier images: a process that
 * exec'd another program first wrote what it had recorded (loom-preload,
 * tools/loom/preload_exec.c) and named the file in <pid>.exec, one line per
 * image ("events flows devices dropped warnings\tTRACE").  They are merged
 * with the other traces (or stay in -o DIR/), and the summary says them.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "done.h"
#include "follow_int.h"

/* <pid>.exec's text in a heap buffer (NULL when none). */
static char *read_exec(const loom_follow *f, pid_t pid) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%d.exec", f->dir, (int)pid);
  FILE *fp = fopen(path, "re");
  if (!fp) return NULL;
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  char chunk[4096];
  size_t k;
  while (m && (k = fread(chunk, 1, sizeof chunk, fp)) > 0) fwrite(chunk, 1, k, m);
  fclose(fp);
  if (m) fclose(m);
  return buf;
}

size_t follow_exec_count(const loom_follow *f, pid_t pid) {
  char *t = read_exec(f, pid);
  size_t n = 0;
  for (char *p = t; p && *p; p++) n += *p == '\n';
  free(t);
  return n;
}

unsigned long long follow_exec_add(const loom_follow *f, const proc *p, int say,
                                   follow_images *im) {
  char *t = read_exec(f, p->pid);
  if (!t) return 0;
  char **w = realloc(im->owned, (im->nowned + 1) * sizeof *w);
  if (!w) {
    free(t);
    return 0;
  }
  im->owned = w;
  im->owned[im->nowned++] = t;
  unsigned long long total = 0;
  for (char *line = t; *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    done_line d;
    if (done_parse(line, &d) == DONE_TRACE && *im->ninputs < im->cap) {
      im->pids[*im->ninputs] = p->pid;
      im->inputs[(*im->ninputs)++] = d.text;
      total += d.events;
      if (say)
        fprintf(stderr, "loom:   pid %d, before it exec'd %.160s: %llu events, %llu dropped, "
                "%llu warning%s%s%s\n", (int)p->pid, p->cmd, d.events, d.dropped, d.warnings,
                d.warnings == 1 ? "" : "s", f->to_dir ? " -> " : "", f->to_dir ? d.text : "");
    }
    if (!nl) break;
    line = nl + 1;
  }
  return total;
}

void follow_exec_free(follow_images *im) {
  for (size_t i = 0; i < im->nowned; i++) free(im->owned[i]);
  free(im->owned);
}
