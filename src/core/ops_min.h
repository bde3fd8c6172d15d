/*
 * ops_min.h - the smallest backend table loom accepts, shared by the
 * registry (registry.c) and `loom check-backend` (tools/loom/check.c, which
 * reads it from the tools table, loom/tools.h), so that the two say the
 * same size: an ABI 1.0 table, which ends with
 * pop_external.  Slots past a table's struct_size read as NULL (the copy
 * is zero-extended), so a 1.0 table's `enable` is never read.
 */
#ifndef LOOM_OPS_MIN_H
#define LOOM_OPS_MIN_H

#include <stddef.h>

#include "loom/plugin.h"

#define LOOM__OPS_MIN_SIZE (offsetof(loom_backend_ops, pop_external) + sizeof(void (*)(void)))

#endif
