/*
 * test_pytorch.c - an unmodified /usr/bin/python3 running a small PyTorch
 * model (tests/integrations/torch_model.py: Conv2d, Linear, SGD, a
 * record_function region per step) recorded by `loom record`, which preloads
 * the PyTorch adapter: inside the script's "workload" region the trace holds
 * exactly as many cpu_op records and user ranges as PyTorch's own profiler
 * reports for the same run (the script runs under both at once: comparing
 * two runs is not exact, PyTorch executes slightly different ops when its
 * profiler is on), every op nested on its thread; the script's output is
 * unchanged.  Every op carries Kineto's arguments: "Input Dims" and
 * "Input type" always, a "Sequence number" on the ops autograd records (the
 * model's Linear and Conv2d with their real shapes and that number, their
 * backward nodes with the same number and a "Fwd thread id").  Nesting
 * matches: per (parent name, op name) the trace has as many ops and user
 * ranges as PyTorch's own event tree of the same run, and the same depth.
 * oneDNN's primitives arrive through ITT: slices in oneDNN's domain, each
 * inside the aten op that ran it, the same number in every training step.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* The args object ("args":{...}) of the JSON event that starts at ev, as a
 * NUL-terminated copy in buf (empty when none). */
static const char *event_args(const char *ev, char *buf, size_t n) {
  buf[0] = 0;
  const char *end = strchr(ev, '}'), *a = strstr(ev, "\"args\":{");
  if (!a || (end && a > end)) return buf;
  const char *e = strchr(a, '}');
  if (!e) return buf;
  size_t len = (size_t)(e + 1 - a) < n - 1 ? (size_t)(e + 1 - a) : n - 1;
  memcpy(buf, a, len);
  buf[len] = 0;
  return buf;
}

/* The "Sequence number" in args, or -1. */
static long seq_of(const char *args) {
  const char *s = strstr(args, "\"Sequence number\":");
  return s ? strtol(s + strlen("\"Sequence number\":"), NULL, 10) : -1;
}

/* Shapes from tests/integrations/torch_model.py: x is 4x3x16x16, Conv2d(3, 8,
 * 3), Linear(8 * 14 * 14 = 1568, 10); 3 training steps. */
static void check_op_args(const char *trace) {
  size_t len = 0;
  char *json = read_file(trace, &len);
  assert_non_null(json);
  static const char cpu_op[] = "\"cat\":\"cpu_op\",\"name\":\"";
  int ops = 0, with_dims = 0, with_type = 0, with_seq = 0, linear = 0, conv = 0, addmm = 0, bwd = 0;
  long addmm_seq[8];
  char args[1024];
  for (const char *p = strstr(json, cpu_op); p; p = strstr(p + 1, cpu_op)) {
    const char *name = p + sizeof cpu_op - 1;
    event_args(p, args, sizeof args);
    ops++;
    with_dims += strstr(args, "\"Input Dims\":\"[") != NULL;
    with_type += strstr(args, "\"Input type\":\"[") != NULL;
    long seq = seq_of(args);
    with_seq += seq >= 0;
    if (!strncmp(name, "aten::linear\"", 13)) {
      linear++;
      assert_non_null(strstr(args, "\"Input Dims\":\"[[4, 1568], [10, 1568], [10]]\""));
      assert_non_null(strstr(args, "\"Input type\":\"[\\\"float\\\", \\\"float\\\", \\\"float\\\"]\""));
      assert_true(seq >= 0);
    } else if (!strncmp(name, "aten::conv2d\"", 13)) {
      conv++;
      assert_non_null(strstr(args, "\"Input Dims\":\"[[4, 3, 16, 16], [8, 3, 3, 3], [8], "));
      assert_true(seq >= 0);
    } else if (!strncmp(name, "aten::addmm\"", 12)) {
      assert_non_null(strstr(args, "\"Input Dims\":\"[[10], [4, 1568], [1568, 10], [], []]\""));
      assert_non_null(strstr(args, "\\\"Scalar\\\""));
      assert_true(seq >= 0);
      if (addmm < 8) addmm_seq[addmm] = seq;
      addmm++;
    } else if (!strncmp(name, "AddmmBackward0\"", 15)) {
      /* the backward node carries its forward op's sequence number */
      int found = 0;
      for (int i = 0; i < addmm && i < 8; i++) found |= addmm_seq[i] == seq;
      assert_true(found);
      assert_non_null(strstr(args, "\"Fwd thread id\":"));
      assert_non_null(strstr(args, "\"Input Dims\":\"[[4, 10]]\""));
      bwd++;
    }
  }
  print_message("%d cpu_op in the JSON: %d with Input Dims, %d with Input type, %d with a Sequence number\n", ops,
                with_dims, with_type, with_seq);
  assert_true(ops > 100);
  assert_int_equal(with_dims, ops);
  assert_int_equal(with_type, ops);
  assert_true(with_seq > 0 && with_seq < ops); /* e.g. aten::empty has none */
  assert_int_equal(linear, 3);
  assert_int_equal(conv, 3);
  assert_int_equal(addmm, 3);
  assert_int_equal(bwd, 3);
  free(json);
}

