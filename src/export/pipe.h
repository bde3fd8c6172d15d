/*
 * pipe.h - a streaming read's sinks on a thread of their own.
 *
 * A reader (pftrace_read.c, read_json.c) hands events to its sink in
 * batches, in the reading thread.  With a pipe the reader is given the
 * pipe's sinks instead: they copy the events, their arguments and the flow
 * ends into a batch, and a second thread calls the caller's sinks on it
 * while the reader reads on.  Two batches: the reader fills one while the
 * other is delivered, so memory stays bounded by two batches.
 *
 * The caller's sinks are given a mirror of the trace, not the reader's: its
 * strings (the same ids: new strings are copied over in id order with each
 * batch), processes, tracks and metadata as they were when the batch was
 * handed over, and its scalar fields.  Not its devices, warnings or events.
 * A sink that opts in (loom__sink.threaded) keeps no pointer into that
 * trace past the read: the mirror is freed by loom__pipe_end.
 */
#ifndef LOOM_EXPORT_PIPE_H
#define LOOM_EXPORT_PIPE_H

#include <stddef.h>

#include "trace/trace.h"

typedef struct loom__pipe loom__pipe;

/* Inputs at least this big (bytes on disk) go through a pipe when the sink
 * allows it and the process may run on two CPUs; SIZE_MAX: never.  Tests
 * set it. */
extern size_t loom__pipe_min;
/* Events and flow ends per batch at least (16384).  Tests set it. */
extern size_t loom__pipe_batch;

/* A pipe to sink and flows (may be NULL), its thread started; NULL when
 * none could be had (then stream to the sinks directly). */
loom__pipe *loom__pipe_new(const loom__sink *sink, const loom__flow_sink *flows);
/* The sinks the reader is given. */
const loom__sink *loom__pipe_sink(loom__pipe *p);
const loom__flow_sink *loom__pipe_flows(loom__pipe *p);
/* After the read: with t (the reader's trace, a read that succeeded) hands
 * over the last batch and waits until it is delivered; with t NULL drops
 * what was not delivered.  Frees the pipe.  0, or -1 when a sink failed
 * (or out of memory). */
int loom__pipe_end(loom__pipe *p, const loom_trace *t);

#endif
