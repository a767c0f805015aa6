#include "kiln/backend/cuda/compiled_source.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kiln/backend/cuda/kernels.h"
#include "kiln/core/half.h"

namespace kiln::cuda {

namespace {

using detail::JitKernelSpec;
using detail::JitRole;

bool is_half(Dtype d) { return d == float16 || d == bfloat16; }

// The type values are computed in: 16-bit floats widen to float.
std::string compute_type(Dtype d) {
  return is_half(d) ? "float" : device_type(d);
}

// An exact literal of a constant in its compute type: its bits, with the
// value in a comment. 16-bit floats are widened to float bits here, so the
// source needs no fp16/bf16 header for them.
std::string literal(const FusedConstant& c) {
  Dtype d = c.dtype;
  if (d == bool_) return c.bits ? "true" : "false";
  char value[40];
  if (d == float64) {
    double v;
    std::memcpy(&v, &c.bits, 8);
    std::snprintf(value, sizeof(value), "%.17g", v);
    return "__longlong_as_double(" + detail::hex_literal(c.bits) + ") /* " +
           value + " */";
  }
  if (d == float32 || is_half(d)) {
    uint16_t h = static_cast<uint16_t>(c.bits);
    float v = d == float32   ? detail::bits_float(static_cast<uint32_t>(c.bits))
              : d == float16 ? detail::half_bits_to_float(h)
                             : detail::bfloat16_bits_to_float(h);
    uint32_t b;
    std::memcpy(&b, &v, 4);
    std::snprintf(value, sizeof(value), "%.9g", v);
    return "__int_as_float(" + std::to_string(static_cast<int32_t>(b)) +
           ") /* " + value + " */";
  }
  // Integers: the value's bytes, zero-extended; the conversion wraps.
  return "static_cast<" + std::string(device_type(d)) + ">(" +
         detail::hex_literal(c.bits) + ")";
}

std::string var(int arg) {
  return (arg < 0 ? "x" : "t") + std::to_string(arg < 0 ? -arg - 1 : arg);
}

// Whether the vector loops call region2 (two elements a call): where a
// 16-bit float is rounded, a packed conversion rounds both elements in one
// instruction. Conversions issue at a quarter of the FMA rate, and one per
// op per element bounds bfloat16 kernels (123 against 107 us for the
// issue's 64M-element kernel on an H200).
bool paired(const JitKernelSpec& spec, int width) {
  if (width % 2 != 0) return false;
  for (auto& op : spec.region->ops()) {
    if (is_half(op.dtype)) return true;
  }
  return false;
}

// The region on `lanes` elements (1 or 2): `region(x..., y...)` takes the
// non-constant inputs in their compute types and stores each output through
// a reference; region2 takes and stores two of each (xK_0, xK_1). Each op's
// value is rounded to its dtype (as_dtype, as_dtype_pair), as storing it
// between unfused kernels would.
void emit_region(std::string& s, const JitKernelSpec& spec, int lanes) {
  auto& ops = spec.region->ops();
  auto& outs = spec.region->outputs();
  auto& constants = spec.region->constants();
  auto lane = [&](const std::string& v, int l) {
    return lanes == 1 ? v : v + "_" + std::to_string(l);
  };
  // Constants are shared by the lanes.
  auto arg = [&](int a, int l) {
    if (a < 0 && spec.roles[-a - 1] == JitRole::constant) return var(a);
    return lane(var(a), l);
  };
  s += lanes == 1 ? "static __device__ __forceinline__ void region("
                  : "static __device__ __forceinline__ void region2(";
  bool first = true;
  auto param = [&](const std::string& p) {
    s += (first ? "" : ", ") + p;
    first = false;
  };
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] == JitRole::constant) continue;
    for (int l = 0; l < lanes; ++l) {
      param("const " + compute_type(spec.input_dtypes[k]) + " " +
            lane("x" + std::to_string(k), l));
    }
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    for (int l = 0; l < lanes; ++l) {
      param(std::string(device_type(ops[outs[o]].dtype)) + "& " +
            lane("y" + std::to_string(o), l));
    }
  }
  s += ") {\n";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] != JitRole::constant) continue;
    s += "  const " + compute_type(spec.input_dtypes[k]) + " x" +
         std::to_string(k) + " = " + literal(*constants[k]) + ";\n";
  }
  for (size_t j = 0; j < ops.size(); ++j) {
    auto& op = ops[j];
    std::string name = op.primitive->name();
    std::string t = "t" + std::to_string(j), dt = device_type(op.dtype);
    // Every value of a 16-bit dtype here is one of that dtype (rounded as
    // it was made), so an op whose operands share its dtype takes that
    // dtype's form (op_for), as the unfused kernels do.
    bool same_dtype = true;
    for (int a : op.args) {
      same_dtype &=
          (a < 0 ? spec.input_dtypes[-a - 1] : ops[a].dtype) == op.dtype;
    }
    std::string functor = is_half(op.dtype) && same_dtype
                              ? "op_for<" + name + ", " + dt + ">"
                              : name;
    std::vector<std::string> value(lanes);
    for (int l = 0; l < lanes; ++l) {
      if (name == "AsType") {
        value[l] = arg(op.args[0], l); // the rounding is the conversion
        continue;
      }
      value[l] = functor + "{}(";
      for (size_t k = 0; k < op.args.size(); ++k) {
        value[l] += (k ? ", " : "") + arg(op.args[k], l);
      }
      value[l] += ")";
    }
    std::string ct = compute_type(op.dtype);
    auto first_out = std::find(outs.begin(), outs.end(), static_cast<int>(j));
    if (first_out != outs.end()) {
      // An output is stored as it is rounded (one conversion, not two);
      // later ops read the stored value back.
      std::string y = "y" + std::to_string(first_out - outs.begin());
      if (lanes == 1) {
        s += "  " + y + " = cast_to<" + dt + ">(" + value[0] + ");\n" +
             "  const " + ct + " " + t + " = cast_to<" + ct + ">(" + y +
             ");\n";
      } else {
        s += "  store_pair<" + dt + ">(" + value[0] + ", " + value[1] +
             ", " + y + "_0, " + y + "_1);\n" + "  const " + ct + " " + t +
             "_0 = cast_to<" + ct + ">(" + y + "_0), " + t + "_1 = cast_to<" +
             ct + ">(" + y + "_1);\n";
      }
    } else if (lanes == 1) {
      s += "  const " + ct + " " + t + " = as_dtype<" + dt + ">(" + value[0] +
           ");\n";
    } else {
      s += "  " + ct + " " + t + "_0, " + t + "_1;\n" + "  as_dtype_pair<" +
           dt + ">(" + value[0] + ", " + value[1] + ", " + t + "_0, " + t +
           "_1);\n";
    }
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    // Stored above, unless an earlier output is the same op.
    if (std::find(outs.begin(), outs.end(), outs[o]) == outs.begin() + o) {
      continue;
    }
    std::string y = "y" + std::to_string(o), t = "t" + std::to_string(outs[o]);
    std::string dt = device_type(ops[outs[o]].dtype);
    if (lanes == 1) {
      s += "  " + y + " = cast_to<" + dt + ">(" + t + ");\n";
    } else {
      s += "  store_pair<" + dt + ">(" + t + "_0, " + t + "_1, " + y + "_0, " +
           y + "_1);\n";
    }
  }
  s += "}\n\n";
}

