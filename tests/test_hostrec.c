/*
 * test_hostrec.c - host recording: exact counts from many threads with
 * random nesting, threads that exit before stop, the memory cap (exact drop
 * count and marker), ranges open at stop, fork, steps, explicit-id ranges,
 * names that need escaping loaded by trace_processor, and ops with raw
 * arguments (loom_op_begin_raw): formatted at collect, once per distinct
 * bytes, on the right op, across chunk boundaries, dropped whole by the cap;
 * an op's first argument kept in its own record (LOOM__HR_F_ARG0) only when
 * it is an int of 0..2^32-1, every argument exact either way.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
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
  assert_non_null(strstr(loom_trace_warning(t, 0), "memory_cap=1100 bytes)"));
  loom_trace_free(t);
}

/* Host records are bounded by default (1 GiB, named in the warning when it
 * is reached); memory_cap=0 asks for no bound, and a bad value is refused. */
static void test_memory_cap_default(void **state) {
  (void)state;
  loom_session_config bad = {.struct_size = sizeof bad, .devices = "cpu",
                             .options = "memory_cap=much"};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&bad, &s), LOOM_EINVAL);
  assert_non_null(strstr(loom_last_error(), "memory_cap='much'"));
  assert_non_null(strstr(loom_last_error(), "0 for no bound"));
  /* 0: 100 instants in chunks of 32 records, none dropped */
  s = ts_start("cpu", "buffer_size=1k,memory_cap=0");
  for (int i = 0; i < 100; i++) loom_instant("tick");
  loom_trace *t = ts_finish(s);
  assert_int_equal(count_cat(t, "cpu_instant_event", -1), 100);
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
  /* the default, 1 GiB: a first chunk larger than that cannot be had, so
   * every record is dropped and the warning names the default */
  s = ts_start("cpu", "buffer_size=1100m");
  for (int i = 0; i < 10; i++) loom_instant("tick");
  t = ts_finish(s);
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  assert_int_equal(count_cat(t, "cpu_instant_event", -1), 0);
  assert_int_equal(sum.dropped, 10);
  assert_int_equal(loom_trace_warning_count(t), 1);
  assert_non_null(strstr(loom_trace_warning(t, 0), "10 host records dropped"));
  assert_non_null(strstr(loom_trace_warning(t, 0), "memory_cap=1073741824 bytes, the default"));
  loom_trace_free(t);
  /* memory_cap sets it (the chunk is only touched where written) */
  s = ts_start("cpu", "buffer_size=1100m,memory_cap=2g");
  for (int i = 0; i < 10; i++) loom_instant("tick");
  t = ts_finish(s);
  assert_int_equal(count_cat(t, "cpu_instant_event", -1), 10);
  assert_int_equal(loom_trace_warning_count(t), 0);
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

/* The first argument goes inline in the op's record when it is an int of
 * 0..UINT32_MAX; every other first argument is a record of its own.  Either
 * way each op has exactly its arguments, keys, types and values, through
 * both calls that take arguments. */
static void test_op_arg0_inline(void **state) {
  (void)state;
  static const loom_arg firsts[] = {
      {.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = 0},
      {.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = (int64_t)UINT32_MAX},
      {.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = (int64_t)UINT32_MAX + 1},
      {.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = -1},
      {.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = INT64_MIN},
      {.key = "u", .type = LOOM_ARG_UINT, .v.u = 5},
      {.key = "d", .type = LOOM_ARG_DOUBLE, .v.d = 1.5},
      {.key = "s", .type = LOOM_ARG_STRING, .v.s = "text"}};
  enum { NF = sizeof firsts / sizeof firsts[0] };
  loom_session *s = ts_start("cpu", NULL);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < NF; i++) {
      loom_arg a[2] = {firsts[i], {.key = "b", .type = LOOM_ARG_INT, .v.i = 9}};
      char name[32];
      snprintf(name, sizeof name, "op%d", i);
      if (k) loom_op_begin_raw(name, 500 + (uint64_t)i, a, 2, NULL, 0, NULL);
      else loom_op_begin_args(name, 400 + (uint64_t)i, a, 2);
      loom_op_end();
    }
  loom_op_begin_args("op_one", 600, firsts, 1); /* the inline argument alone */
  loom_op_end();
  loom_trace *t = ts_finish(s);
  size_t seen = 0;
  for (size_t e = 0; e < loom_trace_event_count(t); e++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(t, e, &v), LOOM_OK);
    if (strncmp(v.name, "op", 2)) continue;
    loom_arg got[4];
    size_t n = loom_trace_event_args(t, e, got, 4);
    seen++;
    if (!strcmp(v.name, "op_one")) {
      assert_int_equal(n, 1);
      assert_string_equal(got[0].key, "Sequence number");
      assert_int_equal(got[0].type, LOOM_ARG_INT);
      assert_int_equal(got[0].v.i, 0);
      continue;
    }
    int i = atoi(v.name + 2);
    assert_int_equal(v.external_id % 100, (uint64_t)i);
    assert_int_equal(n, 2);
    assert_string_equal(got[0].key, firsts[i].key);
    assert_int_equal(got[0].type, firsts[i].type);
    if (firsts[i].type == LOOM_ARG_STRING) assert_string_equal(got[0].v.s, "text");
    else assert_memory_equal(&got[0].v, &firsts[i].v, sizeof got[0].v.i);
    assert_string_equal(got[1].key, "b");
    assert_int_equal(got[1].type, LOOM_ARG_INT);
    assert_int_equal(got[1].v.i, 9);
  }
  assert_int_equal(seen, 2 * NF + 1);
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


