/*
 * follow_int.h - what the two halves of `loom record`'s multi-process part
 * share: follow.c (the session folder, waiting, the summary, the merge) and
 * follow_keep.c (how a process ended, rebuilding its trace from its arena,
 * keeping every record when the output cannot be written).
 */
#ifndef LOOM_FOLLOW_INT_H
#define LOOM_FOLLOW_INT_H
#include <stddef.h>
#include <sys/types.h>

#include "follow.h"
#include "kept.h"

typedef struct proc {
  pid_t pid;
  int windows; /* wrote window files (or none), reported by windows_of */
  char cmd[512];
  char done[16384]; /* <pid>.done's lines, "" when none */
} proc;

/* The trace extension of an output name (.json when none is known). */
const char *follow_ext(const char *out);
/* The kernel's count of OOM kills in loom record's memory cgroup, or -1. */
long long follow_oom_kills(void);
/* How a process that wrote no trace ended, as a phrase after its name:
 * its save failed (failed: its .done message, "to write X: why") or it
 * died ("was killed by SIGKILL"). */
void follow_ended(const loom_follow *f, pid_t pid, pid_t top, int top_status, const char *failed,
                  char *how, size_t n);
/* Rebuilds p's trace from its arena into the session folder (-o FILE:
 * merged from there) or where it would have written it (-o DIR/), as its
 * .done line, and frees the arena; a line about it in msg.  0; -1: no arena
 * or nothing to rebuild (msg says why); -2: the trace could not be written,
 * the records are whole in its arena (for the caller to keep). */
int follow_rebuild(const loom_follow *f, proc *p, pid_t top, int top_status, const char *failed,
                   char *msg, size_t n);
/* Why pid wrote no trace, as far as loom record knows. */
void follow_why_lost(const loom_follow *f, pid_t pid, pid_t top, int top_status, char *out,
                     size_t n);
/* Removes a folder of plain files. */
void follow_rm_rf(const char *dir);
/* Moves a trace to `to`: rename, else a copy through a temporary file
 * renamed over it when whole (the mode: the umask's, never wider than the
 * file replaced).  0, or -1 with errno. */
int follow_move(const char *from, const char *to);
/* The output could not be written whole: every trace written (inputs, of
 * processes pids) and every arena already in k are kept in one folder and
 * the command that writes them elsewhere is printed; -o FILE never holds a
 * part of the run. */
void follow_keep_all(loom_follow *f, kept *k, const char **inputs, size_t ninputs,
                     const pid_t *pids, const char *prog, pid_t top);
/* Removes the control socket a killed process left. */
void follow_drop_socket(pid_t pid);
/* The traces a process's earlier images wrote before they exec'd
 * (follow_exec.c): how many (room the caller makes in its inputs), and
 * adding them as inputs of the merge (said on stderr when say).  Their
 * paths live in im until follow_exec_free.  Returns their events. */
typedef struct follow_images {
  const char **inputs;
  pid_t *pids;
  size_t *ninputs, cap;
  char **owned;
  size_t nowned;
} follow_images;
size_t follow_exec_count(const loom_follow *f, pid_t pid);
unsigned long long follow_exec_add(const loom_follow *f, const proc *p, int say,
                                   follow_images *im);
void follow_exec_free(follow_images *im);
#endif
