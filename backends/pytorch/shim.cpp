/*
 * shim.cpp - loom-pytorch-shim.so: the C++ half of the PyTorch adapter,
 * built against Debian's libtorch-dev (1.13) and loaded by loom-pytorch.so
 * once libtorch_cpu is in the process.  A global RecordFunction callback
 * turns every op (ATen ops, autograd nodes, TorchScript functions) into a
 * loom framework op (cpu_op) with a process-unique external id, and every
 * record_function / RECORD_USER_SCOPE range into a user range
 * (user_annotation), both on the calling thread, nested as PyTorch nests them.
 *
 * Where loom has loom_op_begin_args, each op carries Kineto's arguments:
 * "Sequence number" (when PyTorch gives one, >= 0), "Fwd thread id" (backward
 * ops, when non-zero), "Input Dims" ("[[2, 3], [3], []]": one entry per input,
 * sizes for a tensor, [] otherwise) and "Input type" ("[\"float\",
 * \"Scalar\", \"\"]": the dtype for a tensor, "Scalar", "TensorList", or
 * "" otherwise).  Without it (an older libloom) ops are recorded without
 * arguments and PyTorch is not asked for the inputs.
 *
 * loom.h gives the types; its functions are reached with dlsym, so nothing
 * here links libloom.
 */
#include <ATen/record_function.h>
#include <dlfcn.h>
#include <loom/loom.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <string>

namespace {
using string_id_fn = uint32_t (*)(const char *);
using op_begin_id_fn = void (*)(uint32_t, uint64_t);
using void_fn = void (*)();
using str_fn = void (*)(const char *);
using op_begin_args_fn = void (*)(const char *, uint64_t, const loom_arg *, uint32_t);

string_id_fn string_id_of;
op_begin_id_fn op_begin_id;
void_fn op_end, range_pop;
str_fn range_push_str;
op_begin_args_fn op_begin_args; // null: record ops without arguments
std::atomic<uint64_t> next_id{1};

// ObserverContext subclasses tell the end callback what the start did; a
// null context (start saw nothing to record) makes the end a no-op, so
// nesting stays exact even for ops begun before the callback was added.
struct Ctx : at::ObserverContext {
  explicit Ctx(bool u) : user(u) {}
  bool user;
};

void append_int(std::string &s, int64_t v) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof b, v);
  s.append(b, r.ptr);
}

// Kineto's "Input Dims" / "Input type" for the op's inputs (1.13's
// torch/csrc/profiler/collection.cpp: a tensor gives its sizes and dtype, a
// scalar "Scalar", a tensor list "TensorList", anything else "").
void describe_inputs(const at::RecordFunction &fn, std::string &dims, std::string &types) {
  dims.assign(1, '[');
  types.assign(1, '[');
  bool first = true;
  for (const c10::IValue &v : fn.inputs()) {
    if (!first) dims += ", ", types += ", ";
    first = false;
    dims += '[';
    types += '"';
    if (v.isTensor()) {
      const at::Tensor &t = v.toTensor();
      if (t.defined()) {
        bool f = true;
        for (int64_t d : t.sizes()) {
          if (!f) dims += ", ";
          f = false;
          append_int(dims, d);
        }
        c10::string_view nm = t.dtype().name();
        types.append(nm.data(), nm.size());
      }
    } else if (v.isScalar()) {
      types += "Scalar";
    } else if (v.isTensorList()) {
      types += "TensorList";
    }
    dims += ']';
    types += '"';
  }
  dims += ']';
  types += ']';
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn) {
  const char *name = fn.name();
  if (!name) name = "";
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    range_push_str(name);
    return std::make_unique<Ctx>(true);
  }
  uint64_t ext = next_id.fetch_add(1, std::memory_order_relaxed);
  if (op_begin_args) {
    loom_arg a[4];
    uint32_t n = 0;
    if (fn.seqNr() >= 0) {
      a[n].key = "Sequence number", a[n].type = LOOM_ARG_INT, a[n].v.i = fn.seqNr();
      n++;
    }
    if (fn.forwardThreadId() > 0) {
      a[n].key = "Fwd thread id", a[n].type = LOOM_ARG_UINT, a[n].v.u = fn.forwardThreadId();
      n++;
    }
    // loom copies the strings during the call, so one buffer per thread is
    // enough even for ops that nest (a nested op starts after this returns)
    thread_local std::string dims, types;
    describe_inputs(fn, dims, types);
    a[n].key = "Input Dims", a[n].type = LOOM_ARG_STRING, a[n].v.s = dims.c_str();
    n++;
    a[n].key = "Input type", a[n].type = LOOM_ARG_STRING, a[n].v.s = types.c_str();
    n++;
    op_begin_args(name, ext, a, n);
  } else {
    op_begin_id(string_id_of(name), ext);
  }
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
  find(op_begin_args, "loom_op_begin_args"); // optional
  at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end).needsInputs(op_begin_args != nullptr));
  return 0;
}
