/*
 * test_heap.c - the host heap recorder (libloom-heap.so, `loom record
 * --memory host`) on tests/heap/heapapp.c, a program that knows nothing of
 * loom.  Modes:
 *   record  with --memory host and heap.names=1 (records through the
 *           backend, named after their calls): the program runs with loom's
 *           malloc and behaves the same (its output, a failed allocation's
 *           ENOMEM); its own allocations, found by their sizes, are
 *           recorded exactly (per call and size, each free matched to its
 *           allocation by address, the leak live at the end), 1000 per
 *           worker thread on that thread; trace_processor counts them with
 *           no error.  --devices cpu,heap with the default way (the host
 *           recorder where libloom has loom_memory_alloc): the same by size.  Without the option: the
 *           program runs with the C library's malloc and nothing is recorded.
 *           --memory with another value is refused before the program runs.
 *   probe   the plug-in loaded but not preloaded: a session that asks for
 *           "heap" warns why it cannot record, and the rest goes on.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

enum { THREADS = 4, PER_THREAD = 1000, SMALL = 3331, LEAK = 70001 };

typedef struct sig { const char *call; uint64_t bytes; size_t want, got, freed; } sig;

typedef struct live { uint64_t addr; sig *s; int64_t tid; } live;

typedef struct tally {
  sig sigs[9];
  size_t memory, small, small_freed, small_threads, unmatched_small;
  int64_t small_tid[THREADS + 1];
  size_t per_thread[THREADS + 1];
  size_t leaked;
} tally;

static int arg_u(const loom_arg *a, size_t n, const char *key, uint64_t *v) {
  for (size_t k = 0; k < n; k++)
    if (!strcmp(a[k].key, key) && a[k].type != LOOM_ARG_STRING) {
      *v = a[k].type == LOOM_ARG_DOUBLE ? (uint64_t)a[k].v.d : a[k].v.u;
      return 1;
    }
  return 0;
}

/* One memory event (as read back: named after its call, marked alloc or
 * free): its call, address, bytes (0 on a free) and whether it frees; 0
 * when event i is no memory event. */
static int memory_event(const loom_trace *t, size_t i, const loom_event_view *v,
                        const char **call, uint64_t *addr, uint64_t *bytes, int *is_free) {
  if (v->kind != LOOM_KIND_MEMORY) return 0;
  loom_arg a[24];
  size_t n = loom_trace_event_args(t, i, a, 24);
  if (n > 24) n = 24;
  *call = v->name;
  *is_free = (v->roles & LOOM_RECORD_F_FREE) != 0;
  *addr = *bytes = 0;
  assert_true(arg_u(a, n, "addr", addr));
  if (!*is_free) assert_true(arg_u(a, n, "bytes", bytes));
  assert_true(*is_free || (v->roles & LOOM_RECORD_F_ALLOC));
  return 1;
}

static void count_small(tally *c, int64_t tid) {
  c->small++;
  for (int k = 0; k <= THREADS; k++) {
    if (k == (int)c->small_threads && c->small_threads <= THREADS) {
      c->small_tid[k] = tid, c->small_threads++;
    }
    if (c->small_tid[k] == tid) {
      c->per_thread[k]++;
      return;
    }
  }
}

/* Walks the events (by track, then time): allocations of known sizes and
 * the frees of what they allocated, matched by address on the same thread. */
static tally inspect(const loom_trace *t, int by_name) {
  tally c = {.sigs = {{"malloc", 100003, 5}, {"calloc", 70049, 2}, {"malloc", 20011, 1},
                      {"realloc", 40013, 1}, {"posix_memalign", 30011, 1},
                      {"aligned_alloc", 12928, 1}, {"memalign", 50021, 1}, {"malloc", LEAK, 1},
                      {"malloc", SMALL, THREADS * PER_THREAD}}};
  live lv[64];
  size_t nlive = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    const char *call;
    uint64_t addr, bytes;
    int is_free;
    if (!memory_event(t, i, &v, &call, &addr, &bytes, &is_free)) continue;
    c.memory++;
    if (is_free) {
      for (size_t k = 0; k < nlive; k++)
        if (lv[k].addr == addr && lv[k].tid == v.tid) {
          lv[k].s->freed++;
          c.small_freed += lv[k].s->bytes == SMALL;
          lv[k] = lv[--nlive];
          break;
        }
      continue;
    }
    for (size_t k = 0; k < 9; k++) {
      if ((by_name && strcmp(call, c.sigs[k].call)) || bytes != c.sigs[k].bytes) continue;
      c.sigs[k].got++;
      if (bytes == SMALL) count_small(&c, v.tid);
      if (nlive < 64) lv[nlive++] = (live){addr, &c.sigs[k], v.tid};
    }
  }
  for (size_t k = 0; k < nlive; k++) c.leaked += lv[k].s->bytes == LEAK;
  return c;
}

