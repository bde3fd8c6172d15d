/*
 * test_ondemand.c - `loom trigger` on programs running under `loom record
 * --on-demand` (ondemand_app: steps of 20 ms, each a "step_work" range
 * holding two "inner" ranges):
 *   windows   a --duration window and a --steps window on one run: two
 *             files, the steps one with exactly 3 steps (3 ProfilerStep,
 *             3 step_work, 6 inner), the duration one no longer than asked;
 *             both 0 errors in trace_processor; a second trigger while a
 *             window runs is told busy; --list shows the program; a client
 *             waiting for a window the program ends before is told so;
 *   kineto    --config with Kineto's keys: ACTIVITIES_ITERATIONS and
 *             ACTIVITIES_LOG_FILE give that file with exactly those steps,
 *             PROFILE_START_ITERATION_ROUNDUP starts on a multiple, an
 *             unknown key is warned about by name;
 *   otheruid  as uid nobody: kept out by the folder's mode, and refused by
 *             the process itself (SO_PEERCRED) when past it with
 *             CAP_DAC_OVERRIDE (needs root and setpriv, else skipped);
 *   unknown   a pid not under loom, a pid that does not exist, a socket left
 *             by a killed process, and a process recording its whole run
 *             each get their message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../testutil.h"

static char dir[512];
static pid_t recorder; /* loom record */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Starts `loom record [--on-demand] -- ondemand_app STEPS 20 PIDFILE` and
 * returns the program's pid, once it runs. */
