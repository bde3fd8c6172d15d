/*
 * test_merge.c - loom_merge(): traces of several ranks into one timeline.
 *
 * The per-rank inputs are Chrome JSON files written here with known
 * metadata, MPI-style records and clock_sync points, so every expected
 * count and time follows from the test's own numbers; the real Kineto
 * traces in tests/data/kineto are merged as two ranks.  Merged traces are
 * read back by loom and by Perfetto's trace_processor.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char dir[256];

static void path_of(char *b, size_t n, const char *name) { snprintf(b, n, "%s/%s", dir, name); }

/* A rank's trace: header with metadata, then events the caller adds. */
static FILE *open_rank(const char *name, int rank, const char *host, long pid) {
  char p[512];
  path_of(p, sizeof p, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fprintf(f, "{\"schemaVersion\":1,\"rank\":\"%d\",\"world_size\":\"2\",\"hostname\":\"%s\","
             "\"command_line\":\"./app --rank %d\",\"baseTimeNanoseconds\":0,\"traceEvents\":[\n"
             "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%ld,\"tid\":0,\"args\":{\"name\":\"app\"}}",
          rank, host, rank, pid);
  return f;
}

static void us(FILE *f, const char *key, long long ns) {
  fprintf(f, ",\"%s\":%lld.%03lld", key, ns / 1000, ns % 1000);
}

/* A slice (dur > 0) or instant (dur < 0) with raw JSON args. */
static void ev(FILE *f, long pid, const char *name, const char *cat, long long ts, long long dur,
               const char *args) {
  fprintf(f, ",\n{\"ph\":\"%s\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%ld,\"tid\":%ld", dur < 0 ? "i" : "X",
          name, cat, pid, pid);
  us(f, "ts", ts);
  if (dur >= 0) us(f, "dur", dur);
  else fprintf(f, ",\"s\":\"t\"");
  fprintf(f, ",\"args\":{%s}}", args ? args : "");
}

static void close_rank(FILE *f) {
  fprintf(f, "\n]}\n");
  fclose(f);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = 0;
  fclose(f);
  return b;
}

static loom_status merge(const char *const *in, uint32_t n, const char *out, uint32_t flags,
                         loom_merge_result *r) {
  loom_merge_config c = {.struct_size = sizeof c, .ninputs = n, .inputs = in, .output = out, .flags = flags};
  r->struct_size = sizeof *r;
  return loom_merge(&c, r);
}

/* Closes the two ranks' files (first, second: their names) and merges them
 * in that order into out (the name nout in the test's folder). */
static void merge_pair(FILE *first, const char *n1, FILE *second, const char *n2,
                       const char *nout, char out[512], loom_merge_result *r) {
  char p1[512], p2[512];
  close_rank(first);
  close_rank(second);
  path_of(p1, sizeof p1, n1);
  path_of(p2, sizeof p2, n2);
  path_of(out, 512, nout);
  const char *in[] = {p1, p2};
  assert_int_equal(merge(in, 2, out, 0, r), LOOM_OK);
}

#define T0 1700000000000000000LL

/* Rank 1 (listed first, same pid as rank 0) sends to rank 0, which
 * completes the receive in a wait; one more send stays unmatched. */
static void test_two_ranks(void **state) {
  (void)state;
  FILE *a = open_rank("r1.json", 1, "hostA", 4242), *b = open_rank("r0.json", 0, "hostA", 4242);
  ev(a, 4242, "compute", "user_annotation", T0, 500000, NULL);
  ev(a, 4242, "MPI_Send", "mpi", T0 + 100000, 2000, "\"comm\":0,\"dst\":0,\"tag\":7,\"bytes\":64");
  ev(a, 4242, "MPI_Send", "mpi", T0 + 200000, 2000, "\"comm\":0,\"dst\":0,\"tag\":9,\"bytes\":64");
  ev(b, 4242, "MPI_Irecv", "mpi", T0 + 50000, 1000, "\"comm\":0,\"request\":1");
  ev(b, 4242, "MPI_Wait", "mpi", T0 + 90000, 20000, "\"comm\":0");
  ev(b, 4242, "MPI_Recv_complete", "mpi", T0 + 110000, -1,
     "\"comm\":0,\"src\":1,\"recv_tag\":7,\"recv_bytes\":64,\"request\":1");
  close_rank(a);
  close_rank(b);
  char p1[512], p0[512], out[512];
  path_of(p1, sizeof p1, "r1.json");
  path_of(p0, sizeof p0, "r0.json");
  path_of(out, sizeof out, "two.json");
  const char *in[] = {p1, p0};
  loom_merge_result r;
  assert_int_equal(merge(in, 2, out, 0, &r), LOOM_OK);
  assert_int_equal(r.processes, 2);
  assert_int_equal(r.events, 6);
  assert_int_equal(r.flows, 1);
  loom_trace *t = ts_load(out);
  assert_true(ts_warned(t, p1, "pid 4242 also in another input: renumbered 1"));
  assert_true(ts_warned(t, "1 point-to-point message ends without", NULL));
  loom_event_view from, to;
  ts_flow(t, 0, &from, &to);
  assert_string_equal(from.name, "MPI_Send");
  assert_int_equal(from.start_ns, T0 + 100000);
  assert_string_equal(to.name, "MPI_Wait");
  assert_int_not_equal(from.pid, to.pid);
  loom_trace_free(t);
  char *text = slurp(out);
  assert_non_null(text);
  /* rank 0 first, with the schema's names and Kineto's distributedInfo */
  char *n0 = strstr(text, "rank 0: ./app --rank 0 (pid 4242)"), *n1 = strstr(text, "rank 1: ./app --rank 1 (pid 4242)");
  assert_non_null(n0);
  assert_non_null(n1);
  assert_true(n0 < n1);
  assert_non_null(strstr(text, "\"distributedInfo\":{\"rank\":0,\"world_size\":2}"));
  assert_non_null(strstr(text, "\"ranks/1/hostname\":\"hostA\""));
  /* inputs without marks: the flow joins calls of two processes, a message */
  assert_non_null(strstr(text, "\"ph\":\"s\",\"cat\":\"mpi_message\""));
  free(text);
  tp_require();
  const char *q[] = {"select count(*) from slice where dur > 0",
                     "select count(*) from process where name like 'rank _: ./app%'",
                     "select count(*) from flow",
                     ("select count(distinct upid) from thread join thread_track using(utid) "
                      "join slice on slice.track_id = thread_track.id")};
  long long v[4];
  tp_ints(out, q, v, 4);
  assert_int_equal(v[0], 5);
  assert_int_equal(v[1], 2);
  assert_int_equal(v[2], 1);
  assert_int_equal(v[3], 2);
  assert_int_equal(tp_errors(out), 0);
}

/* Ranks whose clocks disagree: rank 0's receive ends 49 us before rank 1's
 * send began.  The flow is written as it is and the merge says so (a
 * viewer drops it without a word); a receive that waited for its send is
 * not counted. */
static void test_received_before_sent(void **state) {
  (void)state;
  FILE *a = open_rank("b1.json", 1, "hostA", 11), *b = open_rank("b0.json", 0, "hostA", 10);
  ev(a, 11, "MPI_Send", "mpi", T0 + 100000, 2000, "\"comm\":0,\"dst\":0,\"tag\":7,\"bytes\":64");
  ev(a, 11, "MPI_Send", "mpi", T0 + 200000, 2000, "\"comm\":0,\"dst\":0,\"tag\":8,\"bytes\":64");
  ev(b, 10, "MPI_Recv", "mpi", T0 + 50000, 1000, "\"comm\":0,\"src\":1,\"recv_tag\":7");
  ev(b, 10, "MPI_Recv", "mpi", T0 + 150000, 51000, "\"comm\":0,\"src\":1,\"recv_tag\":8");
  char out[512];
  loom_merge_result r;
  merge_pair(a, "b1.json", b, "b0.json", "back.json", out, &r);
  assert_int_equal(r.flows, 2);
  loom_trace *t = ts_load(out);
  assert_true(ts_warned(t, "1 of 2 point-to-point messages end their receive before their send "
                           "began, by up to 49.000 us", NULL));
  loom_trace_free(t);
}

/* Two real Kineto traces (ranks 0 and 1 in their distributedInfo). */
static void test_kineto(void **state) {
  (void)state;
  const char *in[] = {LOOM_TESTS_DIR "/data/kineto/hta_trace_compare_base.json.gz",
                      LOOM_TESTS_DIR "/data/kineto/hta_gpu_simple_add.json.gz"};
  size_t nev = 0, nfl = 0;
  for (int i = 0; i < 2; i++) {
    loom_trace *t = ts_load(in[i]);
    nev += loom_trace_event_count(t);
    nfl += loom_trace_flow_count(t);
    loom_trace_free(t);
  }
  char out[512];
  path_of(out, sizeof out, "kineto.json.gz"); /* .pftrace leaves out slices that overlap without nesting */
  loom_merge_result r;
  assert_int_equal(merge(in, 2, out, 0, &r), LOOM_OK);
  assert_int_equal(r.events, nev);
  /* the merge counts the flow starts it carries over: at least every flow
   * the reader binds (some starts bind to no slice) */
  assert_true(r.flows >= nfl);
  loom_trace *t = ts_load(out);
  assert_int_equal(loom_trace_event_count(t), nev);
  assert_int_equal(loom_trace_flow_count(t), nfl);
  /* no hostnames, no sync points: each says it was merged unaligned */
  assert_true(ts_warned(t, in[0], "merged unaligned"));
  loom_trace_free(t);
  tp_require();
  /* that input has two processes that are not devices (its pid and pid 1, renumbered) */
  assert_int_equal(tp_int(out, "select count(*) from process where name like 'rank 1: % (pid %)'"), 2);
  /* hta_gpu_simple_add has slices overlapping without nesting that
   * trace_processor drops from it alone too: the merge adds no error. */
  char alone[512];
  path_of(alone, sizeof alone, "alone.json");
  loom_trace *a = ts_load(in[1]);
  assert_int_equal(loom_trace_save(a, alone), LOOM_OK);
  loom_trace_free(a);
  const char *drops = "select coalesce(sum(value), 0) from stats where name = 'slice_drop_overlapping_complete_event'";
  assert_int_equal(tp_int(out, drops), tp_int(alone, drops));
  assert_int_equal(tp_int(out, "select count(*) from stats where value > 0 and severity in ('error','data_loss') "
                               "and name != 'slice_drop_overlapping_complete_event'"), 0);
}

/* Device memory of two inputs whose devices share pid 0: the second
 * input's device is renumbered, and so is the "device" of its memory
 * events, so each allocation names its own device and the running totals
 * (Total Allocated) stay per device. */
static void mem_rank(const char *name, int rank, const char *kernel, long long bytes) {
  FILE *f = open_rank(name, rank, "hostA", 4242);
  ev(f, 0, kernel, "kernel", T0 + 2000, 1000, "\"device\":0,\"stream\":7");
  fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\","
             "\"pid\":4242,\"tid\":4242,\"ts\":%lld.000,\"args\":{\"Device Type\":1,"
             "\"Device Id\":0,\"Addr\":4096,\"Bytes\":%lld,\"Total Allocated\":%lld,"
             "\"Total Reserved\":%lld,\"loom_call\":\"cudaMalloc\",\"loom_memory_kind\":\"device\"}}",
          (T0 + 1000) / 1000, bytes, bytes, bytes);
  close_rank(f);
}