static void check_recorded(const char *how, int by_name) {
  char trace[256], cmd[2048], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record %s -o '%s' -- '%s'", LOOM_BIN, how, trace, HEAPAPP);
  assert_int_equal(ts_run(cmd, &out), 0);
  assert_non_null(strstr(out, "heap: loom\n"));
  assert_non_null(strstr(out, "huge: ENOMEM\n")); /* a failure stays one, errno too */
  char *plain = NULL;
  snprintf(cmd, sizeof cmd, "'%s'", HEAPAPP);
  assert_int_equal(ts_run(cmd, &plain), 0);
  assert_string_equal(strstr(out, "huge:"), strstr(plain, "huge:")); /* the same results */
  free(plain);
  free(out);
  loom_trace *t = ts_load(trace);
  tally c = inspect(t, by_name);
  for (size_t k = 0; k < 9; k++) {
    if (c.sigs[k].got != c.sigs[k].want)
      fprintf(stderr, "%s of %llu: %zu, not %zu\n", c.sigs[k].call,
              (unsigned long long)c.sigs[k].bytes, c.sigs[k].got, c.sigs[k].want);
    assert_int_equal(c.sigs[k].got, c.sigs[k].want);
    /* every block freed on the thread that made it, but the leak */
    assert_int_equal(c.sigs[k].freed, c.sigs[k].bytes == LEAK ? 0 : c.sigs[k].want);
  }
  assert_int_equal(c.leaked, 1);
  /* the workers' blocks: on 4 threads, 1000 each, none on the main one */
  assert_int_equal(c.small_threads, THREADS);
  for (int k = 0; k < THREADS; k++) assert_int_equal(c.per_thread[k], PER_THREAD);
  assert_int_equal(c.small_freed, THREADS * PER_THREAD);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  assert_int_equal(s.dropped, 0);
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
  if (!by_name) {
    unlink(trace);
    return;
  }
  const char *q[] = {
      "select count(*) from slice where name = '[memory]' and "
      "extract_arg(arg_set_id, 'args.Bytes') = 3331",
      "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[2];
  tp_ints(trace, q, r, 2);
  assert_int_equal(r[0], THREADS * PER_THREAD);
  assert_int_equal(r[1], 0);
  unlink(trace);
}

static void test_record(void **state) {
  (void)state;
  check_recorded("--memory host --option heap.names=1", 1);
}

static void test_devices(void **state) {
  (void)state;
  check_recorded("--devices cpu,heap", 0);
}

/* Off by default: not preloaded, nothing recorded. */
static void test_off(void **state) {
  (void)state;
  char trace[256], *out = NULL;
  loom_trace *t = ts_record_program(LOOM_BIN, HEAPAPP, "", trace, sizeof trace, &out);
  assert_non_null(strstr(out, "heap: libc\n"));
  free(out);
  tally c = inspect(t, 0);
  assert_int_equal(c.memory, 0);
  loom_trace_free(t);
  unlink(trace);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' record --memory device -o '%s' -- '%s' 2>&1", LOOM_BIN, trace,
           HEAPAPP);
  assert_int_equal(ts_run(cmd, &out), 2 << 8);
  assert_non_null(strstr(out, "--memory takes 'host'"));
  assert_null(strstr(out, "heap:")); /* the program never ran */
  free(out);
}

/* Loaded (LOOM_PLUGINS) but not preloaded: it says so. */
static void test_probe(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,heap", NULL);
  loom_range_push("host work");
  loom_range_pop();
  loom_trace *t = ts_finish(s);
  assert_true(ts_warned(t, "backend 'heap' is unavailable", "--memory host"));
  assert_int_equal(loom_trace_event_count(t), 1);
  loom_trace_free(t);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "record";
  if (!strcmp(mode, "probe")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_probe)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_record), cmocka_unit_test(test_devices),
                                     cmocka_unit_test(test_off)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
