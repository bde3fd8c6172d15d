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
 * arguments and PyTorch is not asked for the inputs.  With loom_op_begin_raw
 * the inputs are only encoded per op (a few bytes) and the strings are made
 * when loom collects the trace, once per distinct encoding.
 *
 * Memory: what torch.profiler(profile_memory=True) sees.  PyTorch's
 * allocators report each allocation and free to c10::reportMemoryUsageToProfiler
 * when c10::memoryProfilingEnabled() says so; both look up the one
 * MemoryReportingInfoBase on top of the calling thread's ThreadLocalDebugInfo
 * (DebugInfoKind::PROFILER_STATE), which PyTorch propagates to the threads
 * that run a task of that thread (autograd's, at::launch's).  loom does not
 * push a reporter of its own there: torch.profiler pushes its state on top
 * (hiding one pushed before) and pops the top at its end with a
 * static_pointer_cast to its own type (a reporter pushed after it would be
 * popped in its place).  Instead, the two functions are bound anew in the
 * objects that call them (libc10's and libtorch's GOT slots, where the
 * allocators reach them): memoryProfilingEnabled() is true while loom
 * captures (or whatever PyTorch says), and each report becomes a
 * loom_memory_alloc/free (the CPU allocator's as LOOM_MEMORY_HOST, device
 * -1; a device allocator's as LOOM_MEMORY_POOL with its reserved bytes and
 * device index) and then goes on to PyTorch's own function, so a
 * torch.profiler in the same run sees every report it would have seen.
 * `--option pytorch.memory=0` (LOOM_PYTORCH_MEMORY=0) turns it off: PyTorch
 * keeps a table of its CPU blocks' sizes while memory is reported.
 *
 * loom.h gives the types; its functions are reached with dlsym, so nothing
 * here links libloom.
 */
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <loom/loom.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {
using string_id_fn = uint32_t (*)(const char *);
using op_begin_id_fn = void (*)(uint32_t, uint64_t);
using void_fn = void (*)();
using str_fn = void (*)(const char *);
using op_begin_args_fn = void (*)(const char *, uint64_t, const loom_arg *, uint32_t);
using op_begin_raw_fn = void (*)(const char *, uint64_t, const loom_arg *, uint32_t, const void *,
                                 uint32_t, loom_raw_format_fn);
using meta_set_fn = loom_status (*)(const char *, const char *);

string_id_fn string_id_of;
op_begin_id_fn op_begin_id;
void_fn op_end, range_pop;
str_fn range_push_str;
op_begin_args_fn op_begin_args; // null: record ops without arguments
op_begin_raw_fn op_begin_raw;   // null: format the inputs on every op
meta_set_fn meta_set;           // null: an older libloom (no distributedInfo)
using step_mark_fn = void (*)(uint64_t);
step_mark_fn step_mark;         // null: an older libloom (no windows by step)
bool shapes = true;             // LOOM_PYTORCH_SHAPES=0: no Input Dims / Input type
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

// ---- the inputs as raw bytes, formatted when loom collects -----------------
// With loom_op_begin_raw (a newer libloom) an op's inputs are encoded in a
// few bytes on the stack and turned into the two strings above by format(),
// once per distinct encoding per trace: per input a kind byte, and for a
// defined tensor its c10::ScalarType as a byte, its rank and its sizes as
// varints.  Anything that does not fit (a big rank or many inputs, a dtype
// whose name was not captured) takes the string path.
enum : uint8_t { IN_OTHER, IN_TENSOR, IN_UNDEF, IN_SCALAR, IN_LIST };
constexpr int kTypes = static_cast<int>(c10::ScalarType::NumOptions);
// The names t.dtype().name() gives, copied at init: format() reads only this
// (trivially destructible) table, so it works at exit after libtorch's
// statics are gone.
char dtype_name[kTypes][40];
uint8_t dtype_len[kTypes]; // 0: not captured

constexpr uint32_t kRawCap = 256;

struct Enc {
  uint8_t *p, *end;
  bool ok = true;
  void byte(uint8_t b) {
    if (p == end) ok = false;
    else *p++ = b;
  }
  void var(uint64_t v) {
    while (v >= 0x80) byte(static_cast<uint8_t>(v | 0x80)), v >>= 7;
    byte(static_cast<uint8_t>(v));
  }
};

// 0 when the inputs do not fit kRawCap (or a dtype is unknown).
uint32_t encode_inputs(const at::RecordFunction &fn, uint8_t *buf) {
  Enc e{buf, buf + kRawCap};
  for (const c10::IValue &v : fn.inputs()) {
    if (v.isTensor()) {
      const at::Tensor &t = v.toTensor();
      if (!t.defined()) {
        e.byte(IN_UNDEF);
        continue;
      }
      caffe2::TypeMeta m = t.dtype();
      if (!m.isScalarType()) return 0;
      int st = static_cast<int>(m.toScalarType());
      if (st < 0 || st >= kTypes || !dtype_len[st]) return 0;
      e.byte(IN_TENSOR);
      e.byte(static_cast<uint8_t>(st));
      c10::IntArrayRef sz = t.sizes();
      e.var(sz.size());
      for (int64_t d : sz) e.var((static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63));
    } else if (v.isScalar()) {
      e.byte(IN_SCALAR);
    } else if (v.isTensorList()) {
      e.byte(IN_LIST);
    } else {
      e.byte(IN_OTHER);
    }
    if (!e.ok) return 0;
  }
  // an op with no inputs still needs a raw record: mark it with one byte
  if (e.p == buf) e.byte(0xff);
  return e.ok ? static_cast<uint32_t>(e.p - buf) : 0;
}

struct Dec {
  const uint8_t *p, *end;
  bool ok = true;
  uint8_t byte() {
    if (p == end) return ok = false, 0;
    return *p++;
  }
  uint64_t var() {
    uint64_t v = 0;
    for (int sh = 0; sh < 64; sh += 7) {
      uint8_t b = byte();
      v |= static_cast<uint64_t>(b & 0x7f) << sh;
      if (!(b & 0x80)) return v;
    }
    return ok = false, 0;
  }
};

// loom_raw_format_fn: the encoding back into Kineto's two strings.
uint32_t format_inputs(const void *raw, uint32_t nraw, char *buf, size_t cap, loom_arg *out,
                       uint32_t max_out) {
  if (max_out < 2 || cap < 2) return 0;
  size_t half = cap / 2;
  Out dims{buf, buf + half}, types{buf + half, buf + cap};
  Dec d{static_cast<const uint8_t *>(raw), static_cast<const uint8_t *>(raw) + nraw};
  if (nraw == 1 && d.p[0] == 0xff) d.p = d.end; // no inputs
  dims.put('[');
  types.put('[');
  for (bool first = true; d.ok && d.p < d.end; first = false) {
    if (!first) dims.put(", ", 2), types.put(", ", 2);
    dims.put('[');
    types.put('"');
    switch (d.byte()) {
    case IN_TENSOR: {
      uint8_t st = d.byte();
      uint64_t rank = d.var();
      for (uint64_t i = 0; i < rank && d.ok; i++) {
        if (i) dims.put(", ", 2);
        uint64_t z = d.var();
        dims.num(static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1)));
      }
      if (st < kTypes) types.put(dtype_name[st], dtype_len[st]);
      break;
    }
    case IN_SCALAR: types.put("Scalar", 6); break;
    case IN_LIST: types.put("TensorList", 10); break;
    default: break; // IN_OTHER, IN_UNDEF
    }
    dims.put(']');
    types.put('"');
  }
  dims.put(']');
  types.put(']');
  if (!d.ok || !dims.ok || !types.ok) return 0;
  *dims.p = 0, *types.p = 0;
  out[0].key = "Input Dims", out[0].type = LOOM_ARG_STRING, out[0].v.s = buf;
  out[1].key = "Input type", out[1].type = LOOM_ARG_STRING, out[1].v.s = buf + half;
  return 2;
}