static void test_device_memory(void **state) {
  (void)state;
  mem_rank("m0.json", 0, "ka", 100);
  mem_rank("m1.json", 1, "kb", 200);
  char p0[512], p1[512], out[512];
  path_of(p0, sizeof p0, "m0.json");
  path_of(p1, sizeof p1, "m1.json");
  path_of(out, sizeof out, "mem.json");
  const char *in[] = {p0, p1};
  loom_merge_result r;
  assert_int_equal(merge(in, 2, out, 0, &r), LOOM_OK);
  loom_trace *t = ts_load(out);
  int64_t dev_of[2] = {-1, -1}, mem_dev[2] = {-2, -2};
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!strcmp(v.name, "ka") || !strcmp(v.name, "kb")) dev_of[v.name[1] == 'b'] = v.pid;
    if (!(v.roles & LOOM_RECORD_F_ALLOC)) continue;
    loom_arg a[16];
    size_t k = loom_trace_event_args(t, i, a, 16);
    int64_t bytes = 0, dev = -3;
    for (size_t j = 0; j < k && j < 16; j++) {
      if (!strcmp(a[j].key, "bytes")) bytes = a[j].type == LOOM_ARG_INT ? a[j].v.i : (int64_t)a[j].v.u;
      if (!strcmp(a[j].key, "device")) dev = a[j].v.i;
    }
    mem_dev[bytes == 200] = dev;
  }
  loom_trace_free(t);
  assert_int_equal(dev_of[0], 0);
  assert_int_not_equal(dev_of[1], 0); /* renumbered */
  assert_int_equal(mem_dev[0], dev_of[0]);
  assert_int_equal(mem_dev[1], dev_of[1]);
  char *text = slurp(out), want[160];
  assert_non_null(text);
  snprintf(want, sizeof want, "\"Device Id\":%lld,\"Addr\":4096,\"Bytes\":200,\"Total Allocated\":200,",
           (long long)dev_of[1]);
  assert_non_null(strstr(text, want));
  free(text);
}

