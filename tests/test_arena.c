/*
 * test_arena.c - the shared-memory arena's allocator (src/record/arena.c,
 * docs/survival.md), in forked children (an arena cannot be turned off):
 *  - the file grows as a hole and each block is reserved when allocated:
 *    after 100,000 range pairs the file holds (st_blocks) no more than the
 *    records plus a small overhead, less than it spans; a process that dies
 *    without writing its trace is rebuilt from it with every range;
 *  - a full filesystem (RLIMIT_FSIZE stands in for it) is a failed
 *    allocation, never a SIGBUS: the records go on in malloc'ed chunks and
 *    the live trace holds every one;
 *  - in a process with threads of its own, loom's pager hands the recording
 *    threads chunks it made present ahead (src/record/pager.c): four threads
 *    recording at once keep every range, and a loom-pager thread ran (the
 *    ThreadSanitizer stage runs this too).
 * The arena goes in LOOM_SHM_DIR (default /dev/shm, where loom record puts
 * it; $TMPDIR when that is missing).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom/tools.h"
#include "testutil.h"
#include "harmless/pagers.h"

/* The shared-memory arena and its rebuild, as loom-preload and loom record
 * reach them. */
static int arena_begin(const char *path, const char *out) {
  return LOOM_TOOLS_GET()->arena_begin(path, out);
}
static loom_status salvage(const char *path, const char *death, loom_tools_salvage_result *r) {
  loom_tools_salvage_opts o = {.death = death};
  return LOOM_TOOLS_GET()->salvage_to(path, &o, r);
}

enum { PAIRS = 100000, REC = 32 };

static void arena_path(char *buf, size_t n) {
  const char *d = getenv("LOOM_SHM_DIR");
  struct stat st;
  if (!d || !*d) d = stat("/dev/shm", &st) == 0 ? "/dev/shm" : getenv("TMPDIR");
  snprintf(buf, n, "%s/loomtest-arena-%d.arena", d && *d ? d : "/tmp", (int)getpid());
}

static loom_session *start(void) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu",
                             .options = "buffer_size=256k,memory_cap=0"};
  loom_session *s = NULL;
  if (loom_session_create(&cfg, &s) || loom_session_start(s)) {
    fprintf(stderr, "child: %s\n", loom_last_error());
    _exit(3);
  }
  return s;
}

static void pairs(long n) {
  for (long i = 0; i < n; i++) {
    loom_range_push("a");
    loom_range_pop();
  }
}

/* Runs fn in a child; its exit status (a signal fails the test). */
/* The ranges pairs() recorded that trace t holds. */
static size_t ranges_a(const loom_trace *t) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    n += v.name && !strcmp(v.name, "a");
  }
  return n;
}

static int in_child(int (*fn)(const char *, const char *), const char *arena, const char *out) {
  fflush(NULL);
  pid_t c = fork();
  if (c == 0) _exit(fn(arena, out));
  int st = 0;
  waitpid(c, &st, 0);
  if (WIFSIGNALED(st)) {
    fail_msg("the child died of signal %d", WTERMSIG(st));
  }
  return WEXITSTATUS(st);
}

/* Records PAIRS pairs and dies without its trace, like a killed process. */
static int die_recording(const char *arena, const char *out) {
  if (arena_begin(arena, out) != 0) return 4;
  start();
  pairs(PAIRS);
  _exit(0);
}

static void test_holes_and_salvage(void **state) {
  (void)state;
  char arena[4096], out[4096];
  arena_path(arena, sizeof arena);
  tmp_path(out, sizeof out, ".json");
  assert_int_equal(in_child(die_recording, arena, out), 0);
  struct stat st;
  assert_int_equal(stat(arena, &st), 0);
  unsigned long long held = (unsigned long long)st.st_blocks * 512, recs = 2ull * PAIRS * REC;
  printf("arena: spans %lld bytes, holds %llu, records %llu\n", (long long)st.st_size, held, recs);
  assert_true(held >= recs);
  /* header, thread buffer, one partly filled chunk; in a process with
   * other threads (ThreadSanitizer's own) up to four chunks the pager made
   * ready as well */
  assert_true(held < recs + (2u << 20));
  assert_true(held < (unsigned long long)st.st_size); /* the segment ahead is not reserved */
  loom_tools_salvage_result r;
  assert_int_equal(salvage(arena, "was killed by SIGKILL", &r), LOOM_OK);
  assert_int_equal(r.ranges, PAIRS);
  assert_string_equal(r.out, out);
  tp_require();
  assert_int_equal(tp_int(out, "select count(*) from slice where name = 'a'"), PAIRS);
  assert_int_equal(tp_errors(out), 0);
  unlink(arena);
  unlink(out);
}

/* A filesystem that fills at 6 MiB: the arena's second segment cannot be
 * made; recording goes on in malloc'ed chunks. */
static int fill_up(const char *arena, const char *out) {
  (void)out;
  signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead */
  struct rlimit rl = {6u << 20, 6u << 20};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0 || arena_begin(arena, "/dev/null") != 0) return 4;
  loom_session *s = start();
  pairs(PAIRS); /* 6.4 MB of records */
  loom_trace *t = NULL;
  if (loom_session_stop(s, &t) != LOOM_OK) return 5;
  size_t n = ranges_a(t);
  printf("full filesystem: %zu of %d ranges in the live trace\n", n, PAIRS);
  fflush(stdout);
  struct stat st;
  int small = stat(arena, &st) == 0 && st.st_size <= (6 << 20);
  loom_trace_free(t);
  loom_session_destroy(s);
  unlink(arena);
  return n == PAIRS && small ? 0 : 6;
}

static void test_full_filesystem(void **state) {
  (void)state;
  char arena[4096];
  arena_path(arena, sizeof arena);
  assert_int_equal(in_child(fill_up, arena, NULL), 0);
}

enum { THREADS = 4 };

static void *recorder(void *arg) {
  pairs((long)(intptr_t)arg);
  return NULL;
}

/* THREADS threads record PAIRS pairs in all at once; every range in the
 * live trace, and the pager ran. */
static int paged(const char *arena, const char *out) {
  (void)out;
  if (arena_begin(arena, "/dev/null") != 0) return 4;
  loom_session *s = start();
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    if (pthread_create(&th[i], NULL, recorder, (void *)(intptr_t)(PAIRS / THREADS))) return 5;
  int seen = 0;
  for (int i = 0; i < 200 && !seen; i++) { /* while they record */
    seen = loom_test_pagers() == 1;
    if (!seen) usleep(1000);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  pairs(PAIRS); /* the main thread too, with the others gone */
  loom_trace *t = NULL;
  if (loom_session_stop(s, &t) != LOOM_OK) return 6;
  size_t n = ranges_a(t);
  printf("pager: %zu of %d ranges, loom-pager seen: %d\n", n, 2 * PAIRS, seen);
  fflush(stdout);
  loom_trace_free(t);
  loom_session_destroy(s);
  unlink(arena);
  return n == 2 * PAIRS && seen ? 0 : 7;
}

static void test_pager(void **state) {
  (void)state;
  char arena[4096];
  arena_path(arena, sizeof arena);
  assert_int_equal(in_child(paged, arena, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_holes_and_salvage),
      cmocka_unit_test(test_full_filesystem),
      cmocka_unit_test(test_pager),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