void capture_dtype_names() {
  for (int i = 0; i < kTypes; i++) {
    try {
      c10::string_view nm =
          caffe2::TypeMeta::fromScalarType(static_cast<c10::ScalarType>(i)).name();
      if (!nm.empty() && nm.size() < sizeof dtype_name[i]) {
        std::memcpy(dtype_name[i], nm.data(), nm.size());
        dtype_len[i] = static_cast<uint8_t>(nm.size());
      }
    } catch (...) {
    }
  }
}

// ---- collectives: Kineto's arguments on c10d ops ----------------------------
// 1.13 records each torch.distributed call as a c10d op ("c10d::allreduce_")
// whose inputs are the tensors, the ProcessGroup object and scalars, around
// the backend's own op ("gloo:all_reduce"); it has no record_param_comms.
// The c10d op gets the arguments later PyTorch versions write on
// record_param_comms (ParamCommsUtils), and the first group seen with the
// largest size gives the trace's distributedInfo.  Groups have no names in
// 1.13: they are numbered in the order first seen ("0", "1", ...).
struct CommCount {
  int64_t nelems = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  void add(const at::Tensor &t) {
    if (!t.defined()) return;
    nelems += t.numel();
    if (dtype == c10::ScalarType::Undefined) dtype = t.scalar_type();
  }
  void add(const c10::IValue &v) {
    if (v.isTensor()) add(v.toTensor());
    else if (v.isTensorList())
      for (const at::Tensor &t : v.toTensorList().vec()) add(t);
    else if (v.isList())
      for (const c10::IValue &e : v.toListRef()) add(e);
  }
  static bool holds_tensors(const c10::IValue &v) {
    return v.isTensor() || v.isTensorList() || v.isList();
  }
};