/* One recorded run of the script: PyTorch's own counts (printed by the
 * script) and loom's inside the script's "workload" range. */
typedef struct counts {
  int ops, user, lops, luser, other_thread;
  int depth;           /* the profiler's deepest event below "workload" */
  char nesting[16384]; /* the profiler's "P>C=N;..." (torch_model.py) */
} counts;

/* loom's nesting of the ops and user ranges inside "workload" on its thread,
 * in the script's format: per (parent, child) name, sorted; the parent is the
 * enclosing slice in trace_processor, whatever its kind (an ITT slice around
 * an op would show as a mismatch). */
#define IN_WORKLOAD                                                                              \
  "with w as (select id, ts, ts + dur as te, track_id, depth from slice "                        \
  "where name = 'workload' and category = 'user_annotation'), "                                  \
  "c as (select s.*, s.depth - w.depth as rel from slice s join w on s.track_id = w.track_id "   \
  "where s.ts >= w.ts and s.ts <= w.te and s.id != w.id and s.category in ('cpu_op', 'user_annotation')) "
static const char nesting_sql[] =
    IN_WORKLOAD
    ", g as (select coalesce(p.name, '-') as parent, c.name as child, count(*) as n from c "
    "left join slice p on p.id = c.parent_id group by parent, child order by parent, child) "
    "select group_concat(parent || '>' || child || '=' || n, ';') as v from g";
static const char depth_sql[] = IN_WORKLOAD "select max(rel) from c";

/* oneDNN's ITT tasks (domain dnnl::...) per training step, and where they sit. */
#define DNNL_STEPS                                                                               \
  "with st as (select id, ts, ts + dur as te, track_id from slice where name = 'train_step'), "  \
  "k as (select (select count(*) from slice d where d.track_id = st.track_id and d.ts >= st.ts " \
  "and d.ts <= st.te and d.category like 'dnnl%') as n from st) "
static const char *const itt_sql[] = {
    DNNL_STEPS "select count(*) from k",
    DNNL_STEPS "select min(n) from k",
    DNNL_STEPS "select max(n) from k",
    ("select count(*) from slice d left join slice p on p.id = d.parent_id "
     "where d.category like 'dnnl%' and (p.category is null or p.category != 'cpu_op')"),
    "select count(*) from slice where category like 'dnnl%' and name = 'convolution'",
};

/* The rest of the line after prefix in out, into buf. */
static void line_after(const char *out, const char *prefix, char *buf, size_t n) {
  const char *p = strstr(out, prefix);
  assert_non_null(p);
  p += strlen(prefix);
  size_t len = strcspn(p, "\n");
  assert_true(len < n);
  memcpy(buf, p, len);
  buf[len] = 0;
}

