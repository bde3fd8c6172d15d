/*
 * test_phases.c - `loom trigger` with exact contents, on phaseapp (phases
 * of steps driven by the test: each step a ProfilerStep# holding a "p<k>"
 * range, an "op<k>" operator and an "i<k>" instant):
 *   ring     loom record --ring --on-demand: three triggers give three
 *            dumps with exactly what the ring held at each (all of phase 1;
 *            phases 1 and 2; with --duration 1 and ACTIVITY_TYPES only the
 *            last second's user ranges), recording goes on (the trace at
 *            exit has every step); a window ahead (--steps) is refused
 *            with the reason; --ring with --duration is refused at start;
 *   kinds    loom record --on-demand: ACTIVITY_TYPES=cpu_op keeps only the
 *            operators of its 3 steps, the next window without it keeps
 *            every kind, one with user_annotation,cpu_instant_event keeps
 *            those two;
 *   library  a program with its own session and LOOM_ON_DEMAND=on (no loom
 *            record): --list shows it, a --steps 3 window and a waited
 *            --duration window are written to its output pattern, its
 *            socket goes away at the end;
 *   libring  the same with LOOM_MODE=ring: a trigger dumps its ring.
 * Every file: exact counts and 0 errors in trace_processor.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../testutil.h"

static char dir[512];
static pid_t child; /* loom record, or phaseapp itself */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static long read_num(const char *name) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  long v = -1;
  if (f && fscanf(f, "%ld", &v) != 1) v = -1;
  if (f) fclose(f);
  return v;
}

static void new_dir(void) {
  tmp_path(dir, sizeof dir, "-phases");
  assert_int_equal(mkdir(dir, 0755), 0);
}

/* Starts phaseapp in dir (new_dir): under `loom record REC` when rec is not
 * NULL, else on its own with the environment env ("K=V K=V").  Returns its
 * pid. */
static long start(const char *rec, const char *env, const char *phases) {
  char cmd[4096];
  if (rec)
    snprintf(cmd, sizeof cmd, "exec %s record %s -o %s/run.json -- %s %s preload %s", LOOM_BIN,
             rec, dir, PHASEAPP, dir, phases);
  else
    snprintf(cmd, sizeof cmd, "exec env %s %s %s own %s", env, PHASEAPP, dir, phases);
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 1000; i++) {
    long pid = read_num("pid");
    if (pid > 0) return pid;
    sleep_ms(10);
  }
  fail_msg("phaseapp did not start: %s", cmd);
  return -1;
}

static void wait_done(long k) {
  for (int i = 0; i < 3000 && read_num("done") != k; i++) sleep_ms(5);
  assert_int_equal(read_num("done"), k);
}

static void go(int k) {
  char path[700];
  snprintf(path, sizeof path, "%s/go%d", dir, k);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
}

