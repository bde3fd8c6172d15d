/*
 * test_plugins.c - how backends arrive: LOOM_PLUGINS, LOOM_PLUGIN_PATH,
 * broken plug-ins (wrong ABI, no entry point, missing file), registration
 * before init, from another thread while a session records and from a
 * library dlopen()ed after a session started (both join that session).
 * usage: test_plugins env|path|bad|late|abi10 (ctest sets the environment).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const char *mode;

typedef struct found { const loom_backend_info *dummy; char origin[512], options[512]; int n, future; } found;
static void visit(const loom_backend_info *b, void *user) {
  found *f = user;
  if (!strcmp(b->name, "sim")) snprintf(f->origin, sizeof f->origin, "%s", b->origin);
  for (const loom_option_desc *o = !strcmp(b->name, "sim") ? b->options : NULL; o && o->key; o++) {
    size_t l = strlen(f->options);
    snprintf(f->options + l, sizeof f->options - l, "%s%s", l ? " " : "", o->key);
  }
  if (!strcmp(b->name, "future")) f->future = 1;
  f->n++;
}

static loom_trace *record_sim(const char *devices, int launch_fake) {
  loom_session *s = ts_start(devices, NULL);
  void *h = dlopen(SIM_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  if (h) {
    uint64_t (*launch)(int, const char *, uint64_t, uint32_t, uint32_t) =
        (uint64_t(*)(int, const char *, uint64_t, uint32_t, uint32_t))dlsym(h, "simrt_launch");
    launch(0, "k", 1000, 1, 1);
  }
  if (launch_fake) fake_launch(0, 0, "late_kernel", 1000);
  return ts_finish(s);
}

static size_t kernels(const loom_trace *t, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind == LOOM_KIND_KERNEL && (!name || !strcmp(v.name, name))) n++;
  }
  return n;
}

static void test_env(void **state) {
  (void)state;
  assert_int_equal(loom_init(), LOOM_OK);
  found f = {0};
  loom_backends_list(visit, &f);
  if (!strcmp(mode, "env")) assert_string_equal(f.origin, SIM_PLUGIN);
  else assert_memory_equal(f.origin, PLUGIN_DIR, strlen(PLUGIN_DIR));
  loom_trace *t = record_sim("cpu,sim", 0);
  assert_int_equal(kernels(t, "k"), 1);
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
  /* the options the plug-in declares: listed, and the only ones of its
   * name a session takes (a mistyped one is refused, naming them) */
  assert_string_equal(f.options, "sim.skew_ppm sim.offset_ns sim.max_pending sim.fail");
  loom_session_config c = {.struct_size = sizeof c, .devices = "cpu,sim", .options = "sim.skew_pmm=5"};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&c, &s), LOOM_EINVAL);
  assert_null(s);
  assert_string_equal(loom_last_error(), "unknown option 'sim.skew_pmm': backend sim reads sim.skew_ppm, "
                                         "sim.offset_ns, sim.max_pending, sim.fail");
  c.options = "sim.skew_ppm=5,meta.run=a,other.key=1"; /* a name no backend has: kept for a later one */
  assert_int_equal(loom_session_create(&c, &s), LOOM_OK);
  loom_session_destroy(s);
}

/* How many of t's warnings are exactly w. */
static size_t warned_exactly(const loom_trace *t, const char *w) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_warning_count(t); i++) n += !strcmp(loom_trace_warning(t, i), w);
  return n;
}