/* ---- loom_op_begin_raw ---------------------------------------------------- */
static atomic_int raw_calls;

/* Describes the bytes: "n=N sum=S first=F last=L", and "raw len" = N. */
static uint32_t raw_fmt(const void *raw, uint32_t n, char *buf, size_t cap, loom_arg *out,
                        uint32_t max_out) {
  atomic_fetch_add(&raw_calls, 1);
  assert_true(cap >= LOOM_RAW_FORMAT_BUF);
  assert_true(max_out >= 2);
  const unsigned char *b = raw;
  unsigned sum = 0;
  for (uint32_t i = 0; i < n; i++) sum += b[i];
  snprintf(buf, cap, "n=%u sum=%u first=%d last=%d", n, sum, n ? b[0] : -1, n ? b[n - 1] : -1);
  out[0] = (loom_arg){.key = "raw", .type = LOOM_ARG_STRING, .v.s = buf};
  out[1] = (loom_arg){.key = "raw len", .type = LOOM_ARG_UINT, .v.u = n};
  return 2;
}

static void raw_fill(unsigned char *b, uint32_t n, unsigned seed) {
  for (uint32_t j = 0; j < n; j++) b[j] = (unsigned char)(seed * 7u + j * 13u);
}

/* What raw_fmt gives for raw_fill(n, seed), as it appears in the JSON. */
static void raw_expect(char *out, size_t cap, uint64_t ext, int64_t seq, uint32_t n, unsigned seed) {
  unsigned char b[LOOM_RAW_MAX];
  raw_fill(b, n, seed);
  unsigned sum = 0;
  for (uint32_t i = 0; i < n; i++) sum += b[i];
  snprintf(out, cap, "\"External id\":%llu,\"Sequence number\":%lld,\"raw\":\"n=%u sum=%u first=%d "
           "last=%d\",\"raw len\":%u}", (unsigned long long)ext, (long long)seq, n, sum,
           n ? b[0] : -1, n ? b[n - 1] : -1, n);
}

/* The trace saved as JSON, in memory (caller frees). */
static char *saved_json(const loom_trace *t) {
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = 0;
  fclose(f);
  unlink(path);
  return s;
}

static void raw_op(uint64_t ext, int64_t seq, uint32_t n, unsigned seed) {
  unsigned char b[LOOM_RAW_MAX + 1];
  raw_fill(b, n, seed);
  loom_arg a = {.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = seq};
  loom_op_begin_raw("aten::raw", ext, &a, 1, b, n, raw_fmt);
  memset(b, 0xee, sizeof b); /* copied during the call */
}

/* Arguments land on their op (also nested), identical bytes are formatted
 * once per trace, lengths around the record's own 16 bytes and the limit. */
static void test_op_raw(void **state) {
  (void)state;
  atomic_store(&raw_calls, 0);
  loom_session *s = ts_start("cpu", NULL);
  static const uint32_t lens[] = {0, 1, 15, 16, 17, 48, 49, 100, LOOM_RAW_MAX};
  enum { NL = sizeof lens / sizeof lens[0] };
  for (int i = 0; i < NL; i++) {
    raw_op(100 + (uint64_t)i, i, lens[i], 1); /* outer */
    raw_op(200 + (uint64_t)i, i, lens[i], 2); /* nested, other bytes */
    loom_op_end();
    loom_op_end();
  }
  for (int i = 0; i < 1000; i++) { /* the same bytes again: no more calls */
    raw_op(300 + (uint64_t)i, 9, 49, 1);
    loom_op_end();
  }
  raw_op(2000, 5, LOOM_RAW_MAX + 1, 1); /* too long: op and args kept, raw not */
  loom_op_end();
  loom_arg a = {.key = "Sequence number", .type = LOOM_ARG_INT, .v.i = 6};
  loom_op_begin_raw("aten::noraw", 2001, &a, 1, NULL, 4, raw_fmt); /* no bytes: no raw */
  loom_op_end();
  loom_trace *t = ts_finish(s);
  assert_int_equal(atomic_load(&raw_calls), 2 * NL - 1); /* both empty raws are alike */
  assert_int_equal(count_cat(t, "cpu_op", 0), 2 * NL + 1000 + 2);
  assert_int_equal(loom_trace_warning_count(t), 0);
  char *js = saved_json(t), want[256];
  for (int i = 0; i < NL; i++) {
    raw_expect(want, sizeof want, 100 + (uint64_t)i, i, lens[i], 1);
    assert_non_null(strstr(js, want));
    raw_expect(want, sizeof want, 200 + (uint64_t)i, i, lens[i], 2);
    assert_non_null(strstr(js, want));
  }
  raw_expect(want, sizeof want, 1299, 9, 49, 1);
  assert_non_null(strstr(js, want));
  assert_non_null(strstr(js, "\"args\":{\"External id\":2000,\"Sequence number\":5}"));
  assert_non_null(strstr(js, "\"args\":{\"External id\":2001,\"Sequence number\":6}"));
  free(js);
  loom_trace_free(t);
}

