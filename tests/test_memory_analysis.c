/*
 * test_memory_analysis.c - the memory accounting of trace/memory.h and `loom
 * report`'s memory section, against figures worked out by hand on a trace
 * built in the model (times in us after the trace's first event):
 *
 *   host thread 1: ProfilerStep#1 [0,1000), ProfilerStep#2 [1000,2000),
 *     range "fwd" [100,900) holding ops aten::empty [110,200) and aten::mm
 *     [300,500); range "bwd" [1050,1900) holding aten::relu [1100,1300).
 *   device 0 ("GPU 0"), kind "pool" (reserved 1024, then 2048 at a4):
 *     a1 120 +100 @0x1000 (empty)  -> 100
 *     a2 310 +300 @0x2000 (mm)     -> 400
 *     a3 320  +50 @0x3000 (mm)     -> 450
 *     f1 400 free 0x1000           -> 350
 *     a4 1150 +200 @0x4000 (relu)  -> 550: the peak, in bwd, ProfilerStep#2
 *     f2 1200 free 0x2000          -> 250
 *     f3 1250 free 0x9999 (77 B): never allocated, counted
 *     leaks: 0x4000 200 (relu), 0x3000 50 (mm); top allocated: mm 350 (2),
 *     relu 200, empty 100; live at the peak: mm 350 (2), relu 200.
 *   host memory, thread 2 (no op): h1 50 +64 @0x10 live at the start;
 *     h2 600 +36 @0x20 -> 100 (peak, ProfilerStep#1); h3 700 free 0x10
 *     (bytes not said) -> 36; leak 0x20 36; nothing allocated by an op.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "analysis/analysis.h"
#include "loom/loom.h"
#include "loom/tools.h"
#include "trace/memory.h"
#include "trace/trace.h"

#define BASE 1700000000000000000ll
#define PYTORCH_TRAIN LOOM_TESTS_DIR "/data/memory/pytorch_train.json"
#define US(x) (BASE + (int64_t)(x) * 1000)

static void range(loom_trace *t, uint32_t track, int kind, const char *name, int64_t s,
                  int64_t e) {
  loom__ev ev = {.ts = US(s), .dur = (e - s) * 1000, .name = loom__trace_str(t, name),
                 .cat = loom__trace_str(t, kind == LOOM_KIND_CPU_OP ? "cpu_op" : "user_annotation"),
                 .track = track, .kind = (uint8_t)kind, .ph = LOOM__PH_COMPLETE};
  assert_int_equal(loom__trace_add_ev(t, &ev), 0);
}

/* A memory event: bytes < 0 frees (-1: a free that does not say its size). */
static void mem(loom_trace *t, uint32_t track, int64_t ts, int64_t bytes, uint64_t addr,
                int device, const char *kind, int64_t reserved, int at_start) {
  unsigned role = bytes < 0 ? LOOM_RECORD_F_FREE : LOOM_RECORD_F_ALLOC;
  loom__ev ev = {.ts = US(ts), .name = loom__trace_str(t, bytes < 0 ? "free" : "alloc"),
                 .cat = loom__trace_str(t, "memory"), .track = track,
                 .kind = LOOM_KIND_MEMORY, .ph = LOOM__PH_INSTANT,
                 .flags = (uint16_t)(role << LOOM__EV_ROLE_SHIFT)};
  assert_int_equal(loom__trace_add_ev(t, &ev), 0);
  loom__targ a = {.key = loom__trace_str(t, "addr"), .type = LOOM_ARG_UINT, .v.u = addr};
  assert_int_equal(loom__trace_add_arg(t, &a), 0);
  if (bytes != -1) {
    a = (loom__targ){.key = loom__trace_str(t, "bytes"), .type = LOOM_ARG_UINT,
                     .v.u = (uint64_t)(bytes < 0 ? -bytes : bytes)};
    assert_int_equal(loom__trace_add_arg(t, &a), 0);
  }
  if (device >= 0) assert_int_equal(loom__trace_add_arg_int(t, "device", device), 0);
  if (kind) assert_int_equal(loom__trace_add_arg_str(t, "memory_kind", kind), 0);
  if (reserved >= 0) {
    a = (loom__targ){.key = loom__trace_str(t, "reserved"), .type = LOOM_ARG_UINT,
                     .v.u = (uint64_t)reserved};
    assert_int_equal(loom__trace_add_arg(t, &a), 0);
  }
  if (at_start) assert_int_equal(loom__trace_add_arg_int(t, "live_at_start", 1), 0);
}

