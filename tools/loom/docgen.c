/*
 * docgen.c - loom-docgen, run by the build: writes the man pages (loom.1,
 * loom-COMMAND.1) and the bash completion (loom.bash) from the commands'
 * description (spec.c) that `loom --help` prints from, so they cannot
 * disagree.  Built from spec.c and its renderers alone (no libloom), so it
 * runs before anything is installed.
 * usage: loom-docgen VERSION DIR
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spec.h"

/* Pages of commands that no longer exist must not be installed. */
static void remove_pages(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[4096];
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, "loom", 4) || n < 3 || strcmp(e->d_name + n - 2, ".1")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
}

static int write_file(const char *dir, const char *name, const cli_cmd *c, const char *ver) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  if (c) cli_man(f, c, ver);
  else cli_completion(f);
  if (fclose(f) != 0) {
    perror(path);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: loom-docgen VERSION DIR\n");
    return 2;
  }
  remove_pages(argv[2]);
  int bad = write_file(argv[2], "loom.bash", NULL, argv[1]);
  for (const cli_cmd *c = cli_commands; c->name; c++) {
    char name[128];
    snprintf(name, sizeof name, "%s%s.1", c == cli_commands ? "" : "loom-", c->name);
    bad |= write_file(argv[2], name, c, argv[1]);
  }
  return bad;
}
