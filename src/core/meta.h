/*
 * meta.h - the process's metadata set with loom_meta_set (meta.c), as the
 * session's trace carries it and as the control socket answers `loom
 * trigger`'s info request with it (rank, program).
 */
#ifndef LOOM_META_H
#define LOOM_META_H

#include <stddef.h>

#include "loom/loom.h"

/* Writes loom_meta_set()'s process metadata into t (0, or -1 out of memory). */
int loom__meta_apply(loom_trace *t);
/* The value of key into buf: 0, or -1 when it is not set or does not fit
 * in n bytes. */
int loom__process_meta_get(const char *key, char *buf, size_t n);

#endif