static loom_trace *build(void) {
  loom_trace *t = loom__trace_new();
  assert_non_null(t);
  assert_int_equal(loom__trace_add_proc(t, 4242, "python", NULL, 0), 0);
  assert_int_equal(loom__trace_add_proc(t, 0, "GPU 0", NULL, 1), 0);
  uint32_t t1, t2, q;
  assert_int_equal(loom__trace_track(t, 4242, 1, "thread 1 (main)", LOOM_DEVICE_HOST, &t1), 0);
  assert_int_equal(loom__trace_track(t, 4242, 2, "thread 2", LOOM_DEVICE_HOST, &t2), 0);
  assert_int_equal(loom__trace_track(t, 0, 7, "stream 7", 0, &q), 0);
  range(t, t1, LOOM_KIND_USER_RANGE, "ProfilerStep#1", 0, 1000);
  range(t, t1, LOOM_KIND_USER_RANGE, "ProfilerStep#2", 1000, 2000);
  range(t, t1, LOOM_KIND_USER_RANGE, "fwd", 100, 900);
  range(t, t1, LOOM_KIND_CPU_OP, "aten::empty", 110, 200);
  range(t, t1, LOOM_KIND_CPU_OP, "aten::mm", 300, 500);
  range(t, t1, LOOM_KIND_USER_RANGE, "bwd", 1050, 1900);
  range(t, t1, LOOM_KIND_CPU_OP, "aten::relu", 1100, 1300);
  mem(t, t1, 120, 100, 0x1000, 0, "pool", 1024, 0);
  mem(t, t1, 310, 300, 0x2000, 0, "pool", 1024, 0);
  mem(t, t1, 320, 50, 0x3000, 0, "pool", 1024, 0);
  mem(t, t1, 400, -100, 0x1000, 0, "pool", 1024, 0);
  mem(t, t1, 1150, 200, 0x4000, 0, "pool", 2048, 0);
  mem(t, t1, 1200, -300, 0x2000, 0, "pool", 2048, 0);
  mem(t, t1, 1250, -77, 0x9999, 0, "pool", 2048, 0);
  mem(t, t2, 50, 64, 0x10, -1, NULL, -1, 1);
  mem(t, t2, 600, 36, 0x20, -1, NULL, -1, 0);
  mem(t, t2, 700, -1, 0x10, -1, NULL, -1, 0);
  t->start_ns = US(0);
  t->end_ns = US(2000);
  assert_int_equal(loom__trace_process(t), 0);
  return t;
}

static const char *S(const loom_trace *t, uint32_t id) { return id ? loom__trace_cstr(t, id) : "-"; }

/* Each event's bytes in use after it, from the walk. */
typedef struct seen {
  size_t n;
  uint64_t in_use[16], bytes[16];
  uint32_t alloc_op[16];
  uint8_t unknown[16];
} seen;
static int on_mem(void *ud, size_t ev, const loom__mem_ev *e, long series,
                  const loom__mem_after *af) {
  (void)ev, (void)e, (void)series;
  seen *s = ud;
  s->alloc_op[s->n] = af->alloc_op;
  s->bytes[s->n] = af->bytes;
  s->unknown[s->n] = af->unknown;
  s->in_use[s->n++] = af->in_use;
  return 0;
}

