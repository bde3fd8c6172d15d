/*
 * test_windows.c - recording windows through the library (session options
 * and loom__trigger_request), on the in-process fake backend: a step window
 * holds exactly its steps with their device work; a torch.profiler schedule
 * writes one window per cycle with its active steps (warmup discarded),
 * repeat=0 until the end; a request from outside arms one window and a
 * second is refused while it is armed; a time window lies within the run;
 * bad window options are refused naming the option; output names.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "window/trigger.h"
#include "testutil.h"


/* What one finished window held. */
typedef struct win {
  char out[512];
  unsigned seq;
  int steps[16], nsteps, unclosed_steps;
  int work, kernels, flows;
  int64_t start_ns, end_ns, first_work_ns, last_work_end_ns;
  int labelled; /* its metadata names it as label_want says */
} win;
static char label_want[160];
static win wins[16];
static int nwins;

static void on_window(loom_trace *t, const char *out, unsigned seq, void *ud) {
  (void)ud;
  assert_true(nwins < 16);
  win *w = &wins[nwins++];
  memset(w, 0, sizeof *w);
  snprintf(w->out, sizeof w->out, "%s", out);
  w->seq = seq;
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  w->start_ns = s.start_ns;
  w->end_ns = s.end_ns;
  w->flows = (int)loom_trace_flow_count(t);
  if (label_want[0]) {
    char needle[200];
    snprintf(needle, sizeof needle, label_want, seq);
    w->labelled = ts_saved_contains(t, needle);
  }
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.projected) continue;
    int n;
    if (sscanf(v.name, "ProfilerStep#%d", &n) == 1 && w->nsteps < 16) {
      w->steps[w->nsteps++] = n;
      w->unclosed_steps += v.unclosed;
    }
    if (!strcmp(v.name, "work")) {
      if (!w->work || v.start_ns < w->first_work_ns) w->first_work_ns = v.start_ns;
      if (v.start_ns + v.dur_ns > w->last_work_end_ns) w->last_work_end_ns = v.start_ns + v.dur_ns;
      w->work++;
    }
    w->kernels += v.kind == LOOM_KIND_KERNEL;
  }
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Steps of window i, sorted, as "a,b,c". */
static const char *steps_of(int i) {
  static char buf[128];
  qsort(wins[i].steps, (size_t)wins[i].nsteps, sizeof(int), cmp_int);
  size_t k = 0;
  buf[0] = 0;
  for (int j = 0; j < wins[i].nsteps; j++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d", j ? "," : "", wins[i].steps[j]);
  return buf;
}

static void run_steps(int n, int sleep_us) {
  for (int i = 0; i < n; i++) {
    loom_step();
    loom_range_push("work");
    fake_launch(0, 0, "k", 1000);
    if (sleep_us) usleep((useconds_t)sleep_us);
    loom_range_pop();
  }
}

static loom_session *windowed(const char *options) {
  nwins = 0;
  loom_window_callback_set(on_window, NULL);
  return ts_start("cpu,fake", options);
}

static void finish(loom_session *s) {
  loom_trace *t = (loom_trace *)1;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  assert_null(t); /* every window went to the done function */
  loom_session_destroy(s);
}

static void test_step_window(void **state) {
  (void)state;
  loom_session *s = windowed("start_step=5,steps=3,output=/tmp/w.json");
  run_steps(20, 0);
  finish(s);
  assert_int_equal(nwins, 1);
  assert_string_equal(steps_of(0), "5,6,7");
  assert_int_equal(wins[0].unclosed_steps, 0); /* the last step ends at step 8 */
  assert_int_equal(wins[0].work, 3);
  assert_int_equal(wins[0].kernels, 3);
  assert_int_equal(wins[0].flows, 3);
  assert_int_equal(wins[0].seq, 1);
  assert_string_equal(wins[0].out, "/tmp/w.json"); /* one window: the name as given */
}

static void test_schedule(void **state) {
  (void)state;
  /* cycles of 4: step 0 wait, 1 warmup, 2-3 active; 4 wait, 5 warmup, 6-7 active */
  snprintf(label_want, sizeof label_want, "cycle %%u of schedule wait=1 warmup=1 active=2 repeat=2");
  loom_session *s = windowed("wait=1,warmup=1,active=2,repeat=2,output=/tmp/s.json");
  run_steps(20, 0);
  finish(s);
  label_want[0] = 0;
  assert_true(wins[0].labelled && wins[1].labelled);
  assert_int_equal(nwins, 2);
  assert_string_equal(steps_of(0), "2,3");
  assert_string_equal(steps_of(1), "6,7");
  for (int i = 0; i < 2; i++) {
    assert_int_equal(wins[i].work, 2); /* warmup's records were discarded */
    assert_int_equal(wins[i].kernels, 2);
    assert_int_equal(wins[i].unclosed_steps, 0);
  }
  assert_string_equal(wins[0].out, "/tmp/s-1.json");
  assert_string_equal(wins[1].out, "/tmp/s-2.json");
}

static void test_schedule_until_end(void **state) {
  (void)state;
  /* skip 3, then cycles of 4 from step 3: 5-6, 9-10, 13-14, 17-18 */
  loom_session *s = windowed("skip_first=3,wait=1,warmup=1,active=2,repeat=0,output=/tmp/r.json");
  run_steps(20, 0);
  finish(s);
  assert_int_equal(nwins, 4);
  assert_string_equal(steps_of(0), "5,6");
  assert_string_equal(steps_of(1), "9,10");
  assert_string_equal(steps_of(2), "13,14");
  assert_string_equal(steps_of(3), "17,18");
  /* and a schedule without warmup or wait: back-to-back windows */
  s = windowed("active=3,repeat=2,output=/tmp/b.json");
  run_steps(10, 0);
  finish(s);
  assert_int_equal(nwins, 2);
  assert_string_equal(steps_of(0), "0,1,2");
  assert_string_equal(steps_of(1), "3,4,5");
}

static void test_request(void **state) {
  (void)state;
  loom_session *s = windowed("windows=on,output=/tmp/q-{seq}.json");
  run_steps(4, 0); /* nothing recorded */
  loom__window_req r = {.start_step = -1, .steps = 2};
  assert_int_equal(loom__trigger_request(&r), LOOM_OK);
  assert_int_equal(loom__trigger_request(&r), LOOM_EBUSY);
  assert_non_null(strstr(loom_last_error(), "already armed"));
  assert_non_null(strstr(loom_last_error(), "2 steps"));
  run_steps(1, 0); /* step 4 begins the window */
  assert_int_equal(loom__trigger_request(&r), LOOM_EBUSY);
  assert_non_null(strstr(loom_last_error(), "already recording"));
  run_steps(3, 0);
  assert_int_equal(nwins, 1);
  assert_string_equal(steps_of(0), "4,5");
  loom__window_req r2 = {.start_step = 10, .steps = 1, .out = "/tmp/explicit.json"};
  assert_int_equal(loom__trigger_request(&r2), LOOM_OK);
  run_steps(6, 0);
  finish(s);
  assert_int_equal(nwins, 2);
  assert_string_equal(steps_of(1), "10");
  assert_string_equal(wins[0].out, "/tmp/q-1.json");
  assert_string_equal(wins[1].out, "/tmp/explicit.json");
  /* a request needs an end; a session recording its whole run takes none */
  loom__window_req bad = {.start_step = -1};
  assert_int_equal(loom__trigger_request(&bad), LOOM_EINVAL);
  s = ts_start("cpu", NULL);
  assert_int_equal(loom__trigger_request(&r), LOOM_ESTATE);
  loom_trace_free(ts_finish(s));
}

static int64_t now_real(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_time_window(void **state) {
  (void)state;
  int64_t t0 = now_real();
  loom_session *s = windowed("delay=0.1,duration=0.2,output=/tmp/t.json");
  run_steps(500, 1000); /* ~0.5 s or more */
  int64_t t1 = now_real();
  finish(s);
  assert_int_equal(nwins, 1);
  win *w = &wins[0];
  assert_true(w->start_ns >= t0 + 100000000);
  assert_true(w->end_ns <= t1);
  assert_true(w->end_ns - w->start_ns >= 200000000); /* (no upper bound on a busy machine) */
  /* everything recorded is inside the window; the steps are numbered as the program's */
  assert_true(w->work > 10);
  assert_true(w->first_work_ns >= w->start_ns);
  assert_true(w->last_work_end_ns <= w->end_ns);
  assert_true(w->nsteps > 0 && w->steps[0] > 10);
}

/* A trace made outside a window (a ring dump) goes out as the next window. */
static void test_write(void **state) {
  (void)state;
  char path[256], want[256];
  tmp_path(path, sizeof path, ".json");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"traceEvents\":[]}", f);
  fclose(f);
  loom_trace *t = NULL;
  assert_int_equal(loom_trace_load(path, &t), LOOM_OK);
  unlink(path);
  snprintf(label_want, sizeof label_want, "ring dump");
  loom_session *s = windowed("start_step=2,steps=1,output=/tmp/d.json");
  run_steps(4, 0); /* window 1 */
  loom__trigger_write(t, NULL, "ring dump");
  finish(s);
  label_want[0] = 0;
  assert_int_equal(nwins, 2);
  assert_string_equal(steps_of(0), "2");
  assert_int_equal(wins[1].seq, 2);
  snprintf(want, sizeof want, "/tmp/d-2.json");
  assert_string_equal(wins[1].out, want);
  assert_true(wins[1].labelled);
}

static void test_bad_options(void **state) {
  (void)state;
  static const struct { const char *opts, *needle; } bad[] = {
      {"start_step=5", "start_step=5 needs steps"},
      {"steps=abc", "option steps='abc'"},
      {"wait=2,warmup=1", "needs active"},
      {"active=2,start_step=3", "cannot be combined"},
      {"duration=0", "duration=0"},
      {"delay=-1,duration=1", "option delay='-1'"},
      {"windows=maybe", "windows='maybe'"},
      {"on_demand=maybe", "on_demand='maybe'"},
      {"mode=ring,start_step=1,steps=2", "cannot be combined with recording windows"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = bad[i].opts};
    loom_session *s = NULL;
    assert_int_equal(loom_session_create(&cfg, &s), LOOM_EINVAL);
    if (!strstr(loom_last_error(), bad[i].needle))
      fail_msg("%s: message '%s' lacks '%s'", bad[i].opts, loom_last_error(), bad[i].needle);
  }
  /* a ring asked for from outside: accepted */
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu",
                             .options = "mode=ring,windows=on,on_demand=on"};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  loom_session_destroy(s);
}