enum { RAW_THREADS = 3, RAW_OPS = 400 };

static void *raw_worker(void *arg) {
  unsigned th = (unsigned)(uintptr_t)arg;
  for (unsigned i = 0; i < RAW_OPS; i++) {
    /* 1..200 bytes: 1 to 8 records per op, so the ops and their bytes
     * straddle every position of a 32-record chunk */
    raw_op(th * 100000u + i, (int64_t)i, 1 + (i * 37u) % 200u, th * 1000u + i);
    if (i % 3 == 0) raw_op(th * 100000u + 50000u + i, -1, 7, 9); /* nested, shared bytes */
    if (i % 3 == 0) loom_op_end();
    loom_op_end();
  }
  return NULL;
}

/* Small chunks (1 KiB: 32 records) on several threads: raw bytes that span
 * chunks come back intact, each on its own op. */
static void test_op_raw_chunks(void **state) {
  (void)state;
  atomic_store(&raw_calls, 0);
  loom_session *s = ts_start("cpu", "buffer_size=1k");
  pthread_t th[RAW_THREADS];
  for (int i = 0; i < RAW_THREADS; i++)
    pthread_create(&th[i], NULL, raw_worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < RAW_THREADS; i++) pthread_join(th[i], NULL);
  loom_trace *t = ts_finish(s);
  int nested = (RAW_OPS + 2) / 3;
  assert_int_equal(count_cat(t, "cpu_op", 0), RAW_THREADS * (RAW_OPS + nested));
  assert_int_equal(loom_trace_warning_count(t), 0);
  /* seeds differ per op; the nested ops' bytes are one and the same */
  assert_int_equal(atomic_load(&raw_calls), RAW_THREADS * RAW_OPS + 1);
  char *js = saved_json(t), want[256];
  for (unsigned k = 1; k <= RAW_THREADS; k++)
    for (unsigned i = 0; i < RAW_OPS; i++) {
      raw_expect(want, sizeof want, k * 100000u + i, i, 1 + (i * 37u) % 200u, k * 1000u + i);
      assert_non_null(strstr(js, want));
      if (i % 3) continue;
      raw_expect(want, sizeof want, k * 100000u + 50000u + i, -1, 7, 9);
      assert_non_null(strstr(js, want));
    }
  free(js);
  loom_trace_free(t);
}

/* One chunk of 32 records; each op takes 4 (op with its argument inline,
 * raw, 2 more for its 49 bytes) and its end 1: 6 ops fit, the 7th does not
 * fit the 2 records left and is dropped whole, and so is everything after it
 * (its end too, so nothing closes a wrong op). */
static void test_op_raw_memory_cap(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", "buffer_size=1k,memory_cap=1100");
  for (int i = 0; i < 10; i++) {
    raw_op(500 + (uint64_t)i, i, 49, 3);
    loom_op_end();
  }
  loom_instant("after"); /* would fit the 2 records left: dropped too */
  loom_trace *t = ts_finish(s);
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  assert_int_equal(count_cat(t, "cpu_op", -1), 6);
  assert_int_equal(count_cat(t, "cpu_op", 1), 0);
  assert_int_equal(count_cat(t, "cpu_instant_event", -1), 0);
  assert_int_equal(sum.dropped, 4 * 5 + 1);
  assert_int_equal(loom_trace_warning_count(t), 1); /* the cap; no unmatched end */
  char *js = saved_json(t), want[256];
  for (int i = 0; i < 6; i++) {
    raw_expect(want, sizeof want, 500 + (uint64_t)i, i, 49, 3);
    assert_non_null(strstr(js, want));
  }
  free(js);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_exact_counts),
      cmocka_unit_test(test_memory_cap),
      cmocka_unit_test(test_memory_cap_default),
      cmocka_unit_test(test_open_ranges_and_steps),
      cmocka_unit_test(test_kind_filter),
      cmocka_unit_test(test_op_arguments),
      cmocka_unit_test(test_op_arg0_inline),
      cmocka_unit_test(test_fork_child_records_nothing),
      cmocka_unit_test(test_escaping),
      cmocka_unit_test(test_op_raw),
      cmocka_unit_test(test_op_raw_chunks),
      cmocka_unit_test(test_op_raw_memory_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
