/*
 * ctl_dir.c - the private runtime folder that holds the control sockets
 * (see ctl.h); used by the server in loom-preload.so and by `loom trigger`.
 * Both check the folder before use, so neither side talks through a folder
 * another user made or can write to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"

void loom__ctl_dir_name(char *out, size_t n, const char *xdg, uid_t uid) {
  if (xdg && *xdg == '/') snprintf(out, n, "%s/loom", xdg);
  else snprintf(out, n, "/tmp/loom-%u", (unsigned)uid);
}

int loom__ctl_dir_check(const char *dir, uid_t owner, int create, char *err, size_t nerr) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    if (errno != ENOENT || !create) {
      snprintf(err, nerr, "%s: %s", dir, strerror(errno));
      return -1;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
      snprintf(err, nerr, "cannot create %s: %s", dir, strerror(errno));
      return -1;
    }
    if (lstat(dir, &st) != 0) {
      snprintf(err, nerr, "%s: %s", dir, strerror(errno));
      return -1;
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(err, nerr, "%s is not a folder%s", dir,
             S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
    return -1;
  }
  if (st.st_uid != owner) {
    snprintf(err, nerr, "%s belongs to uid %u, not %u: not used", dir, (unsigned)st.st_uid,
             (unsigned)owner);
    return -1;
  }
  if (st.st_mode & 077) {
    snprintf(err, nerr, "%s has mode %03o (group or others may use it; it must be 0700): not used",
             dir, (unsigned)(st.st_mode & 0777));
    return -1;
  }
  return 0;
}

int loom__ctl_sock_path(char *out, size_t n, const char *dir, long pid) {
  struct sockaddr_un a;
  int k = snprintf(out, n, "%s/%ld.sock", dir, pid);
  return k > 0 && (size_t)k < n && (size_t)k < sizeof a.sun_path ? 0 : -1;
}