// The kernel's parameters and the scalar inputs' loads (once per thread).
void emit_signature(std::string& s, const JitKernelSpec& spec,
                    const std::string& symbol, int strided_inputs) {
  auto& ops = spec.region->ops();
  auto& outs = spec.region->outputs();
  s += "extern \"C\" __global__ void " + symbol + "(";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] == JitRole::constant) continue;
    s += std::string("const ") + device_type(spec.input_dtypes[k]) +
         "* __restrict__ in" + std::to_string(k) + ", ";
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    s += std::string(device_type(ops[outs[o]].dtype)) + "* __restrict__ out" +
         std::to_string(o) + ", ";
  }
  s += "const int64_t n";
  if (spec.rows_width > 0) {
    s += ", const int64_t cols";
  } else if (!spec.contiguous) {
    s += ", const __grid_constant__ Strided<" +
         std::to_string(strided_inputs) + "> l";
  }
  // Launched with a programmatic dependency (launch_queue.h): nothing is
  // read before the previous kernel has finished.
  s += ") {\n  const GridDependency dependency;\n";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] != JitRole::scalar) continue;
    Dtype d = spec.input_dtypes[k];
    s += "  const " + compute_type(d) + " s" + std::to_string(k) +
         " = cast_to<" + compute_type(d) + ">(in" + std::to_string(k) +
         "[0]);\n";
  }
}

