/*
 * test_memory_formats.c - memory events in the file formats (docs/formats.md,
 * "Memory"): a PyTorch trace written with profile_memory=True and a trace
 * loom wrote (tests/data/memory) read into the model with the exact
 * allocations, frees, bytes, devices and kinds; written back byte for byte
 * (JSON -> JSON and JSON -> .pftrace -> JSON); the streaming reader (loom
 * report) and the streaming writer (loom merge) give what the whole ones
 * give; trace_processor shows the exact [memory] instants and counter
 * values in .json and .pftrace, and no error.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export/export.h"
#include "testutil.h"
#include "trace/trace.h"

#define PYTORCH LOOM_TESTS_DIR "/data/memory/pytorch_profile_memory.json"
#define LOOMMEM LOOM_TESTS_DIR "/data/memory/loom_memory.json"

static loom_trace *whole(const char *path) {
  loom_trace *t = NULL;
  loom_status st = strstr(path, ".pftrace") ? loom__read_pftrace(path, NULL, NULL, &t)
                                            : loom__read_json(path, NULL, NULL, &t);
  if (st != LOOM_OK) fail_msg("%s: %s", path, loom_last_error());
  return t;
}

/* One memory event as text: name, time, marks and arguments. */
static char *mem_text(const loom_trace *t, const loom__ev *e, const loom__targ *args, int64_t base) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  char roles[LOOM__ROLE_BUF];
  loom__role_format(LOOM__EV_ROLE_OF(e), roles);
  const loom__track *k = &t->tracks[e->track];
  fprintf(f, "%s %lld %lld/%lld %s ext=%llu", loom__trace_cstr(t, e->name),
          (long long)(e->ts + base), (long long)k->pid, (long long)k->tid, roles,
          (unsigned long long)e->external_id);
  for (uint16_t i = 0; i < e->nargs; i++) {
    const loom__targ *a = &args[i];
    fprintf(f, " %s=", loom__trace_cstr(t, a->key));
    if (a->type == LOOM_ARG_STRING) fprintf(f, "'%s'", loom__trace_cstr(t, a->v.s));
    else if (a->type == LOOM_ARG_UINT) fprintf(f, "%lluu", (unsigned long long)a->v.u);
    else if (a->type == LOOM_ARG_INT) fprintf(f, "%lld", (long long)a->v.i);
    else fprintf(f, "%g", a->v.d);
  }
  fclose(f);
  return s;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The memory events of a whole trace, as sorted lines joined by "\n". */
typedef struct lines {
  char **v;
  size_t n, cap;
} lines;

static void add_line(lines *l, char *s) {
  if (l->n == l->cap) l->v = realloc(l->v, (l->cap = l->cap ? 2 * l->cap : 16) * sizeof *l->v);
  l->v[l->n++] = s;
}

static char *joined(lines *l) {
  qsort(l->v, l->n, sizeof *l->v, cmp_str);
  size_t len = 1;
  for (size_t i = 0; i < l->n; i++) len += strlen(l->v[i]) + 1;
  char *out = calloc(1, len);
  for (size_t i = 0; i < l->n; i++) strcat(strcat(out, l->v[i]), "\n"), free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
  return out;
}

static char *memory_of(const loom_trace *t) {
  lines l = {0};
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].kind == LOOM_KIND_MEMORY)
      add_line(&l, mem_text(t, &t->ev[i], t->args + t->ev[i].args_off, 0));
  return joined(&l);
}

static int count_in(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p++) n++;
  return n;
}

/* PyTorch's [memory] events: allocations and frees by the sign of Bytes,
 * the device from Device Type/Id, PyTorch's own totals kept as read. */
static void test_pytorch_profile_memory(void **state) {
  (void)state;
  loom_trace *t = whole(PYTORCH);
  char *m = memory_of(t);
  assert_int_equal(count_in(m, "\n"), 8);
  assert_int_equal(count_in(m, " alloc "), 4);
  assert_int_equal(count_in(m, " free "), 4);
  assert_int_equal(count_in(m, "memory_kind='pool'"), 5);
  assert_int_equal(count_in(m, "memory_kind='host'"), 3);
  assert_int_equal(count_in(m, "Total Allocated="), 8); /* the allocator's, kept */
  assert_int_equal(count_in(m, "device=0 "), 3);
  assert_int_equal(count_in(m, "device=1 "), 2);
  assert_int_equal(count_in(m, "Device Type=12"), 2); /* not 1: kept as read */
  assert_non_null(strstr(m, "[memory] 1003500 100/100 alloc ext=0 addr=139000001048576u "
                            "bytes=512u device=0 memory_kind='pool' reserved=2097152u "
                            "Total Allocated=1049088\n"));
  assert_non_null(strstr(m, "[memory] 1004000 100/101 free ext=0 addr=94000000000000u "
                            "bytes=4096u memory_kind='host' Total Allocated=4096 "
                            "Total Reserved=0\n"));
  free(m);
  loom_trace_free(t);
}

