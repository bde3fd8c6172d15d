/*
 * test_read_pipe.c - `loom report` reads a big Perfetto trace with its
 * analysis on a second thread (export/pipe.h): the reader hands batches of
 * events over, with a mirror of the trace's strings and tracks.  What a user
 * sees must not depend on it: every Perfetto trace of the tests (and every
 * JSON trace of the tests saved as one, the real Kineto traces included)
 * gives the same report bytes, and its sinks the same calls in the same
 * order (flow ends before the events they bind to), whatever the batch
 * size; a sink that fails and a truncated file give the same error, and
 * nothing hangs.  Runs under ThreadSanitizer in CI.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "export/export.h"
#include "export/pipe.h"
#include "loom/loom.h"
#include "trace/trace.h"

#define MAX_FILES 64
static char *files[MAX_FILES];
static size_t nfiles;
static char *dir;

/* ---- the inputs -------------------------------------------------------------- */
static int ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && !strcmp(s + n - m, suf);
}

static void add_file(const char *path) {
  assert_true(nfiles < MAX_FILES);
  files[nfiles++] = strdup(path);
}

/* Every .pftrace of folder src, and every JSON trace there saved as one. */
static void gather(const char *src) {
  DIR *d = opendir(src);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    char in[1024], out[1024];
    snprintf(in, sizeof in, "%s/%s", src, e->d_name);
    if (ends_with(e->d_name, ".pftrace")) {
      add_file(in);
    } else if (ends_with(e->d_name, ".json") || ends_with(e->d_name, ".json.gz")) {
      loom_trace *t = NULL;
      if (loom_trace_load(in, &t) != LOOM_OK) continue; /* the broken ones of other tests */
      snprintf(out, sizeof out, "%s/%zu-%s.pftrace", dir, nfiles, e->d_name);
      assert_int_equal(loom_trace_save(t, out), LOOM_OK);
      loom_trace_free(t);
      add_file(out);
    }
  }
  closedir(d);
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)len + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
  p[len] = 0;
  fclose(f);
  *n = (size_t)len;
  return p;
}

/* A new file's name in the test's folder. */
static char *new_path(const char *name) {
  static int k;
  char *p = malloc(strlen(dir) + strlen(name) + 32);
  assert_non_null(p);
  sprintf(p, "%s/%d-%s", dir, k++, name);
  return p;
}

static int setup(void **state) {
  (void)state;
  char tmpl[] = "/tmp/loom-pipe-XXXXXX";
  assert_non_null(mkdtemp(tmpl));
  dir = strdup(tmpl);
  gather(LOOM_TESTS_DIR "/data/pftrace-v1");
  gather(LOOM_TESTS_DIR "/data/report");
  gather(LOOM_TESTS_DIR "/data/report/vendors");
  gather(LOOM_TESTS_DIR "/data/report/ranks");
  gather(LOOM_TESTS_DIR "/data/kineto");
  fprintf(stderr, "%zu traces\n", nfiles);
  assert_true(nfiles >= 20);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  for (size_t i = 0; i < nfiles; i++) free(files[i]);
  free(dir);
  return 0;
}

/* batch 0: no pipe; else a pipe with batches of that many events. */
static void use_pipe(size_t batch) {
  loom__pipe_min = batch ? 0 : SIZE_MAX;
  loom__pipe_batch = batch ? batch : 16384;
}

/* ---- what the sinks are given, as text ----------------------------------------- */
typedef struct log {
  char *s;
  size_t n, cap;
  size_t events, fail_at; /* fail_at: the sink fails at that event (1-based), 0 never */
  const loom_trace *seen; /* the trace the sink was given */
  pthread_t thread;       /* the thread it ran on */
} log;

static void say(log *l, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
  if (l->n + (size_t)n + 1 > l->cap) {
    l->cap = (l->n + (size_t)n + 1) * 2;
    l->s = realloc(l->s, l->cap);
    assert_non_null(l->s);
  }
  memcpy(l->s + l->n, buf, (size_t)n + 1);
  l->n += (size_t)n;
}

static void say_track(log *l, const loom_trace *t, uint32_t track) {
  if (track >= t->ntracks) return say(l, " track?%u", track);
  const loom__track *k = &t->tracks[track];
  say(l, " [%lld/%lld %s dev %u]", (long long)k->pid, (long long)k->tid, loom__trace_cstr(t, k->name),
      k->device);
}

static int on_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  log *l = ctx;
  l->seen = t;
  l->thread = pthread_self();
  if (++l->events == l->fail_at) return -1;
  say(l, "E %s|%s %lld+%lld k%u p%u f%u c%llu x%llu", loom__trace_cstr(t, e->name),
      loom__trace_cstr(t, e->cat), (long long)e->ts, (long long)e->dur, e->kind, e->ph, e->flags,
      (unsigned long long)e->correlation, (unsigned long long)e->external_id);
  say_track(l, t, e->track);
  for (uint16_t i = 0; i < e->nargs; i++) {
    const loom__targ *a = &args[i];
    if (a->type == LOOM_ARG_STRING) say(l, " %s='%s'", loom__trace_cstr(t, a->key), loom__trace_cstr(t, a->v.s));
    else say(l, " %s=%u:%llx", loom__trace_cstr(t, a->key), a->type, (unsigned long long)a->v.u);
  }
  say(l, "\n");
  return 0;
}

static int on_flow(void *ctx, const loom_trace *t, uint64_t id, int64_t ts, uint32_t track, char ph,
                   int bind_enclosing, uint32_t name, uint32_t cat) {
  log *l = ctx;
  say(l, "F %llu %lld %c%d %s|%s", (unsigned long long)id, (long long)ts, ph, bind_enclosing,
      loom__trace_cstr(t, name), loom__trace_cstr(t, cat));
  say_track(l, t, track);
  say(l, "\n");
  return 0;
}

