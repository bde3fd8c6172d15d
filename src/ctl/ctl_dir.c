/*
 * ctl_dir.c - the private runtime folder that holds the control sockets
 * (see ctl.h); used by the server in loom-preload.so and by `loom trigger`.
 * Both check the folder before use, so neither side talks through a folder
 * another user made or can write to; both name the same fallback (in the
 * user's home) when another user made /tmp/loom-<uid> first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"

/* uid's home folder; 0, or -1. */
static int home_of(uid_t uid, char *out, size_t n) {
  struct passwd pw, *r = NULL;
  char buf[4096];
  const char *env = getenv("HOME");
  if (uid == geteuid() && env && *env == '/') return snprintf(out, n, "%s", env) < (int)n ? 0 : -1;
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &r) != 0 || !r || !r->pw_dir || *r->pw_dir != '/')
    return -1;
  return snprintf(out, n, "%s", r->pw_dir) < (int)n ? 0 : -1;
}

void loom__ctl_dir_name(char *out, size_t n, const char *xdg, uid_t uid) {
  if (xdg && *xdg == '/') {
    snprintf(out, n, "%s/loom", xdg);
    return;
  }
  snprintf(out, n, "/tmp/loom-%u", (unsigned)uid);
  /* Another user made /tmp/loom-<uid> first (anyone may create a name in
   * /tmp): refused, said once, and the folder is in uid's home instead,
   * where no one else can make it. */
  struct stat st;
  char home[4096];
  if (lstat(out, &st) != 0 || (S_ISDIR(st.st_mode) && st.st_uid == uid)) return;
  if (home_of(uid, home, sizeof home) != 0) return; /* refused later, by the check */
  static _Atomic int said;
  if (!atomic_exchange(&said, 1))
    fprintf(stderr, "loom: %s %s uid %u (made by another user first): not used; the trigger "
            "sockets of uid %u are in %s/.loom-run instead\n", out,
            S_ISDIR(st.st_mode) ? "is a folder of" : "is not a folder, and belongs to",
            (unsigned)st.st_uid, (unsigned)uid, home);
  snprintf(out, n, "%s/.loom-run", home);
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
