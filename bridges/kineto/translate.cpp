/*
 * translate.cpp - loom's processed trace into Kineto's (session.h): each
 * event of a requested type becomes a GenericTraceActivity, times as loom
 * gives them (Unix epoch ns, Kineto's clock), on the device's row (pid:
 * loom's device index) and the queue's (tid), or on the host thread; the
 * framework op it ran for through getLinkedActivity (its "External id");
 * loom's host call -> device work flows as kLinkAsyncCpuGpu; loom's
 * projections of user ranges as gpu_user_annotation; typed arguments,
 * "correlation" and "loom_role" as metadata.  Nothing is computed here:
 * loom's core did the clocks, the window, the flows and the projections.
 */
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include <output_base.h>

#include "session.h"

namespace loom_kineto {
namespace {

using libkineto::GenericTraceActivity;

/* Kineto's ac2g flow ids for children: above CUPTI's correlation ids,
 * within GenericTraceActivity's 32 bits. */
constexpr uint32_t kFlowBase = 1u << 30;

const char *const kRoleWords[] = {"launch", "memory", "comm",    "send",      "recv",      "post",
                                  "wait",   "barrier", "nxn", "one_to_all", "all_to_one"};

/* Kineto writes string metadata as JSON and turns backslashes into '/':
 * no backslash, no quote, no control character may reach it. */
std::string clean(const char *s) {
  std::string out(s ? s : "");
  for (char &c : out) {
    if (c == '"') c = '\'';
    else if (c == '\\') c = '/';
    else if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}

void add_args(const Loom *L, const loom_trace *t, size_t i, GenericTraceActivity &a) {
  loom_arg args[32];
  size_t n = L->trace_event_args(t, i, args, 32);
  std::vector<loom_arg> more;
  if (n > 32) {
    more.resize(n);
    L->trace_event_args(t, i, more.data(), n);
  }
  const loom_arg *v = n > 32 ? more.data() : args;
  for (size_t k = 0; k < n; k++) {
    std::string key = clean(v[k].key);
    switch (v[k].type) {
    case LOOM_ARG_INT: a.addTypedMetadata(key, static_cast<int64_t>(v[k].v.i)); break;
    case LOOM_ARG_UINT: a.addTypedMetadata(key, static_cast<uint64_t>(v[k].v.u)); break;
    case LOOM_ARG_DOUBLE: a.addTypedMetadata(key, v[k].v.d); break;
    default: a.addTypedMetadata(key, clean(v[k].v.s)); break;
    }
  }
}

void add_roles(unsigned roles, GenericTraceActivity &a) {
  std::string s;
  for (unsigned b = 0; b < sizeof kRoleWords / sizeof *kRoleWords; b++)
    if (roles & (1u << b)) s += (s.empty() ? "" : ",") + std::string(kRoleWords[b]);
  if (!s.empty()) a.addTypedMetadata("loom_role", s);
}

/* A counter sample: its value is its first numeric argument. */
void add_counter(const Loom *L, const loom_trace *t, size_t i, const char *name,
                 GenericTraceActivity &a) {
  loom_arg v[4];
  size_t n = L->trace_event_args(t, i, v, 4);
  for (size_t k = 0; k < n && k < 4; k++) {
    double x = v[k].type == LOOM_ARG_DOUBLE ? v[k].v.d
               : v[k].type == LOOM_ARG_INT  ? static_cast<double>(v[k].v.i)
               : v[k].type == LOOM_ARG_UINT ? static_cast<double>(v[k].v.u)
                                            : 0.0;
    if (v[k].type != LOOM_ARG_STRING) {
      a.addCounterValue(name, x);
      return;
    }
  }
}

/* Whether Kineto's writer prints a linked activity's id as "External id"
 * for this type (else it prints the activity's own id). */
bool linked_only(ActivityType t) {
  return is_device_work(t) || t == ActivityType::CUDA_RUNTIME || t == ActivityType::CUDA_DRIVER ||
         t == ActivityType::XPU_RUNTIME || t == ActivityType::XPU_DRIVER ||
         t == ActivityType::PRIVATEUSE1_RUNTIME || t == ActivityType::PRIVATEUSE1_DRIVER;
}

/* The name inside "thread 12 (main)", loom's label of a host thread. */
std::string thread_name(const char *label) {
  const char *o = std::strchr(label, '('), *c = std::strrchr(label, ')');
  return o && c && c > o ? std::string(o + 1, c) : std::string(label);
}

} // namespace

void Session::processTrace(libkineto::ActivityLogger &logger) {
  translate(logger, libkineto::getLinkedActivityCallback());
}

void Session::processTrace(libkineto::ActivityLogger &logger,
                           libkineto::getLinkedActivityCallback linked, int64_t, int64_t) {
  translate(logger, linked);
}

namespace {

/* What an event of loom's trace becomes: its Kineto type, the client's
 * activity it is linked to, the external id. */
struct Pick {
  ActivityType type;
  const libkineto::ITraceActivity *op = nullptr;
  uint64_t ext = 0;
  bool user = false; /* a projection of one of the client's ranges */
};

/* Whether e is logged for req, filling *p; the bridge's placeholders and
 * types not asked for are not. */
bool pick(const Request &req, const loom_event_view &e,
          const libkineto::getLinkedActivityCallback &linked, Pick *p) {
  static const size_t ulen = std::strlen(kUserPrefix);
  p->type = type_of(e);
  if (p->type == ActivityType::ENUM_COUNT || !req.types.count(p->type)) return false;
  if (e.kind == LOOM_KIND_CPU_OP && !std::strcmp(e.name, kOpName)) return false;
  p->user = e.kind == LOOM_KIND_USER_RANGE && !std::strncmp(e.name, kUserPrefix, ulen);
  if (p->user && !e.projected) return false; /* Kineto has the client's range */
  p->ext = p->user ? std::strtoull(e.name + ulen, nullptr, 10) : e.external_id;
  if (p->ext && linked) p->op = linked(static_cast<int32_t>(p->ext));
  return !p->user || p->op; /* a range of the client's it did not hand over: none */
}

void fill(GenericTraceActivity &a, const loom_event_view &e, const Pick &p) {
  a.startTime = e.start_ns;
  a.endTime = e.start_ns + e.dur_ns;
  a.device = static_cast<int32_t>(e.pid);
  a.resource = e.tid;
  a.threadId = static_cast<int32_t>(e.tid);
  a.linked = p.op;
  a.id = static_cast<int32_t>(linked_only(p.type) ? e.correlation : p.ext);
  if (!p.op && p.ext && linked_only(p.type))
    a.addTypedMetadata("External id", static_cast<uint64_t>(p.ext));
  if (e.correlation && e.phase != 'b')
    a.addTypedMetadata("correlation", static_cast<uint64_t>(e.correlation));
  if (e.device != UINT32_MAX && !e.projected) {
    a.addTypedMetadata("device", static_cast<int64_t>(e.device));
    a.addTypedMetadata("stream", static_cast<int64_t>(e.tid));
  }
  add_roles(e.roles, a);
}

/* loom's flows between logged activities, as Kineto's one flow per
 * activity: the host call starts one, each device record it launched
 * ends it. */
void link_flows(const Loom *L, const loom_trace *t,
                const std::vector<GenericTraceActivity *> &acts) {
  size_t nf = L->trace_flow_count(t);
  for (size_t f = 0; f < nf; f++) {
    size_t from, to;
    if (L->trace_flow(t, f, &from, &to) != LOOM_OK || !acts[from] || !acts[to]) continue;
    GenericTraceActivity &a = *acts[from], &b = *acts[to];
    if (!a.flow.id) {
      a.flow.id = kFlowBase + static_cast<uint32_t>(f);
      a.flow.type = libkineto::kLinkAsyncCpuGpu;
      a.flow.start = 1;
    }
    b.flow.id = a.flow.id;
    b.flow.type = libkineto::kLinkAsyncCpuGpu;
    b.flow.start = 0;
  }
}

} // namespace

void Session::translate(libkineto::ActivityLogger &logger,
                        const libkineto::getLinkedActivityCallback &linked) {
  logged_ = 0;
  if (!t_ || !buf_) return;
  size_t n = L_->trace_event_count(t_);
  std::vector<GenericTraceActivity *> acts(n, nullptr);
  std::map<std::pair<int64_t, int64_t>, size_t> track_of; /* (pid, tid) -> track */
  track_used_.assign(L_->trace_track_count(t_), 0);
  for (size_t k = 0; k < track_used_.size(); k++) {
    loom_track_view tv{};
    tv.struct_size = sizeof tv;
    if (L_->trace_track(t_, k, &tv) == LOOM_OK) track_of[{tv.pid, tv.tid}] = k;
  }
  for (size_t i = 0; i < n; i++) {
    loom_event_view e{};
    e.struct_size = sizeof e;
    Pick p;
    if (L_->trace_event(t_, i, &e) != LOOM_OK || !pick(req_, e, linked, &p)) continue;
    buf_->emplace_activity(buf_->span, p.type, p.user ? p.op->name() : std::string(e.name));
    GenericTraceActivity &a = *buf_->activities.back();
    fill(a, e, p);
    add_args(L_, t_, i, a);
    if (e.kind == LOOM_KIND_COUNTER) add_counter(L_, t_, i, e.name, a);
    acts[i] = &a;
    auto tk = track_of.find({e.pid, e.tid});
    if (tk != track_of.end()) track_used_[tk->second] = 1;
  }
  link_flows(L_, t_, acts);
  loom_trace_summary sum{};
  sum.struct_size = sizeof sum;
  if (L_->trace_summarize(t_, &sum) == LOOM_OK) { /* the "loom" span: loom's window */
    buf_->span.startTime = sum.start_ns;
    buf_->span.endTime = sum.end_ns;
  }
  for (const auto &a : buf_->activities) a->log(logger);
  logged_ = buf_->activities.size();
  /* the device rows past the first (getDeviceInfo gives one) */
  auto devs = device_rows();
  for (size_t k = 1; k < devs.size(); k++) logger.handleDeviceInfo(devs[k], buf_->span.startTime);
}

std::vector<libkineto::DeviceInfo> Session::device_rows() const {
  std::vector<libkineto::DeviceInfo> out;
  if (!t_) return out;
  for (size_t d = 0; d < L_->trace_device_count(t_); d++) {
    loom_device_view dv{};
    dv.struct_size = sizeof dv;
    if (L_->trace_device(t_, d, &dv) != LOOM_OK) continue;
    std::string name = std::string(dv.device_type) + " " + std::to_string(dv.pid);
    int64_t sort = dv.pid;
    for (size_t p = 0; p < L_->trace_process_count(t_); p++) {
      loom_process_view pv{};
      pv.struct_size = sizeof pv;
      if (L_->trace_process(t_, p, &pv) == LOOM_OK && pv.pid == dv.pid) {
        if (*pv.name) name = pv.name;
        sort = pv.sort;
      }
    }
    out.push_back(libkineto::DeviceInfo{dv.pid, libkineto::kExceedMaxPid + sort, name, dv.name});
  }
  return out;
}

std::unique_ptr<libkineto::DeviceInfo> Session::getDeviceInfo() {
  auto devs = device_rows();
  if (devs.empty()) return nullptr;
  return std::make_unique<libkineto::DeviceInfo>(devs[0]);
}

std::vector<libkineto::ResourceInfo> Session::getResourceInfos() {
  std::vector<libkineto::ResourceInfo> out;
  if (!t_) return out;
  for (size_t k = 0; k < track_used_.size(); k++) {
    loom_track_view tv{};
    tv.struct_size = sizeof tv;
    if (!track_used_[k] || L_->trace_track(t_, k, &tv) != LOOM_OK) continue;
    bool host = tv.device == UINT32_MAX;
    out.push_back(libkineto::ResourceInfo{
        tv.tid, host ? tv.tid : tv.sort, tv.pid, host ? thread_name(tv.name) : std::string(tv.name),
        host ? libkineto::ResourceType::HOST_THREAD : libkineto::ResourceType::UNKNOWN});
  }
  return out;
}

std::unique_ptr<libkineto::CpuTraceBuffer> Session::getTraceBuffer() {
  if (t_) {
    L_->trace_free(t_);
    t_ = nullptr;
  }
  return std::move(buf_);
}

} // namespace loom_kineto