static void end_app(void) {
  int st;
  assert_int_equal(waitpid(child, &st, 0), child);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* Runs `loom trigger ARGS` (stderr with stdout); the exit status. */
static int trigger(char **out, const char *fmt, ...) {
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "%s trigger %s 2>&1", LOOM_BIN, args);
  int st = ts_run(cmd, out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_in(const char *out, const char *needle) {
  if (!strstr(out, needle)) fail_msg("'%s' not in:\n%s", needle, out);
}

/* trigger that must succeed. */
#define TRIGGER_OK(...)                                   \
  do {                                                    \
    char *o_;                                             \
    int rc_ = trigger(&o_, __VA_ARGS__);                  \
    if (rc_ != 0) fail_msg("loom trigger: %d: %s", rc_, o_); \
    free(o_);                                             \
  } while (0)

/* One file's counts: errors, ProfilerStep#, then p<k>, op<k>, i<k> for
 * each phase k in 1..nph; compared with want (same order). */
static void check(const char *name, int nph, const long long *want) {
  char file[700], sql[16][128];
  const char *q[16];
  snprintf(file, sizeof file, "%s/%s", dir, name);
  int n = 0;
  q[n++] = "select count(*) from stats where value > 0 and severity in ('error','data_loss')";
  q[n++] = "select count(*) from slice where name like 'ProfilerStep#%'";
  for (int k = 1; k <= nph; k++) {
    snprintf(sql[n], sizeof sql[n], "select count(*) from slice where name = 'p%d'", k), q[n] = sql[n], n++;
    snprintf(sql[n], sizeof sql[n], "select count(*) from slice where name = 'op%d'", k), q[n] = sql[n], n++;
    snprintf(sql[n], sizeof sql[n], "select count(*) from slice where name = 'i%d'", k), q[n] = sql[n], n++;
  }
  long long v[16];
  tp_ints(file, q, v, (size_t)n);
  for (int i = 0; i < n; i++)
    if (v[i] != want[i]) fail_msg("%s: %s gave %lld, expected %lld", name, q[i], v[i], want[i]);
}

static void file_has(const char *name, const char *needle) {
  char file[700];
  snprintf(file, sizeof file, "%s/%s", dir, name);
  char *text = read_file(file, NULL);
  if (!text) fail_msg("%s was not written", file);
  expect_in(text, needle);
  free(text);
}

static void test_ring(void **state) {
  (void)state;
  tp_require();
  char *out;
  /* a window ahead cannot be combined with a ring, at start */
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s record --ring 1m --duration 2 -- true 2>&1", LOOM_BIN);
  int st = ts_run(cmd, &out);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  expect_in(out, "cannot be combined with recording windows");
  free(out);
  new_dir();
  long pid = start("--ring 64m --on-demand --devices cpu", NULL, "5 7 6 1");
  wait_done(1);
  assert_int_equal(trigger(&out, "%ld --steps 3", pid), 1);
  expect_in(out, "records in ring mode");
  free(out);
  TRIGGER_OK("%ld -o %s/d1.json", pid, dir);
  go(1);
  wait_done(2);
  TRIGGER_OK("%ld -o %s/d2.json", pid, dir);
  sleep_ms(2000); /* phase 3 begins 2 s after phase 2 ended */
  go(2);
  wait_done(3);
  TRIGGER_OK("%ld --duration 1 --config ACTIVITY_TYPES=user_annotation -o %s/d3.json", pid, dir);
  go(3);
  end_app();
  /* errors, steps, then p/op/i of each phase */
  const long long d1[] = {0, 5, 5, 5, 5, 0, 0, 0};
  const long long d2[] = {0, 12, 5, 5, 5, 7, 7, 7, 0, 0, 0};
  const long long d3[] = {0, 6, 0, 0, 0, 0, 0, 0, 6, 0, 0};
  const long long all[] = {0, 19, 5, 5, 5, 7, 7, 7, 6, 6, 6, 1, 1, 1};
  check("d1.json", 2, d1);
  check("d2.json", 3, d2);
  check("d3.json", 3, d3);
  check("run.json", 4, all);
  file_has("d1.json", "\"ring_dump_reason\":\"loom trigger: a dump of the ring\"");
  file_has("d3.json", "its last 1.000 s");
  file_has("d3.json", "\"loom_window_kinds\":\"user_range\"");
}

static void test_kinds(void **state) {
  (void)state;
  tp_require();
  char *out;
  new_dir();
  long pid = start("--on-demand --devices cpu", NULL, "5 4 5 5 1");
  wait_done(1);
  assert_int_equal(trigger(&out, "%ld --no-wait -o %s/k1.json --config "
                           "'ACTIVITIES_ITERATIONS=3\\nACTIVITY_TYPES=cpu_op,python_function'",
                           pid, dir), 0);
  expect_in(out, "'python_function' has no loom record kind");
  free(out);
  go(1); /* steps 5..7 */
  wait_done(2);
  TRIGGER_OK("%ld --no-wait --steps 3 -o %s/k2.json", pid, dir);
  go(2); /* steps 9..11 */
  wait_done(3);
  TRIGGER_OK("%ld --no-wait --steps 3 -o %s/k3.json --config "
             "ACTIVITY_TYPES=user_annotation,cpu_instant_event", pid, dir);
  go(3); /* steps 14..16 */
  wait_done(4);
  go(4);
  end_app();
  const long long k1[] = {0, 0, 0, 0, 0, 0, 3, 0};
  const long long k2[] = {0, 3, 0, 0, 0, 0, 0, 0, 3, 3, 3};
  const long long k3[] = {0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 3};
  check("k1.json", 2, k1);
  check("k2.json", 3, k2);
  check("k3.json", 4, k3);
  file_has("k1.json", "\"loom_window_kinds\":\"cpu_op\"");
  file_has("k1.json", "this window keeps only the record kinds asked for (cpu_op");
}

static void test_library(void **state) {
  (void)state;
  tp_require();
  char *out, env[800], row[64];
  new_dir();
  snprintf(env, sizeof env, "LOOM_ON_DEMAND=on LOOM_OUTPUT=%s/lib-{seq}.json", dir);
  long pid = start(NULL, env, "5 4 1");
  wait_done(1);
  assert_int_equal(trigger(&out, "--list"), 0);
  snprintf(row, sizeof row, "%ld ", pid);
  expect_in(out, row);
  expect_in(out, "phaseapp");
  free(out);
  TRIGGER_OK("%ld --no-wait --steps 3", pid);
  go(1); /* steps 5..7 */
  wait_done(2);
  assert_int_equal(trigger(&out, "%ld --duration 0.2", pid), 0);
  char wrote[700];
  snprintf(wrote, sizeof wrote, "wrote %s/lib-2.json", dir);
  expect_in(out, wrote);
  free(out);
  go(2);
  end_app();
  const long long l1[] = {0, 3, 0, 0, 0, 3, 3, 3};
  const long long l2[] = {0, 0, 0, 0, 0, 0, 0, 0};
  check("lib-1.json", 2, l1);
  check("lib-2.json", 2, l2);
  assert_int_equal(trigger(&out, "%ld --steps 1", pid), 1);
  expect_in(out, "no such process");
  free(out);
}

static void test_libring(void **state) {
  (void)state;
  tp_require();
  new_dir();
  long pid = start(NULL, "LOOM_ON_DEMAND=on LOOM_MODE=ring LOOM_RING_SIZE=1m", "5 2");
  wait_done(1);
  TRIGGER_OK("%ld -o %s/lr.json", pid, dir);
  go(1);
  end_app();
  const long long lr[] = {0, 5, 5, 5, 5, 0, 0, 0};
  const long long own[] = {0, 7, 5, 5, 5, 2, 2, 2};
  check("lr.json", 2, lr);
  check("own.json", 2, own);
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {cmocka_unit_test(test_ring), cmocka_unit_test(test_kinds),
                                   cmocka_unit_test(test_library),
                                   cmocka_unit_test(test_libring)};
  const char *names[] = {"ring", "kinds", "library", "libring"};
  for (size_t i = 0; argc > 1 && i < 4; i++)
    if (!strcmp(argv[1], names[i])) return _cmocka_run_group_tests(names[i], &all[i], 1, NULL, NULL);
  if (argc > 1) {
    fprintf(stderr, "unknown test '%s'\n", argv[1]);
    return 2;
  }
  return cmocka_run_group_tests(all, NULL, NULL);
}
