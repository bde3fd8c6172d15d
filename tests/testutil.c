/*
 * testutil.c - see testutil.h.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- fake backend ------------------------------------------------------- */
typedef struct fake {
  loom_backend_ops ops;
  int fail;
  loom_backend *b;
  loom_clock clk, mclk; /* realtime; the recorder's domain (fake_memory) */
  uint32_t dev, res[2];
  atomic_int recording;
  atomic_uint_fast64_t corr;
  atomic_uint_fast64_t busy_until[2]; /* queues run one thing at a time */
  fake_calls calls;
} fake;

static fake fakes[4];
static const loom_host *host;

static fake *of(loom_backend *b) {
  for (int i = 0; i < 4; i++)
    if (fakes[i].b == b) return &fakes[i];
  return NULL;
}

static uint64_t now_real(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define FAKE_FNS(i)                                                                   \
  static loom_status probe##i(loom_backend *b, char *why, size_t n) {                 \
    fakes[i].b = b;                                                                   \
    fakes[i].calls.probe++;                                                           \
    if (fakes[i].fail & FAKE_FAIL_PROBE) {                                            \
      snprintf(why, n, "no fake device %d here", i);                                  \
      return LOOM_ENOTFOUND;                                                          \
    }                                                                                 \
    return LOOM_OK;                                                                   \
  }
FAKE_FNS(0)
FAKE_FNS(1)
FAKE_FNS(2)
FAKE_FNS(3)

static loom_status f_configure(loom_backend *b, uint32_t kinds) {
  fake *f = of(b);
  f->calls.configure++;
  if (f->fail & FAKE_FAIL_CONFIGURE) {
    host->report(b, LOOM_SEV_ERROR, "fake configure failure");
    return LOOM_EBACKEND;
  }
  loom_device_info d = {.struct_size = sizeof d, .name = "Fake Device", .vendor = "tests",
                        .type = "gpu"};
  if (host->clock_declare(b, LOOM_CLOCK_REALTIME, "realtime", &f->clk) ||
      host->device_add(b, &d, &f->dev) ||
      host->resource_add(b, f->dev, "stream 7", 7, &f->res[0]) ||
      host->resource_add(b, f->dev, "stream 8", 8, &f->res[1]))
    return LOOM_EBACKEND;
  loom_clock_domain md;
  host->recorder_now(&md);
  if (host->clock_declare(b, md, "recorder", &f->mclk)) return LOOM_EBACKEND;
  return LOOM_OK;
}

static loom_status f_start(loom_backend *b) {
  fake *f = of(b);
  f->calls.start++;
  if (f->fail & FAKE_FAIL_START) {
    host->report(b, LOOM_SEV_ERROR, "fake start failure");
    return LOOM_EBACKEND;
  }
  atomic_store(&f->recording, 1);
  return LOOM_OK;
}

static loom_status f_stop(loom_backend *b) {
  fake *f = of(b);
  f->calls.stop++;
  atomic_store(&f->recording, 0);
  return LOOM_OK;
}

static loom_status f_flush(loom_backend *b) {
  of(b)->calls.flush++;
  return LOOM_OK;
}

static void f_destroy(loom_backend *b) { of(b)->calls.destroy++; }
static void f_push(loom_backend *b, uint64_t id) { of(b)->calls.push++; (void)id; }
static void f_pop(loom_backend *b) { of(b)->calls.pop++; }

loom_status fake_register(int i, const char *name, const char *type, int fail) {
  static loom_status (*probes[4])(loom_backend *, char *, size_t) = {probe0, probe1, probe2, probe3};
  host = loom_host_get(LOOM_ABI_MAJOR);
  fake *f = &fakes[i];
  f->fail = fail;
  f->ops = (loom_backend_ops){
      .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
      .abi_minor = LOOM_ABI_MINOR, .name = name, .device_type = type,
      .kinds = LOOM_KINDS_ALL, .probe = probes[i], .configure = f_configure,
      .start = f_start, .stop = f_stop, .flush = f_flush, .destroy = f_destroy,
      .push_external = f_push, .pop_external = f_pop};
  return host->backend_register(&f->ops, "tests");
}

const loom_backend_ops *fake_ops(int i) { return &fakes[i].ops; }

loom_status fake_emit(int i, const char *name, loom_record *r) {
  fake *f = &fakes[i];
  r->clock = f->clk;
  if (!r->start) r->start = r->end = now_real();
  r->name = host->intern(f->b, name, SIZE_MAX);
  return host->emit(f->b, r);
}

loom_status fake_memory(int i, const char *name, int fast, loom_memory_event *m) {
  fake *f = &fakes[i];
  m->struct_size = sizeof *m;
  m->clock = fast ? f->mclk : f->clk;
  m->ts = fast ? host->recorder_now(NULL) : now_real();
  m->name = host->intern(f->b, name, SIZE_MAX);
  return host->memory(f->b, m);
}