static void test_bad(void **state) {
  (void)state;
  assert_int_equal(loom_init(), LOOM_OK); /* broken plug-ins do not fail init */
  found f = {0};
  loom_backends_list(visit, &f);
  assert_false(f.future);
  loom_trace *t = record_sim("cpu,future", 0);
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    fprintf(stderr, "warning: %s\n", loom_trace_warning(t, i));
  assert_true(ts_warned(t, "backend 'future'", "refused: built for loom ABI 99.0"));
  assert_true(ts_warned(t, "libloom-noentry.so is not a loom plug-in", "loom_plugin_entry"));
  assert_true(ts_warned(t, "cannot load plug-in /nonexistent/libloom-x.so", NULL));
  assert_true(ts_warned(t, "device 'future' requested", NULL));
  assert_true(ts_saved_contains(t, "refused: built for loom ABI 99.0"));
  /* Too-small tables (24 and 0 bytes): what is wrong and the file, said
   * once, with the size `loom check-backend` gives (120 bytes, an ABI 1.0
   * table on this 64-bit platform). */
  char want[1024];
  snprintf(want, sizeof want,
           "backend table from %s refused: its struct_size is 24 bytes, but an ops table of ABI 1.0 "
           "needs at least 120 bytes (it claims ABI %d.0); set struct_size to sizeof(loom_backend_ops)",
           SMALLTABLE_PLUGIN, LOOM_ABI_MAJOR);
  assert_int_equal(warned_exactly(t, want), 1);
  snprintf(want, sizeof want,
           "backend table from %s refused: its struct_size is 0 bytes, but an ops table of ABI 1.0 "
           "needs at least 120 bytes (it claims ABI %d.0); set struct_size to sizeof(loom_backend_ops)",
           ZEROTABLE_PLUGIN, LOOM_ABI_MAJOR);
  assert_int_equal(warned_exactly(t, want), 1);
  /* An entry point that fails says so, with its status and what it had
   * registered; listed twice, said once. */
  snprintf(want, sizeof want,
           "plug-in %s failed to initialise: its loom_plugin_entry returned status %d (backend failure) "
           "and registered no backend", FAILENTRY_PLUGIN, (int)LOOM_EBACKEND);
  assert_int_equal(warned_exactly(t, want), 1);
  snprintf(want, sizeof want,
           "plug-in %s failed to initialise: its loom_plugin_entry returned status %d (backend failure) "
           "after registering 1 backend", FAILAFTER_PLUGIN, (int)LOOM_EBACKEND);
  assert_int_equal(warned_exactly(t, want), 1);
  /* A name already taken, the file reached twice: refused once. */
  snprintf(want, sizeof want,
           "backend 'early' from %s refused: a backend of that name is already registered from tests",
           DUPNAME_PLUGIN);
  assert_int_equal(warned_exactly(t, want), 1);
  size_t refusals = 0, inits = 0;
  for (size_t i = 0; i < loom_trace_warning_count(t); i++) {
    refusals += strstr(loom_trace_warning(t, i), "refused") != NULL;
    inits += strstr(loom_trace_warning(t, i), "failed to initialise") != NULL;
    assert_null(strstr(loom_trace_warning(t, i), "does not match"));
  }
  assert_int_equal(refusals, 4); /* future, small, zero, early: once each */
  assert_int_equal(inits, 2);    /* failentry, failafter */
  loom_trace_free(t);
  /* Loading one again gives the first load's status and message. */
  assert_int_equal(loom_plugin_load(FAILENTRY_PLUGIN), LOOM_EBACKEND);
  snprintf(want, sizeof want,
           "plug-in %s failed to initialise: its loom_plugin_entry returned status %d (backend failure) "
           "and registered no backend", FAILENTRY_PLUGIN, (int)LOOM_EBACKEND);
  assert_string_equal(loom_last_error(), want);
  assert_int_equal(loom_plugin_load(DUPNAME_PLUGIN2), LOOM_EINVAL);
  assert_non_null(strstr(loom_last_error(), "backend 'early' from "));
  assert_non_null(strstr(loom_last_error(), "refused: a backend of that name is already registered from tests"));
  assert_int_equal(loom_plugin_load(ZEROTABLE_PLUGIN), LOOM_EABI);
  assert_non_null(strstr(loom_last_error(), "its struct_size is 0 bytes, but an ops table of ABI 1.0 needs"));
  assert_int_equal(loom_plugin_load("/nonexistent/libloom-x.so"), LOOM_ENOTFOUND);
  assert_non_null(strstr(loom_last_error(), "cannot load plug-in /nonexistent/libloom-x.so: "));
  /* the three loaded again are not said again; the missing file, tried
   * again, is */
  t = record_sim("cpu", 0);
  assert_int_equal(loom_trace_warning_count(t), 1);
  assert_true(ts_warned(t, "cannot load plug-in /nonexistent/libloom-x.so: ", "No such file"));
  loom_trace_free(t);
}

/* A plug-in built against the ABI 1.0 header loads, probes and records. */
static void test_abi10(void **state) {
  (void)state;
  const char *path = getenv("LOOM_PLUGINS");
  assert_non_null(path);
  loom_session *s = ts_start("cpu,abi10", NULL);
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h);
  int (*probed)(void) = (int (*)(void))dlsym(h, "abi10_probed");
  void (*run)(int) = (void (*)(int))dlsym(h, "abi10_run");
  assert_non_null(run);
  assert_int_equal(probed(), 1);
  run(5);
  loom_trace *t = ts_finish(s);
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    fprintf(stderr, "warning: %s\n", loom_trace_warning(t, i));
  assert_int_equal(loom_trace_warning_count(t), 0);
  assert_int_equal(kernels(t, "abi10_kernel"), 5);
  assert_int_equal(loom_trace_flow_count(t), 5);
  loom_trace_free(t);
  /* a table from before ABI 1.3 declares no options: any key of its name is taken */
  loom_session_config c = {.struct_size = sizeof c, .devices = "cpu,abi10", .options = "abi10.anything=1"};
  loom_session *s2 = NULL;
  assert_int_equal(loom_session_create(&c, &s2), LOOM_OK);
  loom_session_destroy(s2);
}

