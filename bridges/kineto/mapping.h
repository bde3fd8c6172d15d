/*
 * mapping.h - the one table between Kineto's activity types and loom's
 * record kinds (docs/kineto.md, "The mapping"): which loom kinds and
 * backends a requested set of Kineto types asks for, and which Kineto type
 * (so which JSON category) each event of loom's trace is logged as.
 */
#ifndef LOOM_KINETO_MAPPING_H
#define LOOM_KINETO_MAPPING_H

#include <ActivityType.h>
#include <loom/loom.h>

#include <cstdint>
#include <set>

namespace loom_kineto {

using libkineto::ActivityType;

/* What a requested set of Kineto activity types asks of loom. */
struct Request {
  std::set<ActivityType> types; /* as requested (empty: Kineto's defaults) */
  uint32_t device_kinds = 0;    /* device work asked for: a backend producing
                                   one of these starts a loom session */
  uint32_t session_kinds = 0;   /* what the loom session records */
};

Request request_of(const std::set<ActivityType> &types);

/* Whether a backend serving device_type that can emit kinds can produce
 * something req asks for ("cpu", the host recording, never does). */
bool backend_wanted(const Request &req, const char *device_type, uint32_t kinds);

/* The Kineto type event e is logged as, or ActivityType::ENUM_COUNT when
 * Kineto has none for it (loom's session markers, CPU samples). */
ActivityType type_of(const loom_event_view &e);

/* Whether a device record (kernel, copy, fill) is of this type. */
bool is_device_work(ActivityType t);

} // namespace loom_kineto

#endif