/* Every argument of every input reaches the merged trace as a whole read
 * keeps it: strings, nested values, true/false/null, integers past 64 bits
 * (as their text), whether "args" comes after "ph" or before it; through
 * JSON and .pftrace outputs alike. */
static const char *const kept_args[] = {
    "\"Input Dims\":[[2,3],[3,4]]", "\"Input type\":[\"float\",\"float\"]", "\"s\":\"hello\"",
    "\"flag\":true",  "\"nil\":null", "\"big\":\"123456789012345678901234\"", "\"obj\":{\"a\":[1,{\"b\":false}]}",
    "\"d\":2.5"};

static void test_arguments_kept(void **state) {
  (void)state;
  const char *args = "\"Input Dims\":[[2,3],[3,4]],\"Input type\":[\"float\",\"float\"],\"s\":\"hello\","
                     "\"flag\":true,\"nil\":null,\"big\":123456789012345678901234,"
                     "\"obj\":{\"a\":[1,{\"b\":false}]},\"d\":2.5";
  FILE *f[2] = {open_rank("args0.json", 0, "hostA", 10), open_rank("args1.json", 1, "hostA", 11)};
  for (int r = 0; r < 2; r++) {
    ev(f[r], 10 + r, "aten::mm", "cpu_op", T0 + 1000, 500, args);
    fprintf(f[r], ",\n{\"args\":{%s},\"ph\":\"X\",\"name\":\"aten::add\",\"cat\":\"cpu_op\",\"pid\":%d,"
                  "\"tid\":%d,\"ts\":%lld.000,\"dur\":1.000}", args, 10 + r, 10 + r, (T0 + 2000000) / 1000);
    close_rank(f[r]);
  }
  char p0[512], p1[512], out[512], pf[512], back[512];
  path_of(p0, sizeof p0, "args0.json");
  path_of(p1, sizeof p1, "args1.json");
  path_of(out, sizeof out, "args.json");
  path_of(pf, sizeof pf, "args.pftrace");
  path_of(back, sizeof back, "args_back.json");
  const char *in[] = {p0, p1};
  loom_merge_result r;
  assert_int_equal(merge(in, 2, out, 0, &r), LOOM_OK);
  assert_int_equal(r.events, 4);
  assert_int_equal(merge(in, 2, pf, 0, &r), LOOM_OK);
  loom_trace *t = ts_load(pf);
  assert_int_equal(loom_trace_save(t, back), LOOM_OK);
  loom_trace_free(t);
  const char *outs[] = {out, back};
  for (int o = 0; o < 2; o++) {
    char *text = slurp(outs[o]);
    assert_non_null(text);
    for (size_t a = 0; a < sizeof kept_args / sizeof *kept_args; a++) {
      size_t n = 0;
      for (const char *q = text; (q = strstr(q, kept_args[a])); q++) n++;
      if (n != 4) fail_msg("%s: %s on %zu events, 4 expected", outs[o], kept_args[a], n);
    }
    /* said once, named by its input */
    if (!strstr(text, "args0.json: 2 integers past 64 bits") || strstr(text, "args0.json: /"))
      fail_msg("%s: the warning of args0.json is not named once by its input", outs[o]);
    free(text);
  }
}