static counts record_once(const char *trace) {
  char cmd[2048], *out = NULL;
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' '%s' profile 2>/dev/null", LOOM_BIN, trace,
           PYTHON, TORCH_MODEL);
  assert_int_equal(ts_run(cmd, &out), 0);
  counts c = {-1, -1, 0, 0, 0, -1, ""};
  assert_int_equal(sscanf(out, "profiler ops %d user %d", &c.ops, &c.user), 2);
  line_after(out, "profiler nesting ", c.nesting, sizeof c.nesting);
  char depth[32];
  line_after(out, "profiler depth ", depth, sizeof depth);
  c.depth = atoi(depth);
  free(out);
  assert_true(c.ops > 100);
  loom_trace *t = ts_load(trace);
  int64_t ws = 0, we = 0, wtid = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!strcmp(v.name, "workload") && v.kind == LOOM_KIND_USER_RANGE) {
      ws = v.start_ns, we = v.start_ns + v.dur_ns, wtid = v.tid;
    }
  }
  assert_true(we > ws);
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.start_ns < ws || v.start_ns > we || !strcmp(v.name, "workload")) continue;
    if (v.kind == LOOM_KIND_CPU_OP) c.lops++;
    /* record_function and optimizer ranges, not oneDNN's ITT tasks (user
     * ranges of the ITT domain's category, which the profiler has not) */
    else if (v.kind == LOOM_KIND_USER_RANGE && v.phase == 'X' && v.category &&
             !strcmp(v.category, "user_annotation"))
      c.luser++;
    else continue;
    c.other_thread += v.tid != wtid;
  }
  loom_trace_free(t);
  return c;
}

/* Whether trace_processor is set up (as tp_require checks, without skipping). */
static int tp_available(void) {
  const char *d = getenv("LOOM_TP_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/trace_processor.wasm", d ? d : "");
  return d && *d && access(path, R_OK) == 0;
}

/* Nesting and ITT, checked in trace_processor on a trace of record_once. */
static int nesting_matches(const char *trace, const counts *c) {
  static char got[sizeof c->nesting];
  tp_str(trace, nesting_sql, got, sizeof got);
  if (strcmp(got, c->nesting)) {
    print_message("nesting differs:\n  profiler %s\n  loom     %s\n", c->nesting, got);
    return 0;
  }
  return 1;
}

static void check_itt(const char *trace) {
  long long r[5];
  tp_ints(trace, itt_sql, r, 5);
  print_message("oneDNN through ITT: %lld steps, %lld-%lld tasks per step, %lld outside an op, "
                "%lld convolutions\n", r[0], r[1], r[2], r[3], r[4]);
  assert_int_equal(r[0], 3);
  assert_true(r[1] > 0);
  assert_int_equal(r[1], r[2]);
  assert_int_equal(r[3], 0);
  assert_true(r[4] > 0);
}

static void test_ops_match_profiler(void **state) {
  (void)state;
  char trace[256];
  tmp_path(trace, sizeof trace, ".json");
  /* The profiler's figures come from its event tree (ns times): its
   * function_events, rebuilt from whole microseconds, lost a zero-length
   * aten::resolve_conj in about one run of two (333 of 334).  A mismatch (of
   * counts or nesting) is still retried twice before it fails. */
  static counts c;
  int nested = 0, tp = tp_available();
  for (int attempt = 0; attempt < 3; attempt++) {
    c = record_once(trace);
    print_message("profiler: %d ops, %d user ranges; loom: %d cpu_op, %d user_annotation (%d off the main thread)\n",
                  c.ops, c.user, c.lops, c.luser, c.other_thread);
    if (c.lops != c.ops || c.luser != c.user) continue;
    if (!tp || (nested = nesting_matches(trace, &c))) break;
  }
  assert_int_equal(c.lops, c.ops);
  assert_int_equal(c.luser, c.user);
  check_op_args(trace);
  tp_require(); /* the rest needs trace_processor (skipped without it) */
  assert_true(nested);
  long long depth = tp_int(trace, depth_sql);
  size_t pairs = 1;
  for (const char *p = c.nesting; *p; p++) pairs += *p == ';';
  print_message("nesting: %zu (parent, op) name pairs as in the profiler's event tree; depth %lld (profiler %d)\n",
                pairs, depth, c.depth);
  assert_int_equal(depth, c.depth);
  assert_true(c.depth >= 4); /* workload > train_step > op > op > ... */
  check_itt(trace);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

/* `--option pytorch.shapes=0`: ops keep their sequence numbers but carry no
 * Input Dims / Input type (PyTorch is not asked for the inputs), like
 * torch.profiler without record_shapes. */
static void test_shapes_off(void **state) {
  (void)state;
  char trace[256], cmd[2048], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record --option pytorch.shapes=0 -o '%s' -- '%s' '%s' profile 2>/dev/null",
           LOOM_BIN, trace, PYTHON, TORCH_MODEL);
  assert_int_equal(ts_run(cmd, &out), 0);
  free(out);
  size_t len = 0;
  char *json = read_file(trace, &len);
  assert_non_null(json);
  static const char cpu_op[] = "\"cat\":\"cpu_op\",\"name\":\"";
  char args[1024];
  int ops = 0, with_dims = 0, with_type = 0, with_seq = 0;
  for (const char *p = strstr(json, cpu_op); p; p = strstr(p + 1, cpu_op)) {
    event_args(p, args, sizeof args);
    ops++;
    with_dims += strstr(args, "\"Input Dims\"") != NULL;
    with_type += strstr(args, "\"Input type\"") != NULL;
    with_seq += seq_of(args) >= 0;
  }
  print_message("shapes off: %d cpu_op, %d with Input Dims, %d with Input type, %d with a Sequence number\n",
                ops, with_dims, with_type, with_seq);
  assert_true(ops > 100);
  assert_int_equal(with_dims, 0);
  assert_int_equal(with_type, 0);
  assert_true(with_seq > 0 && with_seq < ops);
  free(json);
  unlink(trace);
}