uint32_t fake_device(int i) { return fakes[i].dev; }
void fake_lost(int i, uint64_t n, const char *reason) { host->count_lost(fakes[i].b, n, reason); }
fake_calls fake_get_calls(int i) { return fakes[i].calls; }

uint64_t fake_launch(int i, int q, const char *kernel, uint64_t dur_ns) {
  fake *f = &fakes[i];
  uint64_t t0 = now_real();
  uint64_t corr = atomic_fetch_add(&f->corr, 1) + 1;
  uint64_t t1 = now_real();
  if (!atomic_load(&f->recording)) return corr;
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_RUNTIME, .clock = f->clk,
                   .device = LOOM_DEVICE_HOST, .start = t0, .end = t1,
                   .name = host->intern(f->b, "fakeLaunch", SIZE_MAX), .correlation = corr};
  host->emit(f->b, &r);
  loom_arg args[1] = {{.key = "grid", .type = LOOM_ARG_UINT, .v.u = 128}};
  uint64_t start, prev = atomic_load(&f->busy_until[q]);
  do {
    start = prev > t1 + 1000 ? prev : t1 + 1000;
  } while (!atomic_compare_exchange_weak(&f->busy_until[q], &prev, start + dur_ns));
  loom_record k = {.struct_size = sizeof k, .kind = LOOM_KIND_KERNEL, .clock = f->clk,
                   .device = f->dev, .resource = f->res[q], .start = start,
                   .end = start + dur_ns, .name = host->intern(f->b, kernel, SIZE_MAX),
                   .correlation = corr, .nargs = 1, .args = args};
  host->emit(f->b, &k);
  return corr;
}

/* ---- sessions ------------------------------------------------------------- */
loom_session *ts_start(const char *devices, const char *options) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = devices,
                             .options = options, .name = "test"};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  return s;
}

loom_trace *ts_finish(loom_session *s) {
  loom_trace *t = NULL;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  loom_session_destroy(s);
  assert_non_null(t);
  return t;
}

int ts_warned(const loom_trace *t, const char *a, const char *b) {
  for (size_t i = 0; i < loom_trace_warning_count(t); i++) {
    const char *w = loom_trace_warning(t, i);
    if (strstr(w, a) && (!b || strstr(w, b))) return 1;
  }
  return 0;
}

void ts_flow(const loom_trace *t, size_t i, loom_event_view *from, loom_event_view *to) {
  size_t a, b;
  assert_int_equal(loom_trace_flow(t, i, &a, &b), LOOM_OK);
  from->struct_size = sizeof *from;
  to->struct_size = sizeof *to;
  assert_int_equal(loom_trace_event(t, a, from), LOOM_OK);
  assert_int_equal(loom_trace_event(t, b, to), LOOM_OK);
}

int ts_saved_contains(const loom_trace *t, const char *needle) {
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  char *json = read_file(path, NULL);
  assert_non_null(json);
  int found = strstr(json, needle) != NULL;
  free(json);
  unlink(path);
  return found;
}

/* ---- programs under test ------------------------------------------------ */
int ts_run(const char *cmd, char **out) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 4096, n = 0, k;
  char *buf = malloc(cap);
  while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0)
    if ((n += k) + 1 >= cap) buf = realloc(buf, cap *= 2);
  buf[n] = 0;
  int st = pclose(p);
  if (out) *out = buf;
  else free(buf);
  return st;
}

loom_trace *ts_load(const char *path) {
  loom_trace *t = NULL;
  if (loom_trace_load(path, &t) != LOOM_OK) fail_msg("%s", loom_last_error());
  return t;
}

loom_trace *ts_record_program(const char *loom_bin, const char *app, const char *args,
                              char *trace, size_t n, char **out) {
  char cmd[2048];
  tmp_path(trace, n, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' %s 2>/dev/null", loom_bin, trace, app,
           args);
  assert_int_equal(ts_run(cmd, out), 0);
  return ts_load(trace);
}

ts_tally ts_count_annotations(const loom_trace *t, const char *const *names,
                              const char *const *cats) {
  ts_tally c;
  memset(&c, 0, sizeof c);
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    /* (by phase: read back from JSON, a range whose category is a domain
     * name reads back as a marker, not as a user range) */
    if (!strcmp(v.category, "marker")) continue; /* the window end */
    if (v.phase == 'X') c.ranges++;
    else if (v.phase == 'b') c.async++;
    else if (v.phase == 'i') c.instants++;
    else c.other_kinds++;
    for (int k = 0; names[k] && k < 8; k++)
      if (!strcmp(v.name, names[k]) && (!cats[k] || !strcmp(v.category, cats[k]))) {
        c.named[k]++;
        c.tid[k] = v.tid;
      }
  }
  return c;
}

