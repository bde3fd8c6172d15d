/*
 * done.h - the lines a recorded process leaves for `loom record`, one per
 * trace it wrote or could not write: <pid>.done (its trace, its windows,
 * or why there is none) and <pid>.exec (the traces of its images that
 * ended by exec), written by loom-preload.so (and by loom record itself
 * for a trace it rebuilt) and read by loom record's summary and merge
 * (follow.c, follow_exec.c).  Each line is one of:
 *
 *   "EVENTS FLOWS DEVICES DROPPED WARNINGS\tTRACE"             a trace written
 *   "window SEQ EVENTS FLOWS DEVICES DROPPED WARNINGS\tTRACE"  window SEQ written
 *   "failed\tMESSAGE"   its save failed; MESSAGE says why ("to write X: why")
 *   "none\tMESSAGE"     window mode: no window was recorded
 *
 * Numbers are decimal, separated by one space; TRACE and MESSAGE run from
 * the first tab to the end of the line.  Both sides are built from the
 * same tree, so the format has no version of its own.
 */
#ifndef LOOM_DONE_H
#define LOOM_DONE_H
#include <stddef.h>

typedef enum done_kind {
  DONE_BAD,    /* none of the forms above */
  DONE_TRACE,  /* a trace written */
  DONE_WINDOW, /* a window written */
  DONE_FAILED, /* "failed\t" */
  DONE_NONE    /* "none\t" */
} done_kind;

typedef struct done_line {
  done_kind kind;
  unsigned seq; /* DONE_WINDOW: the window's number (from 1); else 0 */
  unsigned long long events, flows, devices, dropped, warnings; /* else 0 */
  const char *text; /* what follows the first tab, in the line read (TRACE
                       or MESSAGE); NULL when the line has no tab */
} done_line;

/* Reads one line, which ends at its NUL or its first '\n'.  d->text points
 * into line and runs to the string's end: a caller that needs TRACE alone
 * cuts the line at its newline first.  Returns d->kind; a line without a
 * tab is DONE_BAD. */
done_kind done_parse(const char *line, done_line *d);

/* The line (no newline) of a trace (d->kind DONE_TRACE) or a window
 * (DONE_WINDOW, d->seq) written to d->text, into buf.  The length it needed,
 * as snprintf. */
int done_format(char *buf, size_t n, const done_line *d);
#endif
