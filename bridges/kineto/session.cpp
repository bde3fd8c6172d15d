/*
 * session.cpp - the life of one Kineto trace in loom (session.h): which
 * backends record it (make_session), start and stop with the trace, the
 * correlation ids Kineto pushes, and loom's warnings handed back through
 * errors() and the trace metadata.  processTrace and the device and queue
 * rows are in translate.cpp.
 */
#include "session.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace loom_kineto {
namespace {

/* A metadata value for Kineto's writer, which writes values as raw JSON
 * and turns every backslash into '/': a JSON string with no backslash
 * (quotes become ', control characters spaces). */
std::string json_quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') c = '\'';
    else if (c == '\\') c = '/';
    else if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> split(const char *list) {
  std::vector<std::string> out;
  std::string cur;
  for (const char *p = list;; p++) {
    if (!*p || *p == ',') {
      if (!cur.empty() && cur != "cpu") out.push_back(cur);
      cur.clear();
      if (!*p) break;
    } else if (*p != ' ') {
      cur += *p;
    }
  }
  return out;
}

struct Scan {
  const Request *req;
  std::vector<std::string> types;     /* device types wanted */
  std::vector<std::string> available; /* of those, with a backend that works */
  std::string unavailable;            /* "backend: reason; ..." */
};

void add_once(std::vector<std::string> &v, const char *s) {
  for (const auto &x : v)
    if (x == s) return;
  v.emplace_back(s);
}

void visit(const loom_backend_info *info, void *user) {
  Scan *sc = static_cast<Scan *>(user);
  if (!backend_wanted(*sc->req, info->device_type, info->kinds)) return;
  add_once(sc->types, info->device_type);
  if (info->state == LOOM_BACKEND_AVAILABLE) {
    add_once(sc->available, info->device_type);
  } else if (info->state == LOOM_BACKEND_UNAVAILABLE) {
    if (!sc->unavailable.empty()) sc->unavailable += "; ";
    sc->unavailable += std::string(info->name) + ": " + (info->reason ? info->reason : "");
  }
}

Scan scan(const Loom *L, const Request &req) {
  Scan sc{&req, {}, {}, {}};
  L->backends_list(visit, &sc);
  return sc;
}

loom_status create(const Loom *L, const Request &req, const std::vector<std::string> &types,
                   loom_session **out) {
  std::string devices = "cpu";
  for (const auto &t : types) devices += "," + t;
  loom_session_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.devices = devices.c_str();
  cfg.kinds = req.session_kinds;
  cfg.name = "kineto";
  return L->session_create(&cfg, out);
}

std::unique_ptr<Session> error_session(const Loom *L, const Request &req, loom_status st) {
  std::string msg = std::string("loom: no loom session for this trace (") + L->strerror(st) +
                    "): " + L->last_error();
  if (st == LOOM_EBUSY)
    msg += "; the device work goes to the loom session already recording (loom record, "
           "loom.profile), not to this trace";
  return std::make_unique<Session>(L, req, nullptr, std::vector<std::string>{msg},
                                   std::unordered_map<std::string, std::string>{});
}

} // namespace

std::unique_ptr<libkineto::IActivityProfilerSession>
make_session(const std::set<libkineto::ActivityType> &types) {
  const Loom *L = loom(nullptr);
  if (!L) return nullptr;
  Request req = request_of(types);
  if (!req.device_kinds) return nullptr; /* host activity only: Kineto has it */
  const char *env = std::getenv("LOOM_DEVICES");
  bool named = env && *env;
  std::vector<std::string> want = named ? split(env) : scan(L, req).types;
  if (want.empty()) return nullptr;
  loom_session *s = nullptr;
  loom_status st = create(L, req, want, &s);
  if (st != LOOM_OK) return error_session(L, req, st);
  std::unordered_map<std::string, std::string> meta;
  if (!named) {
    /* Chosen here, not by the user: a backend whose runtime is absent is
     * left out without a warning (said in the metadata). */
    Scan after = scan(L, req);
    if (after.available.empty()) {
      L->session_destroy(s);
      return nullptr;
    }
    if (after.available.size() < want.size()) {
      L->session_destroy(s);
      s = nullptr;
      if ((st = create(L, req, after.available, &s)) != LOOM_OK) return error_session(L, req, st);
      want = after.available;
    }
    if (!after.unavailable.empty()) meta["loom_unavailable"] = json_quote(after.unavailable);
  }
  std::string devices;
  for (const auto &t : want) devices += (devices.empty() ? "" : ",") + t;
  meta["loom_devices"] = json_quote(devices);
  return std::make_unique<Session>(L, std::move(req), s, std::vector<std::string>{},
                                   std::move(meta));
}

