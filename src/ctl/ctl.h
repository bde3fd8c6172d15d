/*
 * ctl.h - the control socket of a process that accepts `loom trigger`
 * (under `loom record`, or a library user's session with on_demand=on):
 * where it lives (shared by the server in libloom and the `loom trigger`
 * client) and the server's entry points; loom-preload.so and the client
 * reach them through the tools table (loom/tools.h).
 *
 * One Unix stream socket per process, <dir>/<pid>.sock, in a private
 * runtime folder: $XDG_RUNTIME_DIR/loom, else /tmp/loom-<uid>; the folder
 * is created with mode 0700 and, before every use by either side, checked
 * to be a real folder (not a link) owned by the expected user with no
 * access for group or others.
 *
 * Protocol (text, one request per connection): the client sends
 *   "loom-ctl 1\n" then "KEY=VALUE\n" lines, then an empty line;
 * op=info or op=trigger (keys delay_ns, duration_ns, steps, start_step,
 * roundup, warmup, out, wait; kinds: a LOOM_KIND_BIT mask the window keeps,
 * 0 all; asked=0: no window was asked, only Kineto's default duration, so
 * a ring-mode process dumps all it holds).  The server answers lines that start with a
 * word: "info pid=.. program=.. rank=.. state=.. window=..", "armed WINDOW",
 * then (wait=1) "done FILE" or "failed WHY" when the window ends; or
 * "busy WHY", "refused WHY", "error WHY".
 */
#ifndef LOOM_CTL_H
#define LOOM_CTL_H
#include <stddef.h>
#include <sys/types.h>

#include "loom/tools.h" /* LOOM_TOOLS_CTL_MAGIC */

/* The runtime folder of user uid as this process would name it: from
 * xdg ($XDG_RUNTIME_DIR, may be NULL) or /tmp/loom-<uid>; when another user
 * made that (or it is not a folder), uid's home's .loom-run, said once on
 * stderr naming the refused folder. */
void loom__ctl_dir_name(char *out, size_t n, const char *xdg, uid_t uid);

/* Checks dir: a folder, not a symbolic link, owned by `owner`, no group or
 * other access.  create: make it (mode 0700) when missing.  0, or -1 with
 * why in err. */
int loom__ctl_dir_check(const char *dir, uid_t owner, int create, char *err, size_t nerr);

/* <dir>/<pid>.sock; -1 when it does not fit a socket address. */
int loom__ctl_sock_path(char *out, size_t n, const char *dir, long pid);

/* ---- the server (libloom; ctl.c) ------------------------------------------ */
/* Opens this process's socket and starts the thread that serves it
 * (requests go to the core's window controller, or dump the ring in ring
 * mode).  Failing is a warning: the program runs and records as it would
 * without.  A second call while this process serves is a no-op. */
void loom__ctl_start(void);
/* The session ends: the socket goes away; a client waiting for a window
 * hears why it will not come. */
void loom__ctl_stop(const char *why);
/* In a child forked without exec: the parent's socket and thread are not
 * this process's (closed, not removed). */
void loom__ctl_forked(void);
/* A window ended (called by whoever wrote it: the preload's window writer,
 * or the window controller's own, which src/session/entry.c hands this
 * function): out the file, ok 0 with why when it could not be written. */
void loom__ctl_window_done(const char *out, int ok, const char *why);
#endif