typedef struct streamed {
  loom_status st;
  char err[512];
  log l;
  loom_trace *meta;
} streamed;

static streamed stream(const char *path, size_t batch, size_t fail_at) {
  use_pipe(batch);
  streamed r;
  memset(&r, 0, sizeof r);
  r.l.fail_at = fail_at;
  loom__sink sink = {.event = on_event, .ctx = &r.l, .threaded = 1};
  loom__flow_sink flows = {on_flow, &r.l};
  r.st = loom__trace_stream_flows(path, &sink, &flows, &r.meta);
  snprintf(r.err, sizeof r.err, "%s", r.st == LOOM_OK ? "" : loom_last_error());
  use_pipe(0);
  return r;
}

static void streamed_free(streamed *r) {
  free(r->l.s);
  loom_trace_free(r->meta);
}

static const size_t batches[] = {1, 3, 64, 16384};

/* Every file: the same calls, in the same order, with and without a pipe. */
static void test_same_calls(void **state) {
  (void)state;
  for (size_t f = 0; f < nfiles; f++) {
    streamed base = stream(files[f], 0, 0);
    assert_int_equal(base.st, LOOM_OK);
    assert_true(base.l.events > 0);
    assert_ptr_equal(base.l.seen, base.meta); /* no pipe: the reader's own trace */
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
      streamed p = stream(files[f], batches[b], 0);
      assert_int_equal(p.st, LOOM_OK);
      if (p.l.events != base.l.events || p.l.n != base.l.n || memcmp(p.l.s, base.l.s, p.l.n))
        fail_msg("%s, batches of %zu: %zu events, %zu bytes of calls; without a pipe %zu, %zu",
                 files[f], batches[b], p.l.events, p.l.n, base.l.events, base.l.n);
      /* it did go through the pipe: a mirror, on another thread */
      assert_true(p.l.seen != p.meta);
      assert_false(pthread_equal(p.l.thread, pthread_self()));
      assert_int_equal(p.meta->strs.n, base.meta->strs.n);
      streamed_free(&p);
    }
    streamed_free(&base);
  }
}

static char *report_json(const char *path, size_t batch, size_t sort_memory) {
  use_pipe(batch);
  loom_report_options o = {.struct_size = sizeof o, .sort_memory = sort_memory};
  loom_report *r = NULL;
  loom_status st = loom_report_open(path, &o, &r);
  use_pipe(0);
  if (st != LOOM_OK) fail_msg("%s: %s", path, loom_last_error());
  char *out = new_path("report.json");
  assert_int_equal(loom_report_write(r, LOOM_REPORT_JSON, out), LOOM_OK);
  loom_report_free(r);
  size_t n;
  char *s = slurp(out, &n);
  unlink(out);
  free(out);
  return s;
}

/* Every file: the same report bytes, also with a sort budget that spills. */
static void test_same_reports(void **state) {
  (void)state;
  for (size_t f = 0; f < nfiles; f++) {
    for (size_t m = 0; m < 2; m++) {
      size_t budget = m ? 4096 : 0;
      char *base = report_json(files[f], 0, budget);
      for (size_t b = 0; b < sizeof batches / sizeof *batches; b += 2) {
        char *p = report_json(files[f], batches[b], budget);
        if (strcmp(p, base)) fail_msg("%s: the report differs with batches of %zu", files[f], batches[b]);
        free(p);
      }
      free(base);
    }
  }
}

/* A sink that fails stops the read with the same error, at its first,
 * a middle and its last event; nothing hangs. */
static void test_sink_fails(void **state) {
  (void)state;
  for (size_t f = 0; f < nfiles; f++) {
    streamed all = stream(files[f], 0, 0);
    size_t at[3] = {1, all.l.events / 2 + 1, all.l.events};
    for (int k = 0; k < 3; k++) {
      streamed base = stream(files[f], 0, at[k]);
      assert_int_not_equal(base.st, LOOM_OK);
      assert_null(base.meta);
      for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        streamed p = stream(files[f], batches[b], at[k]);
        assert_int_equal(p.st, base.st);
        assert_string_equal(p.err, base.err);
        assert_null(p.meta);
        streamed_free(&p);
      }
      streamed_free(&base);
    }
    streamed_free(&all);
  }
}

/* A file cut short: the same error with and without a pipe. */
static void test_truncated(void **state) {
  (void)state;
  for (size_t f = 0; f < nfiles; f++) {
    size_t n;
    char *s = slurp(files[f], &n);
    char *cut = new_path("cut.pftrace");
    for (int k = 1; k <= 3; k++) {
      FILE *o = fopen(cut, "wb");
      assert_non_null(o);
      assert_int_equal(fwrite(s, 1, n * (size_t)k / 4, o), n * (size_t)k / 4);
      fclose(o);
      streamed base = stream(cut, 0, 0);
      for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        streamed p = stream(cut, batches[b], 0);
        assert_int_equal(p.st, base.st);
        assert_string_equal(p.err, base.err);
        if (p.st == LOOM_OK) assert_string_equal(p.l.s ? p.l.s : "", base.l.s ? base.l.s : "");
        streamed_free(&p);
      }
      streamed_free(&base);
    }
    unlink(cut);
    free(cut);
    free(s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_calls),
      cmocka_unit_test(test_same_reports),
      cmocka_unit_test(test_sink_fails),
      cmocka_unit_test(test_truncated),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
