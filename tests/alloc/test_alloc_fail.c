/*
 * test_alloc_fail.c - allocation-failure injection in the style of curl's
 * torture tests and SQLite's malloc tests: each operation of the public API
 * (session create, start, recording, stop, dump; save to every writer; load
 * with every reader) is run again and again with its Nth allocation failing,
 * for N = 1, 2, ... until a run completes without reaching N.  Each run
 * must end either in an error (an error status, a non-empty
 * loom_last_error, no object returned, and for a save no file at all in its
 * folder) or in a success whose result equals the one of a run without
 * failures (or, for recording and stop, whose trace says in a warning that
 * it lost something).  Runs once with only the Nth allocation failing and
 * once with every allocation from the Nth on failing.  Leaks are found by
 * LeakSanitizer after each operation's runs in the AddressSanitizer build
 * (after every run with ALLOC_FAIL_LEAK_EACH=1).
 *
 * How: linked against the static loom_internal archive with the linker's
 * --wrap for malloc, calloc, realloc, strdup, strndup, posix_memalign,
 * aligned_alloc, mmap, and the entry points of zlib (gzopen, gzdopen,
 * deflateInit2_, inflateInit2_) and yajl (yajl_alloc, yajl_gen_alloc) as
 * allocation points: loom's own calls are counted, not those made inside
 * libc, zlib or yajl once entered (their buffers growing), nor fopen's and
 * opendir's FILE and DIR (loom reads /proc with them, falling back to
 * another name when it cannot).
 *
 * argv[1]: "session" (create, start, record, stop, dump), "save" or "load".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include <cmocka.h>

#include "core/core.h"
#include "loom/loom.h"
#include "loom/plugin.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* ---- the failing allocator -------------------------------------------- */
/* countdown: the allocation that makes it reach 0 fails (and, persistent,
 * every one after it); fired says one failed.  Every thread counts. */
static atomic_long countdown;
static atomic_int armed, fired, persistent;

/* ALLOC_FAIL_BACKTRACE=1 prints where the first failing allocation of each
 * run was made (to find what a failure report is about). */
static void where(void) {
  static int want = -1;
  if (want < 0) want = getenv("ALLOC_FAIL_BACKTRACE") != NULL;
  if (!want) return;
  void *pc[16];
  int n = backtrace(pc, 16);
  backtrace_symbols_fd(pc, n, 2);
  write(2, "--\n", 3);
}

static int fail_now(void) {
  if (!atomic_load_explicit(&armed, memory_order_relaxed)) return 0;
  long left = atomic_fetch_sub(&countdown, 1) - 1;
  if (left == 0 || (left < 0 && atomic_load(&persistent))) {
    if (!atomic_exchange(&fired, 1)) where();
    return 1;
  }
  return 0;
}

#define FAILS(ret)                                                                        \
  do {                                                                                      \
    if (fail_now()) {                                                                       \
      errno = ENOMEM;                                                                       \
      return ret;                                                                           \
    }                                                                                       \
  } while (0)

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
char *__real_strdup(const char *);
char *__real_strndup(const char *, size_t);
int __real_posix_memalign(void **, size_t, size_t);
void *__real_aligned_alloc(size_t, size_t);
void *__real_mmap(void *, size_t, int, int, int, off_t);
gzFile __real_gzopen(const char *, const char *);
gzFile __real_gzdopen(int, const char *);
int __real_deflateInit2_(z_streamp, int, int, int, int, int, const char *, int);
int __real_inflateInit2_(z_streamp, int, const char *, int);
yajl_handle __real_yajl_alloc(const yajl_callbacks *, yajl_alloc_funcs *, void *);
yajl_gen __real_yajl_gen_alloc(const yajl_alloc_funcs *);