std::mutex pg_mu;
std::vector<const c10d::ProcessGroup *> pg_seen; // index = group name
int dist_size = 0;                                // largest group reported

int pg_number(const c10d::ProcessGroup *pg) {
  std::lock_guard<std::mutex> g(pg_mu);
  for (size_t i = 0; i < pg_seen.size(); i++)
    if (pg_seen[i] == pg) return static_cast<int>(i);
  pg_seen.push_back(pg);
  if (meta_set && pg->getSize() > dist_size) {
    dist_size = pg->getSize();
    std::string backend = "unknown";
    try {
      backend = pg->getBackendName();
    } catch (...) {
    }
    meta_set("rank", std::to_string(pg->getRank()).c_str());
    meta_set("world_size", std::to_string(pg->getSize()).c_str());
    meta_set("distributed_backend", backend.c_str());
  }
  return static_cast<int>(pg_seen.size() - 1);
}

const c10d::ProcessGroup *as_group(const c10::IValue &v) {
  if (!v.isCustomClass()) return nullptr;
  try {
    return v.toCustomClass<c10d::ProcessGroup>().get();
  } catch (...) {
    return nullptr;
  }
}

bool is_collective(const char *name) { return !std::strncmp(name, "c10d::", 6); }

void begin_collective(const at::RecordFunction &fn, const char *name, uint64_t ext) {
  std::string coll = name + 6;
  if (!coll.empty() && coll.back() == '_') coll.pop_back();
  const c10d::ProcessGroup *pg = nullptr;
  std::vector<const c10::IValue *> data; // tensor inputs before the group
  int64_t peer = -1;
  for (const c10::IValue &v : fn.inputs()) {
    if (!pg && (pg = as_group(v))) continue;
    if (!pg && CommCount::holds_tensors(v)) data.push_back(&v);
    else if (pg && peer < 0 && v.isInt()) peer = v.toInt(); // send/recv peer, root
  }
  // one tensor argument is both ends; with two, the first is the output
  CommCount in, out;
  if (!data.empty()) in.add(*data.back()), out.add(*data.front());
  std::string pgname = pg ? std::to_string(pg_number(pg)) : "";
  const char *dtype = in.dtype != c10::ScalarType::Undefined ? c10::toString(in.dtype) : "";
  loom_arg a[10];
  uint32_t n = 0;
  auto str = [&](const char *k, const char *v) {
    a[n].key = k, a[n].type = LOOM_ARG_STRING, a[n].v.s = v, n++;
  };
  auto num = [&](const char *k, int64_t v) {
    a[n].key = k, a[n].type = LOOM_ARG_INT, a[n].v.i = v, n++;
  };
  str("Collective name", coll.c_str());
  if (!data.empty())
    num("In msg nelems", in.nelems), num("Out msg nelems", out.nelems), str("dtype", dtype);
  if (pg) {
    num("Group size", pg->getSize());
    num("Rank", pg->getRank());
    str("Process Group Name", pgname.c_str());
    str("Process Group Description", "undefined");
    if (peer >= 0 && coll == "send") num("Dst Rank", peer);
    else if (peer >= 0 && (coll == "recv" || coll == "recv_any_source")) num("Src Rank", peer);
  }
  if (fn.seqNr() >= 0) num("Sequence number", fn.seqNr());
  op_begin_args(name, ext, a, n);
}

