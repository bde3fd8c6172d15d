/*
 * fd.c - descriptors loom keeps open inside a program it records (the
 * shared-memory file, the control socket, signal pipes).  They are moved to
 * high numbers with close-on-exec, so that a program's own files do not get
 * them, and each remembers the file it is (device and inode): a program may
 * close every inherited descriptor (daemons do; Python's os.closerange) and
 * open its own files, which then get loom's numbers.  Before each use loom
 * checks that the number is still its file, and stops using it otherwise:
 * loom never writes into the program's files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Where kept descriptors go: 64 below the soft limit of open files (so a
 * program that opens files one after another meets them last), or half of
 * it for a small limit. */
static int high_base(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > 1u << 20)
    return 1000;
  int lim = (int)r.rlim_cur;
  return lim > 256 ? lim - 64 : lim / 2 > 10 ? lim / 2 : 10;
}

int loom__fd_keep(loom__fd *k, int fd) {
  k->fd = -1;
  if (fd < 0) return -1;
  int hi = -1;
  for (int base = high_base(); hi < 0 && base > fd; base /= 2)
    hi = fcntl(fd, F_DUPFD_CLOEXEC, base);
  if (hi >= 0) close(fd);
  else {
    hi = fd; /* no room up there: stays where it is, still close-on-exec */
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  struct stat st;
  if (fstat(hi, &st) != 0) {
    close(hi);
    return -1;
  }
  k->fd = hi;
  k->dev = (uint64_t)st.st_dev;
  k->ino = (uint64_t)st.st_ino;
  return 0;
}

int loom__fd_ok(const loom__fd *k) {
  struct stat st; /* fstat is async-signal-safe: the signal handlers use this */
  return k->fd >= 0 && fstat(k->fd, &st) == 0 && (uint64_t)st.st_dev == k->dev &&
         (uint64_t)st.st_ino == k->ino;
}

void loom__fd_close(loom__fd *k) {
  if (loom__fd_ok(k)) close(k->fd);
  k->fd = -1;
}