/* What loom wrote reads back and is written again byte for byte, through
 * JSON and through .pftrace; the derived figures are not model data. */
static void test_loom_memory_exact(void **state) {
  (void)state;
  loom_trace *t = whole(LOOMMEM);
  char *m = memory_of(t);
  assert_int_equal(count_in(m, "\n"), 9);
  assert_int_equal(count_in(m, "Total "), 0);
  assert_int_equal(count_in(m, "loom_"), 0);
  assert_non_null(strstr(m, "free 1700000000000016000 42/43 free ext=0 addr=999u bytes=0u "
                            "memory_kind='host'\n"));
  assert_non_null(strstr(m, "zeMemFree 1700000000000017000 42/42 free ext=0 addr=5000u "
                            "bytes=4096u device=1 memory_kind='host_pinned'\n"));
  assert_non_null(strstr(m, "[memory] 1700000000000014000 42/43 alloc ext=0 addr=9000u "
                            "bytes=512u device=1 memory_kind='pool' reserved=2097152u\n"));
  size_t n0, n1, n2;
  char *orig = read_file(LOOMMEM, &n0);
  char j1[256], p[256], j2[256];
  tmp_path(j1, sizeof j1, ".json");
  tmp_path(p, sizeof p, ".pftrace");
  tmp_path(j2, sizeof j2, ".json");
  assert_int_equal(loom__write_chrome_json(t, j1, -1), LOOM_OK);
  assert_int_equal(loom__write_pftrace(t, p), LOOM_OK);
  loom_trace *tp = whole(p);
  char *mp = memory_of(tp);
  assert_string_equal(mp, m);
  assert_int_equal(loom__write_chrome_json(tp, j2, -1), LOOM_OK);
  char *a = read_file(j1, &n1), *b = read_file(j2, &n2);
  assert_true(n0 == n1 && !memcmp(orig, a, n0));
  assert_true(n0 == n2 && !memcmp(orig, b, n0));
  free(a), free(b), free(orig), free(m), free(mp);
  loom_trace_free(t);
  loom_trace_free(tp);
  unlink(j1), unlink(p), unlink(j2);
}

/* ---- streaming ------------------------------------------------------------ */
static int on_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  if (e->kind == LOOM_KIND_MEMORY) add_line(ctx, mem_text(t, e, args, 0));
  return 0;
}

/* The memory events of t with times less base (as a stream gives them). */
static char *memory_less(const loom_trace *t, int64_t base) {
  lines l = {0};
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].kind == LOOM_KIND_MEMORY)
      add_line(&l, mem_text(t, &t->ev[i], t->args + t->ev[i].args_off, -base));
  return joined(&l);
}

/* loom report's read (lean: few string arguments kept) keeps every
 * argument of a memory event: the same events as a whole read. */
static void test_streaming_read_keeps_memory(void **state) {
  (void)state;
  const char *files[] = {LOOMMEM, PYTORCH};
  for (int f = 0; f < 2; f++) {
    char p[256];
    tmp_path(p, sizeof p, ".pftrace");
    loom_trace *t = whole(files[f]);
    assert_int_equal(loom__write_pftrace(t, p), LOOM_OK);
    const char *paths[] = {files[f], p};
    for (int k = 0; k < 2; k++) {
      lines l = {0};
      loom__sink sink = {.event = on_event, .ctx = &l};
      loom_trace *meta = NULL;
      assert_int_equal(loom__trace_stream(paths[k], &sink, &meta), LOOM_OK);
      char *got = joined(&l), *want = memory_less(t, meta->base_ns);
      if (strcmp(got, want)) fail_msg("%s: streamed:\n%s\nwhole:\n%s", paths[k], got, want);
      assert_int_equal(count_in(got, "\n"), f ? 8 : 9);
      free(got), free(want);
      loom_trace_free(meta);
    }
    loom_trace_free(t);
    unlink(p);
  }
}

/* The [memory] instants and memory counters of a JSON file loom wrote
 * (an event a line; the last one has no comma). */
