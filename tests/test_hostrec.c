/*
 * test_hostrec.c - host recording: exact counts from many threads with
 * random nesting, threads that exit before stop, the memory cap (exact drop
 * count and marker), ranges open at stop, fork, steps, explicit-id ranges,
 * and names that need escaping loaded by trace_processor.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static size_t count_cat(const loom_trace *t, const char *cat, int unclosed) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!strcmp(v.category, cat) && (unclosed < 0 || v.unclosed == (unsigned)unclosed)) n++;
  }
  return n;
}

enum { THREADS = 4, PAIRS = 5000 };

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  int depth = 0;
  for (int i = 0; i < PAIRS;) {
    seed = seed * 1103515245u + 12345u;
    if (depth < 8 && (depth == 0 || (seed >> 16) % 2)) {
      loom_range_push("work");
      depth++;
      i++;
    } else {
      loom_range_pop();
      depth--;
    }
  }
  while (depth--) loom_range_pop();
  return NULL;
}

static void test_threads_exact_counts(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", "buffer_size=4k");
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL); /* exited before stop */
  loom_trace *t = ts_finish(s);
  assert_int_equal(count_cat(t, "user_annotation", -1), THREADS * PAIRS);
  assert_int_equal(loom_trace_warning_count(t), 0);
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  const char *q[] = {"select count(*) from slice where name = 'work'",
                     "select count(distinct utid) from slice join thread_track on slice.track_id = thread_track.id",
                     "select count(*) from stats where value > 0 and severity in ('error','data_loss')"};
  long long r[3];
  tp_ints(path, q, r, 3);
  assert_int_equal(r[0], THREADS * PAIRS);
  assert_int_equal(r[1], THREADS);
  assert_int_equal(r[2], 0);
  unlink(path);
  loom_trace_free(t);
}

static void test_memory_cap(void **state) {
  (void)state;
  /* A chunk of 1 KiB holds 1024 / 32 = 32 records (plus a 16-byte header);
   * the cap allows exactly one chunk, so 100 instants keep 32, drop 68. */
  loom_session *s = ts_start("cpu", "buffer_size=1k,memory_cap=1100");
  for (int i = 0; i < 100; i++) loom_instant("tick");
  loom_trace *t = ts_finish(s);
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  assert_int_equal(count_cat(t, "cpu_instant_event", -1), 32);
  assert_int_equal(sum.dropped, 68);
  assert_int_equal(count_cat(t, "marker", -1), 1);
  assert_int_equal(loom_trace_warning_count(t), 1);
  assert_non_null(strstr(loom_trace_warning(t, 0), "68 host records dropped"));
  loom_trace_free(t);
}

static void test_open_ranges_and_steps(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", NULL);
  loom_step();
  loom_range_push("left open");
  loom_op_begin("aten::open", 5);
  loom_step();
  loom_range_begin(42, "async");
  loom_range_pop();
  loom_range_pop(); /* one pop too many: ignored, reported */
  loom_range_begin(43, "never ended");
  loom_range_end(42);
  loom_trace *t = ts_finish(s);
  /* ProfilerStep#0 closed, #1 open; "left open" was popped; aten::open open */
  assert_int_equal(count_cat(t, "user_annotation", 1), 2); /* step #1, async 43 */
  assert_int_equal(count_cat(t, "cpu_op", 1), 1);
  assert_int_equal(count_cat(t, "user_annotation", 0), 3); /* step #0, left open, async 42 */
  assert_int_equal(loom_trace_warning_count(t), 1);
  loom_trace_free(t);
}

/* Only the requested kinds are kept. */
static void test_kind_filter(void **state) {
  (void)state;
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu",
                             .kinds = LOOM_KIND_BIT(LOOM_KIND_COUNTER) | LOOM_KIND_BIT(LOOM_KIND_CPU_OP)};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  loom_range_push("dropped by filter");
  loom_op_begin("aten::kept", 1);
  loom_instant("dropped too");
  loom_counter("kept", 2.5);
  loom_op_end();
  loom_range_pop();
  loom_trace *t = ts_finish(s);
  assert_int_equal(loom_trace_event_count(t), 2);
  assert_int_equal(count_cat(t, "cpu_op", 0), 1);
  assert_int_equal(count_cat(t, "counter", 0), 1);
  loom_trace_free(t);
}

