/*
 * preload_exec.c - loom-preload.so's exec: a process that replaces its
 * program (a worker forked without exec that then execs, a launcher, a
 * shell's `exec`) keeps the records it made before.  The image that ends
 * writes its trace first (preload.c, loom__rec_before_exec), the new image
 * records from its start as any process does, and loom record merges both.
 * If the exec fails, recording goes on in a new session.
 *
 * Every exec function of the C library is wrapped: glibc's own calls from
 * one to another (execvp to execve) do not go through these, so each is
 * needed.  A vfork child (posix_spawn's) shares its parent's memory and
 * records nothing: the check is by process id, in preload.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "preload_id.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

int execve(const char *path, char *const argv[], char *const envp[]) {
  loom__rec_before_exec();
  int rc = REAL("execve", execve_fn)(path, argv, envp);
  loom__rec_exec_failed();
  return rc;
}

int execv(const char *path, char *const argv[]) {
  loom__rec_before_exec();
  int rc = REAL("execv", execv_fn)(path, argv);
  loom__rec_exec_failed();
  return rc;
}

int execvp(const char *file, char *const argv[]) {
  loom__rec_before_exec();
  int rc = REAL("execvp", execv_fn)(file, argv);
  loom__rec_exec_failed();
  return rc;
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
  loom__rec_before_exec();
  int rc = REAL("execvpe", execve_fn)(file, argv, envp);
  loom__rec_exec_failed();
  return rc;
}

int fexecve(int fd, char *const argv[], char *const envp[]) {
  loom__rec_before_exec();
  int rc = REAL("fexecve", fexecve_fn)(fd, argv, envp);
  loom__rec_exec_failed();
  return rc;
}

/* The execl family: the arguments gathered into an array on the stack (as
 * glibc does), then the v form above. */
#define GATHER(first, ap, argv, envp_out)                                   \
  size_t n_ = 1;                                                            \
  va_start(ap, first);                                                      \
  while (va_arg(ap, char *)) n_++;                                          \
  va_end(ap);                                                               \
  char *argv[n_ + 1];                                                       \
  argv[0] = (char *)(first);                                                \
  va_start(ap, first);                                                      \
  for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, char *);        \
  envp_out;                                                                 \
  va_end(ap)

extern char **environ;

int execl(const char *path, const char *arg, ...) {
  va_list ap;
  GATHER(arg, ap, argv, (void)0);
  return execve(path, argv, environ);
}

int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  GATHER(arg, ap, argv, (void)0);
  return execvp(file, argv);
}

int execle(const char *path, const char *arg, ...) {
  va_list ap;
  char **envp = NULL;
  GATHER(arg, ap, argv, envp = va_arg(ap, char **));
  return execve(path, argv, envp);
}