static void test_walk_figures(void **state) {
  (void)state;
  loom_trace *t = build();
  assert_int_equal(loom__mem_events(t), 10);
  loom__mem *m = NULL;
  seen sn = {0};
  assert_int_equal(loom__mem_walk(t, 20, on_mem, &sn, &m), 0);
  assert_int_equal(sn.n, 10);
  /* time order across threads: h1 50, a1 120, a2 310, a3 320, f1 400, h2 600, h3 700, ... */
  const uint64_t after[] = {64, 100, 400, 450, 350, 100, 36, 550, 250, 250};
  for (size_t i = 0; i < 10; i++) assert_int_equal(sn.in_use[i], after[i]);
  assert_string_equal(S(t, sn.alloc_op[4]), "aten::empty"); /* f1 frees empty's block */
  assert_int_equal(sn.bytes[6], 64); /* h3 said no size: its block's */
  assert_int_equal(sn.unknown[9], 1);
  assert_int_equal(sn.bytes[9], 77);
  assert_int_equal(sn.unknown[8], 0);
  assert_int_equal(loom__mem_count(m), 2);
  const loom__mem_series *h = loom__mem_series_at(m, 0), *d = loom__mem_series_at(m, 1);
  assert_true(h->device == LOOM__MEM_HOST);
  assert_string_equal(loom__mem_kind_name(t, h->device, h->kind), "host");
  assert_int_equal(h->nstart, 1);
  assert_int_equal(h->start_bytes, 64);
  assert_int_equal(h->nalloc, 1);
  assert_int_equal(h->alloc_bytes, 36);
  assert_int_equal(h->peak, 100);
  assert_int_equal(h->peak_ts, US(600));
  assert_int_equal(h->peak_op, 0);
  assert_string_equal(S(t, h->peak_step), "ProfilerStep#1");
  assert_int_equal(h->nfree, 1);
  assert_int_equal(h->free_bytes, 64);
  assert_int_equal(h->nleaks, 1);
  assert_int_equal(h->leaks[0].addr, 0x20);
  assert_int_equal(h->nunknown, 0);

  assert_int_equal(d->device, 0);
  assert_string_equal(loom__mem_kind_name(t, d->device, d->kind), "pool");
  assert_int_equal(d->nalloc, 4);
  assert_int_equal(d->alloc_bytes, 650);
  assert_int_equal(d->peak, 550);
  assert_int_equal(d->peak_ts, US(1150));
  assert_string_equal(S(t, d->peak_op), "aten::relu");
  assert_string_equal(S(t, d->peak_range), "bwd");
  assert_string_equal(S(t, d->peak_step), "ProfilerStep#2");
  assert_int_equal(d->in_use, 250);
  assert_int_equal(d->peak_reserved, 2048);
  assert_int_equal(d->peak_reserved_ts, US(1150));
  assert_int_equal(d->nunknown, 1);
  assert_int_equal(d->unknown_bytes, 77);
  assert_int_equal(d->unknown[0].addr, 0x9999);
  assert_string_equal(S(t, d->unknown[0].op), "aten::relu");
  assert_int_equal(d->nleaks, 2);
  assert_int_equal(d->leak_bytes, 250);
  assert_int_equal(d->leaks[0].addr, 0x4000);
  assert_string_equal(S(t, d->leaks[0].op), "aten::relu");
  assert_int_equal(d->leaks[1].addr, 0x3000);
  assert_string_equal(S(t, d->leaks[1].op), "aten::mm");
  assert_int_equal(d->nby_alloc, 3);
  assert_string_equal(S(t, d->by_alloc[0].op), "aten::mm");
  assert_int_equal(d->by_alloc[0].bytes, 350);
  assert_int_equal(d->by_alloc[0].count, 2);
  assert_string_equal(S(t, d->by_alloc[1].op), "aten::relu");
  assert_string_equal(S(t, d->by_alloc[2].op), "aten::empty");
  assert_int_equal(d->nat_peak, 2);
  assert_string_equal(S(t, d->at_peak[0].op), "aten::mm");
  assert_int_equal(d->at_peak[0].bytes, 350);
  assert_int_equal(d->at_peak[0].count, 2);
  assert_string_equal(S(t, d->at_peak[1].op), "aten::relu");
  assert_int_equal(d->at_peak[1].bytes, 200);
  /* 20 buckets of 100 us: the most in use in each */
  const uint64_t bmax[20] = {0, 100, 100, 450, 450, 350, 350, 350, 350, 350,
                             350, 550, 550, 250, 250, 250, 250, 250, 250, 250};
  for (int b = 0; b < 20; b++) assert_int_equal(d->bmax[b], bmax[b]);
  assert_int_equal(d->bres[19], 2048);
  loom__mem_free(m);
  loom_trace_free(t);
}

