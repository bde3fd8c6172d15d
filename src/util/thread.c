/*
 * thread.c - the one way loom starts a thread of its own inside a program
 * (timers, the control socket, ring dumps, the preload watcher, the map
 * snapshots of loom record): with every signal blocked, so that the
 * program's signals keep going to the program's threads, never to one of
 * loom's that neither expects nor handles them.  Compiled into libloom,
 * loom-preload.so and the command (each keeps its symbols hidden).
 */
#include <signal.h>

#include "util.h"

int loom__thread_start(pthread_t *th, void *(*fn)(void *), void *arg) {
  pthread_t own;
  pthread_attr_t at;
  if (pthread_attr_init(&at) != 0) return -1;
  if (!th) pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the mask */
  int rc = pthread_create(th ? th : &own, &at, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&at);
  return rc == 0 ? 0 : -1;
}
