/*
 * libloom.h - the Kineto bridge's view of libloom: the public C functions
 * it calls (loom.h), reached through dlopen/dlsym so that the bridge loads
 * where libloom cannot be found.  There it says so once, on stderr and in
 * loom_kineto_register's status, and Kineto goes on without it.
 */
#ifndef LOOM_KINETO_LIBLOOM_H
#define LOOM_KINETO_LIBLOOM_H

#include <loom/loom.h>

#include <string>

namespace loom_kineto {

struct Loom {
  decltype(&loom_strerror) strerror;
  decltype(&loom_last_error) last_error;
  decltype(&loom_init) init;
  decltype(&loom_backends_list) backends_list;
  decltype(&loom_session_create) session_create;
  decltype(&loom_session_start) session_start;
  decltype(&loom_session_stop) session_stop;
  decltype(&loom_session_destroy) session_destroy;
  decltype(&loom_session_warning_count) session_warning_count;
  decltype(&loom_session_warning) session_warning;
  decltype(&loom_trace_free) trace_free;
  decltype(&loom_trace_save) trace_save;
  decltype(&loom_trace_summarize) trace_summarize;
  decltype(&loom_trace_event_count) trace_event_count;
  decltype(&loom_trace_event) trace_event;
  decltype(&loom_trace_event_args) trace_event_args;
  decltype(&loom_trace_flow_count) trace_flow_count;
  decltype(&loom_trace_flow) trace_flow;
  decltype(&loom_trace_warning_count) trace_warning_count;
  decltype(&loom_trace_warning) trace_warning;
  decltype(&loom_trace_process_count) trace_process_count;
  decltype(&loom_trace_process) trace_process;
  decltype(&loom_trace_track_count) trace_track_count;
  decltype(&loom_trace_track) trace_track;
  decltype(&loom_trace_device_count) trace_device_count;
  decltype(&loom_trace_device) trace_device;
  decltype(&loom_trace_meta_count) trace_meta_count;
  decltype(&loom_trace_meta) trace_meta;
  decltype(&loom_string_id_of) string_id_of;
  decltype(&loom_op_begin_id) op_begin_id;
  decltype(&loom_op_end) op_end;
  decltype(&loom_range_push_id) range_push_id;
  decltype(&loom_range_pop) range_pop;
};

/* libloom's functions, loaded on the first call (thread-safe); NULL when
 * libloom cannot be loaded or lacks one of them, with the reason in *why. */
const Loom *loom(std::string *why);

} // namespace loom_kineto

#endif