/* Each input's metadata under ranks/<k>/, whatever the key's length: two
 * 600-byte keys that differ in their last byte stay two (they became one
 * key cut at 511 bytes, holding the second value). */
static void test_long_metadata_keys(void **state) {
  (void)state;
  char key[2][610], p[2][512], out[512];
  for (int i = 0; i < 2; i++) {
    memset(key[i], 'k', 600);
    snprintf(key[i] + 600, 10, "%d", i);
  }
  for (int r = 0; r < 2; r++) {
    char name[32];
    snprintf(name, sizeof name, "long%d.json", r);
    FILE *f = open_rank(name, r, "hostA", 100 + r);
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"x\",\"pid\":%d,\"tid\":0,\"args\":{}}", 100 + r);
    close_rank(f);
    path_of(p[r], sizeof p[r], name);
    /* the keys as top-level strings: metadata */
    char *text = slurp(p[r]);
    assert_non_null(text);
    f = fopen(p[r], "w");
    assert_non_null(f);
    fprintf(f, "{\"%s\":\"v0\",\"%s\":\"v1\",%s", key[0], key[1], text + 1);
    fclose(f);
    free(text);
  }
  path_of(out, sizeof out, "long.json");
  const char *in[] = {p[0], p[1]};
  loom_merge_result res;
  assert_int_equal(merge(in, 2, out, 0, &res), LOOM_OK);
  char *text = slurp(out);
  assert_non_null(text);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 2; i++) {
      char want[2048];
      snprintf(want, sizeof want, "\"ranks/%d/%s\":\"v%d\"", r, key[i], i);
      if (!strstr(text, want)) fail_msg("%s: no \"ranks/%d/<key %d>\":\"v%d\"", out, r, i, i);
    }
  free(text);
}

