/*
 * test_ring.c - flight-recorder mode (mode=ring): a small budget keeps
 * exactly the last window (count and ids checked against what the program
 * emitted) and reports the overwritten count; recording goes on after a
 * dump; ops whose raw bytes span chunks are never cut in half; a backend's
 * ring keeps device work with its launch; dumps taken while four threads
 * record are consistent (run under ThreadSanitizer with the hostrec set);
 * a step made 10x slower dumps a trace that contains it, once per cooldown;
 * so does a named range longer than slow_range's threshold.
 * Every written trace is loaded by trace_processor with exact counts and 0
 * errors.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* Chunks are 16 bytes of header and 32-byte records (src/record/record.h). */
enum { HDR = 16, REC = 32 };

typedef struct op_span {
  size_t closed, unclosed;
  uint64_t lo, hi; /* external ids of the closed ops */
  int contiguous;  /* the closed ids are lo..hi, each once, in order */
} op_span;

/* The cpu ops of thread tid (0: any) whose external id is in [base, base + 1e9). */
static op_span ops_of(const loom_trace *t, int64_t tid, uint64_t base) {
  op_span s = {0, 0, UINT64_MAX, 0, 1};
  uint64_t next = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (strcmp(v.category, "cpu_op") || (tid && v.tid != tid)) continue;
    if (v.external_id < base || v.external_id >= base + 1000000000ull) continue;
    if (v.unclosed) {
      s.unclosed++;
      continue;
    }
    if (s.closed && v.external_id != next) s.contiguous = 0;
    next = v.external_id + 1;
    if (v.external_id < s.lo) s.lo = v.external_id;
    if (v.external_id > s.hi) s.hi = v.external_id;
    s.closed++;
  }
  return s;
}

static void ring_meta(const loom_trace *t, const char *key, unsigned long long v) {
  char needle[128];
  snprintf(needle, sizeof needle, "\"%s\":\"%llu\"", key, v);
  assert_true(ts_saved_contains(t, needle));
}

