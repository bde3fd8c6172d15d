/*
 * test_record.c - windows under `loom record` on a real OpenCL
 * program (tests/windows/stepapp.c on POCL: 200 steps marked with
 * loom_step, one upload and one kernel per step, each completing during the
 * next step).  --start-step 50 --steps 3 gives exactly ProfilerStep#50..52
 * with the kernels and uploads those steps launched and nothing else; a
 * schedule with repeat gives one file per cycle with its active steps; a
 * --delay/--duration window lies within the program's run; with -o DIR/
 * every process followed writes its own windows.  Every file
 * loads in trace_processor with exact counts and no errors, and `loom
 * report` reads it as it is.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* Runs loom record with window options; returns its exit status. */
static int record(const char *opts, const char *trace, const char *args, char **out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' record %s -o '%s' -- '%s' %s 2>/dev/null", LOOM_BIN, opts,
           trace, STEPAPP, args);
  return ts_run(cmd, out);
}

/* ProfilerStep numbers (host slices) of t in order, device work and whether
 * every flow's launch lies inside one of those steps. */
typedef struct seen {
  int steps[64], nsteps, unclosed;
  int kernels, copies, flows, launches_in_steps;
  int64_t step_lo[64], step_hi[64];
} seen;

static seen inspect(loom_trace *t) {
  seen s = {0};
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    int n;
    if (!v.projected && v.device == UINT32_MAX && sscanf(v.name, "ProfilerStep#%d", &n) == 1 &&
        s.nsteps < 64) {
      s.step_lo[s.nsteps] = v.start_ns;
      s.step_hi[s.nsteps] = v.start_ns + v.dur_ns;
      s.steps[s.nsteps++] = n;
      s.unclosed += v.unclosed;
    }
    s.kernels += v.kind == LOOM_KIND_KERNEL;
    s.copies += v.kind == LOOM_KIND_MEMCPY;
  }
  s.flows = (int)loom_trace_flow_count(t);
  for (int i = 0; i < s.flows; i++) {
    loom_event_view call, work;
    ts_flow(t, (size_t)i, &call, &work);
    for (int k = 0; k < s.nsteps; k++)
      if (call.start_ns >= s.step_lo[k] && call.start_ns + call.dur_ns <= s.step_hi[k]) {
        s.launches_in_steps++;
        break;
      }
  }
  return s;
}

/* trace_processor: host step slices, kernels, uploads, flows, errors. */
static void tp_check(const char *trace, int steps, int kernels) {
  const char *q[] = {
      "select count(*) from slice where name like 'ProfilerStep#%' and category = 'user_annotation'",
      "select count(*) from slice where category = 'kernel'",
      "select count(*) from slice where category = 'gpu_memcpy'",
      "select count(*) from flow",
      "select count(*) from slice where name = 'train_step' and category = 'user_annotation'",
      "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[6];
  tp_ints(trace, q, r, 6);
  assert_int_equal(r[0], steps);
  assert_int_equal(r[1], kernels);
  assert_int_equal(r[2], kernels);
  assert_int_equal(r[3], 2 * kernels);
  assert_int_equal(r[4], steps);
  assert_int_equal(r[5], 0);
}

/* `loom report --json` on the file as it is: its step count and the
 * kernels of its device. */
static void report_counts(const char *trace, long *steps, long *kernels) {
  char cmd[1024], *out = NULL;
  snprintf(cmd, sizeof cmd, "'%s' report --json '%s'", LOOM_BIN, trace);
  assert_int_equal(ts_run(cmd, &out), 0);
  const char *p = strstr(out, "\"steps\":{\"count\":");
  assert_non_null(p);
  *steps = atol(p + strlen("\"steps\":{\"count\":"));
  const char *d = strstr(out, "\"devices\":[{");
  assert_non_null(d);
  const char *k = strstr(d, "\"kernels\":");
  assert_non_null(k);
  *kernels = atol(k + strlen("\"kernels\":"));
  free(out);
}

static void expect_window(const char *trace, int first, int n) {
  loom_trace *t = ts_load(trace);
  seen s = inspect(t);
  assert_int_equal(s.nsteps, n);
  for (int i = 0; i < n; i++) assert_int_equal(s.steps[i], first + i);
  assert_int_equal(s.unclosed, 0);
  assert_int_equal(s.kernels, n); /* the last step's kernel completes after the window */
  assert_int_equal(s.copies, n);
  assert_int_equal(s.flows, 2 * n);
  assert_int_equal(s.launches_in_steps, 2 * n); /* nothing launched outside the steps */
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  assert_int_equal(sum.dropped, 0);
  loom_trace_free(t);
  tp_check(trace, n, n);
  long rs, rk;
  report_counts(trace, &rs, &rk);
  assert_int_equal(rs, n);
  assert_int_equal(rk, n);
}

static void test_start_step(void **state) {
  (void)state;
  tp_require();
  char trace[256], other[300];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record("--start-step 50 --steps 3", trace, "200", NULL), 0);
  expect_window(trace, 50, 3);
  /* one window: the name as given, no numbered files */
  snprintf(other, sizeof other, "%.*s-1.json", (int)(strlen(trace) - 5), trace);
  assert_int_not_equal(access(other, F_OK), 0);
  unlink(trace);
}