/* Rank 1 sends, on a clock 250 ms ahead that runs 50 ppm fast; its
 * clock_sync points (init and finalize, rtt 20 us, each 3 us off the
 * truth) must bring every receive after its send. */
#define SHIFT 250000000LL
#define PPM 50
#define RTT 20000LL
static long long local1(long long truth) { return truth + SHIFT + (truth - T0) * PPM / 1000000; }

static void write_shifted(void) {
  FILE *a = open_rank("s1.json", 1, "hostB", 200), *b = open_rank("s0.json", 0, "hostA", 100);
  long long ti = T0 + 1000000, tf = T0 + 10000000000LL;
  char args[256];
  long long pts[2] = {ti, tf};
  for (int k = 0; k < 2; k++) {
    snprintf(args, sizeof args, "\"reference_rank\":0,\"offset_ns\":%lld,\"rtt_ns\":%lld,\"phase\":\"%s\"",
             pts[k] - local1(pts[k]) + 3000, RTT, k ? "finalize" : "init");
    ev(a, 200, "clock_sync", "loom", local1(pts[k]), -1, args);
    ev(b, 100, "clock_sync", "loom", pts[k], -1, "\"reference_rank\":0,\"offset_ns\":0,\"rtt_ns\":0");
  }
  for (int m = 0; m < 10; m++) { /* one message a second, 40 us in flight */
    long long t = T0 + 500000000LL + m * 1000000000LL;
    ev(a, 200, "MPI_Send", "mpi", local1(t), 5000, "\"comm\":0,\"dst\":0,\"tag\":1,\"bytes\":8");
    ev(b, 100, "MPI_Recv", "mpi", t + 30000, 15000, "\"comm\":0,\"src\":1,\"recv_tag\":1,\"recv_bytes\":8");
  }
  close_rank(a);
  close_rank(b);
}