static void test_output_names(void **state) {
  (void)state;
  char b[256], want[256];
  assert_int_equal(loom__window_path(b, sizeof b, "t.json", 3, 0), 0);
  assert_string_equal(b, "t.json");
  assert_int_equal(loom__window_path(b, sizeof b, "d/t.json.gz", 3, 1), 0);
  assert_string_equal(b, "d/t-3.json.gz");
  assert_int_equal(loom__window_path(b, sizeof b, "t.pftrace", 12, 1), 0);
  assert_string_equal(b, "t-12.pftrace");
  assert_int_equal(loom__window_path(b, sizeof b, "t", 2, 1), 0);
  assert_string_equal(b, "t-2");
  setenv("RANK", "3", 1);
  assert_int_equal(loom__window_path(b, sizeof b, "{program}-{pid}-r{rank}-w{seq}.json", 7, 1), 0);
  snprintf(want, sizeof want, "%s-%d-r3-w7.json", program_invocation_short_name, (int)getpid());
  assert_string_equal(b, want);
  unsetenv("RANK");
  assert_int_equal(loom__window_path(b, 8, "longer-than-eight.json", 1, 0), -1);
}

int main(void) {
  assert_int_equal(fake_register(0, "fake", "fake", 0), LOOM_OK);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_step_window),  cmocka_unit_test(test_schedule),
      cmocka_unit_test(test_schedule_until_end), cmocka_unit_test(test_request),
      cmocka_unit_test(test_time_window),  cmocka_unit_test(test_write),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_output_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