// One thread_local object: one TLS lookup per op (this module is dlopen()ed,
// so each thread_local access is a __tls_get_addr call).  loom copies the
// strings during the call, so one buffer per thread is enough even for ops
// that nest (a nested op starts after this returns).
struct Scratch {
  char dims[2048], types[2048];
  Text big_dims, big_types;
};

// An op whose inputs are described as strings now (no raw bytes): a[0..n)
// holds its other arguments, and a has room for two more.
void begin_with_input_strings(const at::RecordFunction &fn, const char *name, uint64_t ext,
                              loom_arg *a, uint32_t n) {
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
}

// RecordFunction calls the end callback with whatever the start returned;
// returning no context saves an allocation per op, and the end tells a user
// range from an op by its scope, exactly as the start did.  (Callbacks are
// fixed when a RecordFunction starts, so an end never comes without its
// start.)
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn) {
  const char *name = fn.name();
  if (!name) name = "";
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    // torch.profiler's step ranges number the program's steps: windows by
    // step (loom record --start-step, a schedule) count with them, and a
    // window that begins here records this range.
    if (step_mark && !std::strncmp(name, "ProfilerStep#", 13))
      step_mark(std::strtoull(name + 13, nullptr, 10));
    range_push_str(name);
    return nullptr;
  }
  uint64_t ext = next_id.fetch_add(1, std::memory_order_relaxed);
  if (op_begin_args && is_collective(name)) {
    begin_collective(fn, name, ext);
    return nullptr;
  }
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
  if (!shapes) { // like torch.profiler without record_shapes: no inputs
    if (op_begin_raw) op_begin_raw(name, ext, a, n, nullptr, 0, nullptr);
    else op_begin_args(name, ext, a, n);
    return nullptr;
  }
  if (op_begin_raw) {
    uint8_t raw[kRawCap];
    if (uint32_t nraw = encode_inputs(fn, raw)) {
      op_begin_raw(name, ext, a, n, raw, nraw, format_inputs);
      return nullptr;
    }
  }
  begin_with_input_strings(fn, name, ext, a, n);
  return nullptr;
}

void on_end(const at::RecordFunction &fn, at::ObserverContext *) {
  if (fn.scope() == at::RecordScope::USER_SCOPE) range_pop();
  else op_end();
}

// ---- memory reports (see the top of the file) ---------------------------------
using mem_fn = void (*)(uint64_t, uint64_t, loom_memory_kind, int32_t, uint64_t);
using report_fn = void (*)(void *, int64_t, int64_t, int64_t, c10::Device);
mem_fn mem_alloc, mem_free;
report_fn real_report;

bool loom_memory_enabled() { return true; }

void loom_report(void *ptr, int64_t size, int64_t total_allocated, int64_t total_reserved,
                 c10::Device d) {
  auto t = d.type();
  bool host = t == c10::DeviceType::CPU || t == c10::DeviceType::MKLDNN ||
              t == c10::DeviceType::IDEEP;
  loom_memory_kind kind = host ? LOOM_MEMORY_HOST : LOOM_MEMORY_POOL;
  int32_t dev = host ? -1 : d.index();
  uint64_t reserved = host || total_reserved < 0 ? 0 : static_cast<uint64_t>(total_reserved);
  uint64_t addr = reinterpret_cast<uintptr_t>(ptr);
  if (size > 0) mem_alloc(addr, static_cast<uint64_t>(size), kind, dev, reserved);
  else if (size < 0) mem_free(addr, static_cast<uint64_t>(-size), kind, dev, reserved);
  real_report(ptr, size, total_allocated, total_reserved, d);
}

// The GOT slots to bind anew: symbol name, the function to put there.
struct rebind {
  const char *sym;
  void *fn;
  const void *self; // this object's load base: its own slots keep PyTorch's
  int n;            // slots bound
};

// Writes r->fn into slot, which lies in [relro, relro_end) of the object
// when that part is read-only after relocation (made writable for it).
void write_slot(void **slot, void *fn, uintptr_t relro, uintptr_t relro_end) {
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t a = reinterpret_cast<uintptr_t>(slot) & ~(page - 1);
  bool ro = reinterpret_cast<uintptr_t>(slot) >= relro &&
            reinterpret_cast<uintptr_t>(slot) < relro_end;
  if (ro && mprotect(reinterpret_cast<void *>(a), page, PROT_READ | PROT_WRITE) != 0) return;
  __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
  if (ro) mprotect(reinterpret_cast<void *>(a), page, PROT_READ);
}

