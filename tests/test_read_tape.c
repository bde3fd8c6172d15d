/*
 * test_read_tape.c - a big JSON trace is parsed on two threads (yajl on its
 * own, the model built from its tokens on the caller's: json_tape.h).  What a
 * user sees must not depend on it: every JSON trace of the tests, the real
 * Kineto traces included, loads to the same bytes both ways; a broken or
 * truncated file gives the same error, at the same byte offset; a token
 * bigger than a tape block and a file bigger than the whole tape come
 * through whole.  Runs under ThreadSanitizer in CI.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <zlib.h>

#include "export/json_tape.h"
#include "loom/loom.h"

typedef struct outcome {
  loom_status st;
  char err[512];
  char *json;  /* the trace saved again as JSON (NULL when it did not load) */
  size_t n;
  size_t events;
} outcome;

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)len + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return p;
}

static outcome load(const char *path, int threaded) {
  loom__json_tape_min = threaded ? 0 : SIZE_MAX;
  outcome o = {0};
  loom_trace *t = NULL;
  o.st = loom_trace_load(path, &t);
  snprintf(o.err, sizeof o.err, "%s", o.st == LOOM_OK ? "" : loom_last_error());
  if (t) {
    char out[] = "/tmp/loom-tape-XXXXXX.json";
    int fd = mkstemps(out, 5);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(loom_trace_save(t, out), LOOM_OK);
    o.json = slurp(out, &o.n);
    o.events = loom_trace_event_count(t);
    unlink(out);
    loom_trace_free(t);
  }
  loom__json_tape_min = 1 << 20;
  return o;
}

/* Loads path both ways; fails unless status, message and output agree. */
static outcome same_both_ways(const char *path) {
  outcome a = load(path, 0), b = load(path, 1);
  if (a.st != b.st || strcmp(a.err, b.err) || a.n != b.n || (a.n && memcmp(a.json, b.json, a.n)))
    fail_msg("%s: one thread: %d \"%s\" %zu bytes; two: %d \"%s\" %zu bytes", path, (int)a.st, a.err, a.n,
             (int)b.st, b.err, b.n);
  free(b.json);
  return a;
}

static int is_json_trace(const char *name) {
  size_t n = strlen(name);
  return (n > 5 && !strcmp(name + n - 5, ".json")) || (n > 8 && !strcmp(name + n - 8, ".json.gz"));
}

static size_t walk(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t loaded = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      loaded += walk(path);
    } else if (is_json_trace(e->d_name)) {
      outcome o = same_both_ways(path);
      loaded += o.st == LOOM_OK;
      free(o.json);
    }
  }
  closedir(d);
  return loaded;
}

static void test_every_test_trace(void **state) {
  (void)state;
  size_t loaded = walk(LOOM_TESTS_DIR "/data");
  print_message("%zu JSON traces loaded the same on one and two threads\n", loaded);
  assert_true(loaded >= 10);
}

static void write_file(const char *path, const char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

/* A Kineto-like trace of n events; one event's name is name_len bytes. */
static char *big_trace(size_t n, size_t name_len, size_t *len) {
  size_t cap = n * 200 + name_len + 4096, at = 0;
  char *p = malloc(cap);
  assert_non_null(p);
  at += (size_t)sprintf(p + at, "{\"traceEvents\":[");
  for (size_t i = 0; i < n; i++) {
    at += (size_t)sprintf(p + at, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"", i ? "," : "",
                          i % 2 ? "kernel" : "cpu_op");
    if (i == n / 2) {
      memset(p + at, 'k', name_len);
      at += name_len;
    } else {
      at += (size_t)sprintf(p + at, "op \\u00e9 %zu", i % 7);
    }
    at += (size_t)sprintf(p + at, "\",\"pid\":%d,\"tid\":%d,\"ts\":%zu.%03zu,\"dur\":1.5,"
                          "\"args\":{\"External id\":%zu,\"dims\":[[%zu,2],[3]],\"ok\":true,\"n\":null}}",
                          i % 2 ? 0 : 7, i % 2 ? 7 : 8, i, i % 1000, i, i);
  }
  at += (size_t)sprintf(p + at, "]}");
  *len = at;
  return p;
}

static void test_big_tokens_and_files(void **state) {
  (void)state;
  size_t n;
  char *p = big_trace(40000, 3 << 20, &n); /* > 8 blocks of 256 KiB, one token of 3 MiB */
  char path[] = "/tmp/loom-tape-big-XXXXXX.json";
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  close(fd);
  write_file(path, p, n);
  outcome o = same_both_ways(path);
  assert_int_equal(o.st, LOOM_OK);
  assert_int_equal(o.events, 40000);
  assert_non_null(strstr(o.json, "kkkkkkkk"));
  free(o.json);
  /* gzip: the tape reads through zlib the same */
  char gz[sizeof path + 3];
  snprintf(gz, sizeof gz, "%s.gz", path);
  gzFile z = gzopen(gz, "wb");
  assert_non_null(z);
  assert_int_equal(gzwrite(z, p, (unsigned)n), (int)n);
  gzclose(z);
  o = same_both_ways(gz);
  assert_int_equal(o.events, 40000);
  free(o.json);
  unlink(gz);
  unlink(path);
  free(p);
}

static void test_broken_files_same_error(void **state) {
  (void)state;
  size_t n;
  char *p = big_trace(2000, 10, &n);
  char path[] = "/tmp/loom-tape-bad-XXXXXX.json";
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  close(fd);
  size_t errors = 0;
  /* truncated anywhere */
  for (size_t cut = 1; cut < n; cut += n / 97) {
    write_file(path, p, cut);
    outcome o = same_both_ways(path);
    errors += o.st != LOOM_OK;
    free(o.json);
  }
  /* a byte that breaks the JSON, at places across the file */
  for (size_t at = 20; at < n; at += n / 31) {
    char keep = p[at];
    p[at] = '}';
    write_file(path, p, n);
    outcome o = same_both_ways(path);
    errors += o.st != LOOM_OK;
    if (o.st == LOOM_EFORMAT) assert_non_null(strstr(o.err, "byte offset"));
    free(o.json);
    p[at] = keep;
  }
  /* corrupt compressed data */
  char gz[sizeof path + 3];
  snprintf(gz, sizeof gz, "%s.gz", path);
  gzFile z = gzopen(gz, "wb");
  assert_int_equal(gzwrite(z, p, (unsigned)n), (int)n);
  gzclose(z);
  size_t zn;
  char *zp = slurp(gz, &zn);
  for (size_t i = zn / 2; i < zn / 2 + 64 && i < zn; i++) zp[i] ^= 0x5a;
  write_file(gz, zp, zn);
  outcome o = same_both_ways(gz);
  assert_int_not_equal(o.st, LOOM_OK);
  assert_non_null(strstr(o.err, "compressed"));
  errors++;
  free(zp);
  unlink(gz);
  unlink(path);
  free(p);
  print_message("%zu broken files: the same error both ways\n", errors);
  assert_true(errors > 100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_test_trace),
      cmocka_unit_test(test_big_tokens_and_files),
      cmocka_unit_test(test_broken_files_same_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