static long start_app_as(int steps, int on_demand) {
  char pidfile[600], out[600], nsteps[16];
  tmp_path(dir, sizeof dir, "-ondemand");
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(pidfile, sizeof pidfile, "%s/app.pid", dir);
  snprintf(out, sizeof out, "%s/run.json", dir);
  snprintf(nsteps, sizeof nsteps, "%d", steps);
  recorder = fork();
  assert_true(recorder >= 0);
  if (recorder == 0) {
    if (on_demand)
      execl(LOOM_BIN, LOOM_BIN, "record", "--on-demand", "-o", out, "--", ONDEMAND_APP, nsteps,
            "20", pidfile, (char *)NULL);
    else
      execl(LOOM_BIN, LOOM_BIN, "record", "-o", out, "--", ONDEMAND_APP, nsteps, "20", pidfile,
            (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 1000; i++) {
    FILE *f = fopen(pidfile, "r");
    long pid = 0;
    if (f && fscanf(f, "%ld", &pid) == 1 && pid > 0) {
      fclose(f);
      sleep_ms(100); /* its socket is opened before main; let it settle */
      return pid;
    }
    if (f) fclose(f);
    sleep_ms(10);
  }
  fail_msg("ondemand_app did not start");
  return -1;
}

static long start_app(int steps) { return start_app_as(steps, 1); }

static void end_app(void) {
  int st;
  assert_int_equal(waitpid(recorder, &st, 0), recorder);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* Runs `loom trigger ARGS` (stderr with stdout); the exit status. */
static int trigger(char **out, const char *fmt, ...) {
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "%s trigger %s 2>&1", LOOM_BIN, args);
  int st = ts_run(cmd, out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_in(const char *out, const char *needle) {
  if (!strstr(out, needle)) fail_msg("'%s' not in:\n%s", needle, out);
}

#define TP_ERRORS "select count(*) from stats where value > 0 and severity in ('error','data_loss')"

/* Exactly `steps` steps, each with its ranges, and 0 errors (one
 * trace_processor run). */
static void check_steps_file(const char *file, long long steps) {
  static const char *const q[] = {
      TP_ERRORS,
      "select count(*) from slice where name like 'ProfilerStep#%'",
      "select count(*) from slice where name = 'step_work'",
      "select count(*) from slice where name = 'inner'",
  };
  long long v[4];
  tp_ints(file, q, v, 4);
  assert_int_equal(v[0], 0);
  assert_int_equal(v[1], steps);
  assert_int_equal(v[2], steps);
  assert_int_equal(v[3], 2 * steps);
}

/* The checks in trace_processor come after the program ended: they take
 * seconds each, the windows are asked while it runs. */
static void test_windows(void **state) {
  (void)state;
  tp_require();
  long pid = start_app(300);
  char *out, dur[700], steps[700], longw[700], wrote[800];
  /* --list shows it, waiting */
  assert_int_equal(trigger(&out, "--list"), 0);
  char row[128];
  snprintf(row, sizeof row, "%ld ", pid);
  expect_in(out, row);
  expect_in(out, "ondemand_app");
  expect_in(out, "idle");
  free(out);
  /* a time window */
  snprintf(dur, sizeof dur, "%s/dur.json", dir);
  assert_int_equal(trigger(&out, "%ld --duration 0.3 -o %s", pid, dur), 0);
  snprintf(wrote, sizeof wrote, "wrote %s", dur);
  expect_in(out, wrote);
  free(out);
  /* a step window, asked at once after the first was written */
  snprintf(steps, sizeof steps, "%s/steps.json", dir);
  assert_int_equal(trigger(&out, "%ld --steps 3 -o %s", pid, steps), 0);
  snprintf(wrote, sizeof wrote, "wrote %s", steps);
  expect_in(out, wrote);
  free(out);
  /* a second trigger while one runs: busy, naming the window in progress */
  snprintf(longw, sizeof longw, "%s/long.json", dir);
  assert_int_equal(trigger(&out, "%ld --steps 25 --no-wait -o %s", pid, longw), 0);
  expect_in(out, "window armed");
  free(out);
  assert_int_equal(trigger(&out, "%ld --duration 0.1", pid), 1);
  expect_in(out, "busy");
  expect_in(out, "25 steps");
  free(out);
  assert_int_equal(trigger(&out, "--list"), 0);
  expect_in(out, "25 steps");
  free(out);
  /* a window the program ends before: the waiting client hears so (once
   * the 25 steps are written) */
  for (int i = 0; i < 1000 && access(longw, F_OK) != 0; i++) sleep_ms(10);
  sleep_ms(200);
  assert_int_equal(trigger(&out, "%ld --steps 2 --start-step 1000000", pid), 1);
  expect_in(out, "the program ended before the window did");
  free(out);
  end_app();
  static const char *const q[] = {
      TP_ERRORS,
      "select count(*) from slice where name = 'step_work'",
      "select max(ts + dur) - min(ts) from slice",
  };
  long long v[3];
  tp_ints(dur, q, v, 3);
  assert_int_equal(v[0], 0);
  assert_true(v[1] >= 5); /* 15 steps of 20 ms fit in 0.3 s */
  /* nothing from outside the window: it spans 0.3 s, give or take how late
   * the controller's timer thread wakes up on a loaded machine */
  if (v[2] < 150000000 || v[2] > 350000000) fail_msg("the 0.3 s window spans %lld ns", v[2]);
  check_steps_file(steps, 3);
  check_steps_file(longw, 25);
}

static void test_kineto(void **state) {
  (void)state;
  tp_require();
  long pid = start_app(300);
  char *out, file[700];
  snprintf(file, sizeof file, "%s/kineto.json", dir);
  assert_int_equal(trigger(&out, "%ld --config 'ACTIVITIES_ITERATIONS=2\\n"
                                 "ACTIVITIES_LOG_FILE=%s\\nNOT_A_KINETO_KEY=1'", pid, file), 0);
  expect_in(out, "warning: NOT_A_KINETO_KEY: unknown key");
  free(out);
  /* from a file, as dynolog sends it: the start rounded up to a multiple of 10 */
  char cfg[700], rfile[700];
  snprintf(cfg, sizeof cfg, "%s/on-demand.conf", dir);
  snprintf(rfile, sizeof rfile, "%s/roundup.json", dir);
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fprintf(f, "# a dynolog request\nACTIVITIES_ITERATIONS=3\nPROFILE_START_ITERATION=0\n"
             "PROFILE_START_ITERATION_ROUNDUP=10\nACTIVITIES_LOG_FILE=%s\n", rfile);
  fclose(f);
  assert_int_equal(trigger(&out, "%ld --config %s", pid, cfg), 0);
  free(out);
  /* a bad value: the key and the value, nothing sent */
  assert_int_equal(trigger(&out, "%ld --config 'ACTIVITIES_DURATION_MSECS=soon'", pid), 2);
  expect_in(out, "ACTIVITIES_DURATION_MSECS=soon: not a whole number");
  free(out);
  end_app();
  check_steps_file(file, 2);
  check_steps_file(rfile, 3);
  static const char *const q[] = {
      "select min(cast(substr(name, 14) as int)) from slice where name like 'ProfilerStep#%'",
      "select max(cast(substr(name, 14) as int)) from slice where name like 'ProfilerStep#%'",
  };
  long long v[2];
  tp_ints(rfile, q, v, 2);
  assert_true(v[0] > 0);
  assert_int_equal(v[0] % 10, 0);
  assert_int_equal(v[1], v[0] + 2);
}

static void test_other_uid(void **state) {
  (void)state;
  if (geteuid() != 0) {
    fprintf(stderr, "skipped: running as another uid needs root (this test runs as uid %u)\n",
            (unsigned)geteuid());
    skip();
  }
  char *out;
  if (ts_run("setpriv --reuid=65534 --regid=65534 --clear-groups " LOOM_BIN " version 2>&1",
             &out) != 0) {
    fprintf(stderr, "skipped: cannot run %s as uid 65534 with setpriv: %s\n", LOOM_BIN, out);
    free(out);
    skip();
  }
  free(out);
  long pid = start_app(60);
  /* root may */
  char cmd[1024], file[700];
  snprintf(file, sizeof file, "%s/root.json", dir);
  assert_int_equal(trigger(&out, "%ld --steps 1 -o %s", pid, file), 0);
  free(out);
  /* the folder keeps others out */
  snprintf(cmd, sizeof cmd, "setpriv --reuid=65534 --regid=65534 --clear-groups %s trigger %ld "
                            "--duration 0.1 2>&1", LOOM_BIN, pid);
  int st = ts_run(cmd, &out);
  assert_int_equal(WEXITSTATUS(st), 1);
  expect_in(out, "Permission denied");
  free(out);
  /* past the folder (CAP_DAC_OVERRIDE): the process itself refuses */
  snprintf(cmd, sizeof cmd, "setpriv --reuid=65534 --regid=65534 --clear-groups "
                            "--inh-caps=+dac_override --ambient-caps=+dac_override %s trigger "
                            "%ld --duration 0.1 2>&1", LOOM_BIN, pid);
  st = ts_run(cmd, &out);
  if (strstr(out, "setpriv:")) {
    fprintf(stderr, "skipped the refusal check: %s", out);
  } else {
    assert_int_equal(WEXITSTATUS(st), 1);
    char want[128];
    snprintf(want, sizeof want, "refused: uid 65534 may not control process %ld", pid);
    expect_in(out, want);
  }
  free(out);
  end_app();
}

static void test_unknown(void **state) {
  (void)state;
  char *out, want[256];
  /* a running process that is not under loom */
  pid_t c = fork();
  if (c == 0) {
    sleep(5);
    _exit(0);
  }
  assert_int_equal(trigger(&out, "%ld --steps 2", (long)c), 1);
  snprintf(want, sizeof want, "process %ld is not recording with loom: no socket in ", (long)c);
  expect_in(out, want);
  free(out);
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  /* no such process */
  assert_int_equal(trigger(&out, "%ld --steps 2", (long)c), 1);
  snprintf(want, sizeof want, "process %ld is not recording with loom: no such process", (long)c);
  expect_in(out, want);
  free(out);
  /* a socket a killed process left (pid c is gone): ignored, and --list removes it */
  char d[512], sock[600];
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg && *xdg) snprintf(d, sizeof d, "%s/loom", xdg);
  else snprintf(d, sizeof d, "/tmp/loom-%u", (unsigned)geteuid());
  mkdir(d, 0700);
  snprintf(sock, sizeof sock, "%s/%ld.sock", d, (long)c);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  assert_true(strlen(sock) < sizeof a.sun_path);
  memcpy(a.sun_path, sock, strlen(sock) + 1);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  close(fd);
  assert_int_equal(trigger(&out, "%ld --steps 2", (long)c), 1);
  expect_in(out, "is not recording with loom");
  free(out);
  assert_int_equal(trigger(&out, "--list"), 0);
  free(out);
  struct stat st;
  assert_int_equal(lstat(sock, &st), -1);
  assert_int_equal(errno, ENOENT);
  /* under loom record, recording the whole run: nothing to trigger, said so;
   * such a process serves no socket (no loom thread runs in it), so --list
   * does not show it */
  long pid = start_app_as(75, 0);
  assert_int_equal(trigger(&out, "%ld --steps 2", pid), 1);
  expect_in(out, "records its whole run under loom record: no session in window mode");
  free(out);
  assert_int_equal(trigger(&out, "--list"), 0);
  char row[64];
  snprintf(row, sizeof row, "%ld ", pid);
  assert_null(strstr(out, row));
  free(out);
  end_app();
  /* bad command lines */
  assert_int_equal(trigger(&out, "12x --steps 2"), 2);
  expect_in(out, "'12x' is not a process id");
  free(out);
  assert_int_equal(trigger(&out, "1 --steps 2 --duration 1"), 2);
  expect_in(out, "give one of them");
  free(out);
}

int main(int argc, char **argv) {
  const struct CMUnitTest all[] = {
      cmocka_unit_test(test_windows),
      cmocka_unit_test(test_kineto),
      cmocka_unit_test(test_other_uid),
      cmocka_unit_test(test_unknown),
  };
  const char *only = argc > 1 ? argv[1] : NULL;
  static const char *const names[] = {"windows", "kineto", "otheruid", "unknown"};
  if (only)
    for (size_t i = 0; i < 4; i++)
      if (!strcmp(only, names[i])) return _cmocka_run_group_tests(names[i], &all[i], 1, NULL, NULL);
  return cmocka_run_group_tests(all, NULL, NULL);
}