static void test_schedule_files(void **state) {
  (void)state;
  tp_require();
  char trace[256], f[300];
  tmp_path(trace, sizeof trace, ".json");
  assert_int_equal(record("--wait 5 --warmup 2 --active 3 --repeat 4", trace, "200", NULL), 0);
  size_t stem = strlen(trace) - 5;
  for (int i = 1; i <= 4; i++) { /* cycles of 10 steps: 7-9, 17-19, 27-29, 37-39 */
    snprintf(f, sizeof f, "%.*s-%d.json", (int)stem, trace, i);
    expect_window(f, 10 * (i - 1) + 7, 3);
    unlink(f);
  }
  snprintf(f, sizeof f, "%.*s-5.json", (int)stem, trace);
  assert_int_not_equal(access(f, F_OK), 0);
  assert_int_not_equal(access(trace, F_OK), 0);
}

static void test_delay_duration(void **state) {
  (void)state;
  tp_require();
  char trace[256], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  /* 800 steps of at least 5 ms: the loop runs past 4 s after the start,
   * well past the window even when the OpenCL compiler is slow */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long launched = (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
  assert_int_equal(record("--delay 2 --duration 0.5", trace, "800 5", &out), 0);
  long long start = 0, end = 0;
  const char *p = strstr(out, "start "), *e = strstr(out, "end ");
  assert_non_null(p);
  assert_non_null(e);
  start = atoll(p + 6);
  end = atoll(e + 4);
  free(out);
  loom_trace *t = ts_load(trace);
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  /* the window begins 2 s after the program started, within its loop, and
   * lasts 0.5 s (its start here is its first event); no upper bound on a
   * busy machine beyond the program's end */
  assert_true(s.start_ns >= launched + 2000000000);
  assert_true(s.start_ns > start);
  assert_true(s.end_ns < end);
  assert_true(s.end_ns - s.start_ns >= 450000000);
  seen w = inspect(t);
  assert_true(w.kernels > 0);
  /* every device op of the window has its launch (the window may begin or
   * end between a step's upload and its kernel, so uploads = kernels +- 1) */
  assert_int_equal(w.flows, w.kernels + w.copies);
  assert_true(w.copies >= w.kernels - 1 && w.copies <= w.kernels + 1);
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.device == UINT32_MAX) assert_true(v.start_ns >= s.start_ns && v.start_ns <= s.end_ns);
  }
  loom_trace_free(t);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

/* Process following: with -o DIR/ every process writes its own windows,
 * DIR/<program>-<pid>-<seq>.json (a shell running the program twice). */
static void test_follow_dir(void **state) {
  (void)state;
#ifdef NO_SHELL_FOLLOW
  skip();
#endif
  tp_require();
  char dir[256], cmd[2048];
  tmp_path(dir, sizeof dir, "-windows/");
  snprintf(cmd, sizeof cmd, "'%s' record --wait 1 --active 2 --repeat 2 -o '%s' -- sh -c "
           "\"'%s' 10 >/dev/null; '%s' 10 >/dev/null\" 2>/dev/null", LOOM_BIN, dir, STEPAPP,
           STEPAPP);
  assert_int_equal(ts_run(cmd, NULL), 0);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  int files = 0, per_seq[3] = {0, 0, 0};
  while ((e = readdir(d))) {
    int pid, seq;
    char f[600];
    if (sscanf(e->d_name, "stepapp-%d-%d.json", &pid, &seq) != 2) continue;
    assert_true(seq == 1 || seq == 2);
    per_seq[seq]++;
    files++;
    snprintf(f, sizeof f, "%s%s", dir, e->d_name);
    expect_window(f, seq == 1 ? 1 : 4, 2); /* cycles of 3: steps 1-2, 4-5 */
    unlink(f);
  }
  closedir(d);
  assert_int_equal(files, 4); /* nothing else: the shell has no steps */
  assert_int_equal(per_seq[1], 2);
  assert_int_equal(per_seq[2], 2);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_start_step),
      cmocka_unit_test(test_schedule_files),
      cmocka_unit_test(test_delay_duration),
      cmocka_unit_test(test_follow_dir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