static void tp_check_ops(const loom_trace *t, long long ops) {
  char path[256], q0[160];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  snprintf(q0, sizeof q0, "select count(*) from slice where name = 'op'");
  const char *q[] = {q0, "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[2];
  tp_ints(path, q, r, 2);
  assert_int_equal(r[0], ops);
  assert_int_equal(r[1], 0);
  unlink(path);
}

/* 100000 numbered ops (2 records each) into a ring of 10 chunks of 32
 * records: the kept window is the last 10 chunks, 160 ops; the rest,
 * 2 * (100000 - 160) records, is reported overwritten. */
static void test_exact_window(void **state) {
  (void)state;
  enum { N = 100000, CHUNK_RECS = 1024 / REC, CHUNKS = 10 };
  char opts[128];
  snprintf(opts, sizeof opts, "mode=ring,buffer_size=1k,ring_size=%d", CHUNKS * (HDR + 1024));
  loom_session *s = ts_start("cpu", opts);
  for (uint64_t i = 0; i < N; i++) {
    loom_op_begin("op", i);
    loom_op_end();
  }
  const uint64_t kept = CHUNKS * CHUNK_RECS / 2, over = 2 * (N - kept);
  loom_trace *d = NULL;
  assert_int_equal(loom_session_dump(s, "test", &d), LOOM_OK);
  op_span o = ops_of(d, 0, 0);
  assert_int_equal(o.closed, kept);
  assert_int_equal(o.unclosed, 0);
  assert_true(o.contiguous);
  assert_int_equal(o.lo, N - kept);
  assert_int_equal(o.hi, N - 1);
  ring_meta(d, "ring_overwritten_records", over);
  assert_true(ts_warned(d, "ring: 199680 records overwritten", NULL));
  assert_false(ts_warned(d, "without a matching begin", NULL));
  tp_check_ops(d, (long long)kept);
  loom_trace_free(d);
  /* Recording goes on: 48 more ops (3 chunks) move the window by 48. */
  for (uint64_t i = N; i < N + 48; i++) {
    loom_op_begin("op", i);
    loom_op_end();
  }
  loom_trace *t = ts_finish(s);
  o = ops_of(t, 0, 0);
  assert_int_equal(o.closed, kept);
  assert_true(o.contiguous);
  assert_int_equal(o.lo, N + 48 - kept);
  ring_meta(t, "ring_overwritten_records", over + 96);
  assert_int_equal(loom_trace_warning_count(t), 1); /* the ring's, not the dump's again */
  loom_trace_free(t);
}

/* Ranges cut by the ring: pops whose push was overwritten are dropped, not
 * reported as unmatched; nesting across the cut keeps only whole ranges. */
static void test_ranges_cut(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", "mode=ring,buffer_size=1k,ring_size=4160");
  loom_range_push("outer"); /* overwritten: its pop must go too */
  for (int i = 0; i < 1000; i++) {
    loom_range_push("r");
    loom_range_pop();
  }
  loom_range_pop();
  loom_trace *t = ts_finish(s);
  /* Records: 0 outer's push, then r's push (odd) and pop (even), the last
   * outer's pop.  The ring keeps the last 4 chunks of 32: the current one
   * (partly written) and the 3 before it. */
  const int total = 2002, chunks = (total + 31) / 32, first = total - (total - (chunks - 4) * 32);
  int whole = 0, cut = 1; /* outer's pop */
  for (int i = 1; i <= 2000; i += 2) {
    if (i >= first) whole++;
    else if (i + 1 >= first) cut++;
  }
  const char *names[] = {"r", "outer", NULL};
  const char *cats[] = {NULL, NULL, NULL};
  ts_tally c = ts_count_annotations(t, names, cats);
  assert_int_equal(c.named[0], whole);
  assert_int_equal(c.named[1], 0);
  assert_false(ts_warned(t, "without a matching begin", NULL));
  char msg[96];
  snprintf(msg, sizeof msg, " %d range ends whose begin was overwritten", cut);
  assert_true(ts_warned(t, msg, NULL));
  loom_trace_free(t);
}

/* Raw bytes of 200 (7 records after the op's) span chunk boundaries: an op
 * whose first records were overwritten must not leave its tail behind as
 * records of their own, and every kept op has its own bytes. */
static uint32_t fmt_id(const void *raw, uint32_t n, char *buf, size_t nbuf, loom_arg *out,
                       uint32_t max) {
  (void)buf, (void)nbuf;
  if (max < 1 || n < 8) return 0;
  uint64_t id;
  memcpy(&id, raw, 8);
  for (uint32_t i = 8; i < n; i++)
    if (((const unsigned char *)raw)[i] != (unsigned char)(id + i)) return 0; /* torn */
  out[0] = (loom_arg){.key = "id", .type = LOOM_ARG_UINT, .v.u = id};
  return 1;
}

static void test_raw_spanning(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", "mode=ring,buffer_size=1k,ring_size=8320");
  unsigned char raw[200];
  for (uint64_t i = 0; i < 3000; i++) {
    memcpy(raw, &i, 8);
    for (uint32_t k = 8; k < sizeof raw; k++) raw[k] = (unsigned char)(i + k);
    loom_op_begin_raw("op", i, NULL, 0, raw, sizeof raw, fmt_id);
    loom_op_end();
  }
  loom_trace *t = ts_finish(s);
  op_span o = ops_of(t, 0, 0);
  assert_true(o.closed > 20);
  assert_true(o.contiguous);
  assert_int_equal(o.hi, 2999);
  assert_int_equal(loom_trace_warning_count(t), 1);
  tp_check_ops(t, (long long)o.closed);
  /* every kept op carries its own bytes, intact (fmt_id gives no argument
   * for torn bytes) */
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  assert_int_equal(tp_int(path, "select count(*) from slice join args using(arg_set_id) "
                                "where slice.name = 'op' and args.key = 'args.id'"),
                   (long long)o.closed);
  unlink(path);
  loom_trace_free(t);
}

/* A backend's ring: device work goes with its launch. */
static void test_backend_ring(void **state) {
  (void)state;
  assert_int_equal(fake_register(0, "fake0", "fakedev", 0), LOOM_OK);
  loom_session *s = ts_start("cpu,fakedev", "mode=ring,ring_size=64k,backend_memory_cap=32k");
  for (int i = 0; i < 5000; i++) fake_launch(0, 0, "k", 100);
  loom_trace *d = NULL;
  assert_int_equal(loom_session_dump(s, "test", &d), LOOM_OK);
  size_t calls = 0, kernels = 0;
  for (size_t i = 0; i < loom_trace_event_count(d); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(d, i, &v);
    calls += v.kind == LOOM_KIND_RUNTIME;
    kernels += v.kind == LOOM_KIND_KERNEL;
  }
  assert_true(kernels > 100 && kernels < 1000);
  assert_int_equal(kernels, calls);
  assert_int_equal(loom_trace_flow_count(d), kernels);
  assert_true(ts_warned(d, "records overwritten (host 0, backends", NULL));
  loom_trace_free(d);
  loom_trace_free(ts_finish(s));
}

/* ---- dumps while several threads record (TSan) ---------------------------- */
enum { THREADS = 4 };
static atomic_int stop_flag;

static void *writer(void *arg) {
  uint64_t base = (uint64_t)(uintptr_t)arg * 1000000000ull;
  for (uint64_t i = 0; !atomic_load(&stop_flag); i++) {
    loom_range_push("w");
    loom_op_begin("op", base + i);
    loom_op_end();
    loom_range_pop();
  }
  return NULL;
}

static void test_concurrent_dumps(void **state) {
  (void)state;
  atomic_store(&stop_flag, 0);
  loom_session *s = ts_start("cpu", "mode=ring,buffer_size=1k,ring_size=64k");
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)(i + 1));
  for (int k = 0; k < 20; k++) {
    usleep(2000);
    loom_trace *d = NULL;
    assert_int_equal(loom_session_dump(s, "concurrent", &d), LOOM_OK);
    /* each thread's kept ops are one run of consecutive ids (a suffix of
     * what it wrote), at most one open; no range is half */
    for (int i = 0; i < THREADS; i++) {
      op_span o = ops_of(d, 0, (uint64_t)(i + 1) * 1000000000ull);
      assert_true(o.contiguous);
      assert_true(o.unclosed <= 1);
    }
    assert_false(ts_warned(d, "without a matching begin", NULL));
    loom_trace_free(d);
  }
  atomic_store(&stop_flag, 1);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  loom_trace *t = ts_finish(s);
  for (int i = 0; i < THREADS; i++) {
    op_span o = ops_of(t, 0, (uint64_t)(i + 1) * 1000000000ull);
    assert_true(o.closed > 0);
    assert_true(o.contiguous);
    assert_int_equal(o.unclosed, 0);
  }
  loom_trace_free(t);
}

