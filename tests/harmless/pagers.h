/*
 * pagers.h - how many threads named loom-pager (src/record/pager.c) the
 * calling process runs, read from /proc/self/task: for tests/harmless/prog.c
 * and tests/test_arena.c.
 */
#ifndef LOOM_TEST_PAGERS_H
#define LOOM_TEST_PAGERS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

static int loom_test_pagers(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = e->d_name[0] != '.' ? fopen(path, "re") : NULL;
    if (f && fgets(name, sizeof name, f) && !strcmp(name, "loom-pager\n")) n++;
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return n;
}

#endif
