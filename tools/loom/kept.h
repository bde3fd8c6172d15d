/*
 * kept.h - the records of a `loom record` run whose trace could not be
 * written (disk full, no permission, a failed merge), kept so that `loom
 * salvage` writes them elsewhere (kept.c; docs/survival.md).
 *
 * A kept run is one folder, loom-kept-<pid>-XXXXXX, in the shared-memory
 * folder (LOOM_SHM_DIR, default /dev/shm) or, where the arenas went to the
 * session folder, in $TMPDIR: the arenas of the processes whose trace was
 * not written (their complete records, host and device) and a manifest,
 * `kept`, naming them and the traces that were written but not merged
 * into the output (they stay in the session folder, named by path).
 */
#ifndef LOOM_TOOL_KEPT_H
#define LOOM_TOOL_KEPT_H
#include <limits.h>
#include <stddef.h>

#define KEPT_PREFIX "loom-kept-"
#define KEPT_MANIFEST "kept"

typedef struct kept_item {
  int pid;
  int arena;            /* 1: an arena to rebuild; 0: a trace written */
  char path[PATH_MAX];  /* an arena: its name in the kept folder; a trace: its path */
  char cmd[512];        /* the command line, for messages */
  char how[512];        /* an arena: how its process ended ("was killed by SIGKILL") */
} kept_item;

typedef struct kept {
  char dir[PATH_MAX];     /* the kept folder */
  char out[PATH_MAX];     /* the run's -o (a folder when to_dir) */
  int to_dir;
  char session[PATH_MAX]; /* the session folder kept for the traces in it, or "" */
  kept_item *v;
  size_t n, cap;
} kept;

/* Adds an item (how: NULL for a trace); 0, or -1 out of memory. */
int kept_add(kept *k, int pid, int arena, const char *path, const char *cmd, const char *how);
/* Writes the manifest into folder `at` (the arenas' folder) and renames
 * it loom-kept-...; k->dir is then the kept folder.  0, or -1 with a
 * message in err (the folder is then left as it is, named in k->dir). */
int kept_save(kept *k, const char *at, char *err, size_t nerr);
/* Reads a kept folder: its manifest, else every arena in it.  0, or -1
 * with a message in err. */
int kept_load(kept *k, const char *dir, char *err, size_t nerr);
/* The newest kept folder of this user, in the shared-memory folder or
 * $TMPDIR; *others: how many more there are.  0, or -1 when there is none. */
int kept_find(char *dir, size_t n, size_t *others);
/* s quoted for a shell where it needs it (for the command printed). */
void kept_quote(char *out, size_t n, const char *s);
void kept_free(kept *k);
#endif
