/*
 * plain.c - the workload as a program compiled against a loom.h without the
 * inline idle check calls loom: every recording call a call into libloom
 * (LOOM_NO_INLINE_CHECK), which decides for itself.
 */
#define LOOM_NO_INLINE_CHECK
#define WORKLOAD workload_plain
#define WORKLOAD_FMT fmt_plain
#define WORKLOAD_STEP step_plain
#include "workload.h"
#ifdef loom_range_push
#error "LOOM_NO_INLINE_CHECK left loom_range_push a macro"
#endif