/* Framework ops with arguments: each op's own, also when nested. */
static void test_op_arguments(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", NULL);
  loom_arg outer[2] = {{.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = 7},
                       {.key = "Input Dims", .type = LOOM_ARG_STRING, .v.s = "[[2, 3], [3]]"}};
  char dtype[16];
  snprintf(dtype, sizeof dtype, "%s", "float"); /* a temporary string: copied */
  loom_arg inner[1] = {{.key = "Input type", .type = LOOM_ARG_STRING, .v.s = dtype}};
  loom_op_begin_args("aten::linear", 70, outer, 2);
  loom_op_begin_args("aten::addmm", 71, inner, 1);
  memset(dtype, 'x', sizeof dtype - 1);
  loom_op_end();
  loom_op_begin("aten::relu", 72); /* no arguments */
  loom_op_end();
  loom_op_end();
  loom_trace *t = ts_finish(s);
  assert_int_equal(count_cat(t, "cpu_op", 0), 3);
  assert_true(ts_saved_contains(t, "\"name\":\"aten::linear\",\"pid\""));
  assert_true(ts_saved_contains(t, "\"External id\":70,\"Sequence number\":7,\"Input Dims\":\"[[2, 3], [3]]\"}"));
  assert_true(ts_saved_contains(t, "\"External id\":71,\"Input type\":\"float\"}"));
  assert_true(ts_saved_contains(t, "\"args\":{\"External id\":72}"));
  loom_trace_free(t);
}

static void test_fork_child_records_nothing(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", NULL);
  loom_instant("parent before");
  pid_t pid = fork();
  if (pid == 0) {
    loom_instant("child"); /* must not reach the parent's trace */
    loom_session *c = NULL;
    loom_session_config cfg = {.struct_size = sizeof cfg};
    /* The child may not drive the parent's session either. */
    _exit(loom_session_create(&cfg, &c) == LOOM_EBUSY ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  loom_instant("parent after");
  loom_trace *t = ts_finish(s);
  assert_int_equal(count_cat(t, "cpu_instant_event", -1), 2);
  loom_trace_free(t);
}

static void test_escaping(void **state) {
  (void)state;
  tp_require();
  static const char *names[] = {"quote\"back\\slash", "new\nline\ttab", "ctl\x01\x1f",
                                "bad utf8 \xff\xfe end", "ok \xc3\xa9 utf8"};
  loom_session *s = ts_start("cpu", NULL);
  for (int i = 0; i < 5; i++) {
    loom_range_push_str(names[i]);
    loom_range_pop();
  }
  loom_trace *t = ts_finish(s);
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  const char *q[] = {"select count(*) from slice where category = 'user_annotation'",
                     "select count(*) from slice where name = 'quote\"back\\slash'",
                     "select count(*) from slice where name = 'new' || char(10) || 'line' || char(9) || 'tab'",
                     "select count(*) from slice where name = 'ctl' || char(1) || char(31)",
                     "select count(*) from slice where name = 'bad utf8 ' || char(65533) || char(65533) || ' end'",
                     "select count(*) from slice where name = 'ok ' || char(233) || ' utf8'"};
  long long r[6];
  tp_ints(path, q, r, 6);
  for (int i = 0; i < 6; i++) assert_int_equal(r[i], i == 0 ? 5 : 1);
  unlink(path);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_exact_counts),
      cmocka_unit_test(test_memory_cap),
      cmocka_unit_test(test_open_ranges_and_steps),
      cmocka_unit_test(test_kind_filter),
      cmocka_unit_test(test_op_arguments),
      cmocka_unit_test(test_fork_child_records_nothing),
      cmocka_unit_test(test_escaping),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
