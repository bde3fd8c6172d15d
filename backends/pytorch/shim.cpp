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
#include <cstring>
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

// ---- Input Dims / Input type ------------------------------------------------
// Kineto's strings for the op's inputs (1.13's torch/csrc/profiler/
// collection.cpp: a tensor gives its sizes and dtype, a scalar "Scalar", a
// tensor list "TensorList", anything else ""), written into a fixed
// per-thread buffer: no allocation per op.  Ops whose description does not
// fit (thousands of inputs) take the std::string path below.
struct Out {
  char *p, *end;
  bool ok = true;
  void put(const char *s, size_t n) {
    if (static_cast<size_t>(end - p) <= n) ok = false;
    else std::memcpy(p, s, n), p += n;
  }
  void put(char c) {
    if (end - p <= 1) ok = false;
    else *p++ = c;
  }
  void num(int64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    put(b, static_cast<size_t>(r.ptr - b));
  }
};

struct Text {
  std::string s;
  void put(const char *p, size_t n) { s.append(p, n); }
  void put(char c) { s += c; }
  void num(int64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    s.append(b, r.ptr);
  }
};

template <typename W> void describe_inputs(const at::RecordFunction &fn, W &dims, W &types) {
  dims.put('[');
  types.put('[');
  bool first = true;
  for (const c10::IValue &v : fn.inputs()) {
    if (!first) dims.put(", ", 2), types.put(", ", 2);
    first = false;
    dims.put('[');
    types.put('"');
    if (v.isTensor()) {
      const at::Tensor &t = v.toTensor();
      if (t.defined()) {
        bool f = true;
        for (int64_t d : t.sizes()) {
          if (!f) dims.put(", ", 2);
          f = false;
          dims.num(d);
        }
        c10::string_view nm = t.dtype().name();
        types.put(nm.data(), nm.size());
      }
    } else if (v.isScalar()) {
      types.put("Scalar", 6);
    } else if (v.isTensorList()) {
      types.put("TensorList", 10);
    }
    dims.put(']');
    types.put('"');
  }
  dims.put(']');
  types.put(']');
}

// One thread_local object: one TLS lookup per op (this module is dlopen()ed,
// so each thread_local access is a __tls_get_addr call).  loom copies the
// strings during the call, so one buffer per thread is enough even for ops
// that nest (a nested op starts after this returns).
struct Scratch {
  char dims[2048], types[2048];
  Text big_dims, big_types;
};

// RecordFunction calls the end callback with whatever the start returned;
// returning no context saves an allocation per op, and the end tells a user
// range from an op by its scope, exactly as the start did.  (Callbacks are
// fixed when a RecordFunction starts, so an end never comes without its
// start.)
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn) {
  const char *name = fn.name();
  if (!name) name = "";
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    range_push_str(name);
    return nullptr;
  }
  uint64_t ext = next_id.fetch_add(1, std::memory_order_relaxed);
  if (!op_begin_args) {
    op_begin_id(string_id_of(name), ext);
    return nullptr;
  }
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
  thread_local Scratch sc;
  Out dims{sc.dims, sc.dims + sizeof sc.dims}, types{sc.types, sc.types + sizeof sc.types};
  describe_inputs(fn, dims, types);
  const char *ds = sc.dims, *ts = sc.types;
  if (dims.ok && types.ok) {
    *dims.p = 0, *types.p = 0;
  } else {
    sc.big_dims.s.clear(), sc.big_types.s.clear();
    describe_inputs(fn, sc.big_dims, sc.big_types);
    ds = sc.big_dims.s.c_str(), ts = sc.big_types.s.c_str();
  }
  a[n].key = "Input Dims", a[n].type = LOOM_ARG_STRING, a[n].v.s = ds;
  n++;
  a[n].key = "Input type", a[n].type = LOOM_ARG_STRING, a[n].v.s = ts;
  n++;
  op_begin_args(name, ext, a, n);
  return nullptr;
}

void on_end(const at::RecordFunction &fn, at::ObserverContext *) {
  if (fn.scope() == at::RecordScope::USER_SCOPE) range_pop();
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
