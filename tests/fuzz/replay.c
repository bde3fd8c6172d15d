/*
 * replay.c - feeds files to a fuzz target's LLVMFuzzerTestOneInput, for
 * the ordinary suite (any compiler, no libFuzzer): every input that ever
 * failed (tests/data/fuzz/<target>/) and the seed corpus, so that a
 * regression fails every build.  Arguments: files or folders (each file in
 * them, in name order).  Fails when it replays nothing: a missing corpus is
 * an error, not a pass.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static long replayed;

static void one(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    exit(2);
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0)
    if ((n += k) == cap) buf = realloc(buf, cap *= 2);
  fclose(f);
  if (!buf) abort();
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
  /* a copy of exactly n bytes, so ASan sees reads past the input's end */
  unsigned char *in = malloc(n ? n : 1);
  memcpy(in, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(in, n);
  free(in);
  replayed++;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static void walk(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: %s: no such file or folder\n", path);
    exit(2);
  }
  if (!S_ISDIR(st.st_mode)) return one(path);
  struct dirent **ents;
  int n = scandir(path, &ents, NULL, by_name);
  for (int i = 0; i < n; i++) {
    char p[4096];
    if (ents[i]->d_name[0] != '.' && strcmp(ents[i]->d_name, "README") &&
        strcmp(ents[i]->d_name, "README.md")) {
      snprintf(p, sizeof p, "%s/%s", path, ents[i]->d_name);
      walk(p);
    }
    free(ents[i]);
  }
  free(ents);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) walk(argv[i]);
  if (!replayed) {
    fprintf(stderr, "replay: no input found in the folders given\n");
    return 1;
  }
  printf("replayed %ld inputs without a failure\n", replayed);
  return 0;
}