/* ---- the slow-step trigger ------------------------------------------------ */
/* Dumps are numbered as the process's windows (src/window/trigger.c): from
 * the session's output pattern, -<seq> before the extension. */
static void dump_name(char *buf, size_t n, const char *out, int seq) {
  snprintf(buf, n, "%.*s-%d.json", (int)(strlen(out) - 5), out, seq);
}

/* The dumps written for out (their numbers go on across sessions): up to
 * max names into names, after waiting for the first. */
static int dumps_of(const char *out, char names[][300], int max) {
  int n = 0;
  for (int waited = 0; waited < 2000 && !n; waited++) {
    for (int k = 1; k <= 100 && n < max; k++) {
      dump_name(names[n], sizeof names[n], out, k);
      if (access(names[n], R_OK) == 0) n++;
    }
    if (!n) usleep(10000);
  }
  if (n) usleep(300000); /* let the writer finish */
  for (int k = 1, m = 0; k <= 100 && n < max; k++) { /* any written meanwhile */
    char p[300];
    dump_name(p, sizeof p, out, k);
    m = 0;
    for (int i = 0; i < n; i++) m |= !strcmp(names[i], p);
    if (!m && access(p, R_OK) == 0) snprintf(names[n++], 300, "%s", p);
  }
  return n;
}

