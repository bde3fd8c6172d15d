/*
 * preload_id.h - who a process under `loom record` is (command line,
 * program, rank) and where its files go; see preload_id.c.
 */
#ifndef LOOM_PRELOAD_ID_H
#define LOOM_PRELOAD_ID_H
#include <stddef.h>

/* argv joined by spaces (from /proc/self/cmdline). */
void loom__rec_cmdline(char *out, size_t n);
/* LOOM_RECORD_DIR/<pid><suffix> (.arena: in LOOM_RECORD_ARENAS when set);
 * -1 when there is no such folder. */
int loom__rec_file(char *out, size_t n, const char *suffix);
/* Where this process's trace goes: LOOM_RECORD_TRACEDIR/<program>-<pid>
 * [-rank<R>]<LOOM_RECORD_EXT>, else LOOM_RECORD_OUTPUT, else
 * loom-trace.json. */
const char *loom__rec_trace_path(char *out, size_t n);
/* Writes LOOM_RECORD_DIR/<pid>.started (the command line). */
void loom__rec_mark_started(void);
/* Session options: user (may be NULL) then the labels of this process
 * (meta.pid, meta.command_line, meta.hostname, meta.rank, meta.world_size,
 * process_name); -1 when they do not fit. */
int loom__rec_options(char *out, size_t n, const char *user);
/* The rank from the launcher's environment (NULL: none); the program name
 * (argv[0]'s last component, safe in a file name). */
const char *loom__rec_rank(void);
void loom__rec_program(char *out, size_t n);
/* preload.c: the process is about to exec (preload_exec.c): the ending
 * image's trace is written (when it recorded anything) and named in
 * <pid>.exec for loom record; after a failed exec, recording goes on. */
void loom__rec_before_exec(void);
void loom__rec_exec_failed(void);

#endif