void *__wrap_malloc(size_t n) { FAILS(NULL); return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { FAILS(NULL); return __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { FAILS(NULL); return __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { FAILS(NULL); return __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { FAILS(NULL); return __real_strndup(s, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
  if (fail_now()) return ENOMEM;
  return __real_posix_memalign(p, a, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n) { FAILS(NULL); return __real_aligned_alloc(a, n); }
void *__wrap_mmap(void *a, size_t n, int prot, int fl, int fd, off_t off) {
  FAILS(MAP_FAILED);
  return __real_mmap(a, n, prot, fl, fd, off);
}
gzFile __wrap_gzopen(const char *p, const char *m) { FAILS(NULL); return __real_gzopen(p, m); }
gzFile __wrap_gzdopen(int fd, const char *m) { FAILS(NULL); return __real_gzdopen(fd, m); }
int __wrap_deflateInit2_(z_streamp z, int l, int me, int w, int ml, int st, const char *v, int sz) {
  if (fail_now()) return Z_MEM_ERROR;
  return __real_deflateInit2_(z, l, me, w, ml, st, v, sz);
}
int __wrap_inflateInit2_(z_streamp z, int w, const char *v, int sz) {
  if (fail_now()) return Z_MEM_ERROR;
  return __real_inflateInit2_(z, w, v, sz);
}
yajl_handle __wrap_yajl_alloc(const yajl_callbacks *cb, yajl_alloc_funcs *af, void *ctx) {
  FAILS(NULL);
  return __real_yajl_alloc(cb, af, ctx);
}
yajl_gen __wrap_yajl_gen_alloc(const yajl_alloc_funcs *af) {
  FAILS(NULL);
  return __real_yajl_gen_alloc(af);
}

static void arm(long n) {
  atomic_store(&fired, 0);
  atomic_store(&countdown, n);
  loom__clear_error();
  atomic_store(&armed, 1);
}
static int disarm(void) {
  atomic_store(&armed, 0);
  return atomic_load(&fired);
}

/* LeakSanitizer over the heap now: a block lost by the runs of op up to
 * failure N is reported by LeakSanitizer and fails the test.  Once per
 * operation (a heap scan costs ~15 ms), after every run with
 * ALLOC_FAIL_LEAK_EACH=1 to find the N that leaks. */
static void leak_check(const char *op, long n, int last) {
#ifdef HAVE_LSAN
  static int each = -1;
  if (each < 0) each = getenv("ALLOC_FAIL_LEAK_EACH") != NULL;
  if ((each || last) && __lsan_do_recoverable_leak_check())
    fail_msg("%s: a leak in the runs up to failing allocation %ld (%s)%s", op, n,
             atomic_load(&persistent) ? "and all after it" : "only",
             each ? "" : "; ALLOC_FAIL_LEAK_EACH=1 tells which");
#else
  (void)op, (void)n, (void)last;
#endif
}

/* An operation under test: 0 when it completed (its result checked), 1
 * when it failed as it should; it fails the test itself otherwise. */
typedef int (*op_fn)(const char *name, long n);

/* Runs op for N = 1, 2, ... until a run completes with no failure injected;
 * returns that last N. */
static long torture(const char *name, op_fn op) {
  long n = 1;
  for (;; n++) {
    arm(n);
    int failed = op(name, n);
    int hit = disarm();
    (void)failed; /* a success despite the failure was checked by op */
    leak_check(name, n, !hit);
    if (!hit) break;
    if (n > 100000) fail_msg("%s: more than 100000 allocations", name);
  }
  printf("%-22s %s: completes from N = %ld\n", name,
         atomic_load(&persistent) ? "every one from the Nth fails" : "the Nth fails",
         n);
  return n;
}

/* An error as the API promises: an error status and a message. */
static void expect_error(const char *op, long n, loom_status st) {
  if (st == LOOM_OK) return;
  if (!loom_last_error()[0])
    fail_msg("%s: failing allocation %ld gave status %d (%s) and no message", op, n, st,
             loom_strerror(st));
}

/* ---- a small device backend, so that stop has flows and a device clock -- */
static struct {
  const loom_host *h;
  loom_backend *b;
  loom_clock clk;
  uint32_t dev, q;
} fb;

static loom_status fb_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  fb.b = b;
  loom_device_info d = {.struct_size = sizeof d, .name = "Fake", .vendor = "tests", .type = "gpu"};
  if (fb.h->clock_declare(b, LOOM_CLOCK_REALTIME, "host", &fb.clk) ||
      fb.h->device_add(b, &d, &fb.dev) || fb.h->resource_add(b, fb.dev, "q", 1, &fb.q))
    return LOOM_EBACKEND;
  return LOOM_OK;
}
static loom_status fb_start(loom_backend *b) { (void)b; return LOOM_OK; }
static loom_status fb_stop(loom_backend *b) { (void)b; return LOOM_OK; }
static const loom_backend_ops fb_ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "fakegpu", .device_type = "fakegpu",
    .kinds = LOOM_KINDS_ALL, .configure = fb_configure, .start = fb_start, .stop = fb_stop};

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A launch call on the host and its kernel on the device, linked; kernel
 * corr runs corr ms after base (never two at once: no lanes, whatever the
 * timing). */
static void fb_launch(uint64_t corr, uint64_t base) {
  uint64_t t = real_ns(), k0 = base + corr * 1000000;
  loom_arg a = {.key = "grid", .type = LOOM_ARG_INT, .v.i = 64};
  loom_record call = {.struct_size = sizeof call, .kind = LOOM_KIND_RUNTIME, .clock = fb.clk,
                      .device = LOOM_DEVICE_HOST, .start = t, .end = t + 1000,
                      .name = fb.h->intern(fb.b, "fakeLaunch", SIZE_MAX), .correlation = corr,
                      .flags = LOOM_RECORD_F_LAUNCH};
  loom_record k = {.struct_size = sizeof k, .kind = LOOM_KIND_KERNEL, .clock = fb.clk,
                   .device = fb.dev, .resource = fb.q, .start = k0, .end = k0 + 3000,
                   .name = fb.h->intern(fb.b, "fake_kernel", SIZE_MAX), .correlation = corr,
                   .nargs = 1, .args = &a};
  fb.h->emit(fb.b, &call);
  fb.h->emit(fb.b, &k);
}

/* ---- the session operations ------------------------------------------- */
static const loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,fakegpu",
                                        .options = "memory_cap=64m,buffer_size=64k",
                                        .name = "alloc"};

/* What a program does while recording: ranges, ops with arguments and
 * device work, instants, counters.  The thread's name and the metadata are
 * set before, unarmed: loom_thread_name returns nothing to report a failure
 * with, and loom_meta_set is tried on its own (op_meta). */
static void names(void) {
  int was = atomic_exchange(&armed, 0);
  loom_thread_name(0, "main thread");
  assert_int_equal(loom_meta_set("alloc_test", "1"), LOOM_OK);
  atomic_store(&armed, was);
}
static void workload(void) {
  names();
  uint64_t base = real_ns();
  for (int i = 0; i < 4; i++) {
    loom_step();
    loom_range_push("step work");
    loom_arg args[2] = {{.key = "i", .type = LOOM_ARG_INT, .v.i = i},
                        {.key = "what", .type = LOOM_ARG_STRING, .v.s = "matmul"}};
    loom_op_begin_args("aten::mm", (uint64_t)(100 + i), args, 2);
    fb_launch((uint64_t)i + 1, base);
    loom_op_end();
    loom_instant("tick");
    loom_counter("loss", 1.0 / (i + 1));
    loom_range_pop();
  }
}

/* What is compared of two traces: counts of everything in them, and the
 * length of their names (a name lost to a failed allocation shortens it). */
typedef struct shape { size_t events, flows, devices, warnings, procs, tracks, meta, text; } shape;
static size_t text_of(const loom_trace *t) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    n += strlen(v.name) + strlen(v.category);
  }
  for (size_t i = 0; i < loom_trace_process_count(t); i++) {
    loom_process_view v = {.struct_size = sizeof v};
    loom_trace_process(t, i, &v);
    n += strlen(v.name) + strlen(v.labels);
  }
  for (size_t i = 0; i < loom_trace_track_count(t); i++) {
    loom_track_view v = {.struct_size = sizeof v};
    loom_trace_track(t, i, &v);
    n += strlen(v.name);
  }
  for (size_t i = 0; i < loom_trace_meta_count(t); i++) {
    const char *k = "", *v = "";
    loom_trace_meta(t, i, &k, &v);
    n += strlen(k) + strlen(v);
  }
  return n;
}
static shape shape_of(const loom_trace *t) {
  shape s = {loom_trace_event_count(t), loom_trace_flow_count(t), loom_trace_device_count(t),
             loom_trace_warning_count(t), loom_trace_process_count(t), loom_trace_track_count(t),
             loom_trace_meta_count(t), text_of(t)};
  return s;
}
static int same_but_warnings(shape a, shape b) {
  return a.events == b.events && a.flows == b.flows && a.devices == b.devices &&
         a.procs == b.procs && a.tracks == b.tracks && a.meta == b.meta && a.text == b.text;
}
static shape ref_stop; /* the trace of a stop without failures */

/* A trace that came out despite a failure: whole, or saying it is not. */
static void check_trace(const char *op, long n, const loom_trace *t, shape want) {
  shape got = shape_of(t);
  if (same_but_warnings(got, want)) return;
  if (got.warnings > want.warnings) return; /* it says what it lost */
  for (size_t i = 0; i < got.tracks; i++) {
    loom_track_view v = {.struct_size = sizeof v};
    loom_trace_track(t, i, &v);
    fprintf(stderr, "track %zu: %lld/%lld '%s'\n", i, (long long)v.pid, (long long)v.tid, v.name);
  }
  fail_msg("%s: failing allocation %ld: success with %zu events, %zu flows, %zu devices, "
           "%zu processes, %zu tracks, %zu metadata, %zu bytes of names (%zu, %zu, %zu, %zu, "
           "%zu, %zu, %zu without failures) and no warning", op, n, got.events, got.flows,
           got.devices, got.procs, got.tracks, got.meta, got.text, want.events, want.flows,
           want.devices, want.procs, want.tracks, want.meta, want.text);
}

static int op_create(const char *name, long n) {
  loom_session *s = (loom_session *)(uintptr_t)1;
  loom_status st = loom_session_create(&cfg, &s);
  disarm();
  if (st != LOOM_OK) {
    expect_error(name, n, st);
    if (s) fail_msg("%s: failing allocation %ld: create failed but returned a session", name, n);
    return 1;
  }
  assert_non_null(s);
  loom_session_destroy(s);
  return 0;
}

static loom_session *created(void) {
  long saved = atomic_load(&countdown);
  int was = atomic_load(&armed);
  atomic_store(&armed, 0);
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  atomic_store(&countdown, saved);
  atomic_store(&armed, was);
  return s;
}

static int op_start(const char *name, long n) {
  disarm();
  loom_session *s = created();
  arm(n);
  loom_status st = loom_session_start(s);
  disarm();
  expect_error(name, n, st);
  if (st == LOOM_OK) {
    loom_trace *t = NULL;
    assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
    loom_trace_free(t);
  }
  loom_session_destroy(s);
  return st != LOOM_OK;
}

/* Failures while the program records: records lost are said. */
static int op_record(const char *name, long n) {
  disarm();
  loom_session *s = created();
  assert_int_equal(loom_session_start(s), LOOM_OK);
  arm(n);
  workload();
  int hit = disarm();
  loom_trace *t = NULL;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  if (hit) check_trace(name, n, t, ref_stop);
  loom_trace_free(t);
  loom_session_destroy(s);
  return 0;
}

static int op_stop(const char *name, long n) {
  disarm();
  loom_session *s = created();
  assert_int_equal(loom_session_start(s), LOOM_OK);
  workload();
  arm(n);
  loom_trace *t = (loom_trace *)(uintptr_t)1;
  loom_status st = loom_session_stop(s, &t);
  int hit = disarm();
  if (st != LOOM_OK) {
    expect_error(name, n, st);
    if (t && t != (loom_trace *)(uintptr_t)1)
      fail_msg("%s: failing allocation %ld: stop failed but returned a trace", name, n);
  } else {
    assert_non_null(t);
    if (hit) check_trace(name, n, t, ref_stop);
    loom_trace_free(t);
  }
  loom_session_destroy(s);
  return st != LOOM_OK;
}

/* loom_meta_set: an error, or the key set. */
static int op_meta(const char *name, long n) {
  loom_status st = loom_meta_set("alloc_meta", "v");
  disarm();
  expect_error(name, n, st);
  assert_int_equal(loom_meta_set("alloc_meta", NULL), LOOM_OK);
  return st != LOOM_OK;
}

static shape ref_dump;
static int op_dump(const char *name, long n) {
  disarm();
  loom_session_config rc = cfg;
  rc.options = "mode=ring,ring_size=1m";
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&rc, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  workload();
  arm(n);
  loom_trace *t = NULL;
  loom_status st = loom_session_dump(s, "alloc test", &t);
  int hit = disarm();
  if (st != LOOM_OK) {
    expect_error(name, n, st);
    if (t) fail_msg("%s: failing allocation %ld: dump failed but returned a trace", name, n);
  } else if (n > 0) {
    if (hit) check_trace(name, n, t, ref_dump);
  } else {
    ref_dump = shape_of(t);
  }
  loom_trace_free(t);
  loom_trace *rest = NULL;
  assert_int_equal(loom_session_stop(s, &rest), LOOM_OK);
  loom_trace_free(rest);
  loom_session_destroy(s);
  return st != LOOM_OK;
}

/* The trace every save and load starts from, recorded without failures. */
static loom_trace *recorded(void) {
  disarm();
  loom_session *s = created();
  assert_int_equal(loom_session_start(s), LOOM_OK);
  workload();
  loom_trace *t = NULL;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  loom_session_destroy(s);
  return t;
}

static void test_session_ops(void **state) {
  (void)state;
  fb.h = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(fb.h->backend_register(&fb_ops, "tests"), LOOM_OK);
  loom_trace *t = recorded();
  ref_stop = shape_of(t);
  assert_true(ref_stop.flows >= 4);
  loom_trace_free(t);
  op_dump("dump", 0);
  for (int p = 0; p < 2; p++) {
    atomic_store(&persistent, p);
    torture("loom_meta_set", op_meta);
    torture("session create", op_create);
    torture("session start", op_start);
    torture("recording", op_record);
    torture("session stop", op_stop);
    torture("session dump (ring)", op_dump);
  }
}

/* ---- writers and readers ---------------------------------------------- */
static const char *const exts[] = {".json", ".json.gz", ".pftrace", ".pftrace.gz"};
static char dir[256], ref_path[4][300];
static loom_trace *ref_trace;
static const char *cur_ext;

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = __real_malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* The names in the save folder other than the references ("ref-*"). */
static int stray_files(char *first, size_t n) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || !strncmp(e->d_name, "ref", 3)) continue;
    if (!count++) snprintf(first, n, "%s", e->d_name);
  }
  closedir(d);
  return count;
}