/* loom record's summary lines: the largest peak first, its top holders. */
static void test_summary_lines(void **state) {
  (void)state;
  loom_trace *t = build();
  char out[2048];
  assert_int_equal(loom__mem_lines(t, out, sizeof out), 0);
  assert_string_equal(out,
                      "loom:   memory GPU 0 (pool): peak 550 B at 1.150 ms in aten::relu "
                      "(ProfilerStep#2); held at the peak by aten::mm 350 B, aten::relu 200 B; "
                      "2 still allocated at the end (250 B); 1 free of unknown addresses\n"
                      "loom:   memory host (host): peak 100 B at 0.600 ms (ProfilerStep#1); "
                      "held at the peak by (no op) 100 B; 1 still allocated at the end (36 B)\n");
  char small[200]; /* whole lines only */
  assert_int_equal(loom__mem_lines(t, small, sizeof small), 0);
  assert_string_equal(small, "");
  const loom_tools *tools = LOOM_TOOLS_GET();
  assert_non_null(tools);
  assert_int_equal(tools->memory_lines(t, out, sizeof out), 0);
  assert_non_null(strstr(out, "peak 550 B"));
  char big[64];
  assert_string_equal(loom__mem_bytes_text(3u << 20, big, sizeof big), "3.00 MiB");
  loom_trace_free(t);
}

/* A trace without memory events has no memory series and no section. */
static void test_no_memory(void **state) {
  (void)state;
  loom_trace *t = loom__trace_new();
  uint32_t k;
  assert_int_equal(loom__trace_track(t, 1, 1, "main", LOOM_DEVICE_HOST, &k), 0);
  range(t, k, LOOM_KIND_CPU_OP, "aten::add", 0, 10);
  loom__mem *m = NULL;
  assert_int_equal(loom__mem_walk(t, 10, NULL, NULL, &m), 0);
  assert_int_equal(loom__mem_count(m), 0);
  loom__mem_free(m);
  loom_trace_free(t);
}

/* ---- loom report on the trace written out ------------------------------------- */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = 0;
  fclose(f);
  return b;
}

/* The report of t saved as ext, in format fmt (text). */
static char *report_of(const loom_trace *t, const char *ext, loom_report_format fmt) {
  static int seq;
  char path[256], out[256];
  snprintf(path, sizeof path, "/tmp/loom-test-memory-%d-%d%s", (int)getpid(), seq++, ext);
  snprintf(out, sizeof out, "/tmp/loom-test-memory-%d.out", (int)getpid());
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  loom_report_options o = {.struct_size = sizeof o, .top = 20};
  loom_report *r = NULL;
  if (loom_report_open(path, &o, &r) != LOOM_OK) fail_msg("report: %s", loom_last_error());
  assert_int_equal(loom_report_write(r, fmt, out), LOOM_OK);
  loom_report_free(r);
  char *text = slurp(out);
  if (!getenv("LOOM_TEST_KEEP")) unlink(path);
  unlink(out);
  return text;
}

static yajl_val at(yajl_val v, const char *key) {
  const char *p[] = {key, NULL};
  yajl_val x = yajl_tree_get(v, p, yajl_t_any);
  if (!x) fail_msg("no key %s", key);
  return x;
}
static long long num(yajl_val v, const char *key) { return YAJL_GET_INTEGER(at(v, key)); }
static const char *str(yajl_val v, const char *key) {
  yajl_val x = at(v, key);
  return YAJL_IS_NULL(x) ? "-" : YAJL_GET_STRING(x);
}
static yajl_val item(yajl_val arr, size_t i) {
  assert_true(YAJL_IS_ARRAY(arr) && i < arr->u.array.len);
  return arr->u.array.values[i];
}