/* The args of the first cpu_op named name (empty when none). */
static const char *op_args(const char *json, const char *name, char *buf, size_t n) {
  char key[256];
  snprintf(key, sizeof key, "\"cat\":\"cpu_op\",\"name\":\"%s\"", name);
  const char *p = strstr(json, key);
  buf[0] = 0;
  return p ? event_args(p, buf, n) : buf;
}

/* torch.distributed (tests/integrations/torch_dist.py, a one-rank gloo
 * world): each c10d op carries Kineto's collective arguments with the real
 * sizes and types, groups are numbered in the order first used, and the
 * trace names the rank, world size and backend (its distributedInfo). */
static void test_collectives(void **state) {
  (void)state;
  char trace[256], cmd[2048], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' '%s' 2>&1", LOOM_BIN, trace, PYTHON,
           TORCH_DIST);
  int rc = ts_run(cmd, &out);
  print_message("%s", out ? out : "");
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "sum 16.0")); /* the program ran as it does alone */
  free(out);
  size_t len = 0;
  char *json = read_file(trace, &len);
  assert_non_null(json);
  char a[1024];
  static const struct {
    const char *op, *want[8];
  } cases[] = {
      {"c10d::allreduce_",
       {"\"Collective name\":\"allreduce\"", "\"In msg nelems\":16,", "\"Out msg nelems\":16,",
        "\"dtype\":\"Float\"", "\"Group size\":1,", "\"Rank\":0,", "\"Process Group Name\":\"0\""}},
      {"c10d::broadcast_",
       {"\"Collective name\":\"broadcast\"", "\"In msg nelems\":8,", "\"dtype\":\"Long\"",
        "\"Process Group Name\":\"0\""}},
      {"c10d::allgather_",
       {"\"Collective name\":\"allgather\"", "\"In msg nelems\":4,", "\"Out msg nelems\":4,",
        "\"Process Group Name\":\"1\"", "\"Process Group Description\":\"undefined\""}},
      {"c10d::barrier", {"\"Collective name\":\"barrier\"", "\"Group size\":1,"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    op_args(json, cases[i].op, a, sizeof a);
    print_message("%s %s\n", cases[i].op, a);
    for (size_t k = 0; k < 8 && cases[i].want[k]; k++) assert_non_null(strstr(a, cases[i].want[k]));
  }
  assert_non_null(strstr(json, "\"rank\":\"0\""));
  assert_non_null(strstr(json, "\"world_size\":\"1\""));
  assert_non_null(strstr(json, "\"distributed_backend\":\"gloo\""));
  free(json);
  tp_require();
  assert_int_equal(tp_int(trace, "select count(*) from slice where name like 'c10d::%'"), 4);
  assert_int_equal(tp_errors(trace), 0);
  unlink(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops_match_profiler),
      cmocka_unit_test(test_shapes_off),
      cmocka_unit_test(test_collectives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