static int op_save(const char *name, long n) {
  char path[300];
  snprintf(path, sizeof path, "%s/out%s", dir, cur_ext);
  loom_status st = loom_trace_save(ref_trace, path);
  int hit = disarm();
  char stray[256] = "";
  if (st != LOOM_OK) {
    expect_error(name, n, st);
    if (stray_files(stray, sizeof stray))
      fail_msg("%s: failing allocation %ld: the failed save left %s", name, n, stray);
    return 1;
  }
  if (hit) { /* completed despite the failure: the same bytes */
    size_t a = 0, b = 0;
    char *got = slurp(path, &a), *want = NULL;
    for (int i = 0; i < 4; i++)
      if (!strcmp(exts[i], cur_ext)) want = slurp(ref_path[i], &b);
    if (!got || !want || a != b || memcmp(got, want, a))
      fail_msg("%s: failing allocation %ld: saved %zu bytes, %zu without failures", name, n, a,
               b);
    free(got);
    free(want);
  }
  unlink(path);
  return 0;
}

static void make_refs(void) {
  snprintf(dir, sizeof dir, "%s/loom-alloc-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  assert_non_null(mkdtemp(dir));
  ref_trace = recorded();
  for (int i = 0; i < 4; i++) {
    snprintf(ref_path[i], sizeof ref_path[i], "%s/ref%s", dir, exts[i]);
    assert_int_equal(loom_trace_save(ref_trace, ref_path[i]), LOOM_OK);
  }
}

static void drop_refs(void) {
  for (int i = 0; i < 4; i++) unlink(ref_path[i]);
  rmdir(dir);
  loom_trace_free(ref_trace);
}

static void test_save(void **state) {
  (void)state;
  fb.h = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(fb.h->backend_register(&fb_ops, "tests"), LOOM_OK);
  make_refs();
  for (int p = 0; p < 2; p++) {
    atomic_store(&persistent, p);
    for (int i = 0; i < 4; i++) {
      char name[64];
      snprintf(name, sizeof name, "save %s", exts[i]);
      cur_ext = exts[i];
      torture(name, op_save);
    }
  }
  drop_refs();
}

static const char *cur_load;
static shape ref_load;

static int op_load(const char *name, long n) {
  loom_trace *t = (loom_trace *)(uintptr_t)1;
  loom_status st = loom_trace_load(cur_load, &t);
  int hit = disarm();
  if (st != LOOM_OK) {
    expect_error(name, n, st);
    if (t && t != (loom_trace *)(uintptr_t)1)
      fail_msg("%s: failing allocation %ld: load failed but returned a trace", name, n);
    return 1;
  }
  if (hit) {
    shape got = shape_of(t);
    if (!same_but_warnings(got, ref_load) || got.warnings != ref_load.warnings)
      fail_msg("%s: failing allocation %ld: loaded %zu events, %zu flows, %zu warnings, "
               "%zu bytes of names (%zu, %zu, %zu, %zu without failures)", name, n, got.events,
               got.flows, got.warnings, got.text, ref_load.events, ref_load.flows,
               ref_load.warnings, ref_load.text);
  }
  loom_trace_free(t);
  return 0;
}

static void test_load(void **state) {
  (void)state;
  fb.h = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(fb.h->backend_register(&fb_ops, "tests"), LOOM_OK);
  make_refs();
  for (int p = 0; p < 2; p++) {
    atomic_store(&persistent, p);
    for (int i = 0; i < 4; i++) {
      loom_trace *t = NULL;
      assert_int_equal(loom_trace_load(ref_path[i], &t), LOOM_OK);
      ref_load = shape_of(t);
      loom_trace_free(t);
      char name[64];
      snprintf(name, sizeof name, "load %s", exts[i]);
      cur_load = ref_path[i];
      torture(name, op_load);
    }
  }
  drop_refs();
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "session";
  setenv("LOOM_LOG", "quiet", 0); /* the warnings of every failing run */
  const struct CMUnitTest session[] = {cmocka_unit_test(test_session_ops)};
  const struct CMUnitTest save[] = {cmocka_unit_test(test_save)};
  const struct CMUnitTest load[] = {cmocka_unit_test(test_load)};
  if (!strcmp(what, "save")) return cmocka_run_group_tests(save, NULL, NULL);
  if (!strcmp(what, "load")) return cmocka_run_group_tests(load, NULL, NULL);
  return cmocka_run_group_tests(session, NULL, NULL);
}