static void check_json(const char *text) {
  char err[256];
  yajl_val doc = yajl_tree_parse(text, err, sizeof err);
  if (!doc) fail_msg("report JSON: %s", err);
  yajl_val memv = at(doc, "memory");
  yajl_val series = at(memv, "series");
  assert_int_equal(series->u.array.len, 2);
  yajl_val h = item(series, 0), d = item(series, 1);
  assert_string_equal(str(h, "device"), "host");
  assert_true(YAJL_IS_NULL(at(h, "pid")));
  assert_int_equal(num(h, "peak_bytes"), 100);
  assert_int_equal(num(h, "peak_ns"), 600000);
  assert_int_equal(num(h, "live_at_start_bytes"), 64);
  assert_string_equal(str(d, "device"), "GPU 0");
  assert_int_equal(num(d, "pid"), 0);
  assert_string_equal(str(d, "kind"), "pool");
  assert_int_equal(num(d, "allocations"), 4);
  assert_int_equal(num(d, "allocated_bytes"), 650);
  assert_int_equal(num(d, "peak_bytes"), 550);
  assert_int_equal(num(d, "peak_ns"), 1150000);
  assert_string_equal(str(d, "peak_op"), "aten::relu");
  assert_string_equal(str(d, "peak_range"), "bwd");
  assert_string_equal(str(d, "peak_step"), "ProfilerStep#2");
  assert_int_equal(num(d, "in_use_end_bytes"), 250);
  assert_int_equal(num(d, "reserved_peak_bytes"), 2048);
  assert_int_equal(num(d, "leaks"), 2);
  assert_int_equal(num(d, "leaked_bytes"), 250);
  assert_int_equal(num(d, "unknown_frees"), 1);
  assert_int_equal(num(d, "unknown_free_bytes"), 77);
  /* the host's allocation outside any op, then the device's by bytes */
  yajl_val top = at(memv, "top_ops_by_allocated");
  assert_int_equal(top->u.array.len, 4);
  assert_string_equal(str(item(top, 0), "op"), "-");
  assert_int_equal(num(item(top, 0), "bytes"), 36);
  assert_string_equal(str(item(top, 1), "kind"), "pool");
  assert_string_equal(str(item(top, 1), "op"), "aten::mm");
  assert_int_equal(num(item(top, 1), "bytes"), 350);
  assert_int_equal(num(item(top, 1), "count"), 2);
  assert_string_equal(str(item(top, 3), "op"), "aten::empty");
  /* at the host's peak both its blocks (one live from the start) */
  yajl_val pk = at(memv, "top_ops_at_peak");
  assert_int_equal(pk->u.array.len, 3);
  assert_int_equal(num(item(pk, 0), "bytes"), 100);
  assert_int_equal(num(item(pk, 0), "count"), 2);
  assert_string_equal(str(item(pk, 1), "op"), "aten::mm");
  assert_int_equal(num(item(pk, 1), "bytes"), 350);
  assert_string_equal(str(item(pk, 2), "op"), "aten::relu");
  assert_int_equal(num(item(pk, 2), "bytes"), 200);
  yajl_val lk = at(memv, "leaks");
  assert_int_equal(lk->u.array.len, 3); /* the host's 0x20, the device's 0x4000 and 0x3000 */
  assert_string_equal(str(item(lk, 0), "addr"), "0x20");
  assert_string_equal(str(item(lk, 0), "op"), "-");
  assert_string_equal(str(item(lk, 1), "addr"), "0x4000");
  assert_string_equal(str(item(lk, 1), "op"), "aten::relu");
  assert_int_equal(num(item(lk, 1), "ts_ns"), 1150000);
  assert_string_equal(str(item(lk, 2), "op"), "aten::mm");
  yajl_val uf = at(memv, "unknown_frees");
  assert_int_equal(uf->u.array.len, 1);
  assert_string_equal(str(item(uf, 0), "addr"), "0x9999");
  assert_int_equal(num(item(uf, 0), "bytes"), 77);
  yajl_val tl = item(at(memv, "timeline"), 1);
  assert_int_equal(num(tl, "buckets"), 120);
  yajl_val b = at(tl, "in_use_max_bytes");
  assert_int_equal(b->u.array.len, 120);
  assert_int_equal(YAJL_GET_INTEGER(item(b, 119)), 250);
  yajl_tree_free(doc);
}

