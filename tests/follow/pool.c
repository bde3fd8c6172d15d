/*
 * pool.c - processes for the `loom record` follow tests.
 *   pool fork N     parent + N workers forked without exec; worker i records
 *                   (i+1)*10 instants "work" and a range, and ends with _exit;
 *                   the parent records 5 instants "parent"
 *   pool kill       like "fork 3", and worker 1 is killed by SIGKILL after
 *                   its records (before it can write them)
 *   pool spawn PROG ARGS  posix_spawn PROG, wait for it; 4 instants "spawner"
 *   pool leaf N     N instants "leaf", exit 0
 *   pool exit N     1 instant, exit status N
 *   pool signal     1 instant, killed by SIGTERM... by SIGKILL (no trace)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom/loom.h"

extern char **environ;

static void instants(const char *name, int n) {
  for (int k = 0; k < n; k++) loom_instant(name);
}

static int pool(int n, int kill_one) {
  pid_t kids[16];
  for (int i = 0; i < n && i < 16; i++) {
    kids[i] = fork();
    if (kids[i] < 0) return 1;
    if (kids[i] == 0) {
      loom_range_push("worker");
      instants("work", (i + 1) * 10);
      loom_range_pop();
      if (kill_one && i == 1) raise(SIGKILL);
      _exit(0);
    }
  }
  instants("parent", 5);
  int bad = 0;
  for (int i = 0; i < n && i < 16; i++) {
    int st;
    waitpid(kids[i], &st, 0);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !(kill_one && i == 1)) bad = 1;
  }
  return bad;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (!strcmp(argv[1], "fork") && argc > 2) return pool(atoi(argv[2]), 0);
  if (!strcmp(argv[1], "kill")) return pool(3, 1);
  if (!strcmp(argv[1], "leaf") && argc > 2) {
    instants("leaf", atoi(argv[2]));
    return 0;
  }
  if (!strcmp(argv[1], "exit") && argc > 2) {
    instants("exit", 1);
    return atoi(argv[2]);
  }
  if (!strcmp(argv[1], "signal")) {
    instants("signal", 1);
    raise(SIGKILL);
  }
  if (!strcmp(argv[1], "spawn") && argc > 2) {
    pid_t pid;
    if (posix_spawn(&pid, argv[2], NULL, NULL, argv + 2, environ) != 0) return 1;
    instants("spawner", 4);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  return 2;
}
