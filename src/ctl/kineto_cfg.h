/*
 * kineto_cfg.h - Kineto's on-demand configuration (what dynolog's
 * `dyno gputrace` sends a process: KEY=VALUE lines) read into a loom trigger
 * request, so such a request maps onto `loom trigger` one to one.
 *
 * Keys (Kineto's meaning, libkineto/src/Config.cpp):
 *   ACTIVITIES_DURATION_MSECS   a time window of that many ms (Kineto's
 *                               default when nothing else is asked: 500)
 *   ACTIVITIES_DURATION_SECS    the same in seconds
 *   ACTIVITIES_ITERATIONS       a step window of that many steps
 *   PROFILE_START_ITERATION     the first step of the window (>= 0)
 *   PROFILE_START_ITERATION_ROUNDUP
 *                               start on the next multiple of this step
 *   ACTIVITIES_WARMUP_ITERATIONS
 *                               steps between the request and the window
 *                               when the start step is already past
 *   ACTIVITIES_LOG_FILE         where the window's trace goes
 *   ACTIVITY_TYPES              comma-separated Kineto activity types,
 *                               mapped to loom record kinds
 * Every other key is warned about by name; a bad value is an error naming
 * the key and the value.
 */
#ifndef LOOM_KINETO_CFG_H
#define LOOM_KINETO_CFG_H
#include <stddef.h>
#include <stdint.h>

#include "loom/tools.h"

/* The request (its fields: loom/tools.h, where `loom trigger` reads them). */
typedef loom_tools_ondemand loom__ondemand;

/* An empty request: no window asked yet (start_step -1, the rest 0). */
void loom__ondemand_init(loom__ondemand *r);

typedef loom_tools_warn_fn loom__cfg_warn_fn;

/* Reads Kineto configuration text into *r (fields not named keep their
 * value).  Lines end with a newline or with the two characters "\n" (a
 * request given on a command line); blanks around keys and values, blank
 * lines and '#' comments are skipped; the last value of a key wins.  Then
 * applies Kineto's rules: a step window (ACTIVITIES_ITERATIONS) wins over a
 * time window; PROFILE_START_ITERATION_ROUNDUP alone starts at the next
 * multiple; neither steps nor a duration: 500 ms.  warn (may be NULL) gets
 * one message per key loom does not use or value it changes.  0, or -1 with
 * the first error in err ("KEY=VALUE: what is wrong"). */
int loom__kineto_parse(const char *text, loom__ondemand *r, loom__cfg_warn_fn warn, void *ud,
                       char *err, size_t nerr);

/* --config ARG: the contents of the file ARG when ARG names a readable file
 * and contains no '=', else ARG itself; then loom__kineto_parse. */
int loom__kineto_load(const char *arg, loom__ondemand *r, loom__cfg_warn_fn warn, void *ud,
                      char *err, size_t nerr);

/* The step a window starts on, as Kineto resolves it when the request
 * reaches a process whose next step to begin is `next`: the asked start if
 * it is still ahead (counting warmup), else next + warmup rounded up to a
 * multiple of roundup.  -1 when r asks for no start step. */
int64_t loom__ondemand_start(const loom__ondemand *r, int64_t next);
#endif
