/*
 * fuzz.h - what every fuzz target shares: the entry point libFuzzer calls
 * (also called by replay.c, the driver the ordinary suite builds with any
 * compiler), a check that aborts with a message (a finding), and input
 * files in a private temporary folder for the readers that take a path.
 */
#ifndef LOOM_FUZZ_H
#define LOOM_FUZZ_H
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise: the message on stderr, then abort() (libFuzzer keeps
 * the input as a crash). */
#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) loom_fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);       \
  } while (0)
_Noreturn void loom_fuzz_fail(const char *file, int line, const char *cond, const char *fmt,
                              ...);

/* The path of a file named name in this process's temporary folder (made
 * once, removed at exit), holding data[0..size). NULL on an I/O failure. */
const char *loom_fuzz_file(const char *name, const void *data, size_t size);
/* The path name would have there (nothing written). */
const char *loom_fuzz_path(const char *name);
/* data as a NUL-terminated string (malloc'd; NULs inside end it early). */
char *loom_fuzz_str(const uint8_t *data, size_t size);
/* Number of events loom_trace_load reads from path, or -1 when it fails. */
long loom_fuzz_count(const char *path);
/* Every event, flow and warning of a trace that loaded is readable. */
void loom_fuzz_check_events(const void *trace);
/* A trace that loaded: saves it as JSON and as pftrace, loads each again
 * and checks the event, flow and warning counts survive. */
void loom_fuzz_round_trip(const void *trace);
/* Several files in one input: the parts between LOOM_FUZZ_SEP lines (the
 * dictionaries name it).  Up to max parts; the number found. */
#define LOOM_FUZZ_SEP "\n#loom-fuzz-next#\n"
size_t loom_fuzz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len,
                       size_t max);
/* The whole file at path (malloc'd, NUL-terminated), its length in *n. */
char *loom_fuzz_read(const char *path, size_t *n);
#endif