// The call of region (lanes 1) or region2 (lanes 2), where `load(k, l)`
// reads array input k in lane l and `out(o, l)` names output o's element.
template <typename Load, typename Out>
std::string region_call_lanes(const JitKernelSpec& spec, size_t outputs,
                              int lanes, Load load, Out out) {
  std::string s = lanes == 1 ? "region(" : "region2(";
  bool first = true;
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    auto role = spec.roles[k];
    if (role == JitRole::constant) continue;
    for (int l = 0; l < lanes; ++l) {
      s += first ? "" : ", ";
      first = false;
      if (role == JitRole::scalar) {
        s += "s" + std::to_string(k);
      } else {
        s += "cast_to<" + compute_type(spec.input_dtypes[k]) + ">(" +
             load(k, l) + ")";
      }
    }
  }
  for (size_t o = 0; o < outputs; ++o) {
    for (int l = 0; l < lanes; ++l) s += ", " + out(o, l);
  }
  return s + ")";
}

// The call of region() for element e, where `load(k)` reads array input k
// and `out(o)` names output o's element.
template <typename Load, typename Out>
std::string region_call(const JitKernelSpec& spec, size_t outputs, Load load,
                        Out out) {
  return region_call_lanes(spec, outputs, 1,
                           [&](size_t k, int) { return load(k); },
                           [&](size_t o, int) { return out(o); });
}

// The loop over the N elements of the u-th vectors (a<k>[u], b<o>), in
// pairs where `pairs`; `element(k)` is input k's expression before the
// element index (".v[j]" follows unless it is a row input's value).
template <typename Element>
std::string vector_loop(const JitKernelSpec& spec, size_t outputs,
                        bool pairs, Element element) {
  auto at = [&](size_t k, const std::string& j) {
    auto e = element(k);
    return spec.roles[k] == JitRole::row ? e : e + ".v[" + j + "]";
  };
  auto out = [](size_t o, const std::string& j) {
    return "b" + std::to_string(o) + ".v[" + j + "]";
  };
  if (!pairs) {
    return "#pragma unroll\n"
           "        for (int j = 0; j < N; ++j) {\n          " +
           region_call(
               spec, outputs, [&](size_t k) { return at(k, "j"); },
               [&](size_t o) { return out(o, "j"); }) +
           ";\n        }\n";
  }
  const char* lane[] = {"j", "j + 1"};
  return "#pragma unroll\n"
         "        for (int j = 0; j < N; j += 2) {\n          " +
         region_call_lanes(
             spec, outputs, 2,
             [&](size_t k, int l) { return at(k, lane[l]); },
             [&](size_t o, int l) { return out(o, lane[l]); }) +
         ";\n        }\n";
}

