/*
 * shim.cpp - loom-pytorch-shim.so: the C++ half of the PyTorch adapter,
 * built against Debian's libtorch-dev (1.13) and loaded by loom-pytorch.so
 * once libtorch_cpu is in the process.  A global RecordFunction callback
 * turns every op (ATen ops, autograd nodes, TorchScript functions) into a
 * loom framework op (cpu_op) with a process-unique external id, and every
 * record_function / RECORD_USER_SCOPE range into a user range
 * (user_annotation), both on the calling thread, nested as PyTorch nests them.
 *
 * loom.h is reached with dlsym, so nothing here links libloom.
 * Not recorded (loom.h has no per-op arguments API): sequence numbers,
 * input shapes and dtypes.
 */
#include <ATen/record_function.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>

namespace {
using string_id_fn = uint32_t (*)(const char *);
using op_begin_id_fn = void (*)(uint32_t, uint64_t);
using void_fn = void (*)();
using str_fn = void (*)(const char *);

string_id_fn string_id_of;
op_begin_id_fn op_begin_id;
void_fn op_end, range_pop;
str_fn range_push_str;
std::atomic<uint64_t> next_id{1};

// ObserverContext subclasses tell the end callback what the start did; a
// null context (start saw nothing to record) makes the end a no-op, so
// nesting stays exact even for ops begun before the callback was added.
struct Ctx : at::ObserverContext {
  explicit Ctx(bool u) : user(u) {}
  bool user;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn) {
  const char *name = fn.name();
  if (!name) name = "";
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    range_push_str(name);
    return std::make_unique<Ctx>(true);
  }
  uint32_t id = string_id_of(name);
  op_begin_id(id, next_id.fetch_add(1, std::memory_order_relaxed));
  return std::make_unique<Ctx>(false);
}

void on_end(const at::RecordFunction &, at::ObserverContext *c) {
  if (!c) return;
  if (static_cast<Ctx *>(c)->user) range_pop();
  else op_end();
}

template <typename T> bool find(T &out, const char *sym) {
  out = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, sym));
  return out != nullptr;
}
} // namespace

extern "C" __attribute__((visibility("default"))) int loom_pytorch_shim_init(void) {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return 0;
  if (!find(string_id_of, "loom_string_id_of") || !find(op_begin_id, "loom_op_begin_id") ||
      !find(op_end, "loom_op_end") || !find(range_push_str, "loom_range_push_str") ||
      !find(range_pop, "loom_range_pop"))
    return -1;
  at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end).needsInputs(false));
  return 0;
}