static long long meta_ll(const char *text, const char *key) {
  char k[128];
  snprintf(k, sizeof k, "\"%s\":\"", key);
  const char *p = strstr(text, k);
  assert_non_null(p);
  return strtoll(p + strlen(k), NULL, 10);
}

static size_t ordered_flows(const char *out) {
  loom_trace *t = ts_load(out);
  size_t ok = 0;
  for (size_t i = 0; i < loom_trace_flow_count(t); i++) {
    loom_event_view from, to;
    ts_flow(t, i, &from, &to);
    ok += to.start_ns + to.dur_ns >= from.start_ns;
  }
  loom_trace_free(t);
  return ok;
}

static void test_clock_alignment(void **state) {
  (void)state;
  write_shifted();
  char p1[512], p0[512], out[512], raw[512];
  path_of(p1, sizeof p1, "s1.json");
  path_of(p0, sizeof p0, "s0.json");
  path_of(out, sizeof out, "aligned.json");
  path_of(raw, sizeof raw, "unaligned.json");
  const char *in[] = {p1, p0};
  loom_merge_result r;
  assert_int_equal(merge(in, 2, raw, LOOM_MERGE_F_NO_ALIGN, &r), LOOM_OK);
  assert_int_equal(r.flows, 10);
  assert_int_equal(ordered_flows(raw), 0); /* 250 ms ahead: every receive "before" its send */
  assert_int_equal(merge(in, 2, out, 0, &r), LOOM_OK);
  assert_int_equal(r.flows, 10);
  assert_int_equal(ordered_flows(out), 10);
  char *text = slurp(out);
  long long ti = T0 + 1000000, truth = ti - local1(ti);
  long long got = meta_ll(text, "ranks/1/clock_offset_ns"), err = meta_ll(text, "ranks/1/clock_error_ns");
  assert_int_equal(err, RTT / 2);
  assert_true(llabs(got - truth) <= err);
  assert_int_equal(meta_ll(text, "ranks/1/clock_points"), 2);
  free(text);
  tp_require();
  assert_int_equal(tp_int(out, "select count(*) from flow"), 10);
  assert_int_equal(tp_errors(out), 0);
}

static void expect_fail(const char *const *in, uint32_t n, const char *out, const char *a, const char *b) {
  loom_merge_result r;
  assert_int_not_equal(merge(in, n, out, 0, &r), LOOM_OK);
  const char *e = loom_last_error();
  if (!strstr(e, a) || (b && !strstr(e, b))) fail_msg("error '%s' lacks '%s' / '%s'", e, a, b ? b : "");
  if (out) assert_int_equal(access(out, F_OK), -1); /* nothing written */
}

static void test_bad_input(void **state) {
  (void)state;
  write_shifted();
  char p1[512], p0[512], junk[512], out[512], p0b[512];
  path_of(p1, sizeof p1, "s1.json");
  path_of(p0, sizeof p0, "s0.json");
  path_of(junk, sizeof junk, "junk.txt");
  path_of(out, sizeof out, "bad.json");
  FILE *f = fopen(junk, "w");
  fputs("hello, not a trace\n", f);
  fclose(f);
  const char *notrace[] = {p0, junk};
  expect_fail(notrace, 2, out, junk, NULL);
  path_of(p0b, sizeof p0b, "s0copy.json");
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp %s %s", p0, p0b);
  assert_int_equal(system(cmd), 0);
  const char *twice[] = {p0, p1, p0b};
  expect_fail(twice, 3, out, p0, p0b);
  expect_fail(twice, 0, out, "no input", NULL);
  const char *ok[] = {p0, p1};
  expect_fail(ok, 2, "/nonexistent-dir/merged.json", "/nonexistent-dir/merged.json", NULL);
  expect_fail(ok, 2, NULL, "no output", NULL);
}