static void event_lines(char *text, lines *l) {
  for (char *s = strtok(text, "\n"); s; s = strtok(NULL, "\n")) {
    if (!strstr(s, "\"[memory]\"") && !strstr(s, "\"cat\":\"loom_memory\"")) continue;
    size_t n = strlen(s);
    add_line(l, strndup(s, n && s[n - 1] == ',' ? n - 1 : n));
  }
}

/* loom merge's writer (events one by one, in time order) writes the same
 * [memory] instants and counters as the whole writer. */
static void test_streaming_writer_same(void **state) {
  (void)state;
  loom_trace *t = whole(LOOMMEM);
  uint32_t *order = malloc(t->nev * sizeof *order);
  for (size_t i = 0; i < t->nev; i++) order[i] = (uint32_t)i;
  for (size_t i = 1; i < t->nev; i++) /* by time (the merge's order), stable */
    for (size_t j = i; j > 0 && t->ev[order[j - 1]].ts > t->ev[order[j]].ts; j--) {
      uint32_t x = order[j];
      order[j] = order[j - 1], order[j - 1] = x;
    }
  char js[256];
  tmp_path(js, sizeof js, ".json");
  loom__jstream *s = NULL;
  assert_int_equal(loom__jstream_open(&s, t, js, -1), LOOM_OK);
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[order[i]];
    loom__jstream_event(s, e, e->nargs ? t->args + e->args_off : NULL);
  }
  assert_int_equal(loom__jstream_close(s), LOOM_OK);
  char *a = read_file(LOOMMEM, NULL), *b = read_file(js, NULL);
  lines la = {0}, lb = {0};
  event_lines(a, &la);
  event_lines(b, &lb);
  assert_int_equal(la.n, 9 + 8); /* 9 instants, 8 counter events (none for the unknown free) */
  char *ja = joined(&la), *jb = joined(&lb);
  assert_string_equal(ja, jb);
  free(ja), free(jb), free(a), free(b), free(order);
  loom_trace_free(t);
  unlink(js);
}

/* ---- trace_processor --------------------------------------------------- */
static const char summary_sql[] =
    "select (select count(*) from slice where name = '[memory]' or arg_set_id in "
    "(select arg_set_id from args where key = 'debug.loom_role' and string_value in "
    "('alloc', 'free'))) || ';' || (select group_concat(n, '|') from (select t.name || '=' || "
    "count(*) || '/' || cast(max(c.value) as int) || '/' || cast(sum(c.value) as int) as n "
    "from counter c join counter_track t on c.track_id = t.id where t.name like 'Memory %' "
    "group by t.name order by t.name)) || ';' || (select count(*) from stats where value > 0 "
    "and severity in ('error', 'data_loss')) as s";

/* The [memory] instants (named by their call in .pftrace, marked alloc or
 * free), each counter's values (count/max/sum), no error: the same in
 * .json and .pftrace. */
static void test_trace_processor(void **state) {
  (void)state;
  tp_require();
  static const char *const want[] = {
      "9;Memory (device 1, device) in use=2/1000000/1000000|"
      "Memory (device 1, host_pinned) in use=2/4096/4096|Memory (device 1, pool) in use=2/512/512|"
      "Memory (device 1, pool) reserved=2/2097152/4194304|"
      "Memory (device 1, shared) in use=1/65536/65536|Memory (host) in use=1/256/256;0",
      "8;Memory (device 0, pool) in use=3/1049088/2098176|"
      "Memory (device 0, pool) reserved=3/2097152/6291456|"
      "Memory (device 1, pool) in use=2/2048/2048|Memory (device 1, pool) reserved=2/4194304/8388608|"
      "Memory (host) in use=2/4096/4096;0"};
  const char *files[] = {LOOMMEM, PYTORCH};
  for (int f = 0; f < 2; f++) {
    loom_trace *t = whole(files[f]);
    const char *ext[] = {".json", ".pftrace"};
    for (int k = 0; k < 2; k++) {
      char p[256], got[1024];
      tmp_path(p, sizeof p, ext[k]);
      assert_int_equal(loom_trace_save(t, p), LOOM_OK);
      tp_str(p, summary_sql, got, sizeof got);
      if (strcmp(got, want[f])) fail_msg("%s as %s:\n got %s\nwant %s", files[f], ext[k], got,
                                         want[f]);
      unlink(p);
    }
    loom_trace_free(t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pytorch_profile_memory),
      cmocka_unit_test(test_loom_memory_exact),
      cmocka_unit_test(test_streaming_read_keeps_memory),
      cmocka_unit_test(test_streaming_writer_same),
      cmocka_unit_test(test_trace_processor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
