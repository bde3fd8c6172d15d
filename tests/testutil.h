/*
 * testutil.h - helpers shared by the tests: a configurable in-process fake
 * backend (failure injection, REALTIME clock, immediate emission) and the
 * bridge to Perfetto's trace_processor (tests/tp/tp.mjs) for checking
 * written traces with a real consumer.
 */
#ifndef LOOM_TESTUTIL_H
#define LOOM_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "loom/plugin.h"

enum { FAKE_FAIL_PROBE = 1, FAKE_FAIL_CONFIGURE = 2, FAKE_FAIL_START = 4 };

/* Registers fake backend number i (0..3) for device type `type`. */
loom_status fake_register(int i, const char *name, const char *type, int fail);
/* A host runtime call on the calling thread and, launched by it, one kernel
 * of dur_ns on queue q (0/1) of the fake device, starting 1 us after the
 * call ends or when the queue's previous kernel ends (queues run one kernel
 * at a time).  Both are in CLOCK_REALTIME.  Returns the correlation id. */
uint64_t fake_launch(int i, int q, const char *kernel, uint64_t dur_ns);
/* Registration counters of fake i (probe/configure/start/stop/flush calls). */
typedef struct fake_calls { int probe, configure, start, stop, flush, destroy, push, pop; } fake_calls;
fake_calls fake_get_calls(int i);
const loom_backend_ops *fake_ops(int i);
/* Emits r as fake i's record named name (its clock set here; its time now
 * when r->start is 0); emit's status. */
loom_status fake_emit(int i, const char *name, loom_record *r);
/* Records *m as fake i's memory record named name through host->memory
 * (ABI 1.6): fast, on a clock in the recorder's domain (the host record
 * way when the session records the host); else on its realtime clock
 * (emit's way).  Its status. */
loom_status fake_memory(int i, const char *name, int fast, loom_memory_event *m);
/* Fake i's device (device_add's index). */
uint32_t fake_device(int i);
/* The backend counts n records lost for reason (host->count_lost). */
void fake_lost(int i, uint64_t n, const char *reason);

/* Creates and starts a session (asserting success). */
loom_session *ts_start(const char *devices, const char *options);
/* Stops and destroys it, returning the trace (asserting success). */
loom_trace *ts_finish(loom_session *s);
/* 1 when a warning of the trace contains a (and b, unless NULL). */
int ts_warned(const loom_trace *t, const char *a, const char *b);

/* The two ends of flow i (asserting it exists). */
void ts_flow(const loom_trace *t, size_t i, loom_event_view *from, loom_event_view *to);

/* Saves t as JSON to a temporary file and tells whether the file contains
 * needle (the file is removed). */
int ts_saved_contains(const loom_trace *t, const char *needle);

/* ---- programs under test ------------------------------------------------ */
/* Runs a shell command; its stdout goes to *out (heap, caller frees; NULL
 * to drop it).  Returns the wait status. */
int ts_run(const char *cmd, char **out);
/* Loads a trace file (the test fails with loom's message otherwise). */
loom_trace *ts_load(const char *path);
/* `loom_bin record -o TRACE -- app args` (TRACE a new temporary path, into
 * trace[n]); asserts it exited 0 and returns the loaded trace.  The
 * program's stdout goes to *out when out is not NULL. */
loom_trace *ts_record_program(const char *loom_bin, const char *app, const char *args,
                              char *trace, size_t n, char **out);

/* Events of an annotation trace by phase, and how many carry each of the
 * NULL-terminated names (with the category cats[k], unless NULL); the
 * window-end marker is not counted. */
typedef struct ts_tally {
  size_t ranges, async, instants, other_kinds;
  size_t named[8];
  int64_t tid[8];
} ts_tally;
ts_tally ts_count_annotations(const loom_trace *t, const char *const *names,
                              const char *const *cats);

/* Runs SQL on a trace in trace_processor; returns the first column of the
 * first row as an integer (aborts the test on failure). */
long long tp_int(const char *trace, const char *sql);
/* Runs n single-value queries in one trace_processor run. */
void tp_ints(const char *trace, const char *const *sqls, long long *out, size_t n);
/* Same, as a string into buf (NULL value gives ""). */
void tp_str(const char *trace, const char *sql, char *buf, size_t n);
/* Number of rows in stats with errors or data loss (must be 0). */
long long tp_errors(const char *trace);
/* 1 when trace_processor is set up (LOOM_TP_DIR), else skips the test. */
void tp_require(void);

/* A temporary file path (in $TMPDIR or /tmp) ending with suffix, naming
 * nothing that exists. */
void tmp_path(char *buf, size_t n, const char *suffix);
/* Whole file into a heap string (NULL on failure). */
char *read_file(const char *path, size_t *len);

#endif
