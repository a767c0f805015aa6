// Function export and import in MLX's .mlxfn layout: a header (version,
// function count, shapeless flag, metadata), then per function its keyword
// names, inputs, outputs and tape. Every integer is little-endian; lists
// carry a uint64 count. Reading checks each count and size against the
// bytes left, so a truncated or corrupt file raises instead of allocating
// or reading past its end.
#include "kiln/io/function_export.h"

#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "kiln/core/allocator.h"
#include "kiln/io/common.h"
#include "kiln/io/export_trace.h"
#include "kiln/io/mlxfn_ops.h"
#include "kiln/ops/shape.h"
#include "kiln/primitives/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/transforms/compile.h"
#include "kiln/transforms/eval.h"
#include "kiln/transforms/trace.h"

namespace kiln {

namespace detail {

namespace {

// The version this layout follows (MLX's reader ignores it).
constexpr const char* format_version = "0.32.4";

struct Out {
  std::string buf;
  template <typename T>
  void raw(T v) {
    buf.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void i32(int64_t v) { raw<int32_t>(static_cast<int32_t>(v)); }
  void u64(uint64_t v) { raw<uint64_t>(v); }
  void boolean(bool v) { raw<uint8_t>(v ? 1 : 0); }
  void str(const std::string& s) {
    u64(s.size());
    buf += s;
  }
  template <typename T>
  void ints(const std::vector<T>& v) {
    u64(v.size());
    for (auto x : v) i32(x);
  }
  void dtype(Dtype d) {
    i32(static_cast<int>(d.val));
    raw<uint8_t>(d.size);
  }
};

struct In {
  const std::string& data;
  const std::string& file;
  size_t pos = 0;
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("[import_function] " + file +
                             " is truncated or corrupt: " + what + " at byte " +
                             std::to_string(pos) + ".");
  }
  void need(size_t n, const char* what) {
    if (n > data.size() - pos) fail(std::string("reading ") + what);
  }
  template <typename T>
  T raw(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  int32_t i32(const char* what) { return raw<int32_t>(what); }
  uint64_t u64(const char* what) { return raw<uint64_t>(what); }
  bool boolean(const char* what) { return raw<uint8_t>(what) != 0; }
  // A count of items of at least `unit` bytes each.
  size_t count(size_t unit, const char* what) {
    auto n = u64(what);
    if (unit && n > (data.size() - pos) / unit)
      fail(std::string("the count of ") + what);
    return static_cast<size_t>(n);
  }
  std::string str(const char* what) {
    auto n = count(1, what);
    std::string s = data.substr(pos, n);
    pos += n;
    return s;
  }
  std::vector<int64_t> ints(const char* what) {
    auto n = count(4, what);
    std::vector<int64_t> v(n);
    for (auto& x : v) x = i32(what);
    return v;
  }
  std::vector<uint64_t> ids(const char* what) {
    auto n = count(8, what);
    std::vector<uint64_t> v(n);
    for (auto& x : v) x = u64(what);
    return v;
  }
  Shape shape(const char* what) {
    auto v = ints(what);
    for (auto d : v) {
      if (d < 0) fail(std::string("a negative dimension in ") + what);
    }
    return {v.begin(), v.end()};
  }
  Dtype dtype(const char* what) {
    int v = i32(what);
    int size = raw<uint8_t>(what);
    if (v < 0 || v > static_cast<int>(Dtype::Val::complex64)) {
      fail(std::string("an unknown dtype in ") + what);
    }
    static const Dtype all[] = {bool_, uint8, uint16, uint32, uint64,
                               int8, int16, int32, int64, float16,
                               float32, float64, bfloat16, complex64};
    Dtype d = all[v];
    if (static_cast<int>(d.size) != size)
      fail(std::string("a dtype's size in ") + what);
    return d;
  }
};

void write_state(Out& out, const char* schema, const mlxfn::State& st,
                 const std::string& name) {
  size_t k = 0;
  for (const char* c = schema; *c; ++c) {
    if (*c == 'n') {
      ++k;
      continue;
    }
    if (k >= st.size()) {
      throw std::logic_error("[export_function] " + name +
                             ": too few parameters");
    }
    const auto& v = st[k++];
    switch (*c) {
      case 'i': out.i32(v.i); break;
      case 'b': out.boolean(v.i != 0); break;
      case 'f': out.raw<float>(static_cast<float>(v.f)); break;
      case 'd': out.raw<double>(v.f); break;
      case 'u': out.u64(static_cast<uint64_t>(v.i)); break;
      case 'D': out.dtype(v.dt); break;
      case 'S': out.ints(v.v); break;
      case 's': out.str(v.s); break;
      case 'L':
        out.u64(v.v.size());
        for (auto x : v.v) out.raw<int64_t>(x);
        break;
    }
  }
}

mlxfn::State read_state(In& in, const char* schema) {
  mlxfn::State st;
  for (const char* c = schema; *c; ++c) {
    mlxfn::Value v;
    switch (*c) {
      case 'n': break;
      case 'i': v.i = in.i32("a parameter"); break;
      case 'b': v.i = in.boolean("a parameter"); break;
      case 'f':
        v.kind = mlxfn::Value::real;
        v.f = in.raw<float>("a parameter");
        break;
      case 'd':
        v.kind = mlxfn::Value::real;
        v.f = in.raw<double>("a parameter");
        break;
      case 'u': v.i = static_cast<int64_t>(in.u64("a parameter")); break;
      case 'D':
        v.kind = mlxfn::Value::dtype;
        v.dt = in.dtype("a parameter");
        break;
      case 'S':
        v.kind = mlxfn::Value::list;
        v.v = in.ints("a parameter");
        break;
      case 's':
        v.kind = mlxfn::Value::text;
        v.s = in.str("a parameter");
        break;
      case 'L': {
        v.kind = mlxfn::Value::list;
        auto n = in.count(8, "a parameter");
        for (size_t i = 0; i < n; ++i)
          v.v.push_back(in.raw<int64_t>("a parameter"));
        break;
      }
    }
    st.push_back(std::move(v));
  }
  return st;
}

void write_stream(Out& out, Stream s) {
  out.i32(s.index);
  out.i32(s.device.type == Device::gpu ? 1 : 0);
  out.i32(s.device.index);
}

// One exported signature: inputs' dtypes and shapes, keyword names.
struct Signature {
  std::vector<std::string> kwarg_keys;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
};

bool matches(const Signature& sig, const Args& args, const Kwargs& kwargs,
             bool shapeless) {
  if (args.size() + kwargs.size() != sig.shapes.size()) return false;
  if (kwargs.size() != sig.kwarg_keys.size()) return false;
  size_t i = 0;
  for (auto& [k, v] : kwargs) {
    if (k != sig.kwarg_keys[i++]) return false;
  }
  auto fits = [&](const array& a, size_t j) {
    return a.dtype() == sig.dtypes[j] && a.ndim() == sig.shapes[j].size() &&
           (shapeless || a.shape() == sig.shapes[j]);
  };
  size_t j = 0;
  for (auto& a : args) {
    if (!fits(a, j++)) return false;
  }
  for (auto& [k, v] : kwargs) {
    if (!fits(v, j++)) return false;
  }
  return true;
}

std::string describe_signatures(const std::vector<Signature>& sigs) {
  std::ostringstream os;
  int n = 1;
  for (auto& sig : sigs) {
    size_t npos = sig.shapes.size() - sig.kwarg_keys.size();
    os << " " << n++ << ". Function with " << npos << " positional inputs and "
       << sig.kwarg_keys.size() << " keyword inputs:\n";
    for (size_t j = 0; j < sig.shapes.size(); ++j) {
      if (j < npos) {
        os << "   " << j + 1 << ": ";
      } else {
        os << "   \"" << sig.kwarg_keys[j - npos] << "\": ";
      }
      os << shape_str(sig.shapes[j]) << " " << dtype_name(sig.dtypes[j])
         << "\n";
    }
  }
  return os.str();
}

} // namespace

struct ExportFile {
  std::string path;
  bool shapeless;
  std::string metadata;
  std::vector<Signature> signatures;
  std::string body; // the functions written so far
  std::unordered_set<uintptr_t> constants_written;
  std::vector<array> constants_kept; // so their ids stay unique

