/*
 * phaseapp.c - a program that a test drives phase by phase, for the
 * on-demand tests with exact contents: each phase runs N steps, each step
 * loom_step() then a "p<phase>" range holding one "op<phase>" operator
 * (cpu_op) and one "i<phase>" instant; after phase k it writes k into
 * DIR/done and waits until DIR/go<k> exists (the last phase does not wait).  Writes
 * its pid to DIR/pid first.
 *
 * usage: phaseapp DIR own|preload N1 [N2 ...]
 *   own      the program records itself: a session of its own (devices cpu,
 *            options from the environment, e.g. LOOM_ON_DEMAND=on), stopped
 *            at the end (the trace it returns, if any, goes to DIR/own.json)
 *   preload  the session is loom record's
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int put(const char *dir, const char *name, long v) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%ld\n", v) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

static void wait_for(const char *dir, int phase) {
  char path[4096];
  snprintf(path, sizeof path, "%s/go%d", dir, phase);
  while (access(path, F_OK) != 0) sleep_ms(5);
}

/* The names live as long as the program: loom keeps the pointers. */
static char names[16][3][16];

static void phase(int k, long steps) {
  char *p = names[k % 16][0], *op = names[k % 16][1], *in = names[k % 16][2];
  snprintf(p, 16, "p%d", k);
  snprintf(op, 16, "op%d", k);
  snprintf(in, 16, "i%d", k);
  for (long i = 0; i < steps; i++) {
    loom_step();
    loom_range_push(p);
    loom_op_begin(op, 0);
    loom_instant(in);
    loom_op_end();
    loom_range_pop();
  }
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[2], "own") && strcmp(argv[2], "preload"))) {
    fprintf(stderr, "usage: phaseapp DIR own|preload N1 [N2 ...]\n");
    return 2;
  }
  const char *dir = argv[1];
  loom_session *s = NULL;
  if (!strcmp(argv[2], "own")) {
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu"};
    if (loom_session_create(&cfg, &s) != LOOM_OK || loom_session_start(s) != LOOM_OK) {
      fprintf(stderr, "phaseapp: %s\n", loom_last_error());
      return 1;
    }
  }
  if (put(dir, "pid", (long)getpid())) return 1;
  for (int k = 1; k + 2 < argc; k++) {
    phase(k, atol(argv[k + 2]));
    if (put(dir, "done", k)) return 1; /* "done" holds the last phase done */
    if (k + 3 < argc) wait_for(dir, k);
  }
  if (s) {
    loom_trace *t = NULL;
    if (loom_session_stop(s, &t) != LOOM_OK) {
      fprintf(stderr, "phaseapp: stop: %s\n", loom_last_error());
      return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/own.json", dir);
    if (t && loom_trace_save(t, path) != LOOM_OK) fprintf(stderr, "phaseapp: %s\n", loom_last_error());
    loom_trace_free(t);
    loom_session_destroy(s);
  }
  return 0;
}