// Flat kernel over n elements: each grid-stride step a thread loads U
// vectors of N elements of every array input (16-byte accesses, U loads in
// flight, each coalesced across the block), computes, and stores; the tail
// and misaligned views go element by element.
void emit_contiguous(std::string& s, const JitKernelSpec& spec) {
  auto& ops = spec.region->ops();
  auto& outs = spec.region->outputs();
  std::string N = std::to_string(fused_vec_width(spec));
  std::string U = std::to_string(fused_vectors_per_thread(spec));
  auto vec_of = [&](Dtype d) {
    return "Vec<" + std::string(device_type(d)) + ", N>";
  };
  s += "  constexpr int N = " + N + ", U = " + U + ";\n";
  s += "  const bool vec = true";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] != JitRole::vector) continue;
    s += std::string(" &&\n      is_aligned<") +
         device_type(spec.input_dtypes[k]) + ", N>(in" + std::to_string(k) +
         ")";
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    s += std::string(" &&\n      is_aligned<") +
         device_type(ops[outs[o]].dtype) + ", N>(out" + std::to_string(o) +
         ")";
  }
  s += ";\n"
       "  const int64_t block = blockDim.x;\n"
       "  const int64_t step = static_cast<int64_t>(gridDim.x) * block * N * "
       "U;\n"
       "  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * block * U +\n"
       "                    threadIdx.x) * N;\n"
       "       i < n; i += step) {\n"
       "    if (vec && i + ((U - 1) * block + 1) * N <= n) {\n";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] != JitRole::vector) continue;
    s += "      " + vec_of(spec.input_dtypes[k]) + " a" + std::to_string(k) +
         "[U];\n";
  }
  s += "#pragma unroll\n"
       "      for (int u = 0; u < U; ++u) {\n";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] != JitRole::vector) continue;
    std::string ks = std::to_string(k);
    s += "        a" + ks + "[u] = load_vec<" +
         device_type(spec.input_dtypes[k]) + ", N>(in" + ks +
         ", i + u * block * N);\n";
  }
  s += "      }\n"
       "#pragma unroll\n"
       "      for (int u = 0; u < U; ++u) {\n";
  for (size_t o = 0; o < outs.size(); ++o) {
    s += "        " + vec_of(ops[outs[o]].dtype) + " b" + std::to_string(o) +
         ";\n";
  }
  s += vector_loop(spec, outs.size(), paired(spec, fused_vec_width(spec)),
                   [](size_t k) { return "a" + std::to_string(k) + "[u]"; });
  for (size_t o = 0; o < outs.size(); ++o) {
    std::string os = std::to_string(o);
    s += std::string("        store_vec<") + device_type(ops[outs[o]].dtype) +
         ", N>(out" + os + ", i + u * block * N, b" + os + ");\n";
  }
  s += "      }\n"
       "    } else {\n"
       "#pragma unroll 1\n"
       "      for (int k = 0; k < U * N; ++k) {\n"
       "        const int64_t e = i + (k / N) * block * N + k % N;\n"
       "        if (e < n) {\n          " +
       region_call(
           spec, outs.size(),
           [](size_t k) { return "in" + std::to_string(k) + "[e]"; },
           [](size_t o) { return "out" + std::to_string(o) + "[e]"; }) +
       ";\n        }\n      }\n    }\n  }\n}\n";
}

