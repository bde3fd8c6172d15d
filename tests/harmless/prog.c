/*
 * prog.c - a program that does what loom must never disturb, writing what
 * it saw into files of its own (tests/harmless/harmless.sh compares them,
 * byte for byte, with a run without loom):
 *
 *   prog closefds DIR N   closes every descriptor from 3 up (as daemons and
 *                         Python's os.closerange do), opens 12 files in DIR
 *                         (they get the lowest numbers, where loom's were),
 *                         records N ranges (loom's buffers grow meanwhile),
 *                         writes to its files again, and lists its threads
 *   prog ids DIR          as root, as setpriv --reuid --regid does: keeps
 *                         its capabilities across setuid (a per-thread
 *                         flag), becomes uid 65534, raises its effective
 *                         capabilities again (per thread), then setgid
 *                         (glibc asks every thread to follow: one without
 *                         the capability fails it, and glibc aborts), and
 *                         writes who it is
 *   prog unshare DIR      unshare(CLONE_NEWUSER), which needs a process with
 *                         one thread, and writes the result
 *   prog pager DIR N [kill]  a program with a thread of its own (as a
 *                         device runtime has) that records N ranges: writes
 *                         how many loom-pager threads ran then, and after
 *                         1.5 s without recording; with "kill" it is killed
 *                         (SIGKILL) right after the ranges instead
 *
 * Each mode also writes the number of threads of the process: loom starts
 * none in a program that does not ask for one.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loom/loom.h"
#include "pagers.h"

static int threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

static void put(const char *dir, const char *name, const char *fmt, long v) {
  char path[4096], line[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) exit(3);
  int n = snprintf(line, sizeof line, fmt, v);
  if (write(fd, line, (size_t)n) != n) exit(3);
  close(fd);
}

static int closefds(const char *dir, long n) {
  struct rlimit r;
  getrlimit(RLIMIT_NOFILE, &r);
  for (long fd = 3; fd < (long)r.rlim_cur; fd++) close((int)fd);
  int fds[12];
  for (int i = 0; i < 12; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/f%02d", dir, i);
    fds[i] = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fds[i] < 0 || write(fds[i], "ok\n", 3) != 3) return 3;
  }
  for (long i = 0; i < n; i++) {
    loom_range_push("closefds");
    loom_range_pop();
  }
  for (int i = 0; i < 12; i++)
    if (write(fds[i], "again\n", 6) != 6 || close(fds[i]) != 0) return 3;
  put(dir, "threads", "%ld\n", threads());
  return 0;
}

/* The calling thread's effective capabilities set to its permitted ones. */
static int raise_caps(void) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) != 0) return -1;
  d[0].effective = d[0].permitted;
  d[1].effective = d[1].permitted;
  return (int)syscall(SYS_capset, &h, d);
}

static int ids(const char *dir) {
  if (geteuid() != 0) return 77;
  if (setgroups(0, NULL) != 0 || prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 ||
      setresuid(65534, 65534, 65534) != 0 || raise_caps() != 0 ||
      setresgid(65534, 65534, 65534) != 0) {
    put(dir, "ids", "failed: errno %ld\n", errno);
    return 1;
  }
  put(dir, "uid", "uid %ld\n", (long)getuid());
  put(dir, "gid", "gid %ld\n", (long)getgid());
  put(dir, "threads", "%ld\n", threads());
  return 0;
}

static int do_unshare(const char *dir) {
  int rc = unshare(CLONE_NEWUSER);
  put(dir, "unshare", "unshare: %ld\n", rc == 0 ? 0 : errno);
  put(dir, "threads", "%ld\n", threads());
  return rc == 0 ? 0 : 1;
}

static int quit_fd[2];

static void *waiter(void *arg) {
  char c;
  (void)arg;
  return read(quit_fd[0], &c, 1) < 0 ? NULL : NULL;
}

static int pager(const char *dir, long n, int die) {
  pthread_t th;
  if (pipe(quit_fd) != 0 || pthread_create(&th, NULL, waiter, NULL) != 0) return 3;
  for (long i = 0; i < n; i++) {
    loom_range_push("paged");
    loom_range_pop();
  }
  if (die) kill(getpid(), SIGKILL);
  put(dir, "pagers_recording", "%ld\n", loom_test_pagers());
  if (write(quit_fd[1], "q", 1) != 1 || pthread_join(th, NULL) != 0) return 3;
  usleep(1500 * 1000);
  put(dir, "pagers_idle", "%ld\n", loom_test_pagers());
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  if (!strcmp(argv[1], "closefds") && argc > 3) return closefds(argv[2], atol(argv[3]));
  if (!strcmp(argv[1], "ids")) return ids(argv[2]);
  if (!strcmp(argv[1], "unshare")) return do_unshare(argv[2]);
  if (!strcmp(argv[1], "pager") && argc > 3)
    return pager(argv[2], atol(argv[3]), argc > 4 && !strcmp(argv[4], "kill"));
  return 2;
}
