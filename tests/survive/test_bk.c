/*
 * test_bk.c - the records a backend handed to loom survive a
 * SIGKILL, in-process (so that the sanitized builds check the writer and the
 * salvager too; tests/survive/survive.sh checks the same under loom record):
 * a child maps an arena (as loom-preload does), records with the backend of
 * tests/survive/bk.c and kills itself; the parent rebuilds its trace with
 * the tools table's salvage_to and counts what it holds.
 */
#define _GNU_SOURCE
#define SURVIVE_BK_LIB
#include "survive/bk.c"

#include <signal.h>
#include <sys/wait.h>

#include "loom/tools.h"
#include "testutil.h"

/* The shared-memory arena and its rebuild, as loom-preload and loom record
 * reach them. */
static int arena_begin(const char *path, const char *out) {
  return LOOM_TOOLS_GET()->arena_begin(path, out);
}
static loom_status salvage(const char *path, const char *death, loom_tools_salvage_result *r) {
  loom_tools_salvage_opts o = {.death = death};
  return LOOM_TOOLS_GET()->salvage_to(path, &o, r);
}

/* Runs survive_bk's work (n steps) in a child under an arena and session
 * options opts, and rebuilds its trace (out) from the arena. */
static void killed_child(const char *opts, int n, loom_tools_salvage_result *r, char *out, size_t nout) {
  char arena[256];
  tmp_path(arena, sizeof arena, ".arena");
  tmp_path(out, nout, ".json");
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) {
    if (arena_begin(arena, out) != 0) _exit(3);
    host = loom_host_get(LOOM_ABI_MAJOR);
    if (!host || host->backend_register(&ops, "test_survive_bk")) _exit(4);
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,survbk", .options = opts};
    loom_session *s;
    if (loom_session_create(&cfg, &s) || loom_session_start(s)) _exit(5);
    work(n, 3, 1, 0, 0);
    _exit(6);
  }
  int st = 0;
  assert_int_equal(waitpid(c, &st, 0), c);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  assert_int_equal(salvage(arena, "was killed by SIGKILL", r), LOOM_OK);
  unlink(arena);
}

static size_t count_named(loom_trace *t, const char *name, int device) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!v.projected && !strcmp(v.name, name) && (device ? v.device != UINT32_MAX : v.device == UINT32_MAX))
      n++;
  }
  return n;
}

static void test_killed(void **state) {
  (void)state;
  loom_tools_salvage_result r;
  char out[256];
  killed_child(NULL, 100, &r, out, sizeof out);
  assert_int_equal(r.bk_kept, 200);
  assert_int_equal(r.bk_lost, 0);
  assert_int_equal(r.flows, 100);
  assert_int_equal(r.dropped, 0);
  loom_trace *t = ts_load(out);
  assert_int_equal(count_named(t, "survLaunch", 0), 100);
  assert_int_equal(count_named(t, "survKernel", 1), 100);
  assert_int_equal(count_named(t, "survPending", 1), 0);
  assert_int_equal(count_named(t, "step", 0), 100);
  loom_trace_free(t);
  char *text = read_file(out, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"survive_key\":\"kept\""));
  assert_non_null(strstr(text, "\"survive_over\":\"new\""));
  assert_null(strstr(text, "survive_gone"));
  assert_non_null(strstr(text, "(survivor main)"));
  assert_non_null(strstr(text, "\"name\":\"Survivor Device\""));
  free(text);
  unlink(out);
}

/* Ring mode compacts the backend's ring many times: what it held at death
 * is rebuilt, calls with their kernels. */
static void test_killed_ring(void **state) {
  (void)state;
  loom_tools_salvage_result r;
  char out[256];
  killed_child("mode=ring,ring_size=1m,backend_memory_cap=8000", 1000, &r, out, sizeof out);
  assert_true(r.bk_kept > 0 && r.bk_kept < 2000);
  assert_int_equal(r.bk_lost, 0);
  loom_trace *t = ts_load(out);
  size_t calls = count_named(t, "survLaunch", 0), kernels = count_named(t, "survKernel", 1);
  assert_int_equal(calls, r.bk_kept / 2);
  assert_int_equal(kernels, r.bk_kept / 2);
  assert_int_equal(r.flows, calls);
  assert_int_equal(count_named(t, "step", 0), 1000);
  loom_trace_free(t);
  unlink(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_killed),
                                     cmocka_unit_test(test_killed_ring)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