  void rewrite() {
    Out head;
    head.str(format_version);
    head.i32(static_cast<int>(signatures.size()));
    head.boolean(shapeless);
    head.str(metadata);
    std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      if (!f)
        throw std::runtime_error("[export_function] Failed to open " + path);
      f.write(head.buf.data(), head.buf.size());
      f.write(body.data(), body.size());
      if (!f)
        throw std::runtime_error("[export_function] Failed to write " + path);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw std::runtime_error("[export_function] Failed to write " + path);
    }
  }

  void add(const ExportedFn& fun, const Args& args, const Kwargs& kwargs);
};

namespace {

bool is_implicit_broadcast(const array& a) {
  return a.has_primitive() &&
         std::string(a.primitive().name()) == "Broadcast" &&
         static_cast<const Broadcast&>(a.primitive()).implicit();
}

} // namespace

Traced trace_for_export(const ExportedFn& fun, const Args& args,
                        const Kwargs& kwargs, bool shapeless) {
  Args inputs = args;
  for (auto& [k, v] : kwargs) inputs.push_back(v);
  // Trace as compile does, without its fusion, so every node is a
  // primitive that has an MLX name.
  std::vector<array> tracers, outputs, tape, constants;
  std::unordered_set<uintptr_t> tracer_ids;
  {
    TracingScope scope;
    std::optional<ShapelessScope> sl;
    if (shapeless) sl.emplace();
    tracers = make_tracers(inputs);
    Args targs(tracers.begin(), tracers.begin() + args.size());
    Kwargs tkw;
    size_t j = args.size();
    for (auto& [k, v] : kwargs) tkw.emplace(k, tracers[j++]);
    outputs = fun(targs, tkw);
  }
  // The tape, in evaluation order: every node between the inputs and the
  // outputs, and the unevaluated nodes that depend on no input as long as
  // they have an MLX name (so a constant built inside the function, like
  // `constant + 0`, stores `constant` once, as MLX does). Values that are
  // evaluated, or built by a primitive with no MLX name and no input, are
  // constants: their value now is stored. An explicit stack, for deep
  // graphs.
  for (auto& t : tracers) tracer_ids.insert(t.id());
  std::unordered_map<uintptr_t, bool> depends; // visited, and on an input
  std::unordered_set<uintptr_t> constant_ids;
  {
    struct Frame {
      array a;
      size_t next = 0;
    };
    std::vector<Frame> stack;
    auto visited = [&](const array& a) { return depends.count(a.id()) > 0; };
    auto push = [&](const array& a) {
      if (visited(a)) return;
      if (tracer_ids.count(a.id())) {
        depends[a.id()] = true;
        return;
      }
      if (!a.has_primitive() || a.is_available()) {
        depends[a.id()] = false;
        if (constant_ids.insert(a.id()).second) constants.push_back(a);
        return;
      }
      stack.push_back({a});
    };
    for (auto& o : outputs) {
      push(o);
      while (!stack.empty()) {
        auto& f = stack.back();
        const auto& ins = f.a.inputs();
        if (f.next < ins.size()) {
          array x = ins[f.next++];
          push(x);
          continue;
        }
        array a = f.a;
        stack.pop_back();
        if (visited(a)) continue;
        bool dep = false;
        for (auto& x : a.inputs()) dep = dep || depends.at(x.id());
        bool node = dep;
        if (!dep) {
          try {
            mlxfn::describe(a, shapeless);
            node = true;
          } catch (const std::invalid_argument&) {
            node = false;
          }
        }
        if (node) {
          for (auto& s : a.outputs()) depends[s.id()] = dep;
          depends[a.id()] = dep;
          tape.push_back(a);
        } else {
          depends[a.id()] = false;
          if (constant_ids.insert(a.id()).second) constants.push_back(a);
        }
      }
    }
  }
  if (!constants.empty()) eval(constants);

  return Traced{tracers, outputs, tape, constants, tracer_ids};
}

void ExportFile::add(const ExportedFn& fun, const Args& args,
                     const Kwargs& kwargs) {
  for (auto& sig : signatures) {
    if (matches(sig, args, kwargs, shapeless)) {
      throw std::runtime_error(
          "[export_function] Attempting to export a function twice with the "
          "same signature is not allowed.");
    }
  }
  Signature sig;
  Args inputs = args;
  for (auto& [k, v] : kwargs) {
    sig.kwarg_keys.push_back(k);
    inputs.push_back(v);
  }
  for (auto& a : inputs) {
    sig.shapes.push_back(a.shape());
    sig.dtypes.push_back(a.dtype());
  }

  auto traced = trace_for_export(fun, args, kwargs, shapeless);
  auto& tracers = traced.tracers;
  auto& outputs = traced.outputs;
  auto& tape = traced.tape;
  auto& constants = traced.constants;
  auto& tracer_ids = traced.tracer_ids;

  Out out;
  out.u64(sig.kwarg_keys.size());
  for (auto& k : sig.kwarg_keys) out.str(k);
  out.u64(tracers.size());
  for (auto& t : tracers) out.u64(t.id());
  out.u64(tracers.size());
  for (auto& t : tracers) {
    out.ints(t.shape());
    out.dtype(t.dtype());
  }
  out.u64(outputs.size());
  for (auto& o : outputs) out.u64(o.id());

  // Shapeless: an implicit broadcast (an elementwise op lining up its
  // operands) is written as MLX writes it then, a Broadcast whose further
  // inputs give the shape, just before its first consumer.
  std::unordered_map<uintptr_t, array> deferred;
  std::unordered_map<uintptr_t, uintptr_t> underlying;
  if (shapeless) {
    for (auto& n : tape) {
      if (is_implicit_broadcast(n)) {
        deferred.emplace(n.id(), n);
        underlying.emplace(n.id(), n.inputs()[0].id());
      }
    }
  }

  std::vector<std::string> entries;
  // An input or a constant; a node written as a constant (folded) gives
  // its own id with its value.
  auto entry_for_leaf = [&](const array& a, uintptr_t id) {
    Out e;
    e.u64(id);
    e.boolean(false);
    if (tracer_ids.count(id)) {
      e.boolean(false);
    } else {
      e.boolean(true);
      if (constants_written.insert(id).second) {
        constants_kept.push_back(a);
        auto c = io::detail::row_major(a, "export_function");
        e.ints(c.shape());
        e.dtype(c.dtype());
        e.buf.append(c.template data<char>(), c.nbytes());
      }
    }
    entries.push_back(std::move(e.buf));
  };
  for (auto& t : tracers) {
    entry_for_leaf(t, t.id());
  }
  for (auto& c : constants) entry_for_leaf(c, c.id());

  std::unordered_set<uintptr_t> emitted;
  std::function<void(const array&, const array*)> emit =
      [&](const array& n, const array* consumer) {
        if (emitted.count(n.id())) return;
        if (auto value = mlxfn::folded(n, shapeless)) {
          emitted.insert(n.id());
          entry_for_leaf(*value, n.id());
          return;
        }
        std::vector<array> ins = mlxfn::operands(n);
        // Constants the MLX node takes that kiln's does not.
        for (auto& x : ins) {
          if (x.has_primitive() || tracer_ids.count(x.id()) ||
              constants_written.count(x.id())) {
            continue;
          }
          entry_for_leaf(x, x.id());
        }
        if (consumer) {
          // Further inputs: the consumer's other operands, as given.
          for (auto& x : consumer->inputs()) {
            if (x.id() == n.id()) continue;
            auto u = underlying.find(x.id());
            if (u != underlying.end()) {
              ins.push_back(deferred.at(x.id()).inputs()[0]);
            } else {
              ins.push_back(x);
            }
          }
        }
        emitted.insert(n.id());
        auto [name, state] = mlxfn::describe(n, shapeless);
        Out e;
        e.u64(n.id());
        e.boolean(true);
        e.u64(ins.size());
        for (auto& x : ins) e.u64(x.id());
        write_stream(e, n.primitive().stream());
        e.str(name);
        write_state(e, mlxfn::schema(name), state, name);
        auto outs = n.outputs();
        if (outs.size() == 1) {
          e.u64(0);
          e.ints(n.shape());
          e.dtype(n.dtype());
        } else {
          e.u64(outs.size());
          e.u64(outs.size());
          for (auto& o : outs) e.u64(o.id());
          e.u64(outs.size());
          for (auto& o : outs) e.ints(o.shape());
          e.u64(outs.size());
          for (auto& o : outs) e.dtype(o.dtype());
          for (auto& o : outs) emitted.insert(o.id());
        }
        entries.push_back(std::move(e.buf));
      };
  for (auto& n : tape) {
    if (deferred.count(n.id())) continue;
    for (auto& x : n.inputs()) {
      auto d = deferred.find(x.id());
      if (d != deferred.end()) emit(d->second, &n);
    }
    emit(n, nullptr);
  }
  for (auto& o : outputs) {
    auto d = deferred.find(o.id());
    if (d != deferred.end()) emit(d->second, nullptr);
  }
  out.u64(entries.size());
  for (auto& e : entries) out.buf += e;

  signatures.push_back(std::move(sig));
  body += out.buf;
  rewrite();
}

// One function read back: its recorded graph, rebuilt with kiln's ops on
// each call's inputs.
struct ImportedGraph {
  struct Node {
    std::string name;
    mlxfn::State state;
    std::vector<int> inputs; // slots
    std::vector<int> outputs;
    mlxfn::NodeInfo info;
    Stream stream{0, Device::cpu};
  };
  Signature sig;
  int slots = 0;
  std::vector<int> input_slots;
  std::vector<std::pair<int, array>> constants;
  std::vector<Node> nodes;
  std::vector<int> outputs;