/* Runtime calls named call nested in a user range named range (same
 * thread, inside its time). */
static size_t under_range(const loom_trace *t, const char *range, const char *call) {
  size_t n = 0, m = loom_trace_event_count(t);
  for (size_t i = 0; i < m; i++) {
    loom_event_view r = {.struct_size = sizeof r};
    loom_trace_event(t, i, &r);
    if (r.kind != LOOM_KIND_USER_RANGE || strcmp(r.name, range)) continue;
    for (size_t j = 0; j < m; j++) {
      loom_event_view c = {.struct_size = sizeof c};
      loom_trace_event(t, j, &c);
      if (c.kind == LOOM_KIND_RUNTIME && !strcmp(c.name, call) && c.tid == r.tid &&
          c.start_ns >= r.start_ns && c.start_ns + c.dur_ns <= r.start_ns + r.dur_ns)
        n++;
    }
  }
  return n;
}

static void *register_late(void *arg) {
  (void)arg;
  assert_int_equal(fake_register(0, "late", "late", 0), LOOM_OK);
  return NULL;
}

/* Registered by a constructor, before main and before loom_init. */
__attribute__((constructor)) static void early(void) {
  if (fake_register(1, "early", "early", 0) != LOOM_OK) abort();
}

static void test_late(void **state) {
  (void)state;
  loom_trace *t = record_sim("cpu,early", 0);
  fake_calls c = fake_get_calls(1);
  assert_int_equal(c.start, 1); /* the early backend took part */
  loom_trace_free(t);

  /* A session records host work; then a backend arrives from another
   * thread and a device extension is dlopen()ed: both join this session at
   * once, and their device work from then on is in the trace. */
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,sim,late"};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_warning_count(s), 0); /* said at stop, if still true */
  assert_int_equal(loom_session_start(s), LOOM_OK);
  loom_range_push("before the load");
  loom_range_pop();
  pthread_t th;
  pthread_create(&th, NULL, register_late, NULL);
  pthread_join(th, NULL);
  fake_calls lc = fake_get_calls(0);
  assert_int_equal(lc.probe, 1); /* joined in the registering thread */
  assert_int_equal(lc.start, 1);
  void *h = dlopen(SIM_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h);
  uint64_t (*launch)(int, const char *, uint64_t, uint32_t, uint32_t) =
      (uint64_t(*)(int, const char *, uint64_t, uint32_t, uint32_t))dlsym(h, "simrt_launch");
  loom_range_push("device work");
  for (int i = 0; i < 3; i++) launch(0, "k", 1000, 1, 1);
  loom_range_pop();
  fake_launch(0, 0, "late_kernel", 1000);
  fake_launch(0, 1, "late_kernel", 1000);
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  loom_session_destroy(s);
  assert_int_equal(kernels(t, "k"), 3);
  assert_int_equal(kernels(t, "late_kernel"), 2);
  assert_int_equal(under_range(t, "device work", "simLaunchKernel"), 3);
  assert_int_equal(loom_trace_flow_count(t), 5); /* each call linked to its kernel */
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    fprintf(stderr, "warning: %s\n", loom_trace_warning(t, i));
  assert_int_equal(loom_trace_warning_count(t), 0); /* joining is no warning */
  assert_true(ts_saved_contains(t, "backend 'sim' joined the session at"));
  assert_true(ts_saved_contains(t, "backend 'late' joined the session at"));
  loom_trace_free(t);

  /* A type asked for that nobody registers: said at stop, correctly. */
  t = record_sim("cpu,nothere", 0);
  assert_true(ts_warned(t, "device 'nothere' requested but no backend",
                        "registered before or during the session"));
  loom_trace_free(t);

  /* The next session has both. */
  found f = {0};
  loom_backends_list(visit, &f);
  assert_string_equal(f.origin, SIM_PLUGIN); /* found by dladdr */
  t = record_sim("cpu,sim,late", 1);
  assert_int_equal(kernels(t, "k"), 1);
  assert_int_equal(kernels(t, "late_kernel"), 1);
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
}

int main(int argc, char **argv) {
  mode = argc > 1 ? argv[1] : "late";
  struct CMUnitTest tests[1];
  if (!strcmp(mode, "env") || !strcmp(mode, "path"))
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_env);
  else if (!strcmp(mode, "abi10"))
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_abi10);
  else if (!strcmp(mode, "bad"))
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_bad);
  else
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_late);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
