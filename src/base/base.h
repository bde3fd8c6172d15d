/*
 * base.h - the services every layer above util may use: errors and the
 * thread's last error message, logging, warning lists, warnings kept for the
 * next session, session options, and record kind names.  Nothing here knows
 * sessions, backends or traces.
 */
#ifndef LOOM_BASE_H
#define LOOM_BASE_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/loom.h"
#include "loom/plugin.h" /* loom_severity */

/* ---- errors and log ------------------------------------------------------ */
/* Sets the thread's last error message and returns status. */
loom_status loom__fail(loom_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void loom__clear_error(void);

/* Log levels follow loom_severity; LOOM_LOG=debug|info|warning|error|quiet
 * sets the threshold for stderr (default: warning). */
void loom__log(loom_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void loom__vlog(loom_severity sev, const char *fmt, va_list ap);

/* A list of warnings with its own lock. */
typedef struct loom__msgs {
  pthread_mutex_t mu;
  char **v;
  size_t n, cap;
} loom__msgs;
/* Formats a warning or error, prints it at that severity and appends it
 * (unless the list holds max). */
void loom__msgs_vadd(loom__msgs *m, size_t max, loom_severity sev,
                     const char *fmt, va_list ap);
void loom__msgs_free(loom__msgs *m);

/* A warning that is not tied to a session (plug-in loading, registration):
 * printed now and kept for the next session's trace, so none is lost. */
void loom__warn_pending(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Moves pending warnings to the caller (array of heap strings). */
char **loom__take_pending(size_t *n);

/* ---- options ------------------------------------------------------------ */
typedef struct loom__opts {
  char **keys, **vals;
  size_t n, cap;
} loom__opts;

/* Parses "k=v,k=v" (',' or ';').  LOOM_EINVAL with a message naming the
 * offending item on bad syntax. */
loom_status loom__opts_parse(loom__opts *o, const char *s);
void loom__opts_free(loom__opts *o);
/* Whether "NAME.KEY" is an option backend NAME declares (the registry's
 * answer, loom__backend_option_known); known: the ones it does. */
typedef int (*loom__backend_opt_fn)(const char *key, char *known, size_t cap);
/* LOOM_EINVAL naming an option key loom does not know: a key without a dot
 * that is not one of the core's, or NAME.KEY that backend_known refuses. */
loom_status loom__opts_check(const loom__opts *o, loom__backend_opt_fn backend_known);
/* Value of key: session option first, then environment LOOM_<KEY>. */
const char *loom__opts_get(const loom__opts *o, const char *key);
/* Parses a size with optional k/m/g suffix; -1 when malformed. */
int loom__parse_size(const char *s, uint64_t *out);

/* ---- kind names (kinds.c) ------------------------------------------------ */
/* "kernel,memcpy" for a LOOM_KIND_BIT mask, into buf. */
void loom__kinds_format(unsigned kinds, char *buf, size_t n);

#endif
