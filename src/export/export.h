/*
 * export.h - the export layer's readers and writers of whole traces and of
 * streams of events: Chrome/Kineto JSON (plain or gzip), CPU samples in
 * it, and loom's Perfetto protobuf.  The trace model they read into and
 * write from, and the streaming sink a reader hands events to, are in
 * trace/trace.h; atomic output files in outfile.h.
 */
#ifndef LOOM_EXPORT_H
#define LOOM_EXPORT_H

#include <stdint.h>

#include "loom/loom.h"
#include "trace/trace.h"

struct loom__out;

/* ---- readers --------------------------------------------------------------- */
/* Reads a trace file: Chrome/Kineto JSON (plain or gzip) or loom's
 * .pftrace.  sink NULL: the whole trace into *out; else streamed (see
 * loom__sink in trace.h).  Errors name the file and offset. */
loom_status loom__read_json(const char *path, const struct loom__sink *sink,
                            const struct loom__flow_sink *flows, loom_trace **out);
loom_status loom__read_pftrace(const char *path, const struct loom__sink *sink,
                               const struct loom__flow_sink *flows, loom_trace **out);

/* Reads path (any format loom reads) into *meta (no events) through sink. */
loom_status loom__trace_stream(const char *path, const loom__sink *sink, loom_trace **meta);
/* The same, with the flow ends to flows (may be NULL). */
loom_status loom__trace_stream_flows(const char *path, const loom__sink *sink,
                                     const loom__flow_sink *flows, loom_trace **meta);

/* ---- writers --------------------------------------------------------------- */
/* Writes Perfetto protobuf. */
loom_status loom__write_pftrace(const loom_trace *t, const char *path);
loom_status loom__write_pftrace_gz(const loom_trace *t, const char *path); /* .pftrace.gz */

/* CPU samples in Chrome JSON (json_samples.c): the top-level "stackFrames"
 * and "samples" keys (each followed by ",\n") for t's LOOM_KIND_SAMPLE
 * events, times relative to base; and, for a reader, those keys of t->top
 * turned into sample events (ts without the file's base) and removed from
 * top.  0, or -1 when out of memory. */
struct loom__out;
int loom__json_samples_write(const loom_trace *t, struct loom__out *o, int64_t base);
int loom__json_samples_read(loom_trace *t);
/* The same for a stream of events (loom merge): samples added as they pass
 * (a LOOM_KIND_SAMPLE event with its "stack" argument, 0 or -1 when out of
 * memory), the two keys written at the end like loom__json_samples_write. */
typedef struct loom__jsamples loom__jsamples;
loom__jsamples *loom__jsamples_new(void);
int loom__jsamples_add(loom__jsamples *c, const loom_trace *t, const loom__ev *e,
                       const loom__targ *args);
void loom__jsamples_write(const loom__jsamples *c, struct loom__out *o, int64_t base);
void loom__jsamples_free(loom__jsamples *c);

/* Writes Chrome trace JSON (Kineto conventions) to path, atomically;
 * gzip >= 0 compresses at that zlib level. */
loom_status loom__write_chrome_json(const loom_trace *t, const char *path, int gzip);
/* 1: loom__write_chrome_json formats every event on the calling thread
 * (tests compare it with the two threads' text). */
extern int loom__json_one_thread;
/* The JSON writer's top-level keys of t (deviceProperties, metadata, other
 * top-level values, loom_dropped, loom_warnings, displayTimeUnit, traceName)
 * as one JSON object into mem (a memory loom__out; src/export/outfile.h):
 * how .pftrace carries them.  0, or -1 when out of memory. */
int loom__json_header(const loom_trace *t, struct loom__out *mem);
/* Reads such an object (or any top-level JSON object without events) into
 * t, as the JSON reader reads a file's top-level keys.  path names the file
 * in errors; 0, -1 (bad JSON: message in loom_last_error) or -2 (no memory). */
int loom__read_json_header(loom_trace *t, const char *path, const char *text, size_t n);

/* The same JSON written as a stream, for outputs never held whole (loom
 * merge): open writes the header from t's metadata, processes, tracks and
 * devices (every string an event will use must be in t by then); events
 * and flow ends follow in any order (trace_processor sorts them); close
 * writes t's warnings (also those added meanwhile) and commits, abort
 * removes the output.  Flow ends: name/cat 0 = "ac2g"; a message is both
 * ends, category "<cat>_message" (cat: the sending call's category id),
 * the end bound as loom__write_chrome_json does. */
typedef struct loom__jstream loom__jstream;
loom_status loom__jstream_open(loom__jstream **out, const loom_trace *t, const char *path,
                               int gzip);
void loom__jstream_event(loom__jstream *s, const loom__ev *e, const loom__targ *args);
void loom__jstream_flow(loom__jstream *s, char ph, uint64_t id, uint32_t track, int64_t ts,
                        int bp_e, uint32_t name, uint32_t cat);
void loom__jstream_message(loom__jstream *s, uint64_t id, uint32_t cat, uint32_t from_track,
                           int64_t from_ts, uint32_t to_track, int64_t to_ts, int64_t to_dur);
loom_status loom__jstream_close(loom__jstream *s);
void loom__jstream_abort(loom__jstream *s);

#endif
