/*
 * ondemand_app.c - a program to trigger from outside: STEPS steps of STEP_MS
 * ms each (loom_step), every step one "step_work" range holding two "inner"
 * ranges.  Writes its pid into PIDFILE once it runs, so a test knows whom
 * to trigger.
 * usage: ondemand_app STEPS STEP_MS PIDFILE
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ondemand_app STEPS STEP_MS PIDFILE\n");
    return 2;
  }
  long steps = atol(argv[1]), ms = atol(argv[2]);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 || rename(tmp, argv[3])) {
    perror(argv[3]);
    return 1;
  }
  for (long i = 0; i < steps; i++) {
    loom_range_push("step_work");
    for (int k = 0; k < 2; k++) {
      loom_range_push("inner");
      sleep_ms(ms / 2);
      loom_range_pop();
    }
    loom_range_pop();
    loom_step();
  }
  return 0;
}
