/*
 * bench_trace.h - the generated trace bench_report and bench_diff analyse
 * (bench_trace.c).
 */
#ifndef LOOM_BENCH_TRACE_H
#define LOOM_BENCH_TRACE_H

#include <stddef.h>

/* Writes about n events to path (JSON); slow multiplies one kernel's
 * durations; with_memory adds memory events (their count to *memory when
 * not NULL).  Exits on a write error.  Returns the events written. */
size_t bench_write_kineto(const char *path, size_t n, int slow, int with_memory,
                          size_t *memory);

#endif
