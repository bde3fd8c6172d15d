/*
 * session.h - what the session tests (tests/session) share: libloom-sim.so's
 * runtime calls (LOOM_PLUGINS loads it), and counting and finding events
 * of a trace by category and name.
 */
#ifndef LOOM_TESTS_SESSION_H
#define LOOM_TESTS_SESSION_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "simrt.h"

static __attribute__((unused)) uint64_t (*sim_launch)(int, const char *, uint64_t, uint32_t,
                                                      uint32_t);
static __attribute__((unused)) uint64_t (*sim_memcpy)(int, enum simrt_copy, size_t);

static inline void load_sim(void) {
  loom_init(); /* loads LOOM_PLUGINS */
  void *h = dlopen(SIM_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h); /* LOOM_PLUGINS loaded it */
  sim_launch = (uint64_t(*)(int, const char *, uint64_t, uint32_t, uint32_t))dlsym(h, "simrt_launch");
  sim_memcpy = (uint64_t(*)(int, enum simrt_copy, size_t))dlsym(h, "simrt_memcpy");
  assert_non_null(sim_launch);
}

static inline size_t count(const loom_trace *t, const char *cat, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if ((!cat || !strcmp(v.category, cat)) && (!name || !strcmp(v.name, name))) n++;
  }
  return n;
}

/* The k-th event (in trace order) with this category and name. */
static inline loom_event_view find(const loom_trace *t, const char *cat, const char *name, int k) {
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if ((!cat || !strcmp(v.category, cat)) && (!name || !strcmp(v.name, name)) && k-- == 0)
      return v;
  }
  fail_msg("no event %s/%s", cat ? cat : "*", name ? name : "*");
  loom_event_view none = {0};
  return none;
}

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

#endif