/* Other host, no sync points: a warning names the input, times kept. */
static void test_no_clock_relation(void **state) {
  (void)state;
  FILE *a = open_rank("h1.json", 1, "hostB", 7), *b = open_rank("h0.json", 0, "hostA", 8);
  ev(a, 7, "step", "user_annotation", T0 + 77, 1000, NULL);
  ev(b, 8, "step", "user_annotation", T0, 1000, NULL);
  char p1[512], out[512];
  loom_merge_result r;
  merge_pair(b, "h0.json", a, "h1.json", "hosts.json", out, &r);
  path_of(p1, sizeof p1, "h1.json");
  assert_int_equal(r.warnings, 1);
  loom_trace *t = ts_load(out);
  assert_true(ts_warned(t, p1, "no clock relation to rank 0"));
  int64_t starts = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    starts += v.start_ns - T0;
  }
  assert_int_equal(starts, 77);
  loom_trace_free(t);
}

/* Bounded memory: inputs many times the sort budget (1 MiB) are sorted in
 * runs spilled to $TMPDIR, and the output is exactly the one merged within
 * the default budget: complete, in the same order, every message matched;
 * the temporary files are gone, also after a failed merge. */
#define SPILL_ITERS 6000
static size_t count_files(const char *d) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", d);
  FILE *p = popen(cmd, "r");
  size_t n = 0;
  assert_non_null(p);
  assert_int_equal(fscanf(p, "%zu", &n), 1);
  pclose(p);
  return n;
}