/* ---- trace_processor ---------------------------------------------------- */
static const char *tp_dir(void) {
  const char *d = getenv("LOOM_TP_DIR");
  return d && *d ? d : NULL;
}

void tp_require(void) {
  const char *d = tp_dir();
  char path[1024];
  snprintf(path, sizeof path, "%s/trace_processor.wasm", d ? d : "");
  if (!d || access(path, R_OK) != 0) {
    if (getenv("LOOM_TP_REQUIRED")) fail_msg("trace_processor is required but missing in %s", d ? d : "(LOOM_TP_DIR unset)");
    skip();
  }
}

static char *tp_run_n(const char *trace, const char *const *sqls, size_t n) {
  tp_require();
  char cmd[8192];
  int clen = snprintf(cmd, sizeof cmd, "node '%s/tp/tp.mjs' --tp-dir '%s' '%s'",
                     LOOM_TESTS_DIR, tp_dir(), trace);
  /* SQL goes through the environment to avoid shell quoting. */
  for (size_t i = 0; i < n; i++) {
    char var[32];
    snprintf(var, sizeof var, "LOOM_TP_SQL%zu", i);
    setenv(var, sqls[i], 1);
    clen += snprintf(cmd + clen, sizeof cmd - (size_t)clen, " \"$%s\"", var);
  }
  const char *sql = sqls[0];
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  size_t k;
  while ((k = fread(out + len, 1, cap - len - 1, p)) > 0) {
    len += k;
    if (len + 1 >= cap) out = realloc(out, cap *= 2);
  }
  out[len] = 0;
  int rc = pclose(p);
  if (rc != 0) fail_msg("trace_processor failed on %s (sql: %s)", trace, sql);
  return out;
}

static char *tp_run(const char *trace, const char *sql) {
  return tp_run_n(trace, &sql, 1);
}

void tp_ints(const char *trace, const char *const *sqls, long long *out, size_t n) {
  char *json = tp_run_n(trace, sqls, n);
  const char *p = strstr(json, "\"results\":[");
  if (!p) fail_msg("bad trace_processor output: %s", json);
  p += 11;
  for (size_t i = 0; i < n; i++) {
    p = strchr(p, '[');
    if (!p) fail_msg("missing result %zu for '%s': %s", i, sqls[i], json);
    p++;
    if (*p != '{') fail_msg("no rows for '%s'", sqls[i]);
    p = strchr(p, ':') + 1;
    out[i] = strtoll(p, NULL, 10);
    p = strchr(p, ']');
  }
  free(json);
}

/* Extracts the first value of the first row of {"results":[[{"k":v,...}]]}. */
static const char *first_value(const char *json) {
  const char *p = strstr(json, "[[{");
  if (!p) return NULL;
  p = strchr(p, ':');
  return p ? p + 1 : NULL;
}

long long tp_int(const char *trace, const char *sql) {
  char *out = tp_run(trace, sql);
  const char *v = first_value(out);
  if (!v) fail_msg("no rows from '%s': %s", sql, out);
  long long r = strtoll(v, NULL, 10);
  free(out);
  return r;
}

void tp_str(const char *trace, const char *sql, char *buf, size_t n) {
  char *out = tp_run(trace, sql);
  const char *v = first_value(out);
  buf[0] = 0;
  if (v && *v == '"') {
    size_t j = 0;
    for (v++; *v && *v != '"' && j + 1 < n; v++) {
      if (*v == '\\' && v[1]) v++;
      buf[j++] = *v;
    }
    buf[j] = 0;
  }
  free(out);
}

long long tp_errors(const char *trace) {
  return tp_int(trace, "select count(*) as n from stats where value > 0 and "
                       "severity in ('error','data_loss')");
}

/* A name no earlier run left behind either: the pid alone repeats once
 * pids wrap, and a test that failed (or was killed) may have left its
 * files; a name that exists is skipped. */
void tmp_path(char *buf, size_t n, const char *suffix) {
  static atomic_int seq;
  static atomic_uint nonce;
  if (!atomic_load(&nonce)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned v = (unsigned)ts.tv_nsec ^ (unsigned)ts.tv_sec * 2654435761u;
    unsigned zero = 0;
    atomic_compare_exchange_strong(&nonce, &zero, v ? v : 1);
  }
  const char *d = getenv("TMPDIR");
  struct stat sb;
  do {
    snprintf(buf, n, "%s/loomtest-%d-%x-%d%s", d && *d ? d : "/tmp", (int)getpid(),
             atomic_load(&nonce), atomic_fetch_add(&seq, 1), suffix);
  } while (lstat(buf, &sb) == 0);
}

char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = 0;
  if (len) *len = (size_t)n;
  fclose(f);
  return s;
}