int rebind_in(struct dl_phdr_info *info, size_t, void *data) {
  auto *r = static_cast<rebind *>(data);
  // every object, the program too ("" name), but this one
  if (reinterpret_cast<const void *>(info->dlpi_addr) == r->self) return 0;
  const ElfW(Dyn) *dyn = nullptr;
  uintptr_t base = info->dlpi_addr, relro = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn) *>(base + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) relro = base + ph.p_vaddr, relro_end = relro + ph.p_memsz;
  }
  const ElfW(Sym) *symtab = nullptr;
  const char *strtab = nullptr;
  const ElfW(Rela) *rel[2] = {nullptr, nullptr};
  size_t relsz[2] = {0, 0};
  auto ptr = [base](ElfW(Addr) p) { return p < base ? p + base : p; }; // vdso: not relocated
  for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym) *>(ptr(dyn->d_un.d_ptr)); break;
    case DT_STRTAB: strtab = reinterpret_cast<const char *>(ptr(dyn->d_un.d_ptr)); break;
    case DT_JMPREL: rel[0] = reinterpret_cast<const ElfW(Rela) *>(ptr(dyn->d_un.d_ptr)); break;
    case DT_PLTRELSZ: relsz[0] = dyn->d_un.d_val; break;
    case DT_RELA: rel[1] = reinterpret_cast<const ElfW(Rela) *>(ptr(dyn->d_un.d_ptr)); break;
    case DT_RELASZ: relsz[1] = dyn->d_un.d_val; break;
    default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; rel[k] && i < relsz[k] / sizeof(ElfW(Rela)); i++) {
      auto type = ELF64_R_TYPE(rel[k][i].r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      if (strcmp(strtab + symtab[ELF64_R_SYM(rel[k][i].r_info)].st_name, r->sym)) continue;
      write_slot(reinterpret_cast<void **>(base + rel[k][i].r_offset), r->fn, relro, relro_end);
      r->n++;
    }
  return 0;
}

// Binds the allocators' two calls to loom's; false when loom lacks the
// memory calls (an older libloom), it is turned off, or no slot was found.
bool capture_memory() {
  const char *env = getenv("LOOM_PYTORCH_MEMORY"), *opts = getenv("LOOM_RECORD_OPTIONS");
  if ((env && !strcmp(env, "0")) || (opts && strstr(opts, "pytorch.memory=0"))) return false;
  mem_alloc = reinterpret_cast<mem_fn>(dlsym(RTLD_DEFAULT, "loom_memory_alloc"));
  mem_free = reinterpret_cast<mem_fn>(dlsym(RTLD_DEFAULT, "loom_memory_free"));
  if (!mem_alloc || !mem_free) return false;
  real_report = &c10::reportMemoryUsageToProfiler;
  Dl_info self;
  if (!dladdr(reinterpret_cast<void *>(&loom_report), &self)) return false;
  // reports first: once memory profiling reads as enabled they arrive
  rebind rep = {"_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE",
                reinterpret_cast<void *>(&loom_report), self.dli_fbase, 0};
  rebind en = {"_ZN3c1022memoryProfilingEnabledEv", reinterpret_cast<void *>(&loom_memory_enabled),
               self.dli_fbase, 0};
  dl_iterate_phdr(rebind_in, &rep);
  if (rep.n) dl_iterate_phdr(rebind_in, &en);
  return rep.n && en.n;
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
  find(meta_set, "loom_meta_set");           // optional
  find(step_mark, "loom_step_mark");         // optional
  if (op_begin_args && find(op_begin_raw, "loom_op_begin_raw")) capture_dtype_names(); // optional
  // Input shapes and types cost PyTorch a copy of every op's inputs; they
  // can be turned off (LOOM_PYTORCH_SHAPES=0, or `loom record --option
  // pytorch.shapes=0`), as torch.profiler's record_shapes=False does.
  const char *env = getenv("LOOM_PYTORCH_SHAPES"), *opts = getenv("LOOM_RECORD_OPTIONS");
  if ((env && !strcmp(env, "0")) || (opts && strstr(opts, "pytorch.shapes=0"))) shapes = false;
  at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end).needsInputs(op_begin_args != nullptr && shapes));
  capture_memory();
  return 0;
}