  std::vector<array> run(const std::vector<array>& inputs,
                         bool shapeless) const {
    std::vector<std::optional<array>> value(slots);
    for (size_t i = 0; i < inputs.size(); ++i)
      value[input_slots[i]] = inputs[i];
    for (auto& [k, c] : constants) value[k] = c;
    for (auto& n : nodes) {
      std::vector<array> in;
      for (int k : n.inputs) in.push_back(*value[k]);
      auto outs = mlxfn::build(n.name, n.state, in, n.info, n.stream);
      if (outs.size() != n.outputs.size()) {
        throw std::runtime_error("[import_function] " + n.name + " gave " +
                                 std::to_string(outs.size()) +
                                 " outputs, the file records " +
                                 std::to_string(n.outputs.size()) + ".");
      }
      for (size_t k = 0; k < outs.size(); ++k) {
        if (outs[k].dtype() != n.info.dtypes[k] ||
            (!shapeless && outs[k].shape() != n.info.shapes[k])) {
          throw std::runtime_error(
              "[import_function] " + n.name + " built " +
              shape_str(outs[k].shape()) + " " + dtype_name(outs[k].dtype()) +
              " where the file records " + shape_str(n.info.shapes[k]) + " " +
              dtype_name(n.info.dtypes[k]) + ".");
        }
        value[n.outputs[k]] = outs[k];
      }
    }
    std::vector<array> result;
    for (int k : outputs) result.push_back(*value[k]);
    return result;
  }
};

struct ImportTable {
  bool shapeless = false;
  std::string metadata;
  std::vector<ImportedGraph> functions;
};

namespace {

Stream resolve_stream(int device_type) {
  Device d = device_type == 1 && is_available(Device::gpu) ? Device::gpu
                                                           : Device::cpu;
  return default_stream(d);
}

ImportedGraph read_function(In& in, bool shapeless,
                            std::unordered_map<uint64_t, array>& constants) {
  ImportedGraph g;
  auto nkw = in.count(8, "keyword names");
  for (size_t i = 0; i < nkw; ++i)
    g.sig.kwarg_keys.push_back(in.str("a keyword name"));
  auto input_ids = in.ids("input ids");
  auto ninputs = in.count(12, "inputs");
  if (ninputs != input_ids.size()) in.fail("the inputs' count");
  if (nkw > ninputs) in.fail("the keyword count");
  std::unordered_map<uint64_t, int> slot;
  auto slot_of = [&](uint64_t id) {
    auto [it, added] = slot.emplace(id, g.slots);
    if (added) ++g.slots;
    return it->second;
  };
  auto existing = [&](uint64_t id) {
    auto it = slot.find(id);
    if (it == slot.end()) in.fail("a node reads a value not defined before it");
    return it->second;
  };
  for (size_t i = 0; i < ninputs; ++i) {
    g.sig.shapes.push_back(in.shape("an input's shape"));
    g.sig.dtypes.push_back(in.dtype("an input's dtype"));
    g.input_slots.push_back(slot_of(input_ids[i]));
  }
  auto output_ids = in.ids("output ids");
  auto tape_size = in.count(9, "tape");
  for (size_t t = 0; t < tape_size; ++t) {
    auto id = in.u64("a node id");
    if (!in.boolean("a node kind")) {
      if (!in.boolean("a leaf kind")) {
        existing(id); // an input
        continue;
      }
      auto c = constants.find(id);
      if (c == constants.end()) {
        auto shape = in.shape("a constant's shape");
        auto dtype = in.dtype("a constant's dtype");
        size_t bytes = dtype.size;
        for (auto d : shape) {
          if (d && bytes > (in.data.size() - in.pos) / static_cast<size_t>(d)) {
            in.fail("a constant's data");
          }
          bytes *= static_cast<size_t>(d);
        }
        in.need(bytes, "a constant's data");
        auto buffer = allocator::malloc(bytes);
        std::memcpy(buffer.raw(), in.data.data() + in.pos, bytes);
        io::detail::fix_loaded_bytes(static_cast<char*>(buffer.raw()), bytes,
                                     dtype, 0);
        array buf(buffer, shape, dtype);
        in.pos += bytes;
        c = constants.emplace(id, buf).first;
      }
      g.constants.emplace_back(slot_of(id), c->second);
      continue;
    }
    ImportedGraph::Node n;
    for (auto x : in.ids("a node's inputs")) n.inputs.push_back(existing(x));
    in.i32("a stream");
    int device_type = in.i32("a stream");
    in.i32("a stream");
    n.stream = resolve_stream(device_type);
    n.name = in.str("a primitive name");
    n.state = read_state(in, mlxfn::schema(n.name));
    n.info.shapeless = shapeless;
    auto nsib = in.u64("a sibling count");
    if (nsib == 0) {
      n.info.shapes.push_back(in.shape("an output shape"));
      n.info.dtypes.push_back(in.dtype("an output dtype"));
      n.outputs.push_back(slot_of(id));
    } else {
      auto ids = in.ids("sibling ids");
      auto ns = in.count(8, "sibling shapes");
      if (ns != ids.size()) in.fail("sibling shapes");
      for (size_t k = 0; k < ns; ++k)
        n.info.shapes.push_back(in.shape("a sibling shape"));
      auto nd = in.count(5, "sibling dtypes");
      if (nd != ids.size()) in.fail("sibling dtypes");
      for (size_t k = 0; k < nd; ++k)
        n.info.dtypes.push_back(in.dtype("a sibling dtype"));
      for (auto sid : ids) n.outputs.push_back(slot_of(sid));
    }
    g.nodes.push_back(std::move(n));
  }
  for (auto id : output_ids) g.outputs.push_back(existing(id));
  return g;
}

} // namespace

} // namespace detail

FunctionExporter::FunctionExporter(std::string file, ExportedFn fun,
                                   bool shapeless, std::string metadata)
    : file_(std::make_shared<detail::ExportFile>()), fun_(std::move(fun)) {
  file_->path = std::move(file);
  file_->shapeless = shapeless;
  file_->metadata = std::move(metadata);
  file_->rewrite();
}

void FunctionExporter::operator()(const Args& args, const Kwargs& kwargs) {
  if (closed_) {
    throw std::runtime_error(
        "[export_function] Attempting to write after exporting is closed.");
  }
  file_->add(fun_, args, kwargs);
}

void FunctionExporter::close() { closed_ = true; }

FunctionExporter exporter(const std::string& file, ExportedFn fun,
                          bool shapeless, const std::string& metadata) {
  return FunctionExporter(file, std::move(fun), shapeless, metadata);
}

void export_function(const std::string& file, ExportedFn fun, const Args& args,
                     const Kwargs& kwargs, bool shapeless,
                     const std::string& metadata) {
  exporter(file, std::move(fun), shapeless, metadata)(args, kwargs);
}

ImportedFunction::ImportedFunction(const std::string& file)
    : table_(std::make_shared<detail::ImportTable>()) {
  std::ifstream f(file, std::ios::binary);
  if (!f) throw std::runtime_error("[import_function] Failed to open " + file);
  std::string data((std::istreambuf_iterator<char>(f)),
                   std::istreambuf_iterator<char>());
  detail::In in{data, file};
  in.str("the version");
  int count = in.i32("the function count");
  if (count < 0) in.fail("the function count");
  table_->shapeless = in.boolean("the shapeless flag");
  table_->metadata = in.str("the metadata");
  std::unordered_map<uint64_t, array> constants;
  for (int i = 0; i < count; ++i) {
    table_->functions.push_back(
        detail::read_function(in, table_->shapeless, constants));
  }
}

const std::string& ImportedFunction::metadata() const {
  return table_->metadata;
}

std::vector<array> ImportedFunction::operator()(const Args& args,
                                                const Kwargs& kwargs) const {
  auto& t = *table_;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    auto& g = t.functions[i];
    if (!detail::matches(g.sig, args, kwargs, t.shapeless)) continue;
    std::vector<array> inputs = args;
    for (auto& [k, v] : kwargs) inputs.push_back(v);
    return g.run(inputs, t.shapeless);
  }
  std::ostringstream msg;
  std::vector<detail::Signature> sigs;
  for (auto& g : t.functions) sigs.push_back(g.sig);
  msg << "[import_function::call] No imported function found which matches "
      << "the given positional and keyword arguments. Possible functions "
         "include:\n"
      << detail::describe_signatures(sigs) << "\nCalled with " << args.size()
      << " positional inputs and " << kwargs.size() << " keyword inputs:\n";
  for (size_t i = 0; i < args.size(); ++i) {
    msg << "  " << i + 1 << ": " << detail::shape_str(args[i].shape()) << " "
        << dtype_name(args[i].dtype()) << "\n";
  }
  for (auto& [k, v] : kwargs) {
    msg << "  \"" << k << "\": " << detail::shape_str(v.shape()) << " "
        << dtype_name(v.dtype()) << "\n";
  }
  throw std::invalid_argument(msg.str());
}

ImportedFunction import_function(const std::string& file) {
  return ImportedFunction(file);
}

} // namespace kiln
