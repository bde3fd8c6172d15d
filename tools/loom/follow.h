/*
 * follow.h - `loom record` follows every process the program starts: a
 * private session folder the processes write their traces and markers into,
 * waiting for every descendant, the per-process summary and the merge.
 */
#ifndef LOOM_FOLLOW_H
#define LOOM_FOLLOW_H
#include <limits.h>
#include <sys/types.h>

typedef struct loom_follow {
  char dir[PATH_MAX];   /* session folder (markers; traces unless to_dir) */
  char arenas[PATH_MAX]; /* the processes' <pid>.arena: a folder in tmpfs, or dir */
  char out[PATH_MAX];   /* -o: the merged trace, or the folder of traces */
  int to_dir;           /* -o DIR/: one trace per process, kept there */
  struct { pid_t pid; int status; } *ended; /* descendants loom record reaped */
  size_t nended, cap;
  long long oom_kills;  /* the kernel's OOM kills at start (-1: unknown) */
  const char *asked;    /* --devices as given, or NULL (the default list) */
} loom_follow;

/* Checks --follow (none|exec|all), makes the session folder, becomes a child
 * subreaper and sets the environment the preload reads.  0, or 2 after a
 * message. */
int loom__follow_setup(loom_follow *f, const char *out, const char *mode);
/* Waits for top, then for every descendant still running (orphans come to
 * loom record).  Returns top's wait status.  fwd: signals received are
 * forwarded to top by the caller's handler. */
int loom__follow_wait(loom_follow *f, pid_t top);
/* Removes the folders setup made (a run refused before the program). */
void loom__follow_abandon(loom_follow *f);
/* Prints the summary (one line per process, the ones that wrote no trace
 * named), rebuilds the traces of processes that wrote none from their
 * arenas, merges the traces into the -o file (or keeps them in -o DIR/) and
 * removes the session and arenas folders.  A trace that cannot be written
 * (disk full, no permission, a failed merge) loses nothing: every record
 * is kept in a folder `loom salvage` reads (kept.h), the command is
 * printed and 1 is returned; else 0.  prog: the program, for messages. */
int loom__follow_finish(loom_follow *f, const char *prog, int top_status, pid_t top);
#endif