static void test_spill(void **state) {
  (void)state;
  FILE *f[2] = {open_rank("big0.json", 0, "hostA", 10), open_rank("big1.json", 1, "hostA", 11)};
  for (int i = 0; i < SPILL_ITERS; i++) {
    long long t = T0 + i * 10000LL;
    for (int r = 0; r < 2; r++) {
      char a[128];
      ev(f[r], 10 + r, "aten::mm", "cpu_op", t + r * 100, 8000, "\"Input Dims\":\"[[64, 64], [64, 64]]\"");
      snprintf(a, sizeof a, "\"comm\":1,\"dst\":%d,\"tag\":3,\"bytes\":64", 1 - r);
      ev(f[r], 10 + r, "MPI_Send", "mpi", t + r * 100 + 500, 1000, a);
      snprintf(a, sizeof a, "\"comm\":1,\"src\":%d,\"recv_tag\":3,\"recv_bytes\":64", 1 - r);
      ev(f[r], 10 + r, "MPI_Recv", "mpi", t + r * 100 + 2000, 4000, a);
      ev(f[r], 10 + r, "mark", "user_annotation", t + r * 100 + 7000, -1, "\"i\":1");
    }
  }
  close_rank(f[0]);
  close_rank(f[1]);
  char p0[512], p1[512], small[512], big[512], pf[512], tmp[512];
  path_of(p0, sizeof p0, "big0.json");
  path_of(p1, sizeof p1, "big1.json");
  path_of(small, sizeof small, "spilled.json");
  path_of(big, sizeof big, "whole.json");
  path_of(pf, sizeof pf, "spilled.pftrace");
  path_of(tmp, sizeof tmp, "tmp");
  assert_int_equal(mkdir(tmp, 0700), 0);
  char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  setenv("TMPDIR", tmp, 1);
  const char *in[] = {p1, p0};
  loom_merge_config c = {.struct_size = sizeof c, .ninputs = 2, .inputs = in, .output = small,
                         .sort_memory = 1u << 20};
  loom_merge_result r = {.struct_size = sizeof r}, w = {.struct_size = sizeof w};
  assert_int_equal(loom_merge(&c, &r), LOOM_OK);
  const uint64_t nev = 2 * (4 * SPILL_ITERS + 0);
  assert_int_equal(r.events, nev);
  assert_int_equal(r.flows, 2 * SPILL_ITERS);
  assert_int_equal(r.sort_memory, 1u << 20);
  assert_true(r.sort_spilled >= 4); /* each input is ~3 MiB of records */
  assert_int_equal(r.sort_runs, r.sort_spilled + 1); /* the last buffer stays in memory */
  assert_int_equal(count_files(tmp), 0);
  c.output = pf;
  assert_int_equal(loom_merge(&c, &r), LOOM_OK);
  assert_int_equal(count_files(tmp), 0);
  c.output = big;
  c.sort_memory = 0; /* the default: no spill */
  assert_int_equal(loom_merge(&c, &w), LOOM_OK);
  assert_int_equal(w.sort_spilled, 1); /* only the first input, as a whole */
  assert_int_equal(w.sort_memory, 256u << 20);
  char *a = slurp(small), *b = slurp(big);
  assert_non_null(a);
  assert_non_null(b);
  assert_string_equal(a, b);
  /* in time order: the events' lines in the file (one event a line; no
   * strstr over the whole text, which sanitizers make quadratic) */
  long long last = 0, n = 0;
  for (const char *q = a, *nl; *q; q = *nl ? nl + 1 : nl) {
    for (nl = q; *nl && *nl != '\n'; nl++) {}
    if (strncmp(q, "{\"ph\":\"X\"", 9) && strncmp(q, "{\"ph\":\"i\"", 9)) continue;
    const char *ts = memmem(q, (size_t)(nl - q), "\"ts\":", 5);
    assert_non_null(ts);
    long long v = (long long)(strtod(ts + 5, NULL) * 1000 + 0.5);
    assert_true(v >= last);
    last = v;
    n++;
  }
  assert_int_equal(n, nev);
  free(a);
  free(b);
  /* a failed merge (the last input is no trace) leaves no file either */
  const char *bad[] = {p0, LOOM_TESTS_DIR "/CMakeLists.txt"};
  c.inputs = bad;
  c.output = small;
  c.sort_memory = 1u << 20;
  assert_int_equal(loom_merge(&c, &r), LOOM_EFORMAT);
  assert_int_equal(count_files(tmp), 0);
  if (old) setenv("TMPDIR", old, 1);
  else unsetenv("TMPDIR");
  free(old);
  tp_require();
  const char *qs[] = {"select count(*) from slice where dur > 0", "select count(*) from slice where dur = 0",
                      "select count(*) from flow"};
  long long v[3], u[3];
  tp_ints(small, qs, v, 3);
  assert_int_equal(v[0], 2 * 3 * SPILL_ITERS);
  assert_int_equal(v[1], 2 * SPILL_ITERS);
  assert_int_equal(v[2], 2 * SPILL_ITERS);
  assert_int_equal(tp_errors(small), 0);
  tp_ints(pf, qs, u, 3);
  assert_memory_equal(u, v, sizeof v);
  assert_int_equal(tp_errors(pf), 0);
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/loom-merge-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_ranks),         cmocka_unit_test(test_received_before_sent),
      cmocka_unit_test(test_kineto),            cmocka_unit_test(test_arguments_kept),
      cmocka_unit_test(test_clock_alignment),   cmocka_unit_test(test_bad_input), cmocka_unit_test(test_long_metadata_keys),
      cmocka_unit_test(test_no_clock_relation), cmocka_unit_test(test_spill), cmocka_unit_test(test_device_memory),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (!getenv("LOOM_TEST_KEEP")) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) rc = rc ? rc : 1;
  }
  return rc;
}
