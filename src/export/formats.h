/*
 * formats.h - the trace formats loom reads and writes, in one table
 * (load.c): per file name ending, the reader of that content and the writer
 * that a name with that ending gets.  A file is read by its content (load.c
 * looks at its first bytes), whatever its name says; it is written by its
 * name's ending.
 */
#ifndef LOOM_FORMATS_H
#define LOOM_FORMATS_H

#include "trace/trace.h"

typedef loom_status (*loom__reader_fn)(const char *path, const struct loom__sink *sink,
                                       const struct loom__flow_sink *flows, loom_trace **out);
typedef loom_status (*loom__writer_fn)(const loom_trace *t, const char *path);

typedef struct loom__format {
  const char *ext;         /* the file name's ending */
  loom__reader_fn read;    /* reads this content */
  loom__writer_fn write;   /* writes a whole trace to a file of this name */
  int json;                /* the writer writes Chrome JSON (loom__jstream streams it too) */
  int gzip;                /* compressed */
} loom__format;

/* The format a file name asks for by its ending, or NULL. */
const loom__format *loom__format_of(const char *path);
/* The endings, for messages: ".json, .json.gz, .pftrace, .pftrace.gz". */
extern const char loom__format_exts[];

#endif
