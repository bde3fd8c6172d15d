/*
 * merge.c - loom_merge(): several traces into one timeline.
 * (Placeholder until the streaming merge lands: refuses clearly.)
 */
#include "core/core.h"

LOOM_EXTERN loom_status loom_merge(const loom_merge_config *cfg, loom_merge_result *result) {
  (void)cfg;
  (void)result;
  return loom__fail(LOOM_EUNSUPPORTED, "merging traces is not built yet");
}