Session::Session(const Loom *L, Request req, loom_session *s, std::vector<std::string> errors,
                 std::unordered_map<std::string, std::string> meta)
    : L_(L), req_(std::move(req)), s_(s), errors_(std::move(errors)), meta_(std::move(meta)),
      buf_(std::make_unique<libkineto::CpuTraceBuffer>()) {
  if (s_) op_name_ = L_->string_id_of(kOpName);
  buf_->span = libkineto::TraceSpan(0, 0, "loom");
  buf_->gpuOpCount = 0;
}

Session::~Session() {
  if (s_) L_->session_destroy(s_);
  if (t_) L_->trace_free(t_);
}

void Session::start() {
  if (!s_) return;
  loom_status st = L_->session_start(s_);
  if (st != LOOM_OK) {
    errors_.push_back(std::string("loom: the session did not start (") + L_->strerror(st) +
                      "): " + L_->last_error());
    L_->session_destroy(s_);
    s_ = nullptr;
    return;
  }
  live_.store(true);
}

void Session::stop() {
  live_.store(false);
  if (!s_) return;
  loom_status st = L_->session_stop(s_, &t_);
  if (st != LOOM_OK) {
    errors_.push_back(std::string("loom: stopping the session failed (") + L_->strerror(st) +
                      "): " + L_->last_error());
    t_ = nullptr;
  }
  /* before destroy: a session that never got a trace still has its warnings */
  if (!t_)
    for (size_t i = 0; i < L_->session_warning_count(s_); i++)
      errors_.push_back(std::string("loom: ") + L_->session_warning(s_, i));
  L_->session_destroy(s_);
  s_ = nullptr;
  save_copy();
  collect_warnings();
}

/* LOOM_KINETO_TRACE=PATH: loom's own trace of the same records is saved
 * there too (any format loom writes), to compare or to read with loom's
 * tools; a failure is one more error of the trace. */
void Session::save_copy() {
  const char *path = std::getenv("LOOM_KINETO_TRACE");
  if (!t_ || !path || !*path) return;
  loom_status st = L_->trace_save(t_, path);
  if (st != LOOM_OK)
    errors_.push_back(std::string("loom: LOOM_KINETO_TRACE: ") + L_->last_error());
}

void Session::collect_warnings() {
  if (!t_) return;
  for (size_t i = 0; i < L_->trace_warning_count(t_); i++)
    errors_.push_back(std::string("loom: ") + L_->trace_warning(t_, i));
  loom_trace_summary sum{};
  sum.struct_size = sizeof sum;
  if (L_->trace_summarize(t_, &sum) == LOOM_OK && sum.dropped)
    meta_["loom_dropped"] = std::to_string(sum.dropped);
  for (size_t i = 0; i < L_->trace_meta_count(t_); i++) {
    const char *k, *v;
    if (L_->trace_meta(t_, i, &k, &v) == LOOM_OK) meta_[std::string("loom.") + k] = json_quote(v);
  }
}

std::vector<std::string> Session::errors() { return errors_; }

std::unordered_map<std::string, std::string> Session::getMetadata() {
  auto m = meta_;
  if (!errors_.empty()) {
    std::string arr = "[";
    for (size_t i = 0; i < errors_.size(); i++) arr += (i ? ", " : "") + json_quote(errors_[i]);
    m["loom_warnings"] = arr + "]";
  }
  return m;
}

void Session::pushCorrelationId(uint64_t id) {
  if (live_.load(std::memory_order_relaxed)) L_->op_begin_id(op_name_, id);
}

void Session::popCorrelationId() {
  if (live_.load(std::memory_order_relaxed)) L_->op_end();
}

void Session::pushUserCorrelationId(uint64_t id) {
  if (!live_.load(std::memory_order_relaxed)) return;
  char name[48];
  std::snprintf(name, sizeof name, "%s%llu", kUserPrefix, static_cast<unsigned long long>(id));
  L_->range_push_id(L_->string_id_of(name));
}

void Session::popUserCorrelationId() {
  if (live_.load(std::memory_order_relaxed)) L_->range_pop();
}

} // namespace loom_kineto