/* 40 steps of 5 ms (sleeping: a loaded machine delays a sleeper less than
 * it slows a busy loop), steps 25 and 30 of 50 ms. */
static void run_steps(const char *out, const char *cooldown) {
  char opts[512];
  snprintf(opts, sizeof opts, "mode=ring,ring_size=1m,slow_step=5,slow_step_warmup=10,"
           "output=%s%s", out, cooldown);
  loom_session *s = ts_start("cpu", opts);
  for (int i = 0; i < 40; i++) {
    loom_step(); /* step i begins */
    loom_range_push("work");
    usleep(i == 25 || i == 30 ? 50000 : 5000);
    loom_range_pop();
  }
  loom_step();
  usleep(100000);
  loom_trace_free(ts_finish(s)); /* waits for a dump under way */
}

/* A dump names the slow step and holds it whole.  With no cooldown every
 * slow step dumps (a step the loaded machine made slow too may add one). */
static void test_slow_step(void **state) {
  (void)state;
  char out[256];
  tmp_path(out, sizeof out, ".json");
  run_steps(out, ",dump_cooldown=0");
  char names[40][300];
  int n = dumps_of(out, names, 40), found = 0;
  assert_true(n >= 1);
  for (int k = 0; k < n; k++) {
    char *text = read_file(names[k], NULL);
    assert_non_null(text);
    int is25 = strstr(text, "slow step: ProfilerStep#25 took") != NULL;
    free(text);
    if (is25) {
      found++;
      const char *q[] = {"select count(*) from slice where name = 'ProfilerStep#25'",
                         "select count(*) from slice where name = 'ProfilerStep#26'",
                         "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
      long long r[3];
      tp_ints(names[k], q, r, 3);
      assert_int_equal(r[0], 1);
      assert_int_equal(r[1], 1); /* the next step: open at the dump, or done */
      assert_int_equal(r[2], 0);
    }
    unlink(names[k]);
  }
  assert_int_equal(found, 1);
}

/* The step a dump names ("slow step: ProfilerStep#N took"), or -1. */
static int dumped_step(const char *path) {
  char *text = read_file(path, NULL);
  assert_non_null(text);
  const char *at = strstr(text, "slow step: ProfilerStep#");
  int step = at ? atoi(at + strlen("slow step: ProfilerStep#")) : -1;
  free(text);
  return step;
}

/* Steps 25 and 30 are slow; within the cooldown (60 s by default) only the
 * first slow step dumps: step 25 (or one before it the loaded machine made
 * slow), never step 30.  With a cooldown shorter than the 70 ms between the
 * two, both dump: the cooldown ends. */
static void test_slow_step_cooldown(void **state) {
  (void)state;
  char out[256], names[40][300];
  tmp_path(out, sizeof out, ".json");
  run_steps(out, "");
  int n = dumps_of(out, names, 4);
  assert_int_equal(n, 1);
  loom_trace_free(ts_load(names[0]));
  int first = dumped_step(names[0]);
  assert_true(first >= 0 && first <= 25);
  unlink(names[0]);
  tmp_path(out, sizeof out, ".json");
  run_steps(out, ",dump_cooldown=0.04");
  n = dumps_of(out, names, 40);
  int saw25 = 0, saw30 = 0;
  for (int k = 0; k < n; k++) {
    int step = dumped_step(names[k]);
    saw25 += step == 25;
    saw30 += step == 30;
    unlink(names[k]);
  }
  assert_int_equal(saw25, 1);
  assert_int_equal(saw30, 1);
}

/* A slow step noticed just before the session stops is still written: the
 * stop waits for the dump it started (it was lost when the stop took the
 * session away before the dump's thread ran). */
static void test_slow_step_at_stop(void **state) {
  (void)state;
  for (int round = 0; round < 5; round++) {
    char out[256], opts[512], names[4][300];
    tmp_path(out, sizeof out, ".json");
    /* step 14 is 80 times the others, the trigger 20 times; no cooldown, so
     * that a step a loaded machine slows as much (a sanitizer build under
     * load once made step 10 take 8.5 times the median) does not keep step
     * 14's dump from being written */
    snprintf(opts, sizeof opts, "mode=ring,ring_size=1m,slow_step=20,slow_step_warmup=10,"
             "dump_cooldown=0,output=%s", out);
    loom_session *s = ts_start("cpu", opts);
    for (int i = 0; i < 15; i++) {
      loom_step();
      usleep(i == 14 ? 400000 : 5000);
    }
    loom_step(); /* notices step 14 and starts its dump */
    loom_trace_free(ts_finish(s));
    int n = dumps_of(out, names, 4), found = 0;
    assert_true(n >= 1);
    for (int k = 0; k < n; k++) {
      char *text = read_file(names[k], NULL);
      assert_non_null(text);
      found += strstr(text, "slow step: ProfilerStep#14 took") != NULL;
      free(text);
      unlink(names[k]);
    }
    assert_int_equal(found, 1);
  }
}

/* A named range longer than slow_range's threshold dumps the ring with it
 * inside (once in the cooldown: the slow one, or one the machine made slow). */
static void test_slow_range(void **state) {
  (void)state;
  char out[256], opts[512], names[4][300];
  tmp_path(out, sizeof out, ".json");
  snprintf(opts, sizeof opts, "mode=ring,ring_size=1m,slow_range=slowop:25,output=%s", out);
  loom_session *s = ts_start("cpu", opts);
  for (int i = 0; i < 30; i++) {
    loom_range_push("iter");
    loom_range_push_str(i % 2 ? "slowop" : "other");
    usleep(i == 15 ? 60000 : i == 16 ? 80000 : 1000); /* "other" 80 ms: not watched */
    loom_range_pop();
    loom_range_pop();
  }
  usleep(100000);
  loom_trace_free(ts_finish(s));
  assert_int_equal(dumps_of(out, names, 4), 1);
  char *text = read_file(names[0], NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "slow range: 'slowop' took"));
  free(text);
  const char *q[] = {"select count(*) from slice where name = 'slowop' and dur > 25000000",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[2];
  tp_ints(names[0], q, r, 2);
  assert_int_equal(r[0], 1);
  assert_int_equal(r[1], 0);
  unlink(names[0]);
}

static void test_bad_options(void **state) {
  (void)state;
  const char *bad[] = {"mode=circular", "slow_step=3", "mode=ring,slow_step=1",
                       "mode=ring,ring_size=1", "mode=ring,slow_step_warmup=0",
                       "mode=ring,dump_cooldown=-1", "mode=ring,dump_cooldown=nan",
                       "mode=ring,slow_step=inf", "mode=ring,slow_step_warmup=nan",
                       "mode=ring,slow_range=x:nan", "ring_size=1m", "mode=ring,slow_range=x",
                       "mode=ring,slow_range=x:0", "slow_range=x:5"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = bad[i]};
    loom_session *s = NULL;
    assert_int_equal(loom_session_create(&cfg, &s), LOOM_EINVAL);
    assert_non_null(strchr(loom_last_error(), '='));
  }
  loom_session *s = ts_start("cpu", NULL);
  loom_trace *d = NULL;
  assert_int_equal(loom_session_dump(s, NULL, &d), LOOM_ESTATE);
  assert_non_null(strstr(loom_last_error(), "mode=ring"));
  loom_trace_free(ts_finish(s));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_window),     cmocka_unit_test(test_ranges_cut),
      cmocka_unit_test(test_raw_spanning),     cmocka_unit_test(test_backend_ring),
      cmocka_unit_test(test_concurrent_dumps), cmocka_unit_test(test_slow_step),
      cmocka_unit_test(test_slow_step_cooldown), cmocka_unit_test(test_slow_step_at_stop),
      cmocka_unit_test(test_slow_range),
      cmocka_unit_test(test_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