// Strided kernel over the collapsed shape: element i's offsets in each
// strided input from its row-major position (divisions in IdxT); outputs
// are row-major, so output element i is at i. When the innermost extent is
// a multiple of R (strided_run_length), each thread takes R consecutive
// elements of one row: one offset computation, then R loads of every input
// in flight before computing, as the flat kernel's vectors give it. The
// launcher gives it n / R threads then.
void emit_strided(std::string& s, const JitKernelSpec& spec, bool large,
                  int strided_inputs) {
  std::vector<int> slot(spec.roles.size(), -1);
  int next = 0;
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] == JitRole::strided) slot[k] = next++;
  }
  auto outputs = spec.region->outputs().size();
  std::string S = std::to_string(strided_inputs);
  s += std::string("  using IdxT = ") +
       (large ? "long long" : "unsigned int") + ";\n";
  s += "  constexpr int R = " + std::to_string(strided_run_length) +
       ";\n"
       "  const int last = l.ndim - 1;\n"
       "  if (last >= 0 && l.shape[last] % R == 0) {\n"
       "    for (int64_t i = first_index<R>(); i < n; i += grid_step<R>()) "
       "{\n"
       "      int64_t off[" + S + "];\n"
       "      strided_offsets(static_cast<IdxT>(i), l, off);\n";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (slot[k] < 0) continue;
    std::string ks = std::to_string(k), sl = std::to_string(slot[k]);
    s += std::string("      ") + device_type(spec.input_dtypes[k]) + " a" +
         ks + "[R];\n"
         "#pragma unroll\n"
         "      for (int r = 0; r < R; ++r) a" + ks + "[r] = in" + ks +
         "[off[" + sl + "] + r * l.strides[" + sl + "][last]];\n";
  }
  s += "#pragma unroll\n"
       "      for (int r = 0; r < R; ++r) {\n        " +
       region_call(
           spec, outputs,
           [](size_t k) { return "a" + std::to_string(k) + "[r]"; },
           [](size_t o) { return "out" + std::to_string(o) + "[i + r]"; }) +
       ";\n      }\n    }\n    return;\n  }\n";
  s += "  for (int64_t i = first_index<1>(); i < n; i += grid_step<1>()) {\n"
       "    int64_t off[" + S + "];\n"
       "    strided_offsets(static_cast<IdxT>(i), l, off);\n    " +
       region_call(
           spec, outputs,
           [&](size_t k) {
             return "in" + std::to_string(k) + "[off[" +
                    std::to_string(slot[k]) + "]]";
           },
           [](size_t o) { return "out" + std::to_string(o) + "[i]"; }) +
       ";\n  }\n}\n";
}

// Rows kernel over n elements of (n / cols, cols), outputs row-major: the
// contiguous kernel's loop (U vectors of N elements per thread and
// grid-stride step, all loads before any store) where a row input is read
// at row e / cols and a column input at e % cols. N divides cols (the
// launcher picks N = 1 otherwise), so each vector lies in one row: one
// division and one scalar load per row input, an N-wide load per column
// input. The tail goes element by element.
void emit_rows(std::string& s, const JitKernelSpec& spec, bool large) {
  auto& ops = spec.region->ops();
  auto& outs = spec.region->outputs();
  bool rows = false, columns = false;
  for (auto r : spec.roles) {
    rows |= r == JitRole::row;
    columns |= r == JitRole::column;
  }
  auto vec_of = [&](Dtype d) {
    return "Vec<" + std::string(device_type(d)) + ", N>";
  };
  // Where input k's element e is: e itself, or its row or column.
  auto at = [](JitRole r) {
    return r == JitRole::row ? "row" : r == JitRole::column ? "col" : "e";
  };
  // Element e's row and column, where an input needs them.
  auto position = [&](const std::string& pad) {
    std::string p;
    if (rows || columns) {
      p += pad + "const IdxT row = static_cast<IdxT>(e) / "
                 "static_cast<IdxT>(cols);\n";
    }
    if (columns) {
      p += pad + "const IdxT col = static_cast<IdxT>(e) - row * "
                 "static_cast<IdxT>(cols);\n";
    }
    return p;
  };
  s += std::string("  using IdxT = ") +
       (large ? "unsigned long long" : "unsigned int") + ";\n";
  s += "  constexpr int N = " + std::to_string(spec.rows_width) +
       ", U = " + std::to_string(fused_vectors_per_thread(spec)) + ";\n";
  s += "  const int64_t block = blockDim.x;\n"
       "  const int64_t step = static_cast<int64_t>(gridDim.x) * block * N * "
       "U;\n"
       "  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * block * U +\n"
       "                    threadIdx.x) * N;\n"
       "       i < n; i += step) {\n"
       "    if (i + ((U - 1) * block + 1) * N <= n) {\n";
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    auto r = spec.roles[k];
    if (r != JitRole::vector && r != JitRole::column && r != JitRole::row) {
      continue;
    }
    Dtype d = spec.input_dtypes[k];
    s += "      " +
         (r == JitRole::row ? std::string(device_type(d)) : vec_of(d)) +
         " a" + std::to_string(k) + "[U];\n";
  }
  s += "#pragma unroll\n"
       "      for (int u = 0; u < U; ++u) {\n"
       "        const int64_t e = i + u * block * N;\n" +
       position("        ");
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    auto r = spec.roles[k];
    std::string ks = std::to_string(k);
    if (r == JitRole::row) {
      s += "        a" + ks + "[u] = in" + ks + "[row];\n";
    } else if (r == JitRole::vector || r == JitRole::column) {
      s += "        a" + ks + "[u] = load_vec<" +
           device_type(spec.input_dtypes[k]) + ", N>(in" + ks + ", " +
           at(r) + ");\n";
    }
  }
  s += "      }\n"
       "#pragma unroll\n"
       "      for (int u = 0; u < U; ++u) {\n";
  for (size_t o = 0; o < outs.size(); ++o) {
    s += "        " + vec_of(ops[outs[o]].dtype) + " b" + std::to_string(o) +
         ";\n";
  }
  s += vector_loop(spec, outs.size(), paired(spec, spec.rows_width),
                   [](size_t k) { return "a" + std::to_string(k) + "[u]"; });
  for (size_t o = 0; o < outs.size(); ++o) {
    std::string os = std::to_string(o);
    s += std::string("        store_vec<") + device_type(ops[outs[o]].dtype) +
         ", N>(out" + os + ", i + u * block * N, b" + os + ");\n";
  }
  s += "      }\n"
       "    } else {\n"
       "#pragma unroll 1\n"
       "      for (int k = 0; k < U * N; ++k) {\n"
       "        const int64_t e = i + (k / N) * block * N + k % N;\n"
       "        if (e < n) {\n" +
       position("          ") + "          " +
       region_call(
           spec, outs.size(),
           [&](size_t k) {
             return "in" + std::to_string(k) + "[" + at(spec.roles[k]) + "]";
           },
           [](size_t o) { return "out" + std::to_string(o) + "[e]"; }) +
       ";\n        }\n      }\n    }\n  }\n}\n";
}

} // namespace

