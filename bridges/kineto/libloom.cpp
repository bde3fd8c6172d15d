/*
 * libloom.cpp - loads libloom for the Kineto bridge (libloom.h): the copy
 * already in the process if there is one (a program linked with it, `loom
 * record`'s preload, `import loom`), else libloom.so.0 found through the
 * bridge's RUNPATH and the usual search path.  Loaded RTLD_GLOBAL, so that
 * a vendor's plug-in loaded later finds the same loom (loom_plugin_attach).
 */
#include "libloom.h"

#include <dlfcn.h>

#include <mutex>

namespace loom_kineto {
namespace {

Loom table;
const Loom *loaded;
std::string failure;

template <typename F> bool sym(void *h, const char *name, F *out, std::string *why) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  if (*out) return true;
  *why = std::string("libloom lacks ") + name + " (a libloom older than this bridge)";
  return false;
}

#define SYM(field, name) sym(h, #name, &table.field, why)

bool resolve(void *h, std::string *why) {
  return SYM(strerror, loom_strerror) && SYM(last_error, loom_last_error) &&
         SYM(init, loom_init) && SYM(backends_list, loom_backends_list) &&
         SYM(session_create, loom_session_create) && SYM(session_start, loom_session_start) &&
         SYM(session_stop, loom_session_stop) && SYM(session_destroy, loom_session_destroy) &&
         SYM(session_warning_count, loom_session_warning_count) &&
         SYM(session_warning, loom_session_warning) && SYM(trace_free, loom_trace_free) &&
         SYM(trace_save, loom_trace_save) &&
         SYM(trace_summarize, loom_trace_summarize) &&
         SYM(trace_event_count, loom_trace_event_count) && SYM(trace_event, loom_trace_event) &&
         SYM(trace_event_args, loom_trace_event_args) &&
         SYM(trace_flow_count, loom_trace_flow_count) && SYM(trace_flow, loom_trace_flow) &&
         SYM(trace_warning_count, loom_trace_warning_count) &&
         SYM(trace_warning, loom_trace_warning) &&
         SYM(trace_process_count, loom_trace_process_count) &&
         SYM(trace_process, loom_trace_process) &&
         SYM(trace_track_count, loom_trace_track_count) && SYM(trace_track, loom_trace_track) &&
         SYM(trace_device_count, loom_trace_device_count) &&
         SYM(trace_device, loom_trace_device) && SYM(trace_meta_count, loom_trace_meta_count) &&
         SYM(trace_meta, loom_trace_meta) && SYM(string_id_of, loom_string_id_of) &&
         SYM(op_begin_id, loom_op_begin_id) && SYM(op_end, loom_op_end) &&
         SYM(range_push_id, loom_range_push_id) && SYM(range_pop, loom_range_pop);
}

void load() {
  void *h = dlopen("libloom.so.0", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (!h) h = dlopen("libloom.so.0", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char *e = dlerror();
    failure = std::string("libloom.so.0 cannot be loaded (") + (e ? e : "not found") +
              "); put loom's lib folder on LD_LIBRARY_PATH";
    return;
  }
  if (resolve(h, &failure)) loaded = &table;
}

} // namespace

const Loom *loom(std::string *why) {
  static std::once_flag once;
  std::call_once(once, load);
  if (!loaded && why) *why = failure;
  return loaded;
}

} // namespace loom_kineto