static void test_report_every_format(void **state) {
  (void)state;
  loom_trace *t = build();
  const char *ext[] = {".pftrace", ".json", ".json.gz"};
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
    print_message("report of the trace as %s\n", ext[i]);
    char *text = report_of(t, ext[i], LOOM_REPORT_JSON);
    check_json(text);
    free(text);
  }
  char *text = report_of(t, ".pftrace", LOOM_REPORT_TEXT);
  if (getenv("LOOM_TEST_SHOW")) fputs(text, stderr);
  assert_non_null(strstr(text, "Memory by device and kind"));
  assert_non_null(strstr(text, "aten::relu"));
  assert_non_null(strstr(text, "0x9999"));
  free(text);
  text = report_of(t, ".pftrace", LOOM_REPORT_HTML);
  assert_non_null(strstr(text, "most bytes in use"));
  free(text);
  loom_trace_free(t);
}

/* The report of a file as it is, in format fmt. */
static char *report_file(const char *path, loom_report_format fmt) {
  char out[256];
  snprintf(out, sizeof out, "/tmp/loom-test-memory-%d.out", (int)getpid());
  loom_report_options o = {.struct_size = sizeof o, .top = 20};
  loom_report *r = NULL;
  if (loom_report_open(path, &o, &r) != LOOM_OK) fail_msg("report: %s", loom_last_error());
  assert_int_equal(loom_report_write(r, fmt, out), LOOM_OK);
  loom_report_free(r);
  char *text = slurp(out);
  unlink(out);
  return text;
}

/* The same trace as PyTorch writes it (profile_memory=True: Kineto's
 * [memory] instants, host memory with Device Id -1, the CUDA caching
 * allocator's blocks as a pool with its Total Reserved), where the host's
 * first block is an allocation of the profile (PyTorch has no window
 * start): the same figures but the host's 2 allocations of 100 B. */
static void test_report_pytorch_json(void **state) {
  (void)state;
  char *text = report_file(PYTORCH_TRAIN, LOOM_REPORT_JSON);
  char err[256];
  yajl_val doc = yajl_tree_parse(text, err, sizeof err);
  if (!doc) fail_msg("report JSON: %s", err);
  yajl_val memv = at(doc, "memory"), series = at(memv, "series");
  assert_int_equal(series->u.array.len, 2);
  yajl_val h = item(series, 0), d = item(series, 1);
  assert_string_equal(str(h, "kind"), "host");
  assert_int_equal(num(h, "allocations"), 2);
  assert_int_equal(num(h, "allocated_bytes"), 100);
  assert_int_equal(num(h, "live_at_start"), 0);
  assert_int_equal(num(h, "peak_bytes"), 100);
  assert_int_equal(num(h, "peak_ns"), 600000);
  assert_int_equal(num(h, "leaked_bytes"), 36);
  assert_string_equal(str(d, "device"), "GPU 0");
  assert_string_equal(str(d, "kind"), "pool");
  assert_int_equal(num(d, "peak_bytes"), 550);
  assert_int_equal(num(d, "peak_ns"), 1150000);
  assert_string_equal(str(d, "peak_op"), "aten::relu");
  assert_string_equal(str(d, "peak_range"), "bwd");
  assert_string_equal(str(d, "peak_step"), "ProfilerStep#2");
  assert_int_equal(num(d, "reserved_peak_bytes"), 2048);
  assert_int_equal(num(d, "leaks"), 2);
  assert_int_equal(num(d, "unknown_frees"), 1);
  assert_int_equal(num(d, "unknown_free_bytes"), 77);
  yajl_val top = at(memv, "top_ops_by_allocated");
  assert_int_equal(top->u.array.len, 4);
  assert_string_equal(str(item(top, 1), "op"), "aten::mm");
  assert_int_equal(num(item(top, 1), "bytes"), 350);
  yajl_val pk = at(memv, "top_ops_at_peak");
  assert_string_equal(str(item(pk, 1), "op"), "aten::mm");
  assert_int_equal(num(item(pk, 1), "bytes"), 350);
  yajl_val lk = at(memv, "leaks");
  assert_string_equal(str(item(lk, 1), "addr"), "0x4000");
  assert_string_equal(str(item(lk, 1), "op"), "aten::relu");
  assert_string_equal(str(item(at(memv, "unknown_frees"), 0), "addr"), "0x9999");
  yajl_tree_free(doc);
  free(text);
  text = report_file(PYTORCH_TRAIN, LOOM_REPORT_TEXT);
  assert_non_null(strstr(text, "GPU 0  pool      4           650      550        1.150 "
                               "aten::relu ProfilerStep#2        250     2        250"));
  free(text);
  /* loom's summary lines from the trace loaded whole: the same peak */
  loom_trace *t = NULL;
  assert_int_equal(loom_trace_load(PYTORCH_TRAIN, &t), LOOM_OK);
  char lines[2048];
  assert_int_equal(loom__mem_lines(t, lines, sizeof lines), 0);
  assert_non_null(strstr(lines, "loom:   memory GPU 0 (pool): peak 550 B at 1.150 ms in aten::relu "
                                "(ProfilerStep#2); held at the peak by aten::mm 350 B"));
  loom_trace_free(t);
}