int fused_vec_width(const JitKernelSpec& spec) {
  int widest = 1;
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] == JitRole::vector || spec.roles[k] == JitRole::column) {
      widest = std::max<int>(widest, spec.input_dtypes[k].size);
    }
  }
  for (int o : spec.region->outputs()) {
    widest = std::max<int>(widest, spec.region->ops()[o].dtype.size);
  }
  return 16 / widest;
}

int fused_vectors_per_thread(const JitKernelSpec& spec) {
  int width = spec.rows_width > 0 ? spec.rows_width : fused_vec_width(spec);
  return width == 1 ? 4 : width <= 4 ? 2 : 1;
}

JitKernel fused_kernel(const JitKernelSpec& spec, bool large) {
  std::string key = detail::jit_kernel_key(spec);
  if (large) key += "|i64";
  std::string symbol = detail::jit_kernel_symbol(spec, key);
  bool halves = false;
  for (Dtype d : spec.input_dtypes) halves |= is_half(d);
  for (auto& op : spec.region->ops()) halves |= is_half(op.dtype);
  int strided_inputs = 0;
  for (auto r : spec.roles) strided_inputs += r == JitRole::strided;

  std::string s;
  s.reserve(4096);
  s += "// fused kernel " + symbol + "\n// key: " + key + "\n";
  if (!halves) s += "#define KILN_DEVICE_NO_HALF\n";
  s += "#include \"kiln/backend/cuda/device/compiled.cuh\"\n\n"
       "using namespace kiln::cuda;\n\n";
  emit_region(s, spec, 1);
  int width = spec.contiguous ? fused_vec_width(spec) : spec.rows_width;
  if (width > 0 && paired(spec, width)) {
    emit_region(s, spec, 2);
  }
  emit_signature(s, spec, symbol, strided_inputs);
  if (spec.contiguous) {
    emit_contiguous(s, spec);
  } else if (spec.rows_width > 0) {
    emit_rows(s, spec, large);
  } else {
    emit_strided(s, spec, large, strided_inputs);
  }
  // New with each model: the first call's compile time is what shows.
  return {symbol, s, symbol, {}, true};
}

} // namespace kiln::cuda