/* A trace without memory events: no memory section. */
static void test_report_without_memory(void **state) {
  (void)state;
  loom_trace *t = loom__trace_new();
  uint32_t k;
  assert_int_equal(loom__trace_track(t, 1, 1, "main", LOOM_DEVICE_HOST, &k), 0);
  range(t, k, LOOM_KIND_CPU_OP, "aten::add", 0, 10);
  char *text = report_of(t, ".json", LOOM_REPORT_JSON);
  assert_null(strstr(text, "\"memory\""));
  free(text);
  text = report_of(t, ".json", LOOM_REPORT_TEXT);
  assert_null(strstr(text, "Memory"));
  free(text);
  loom_trace_free(t);
}

/* Two processes' host memory (a merged trace of a program and its child):
 * a series each, with its own peak, named by pid in the walk's summary and
 * in the report; peaks are never summed across processes. */
static loom_trace *two_hosts(void) {
  loom_trace *t = loom__trace_new();
  uint32_t a, b;
  assert_int_equal(loom__trace_track(t, 100, 100, "parent", LOOM_DEVICE_HOST, &a), 0);
  assert_int_equal(loom__trace_track(t, 200, 200, "child", LOOM_DEVICE_HOST, &b), 0);
  mem(t, a, 10, 1000, 0x1000, -1, NULL, -1, 0);
  mem(t, b, 20, 300, 0x1000, -1, NULL, -1, 0); /* the same address, another process */
  mem(t, a, 30, -1000, 0x1000, -1, NULL, -1, 0);
  mem(t, b, 40, 500, 0x2000, -1, NULL, -1, 0);
  t->start_ns = US(0);
  t->end_ns = US(100);
  assert_int_equal(loom__trace_process(t), 0);
  return t;
}

static void test_host_per_process(void **state) {
  (void)state;
  loom_trace *t = two_hosts();
  loom__mem *m = NULL;
  assert_int_equal(loom__mem_walk(t, 10, NULL, NULL, &m), 0);
  assert_int_equal(loom__mem_count(m), 2);
  char buf[64];
  for (size_t i = 0; i < 2; i++) {
    const loom__mem_series *s = loom__mem_series_at(m, i);
    int parent = s->pid == 100;
    assert_true(parent || s->pid == 200);
    assert_int_equal(s->peak, parent ? 1000 : 800);
    assert_int_equal(s->in_use, parent ? 0 : 800);
    assert_int_equal(s->nunknown, 0); /* the child's 0x1000 is its own */
    assert_string_equal(loom__mem_device_name(t, m, s, buf, sizeof buf),
                        parent ? "host (pid 100)" : "host (pid 200)");
  }
  loom__mem_free(m);
  char *text = report_of(t, ".json", LOOM_REPORT_TEXT);
  assert_non_null(strstr(text, "host (pid 100)"));
  assert_non_null(strstr(text, "host (pid 200)"));
  free(text);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_walk_figures),
      cmocka_unit_test(test_no_memory),
      cmocka_unit_test(test_summary_lines),
      cmocka_unit_test(test_report_every_format),
      cmocka_unit_test(test_report_without_memory),
      cmocka_unit_test(test_host_per_process),
      cmocka_unit_test(test_report_pytorch_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
