#include "kiln/backend/cpu/jit_source.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "kiln/backend/common/c_types.h"
#include "kiln/backend/cpu/vector_math.h"
#include "kiln/core/half.h"

namespace kiln::detail {

namespace {

bool is_half(Dtype d) { return d == float16 || d == bfloat16; }

// The C type an element is stored as: 16-bit floats as their bits (the
// prelude converts them); complex64 never reaches a fused region.
const char* storage_type(Dtype d) {
  if (is_half(d)) return "uint16_t";
  const char* t = c_scalar_type(d);
  return t ? t : "double";
}

// The C type values are computed in (compute_t): 16-bit floats widen.
const char* compute_type(Dtype d) {
  return is_half(d) ? "float" : storage_type(d);
}

std::string load(Dtype d, const std::string& e) {
  if (d == float16) return "half_bits_to_float(" + e + ")";
  if (d == bfloat16) return "bfloat16_bits_to_float(" + e + ")";
  return e;
}

std::string store(Dtype d, const std::string& e) {
  if (d == float16) return "float_to_half_bits(" + e + ")";
  if (d == bfloat16) return "float_to_bfloat16_bits(" + e + ")";
  return e;
}

// A value computed in float rounded to dtype d's precision, as storing it
// (what the unfused ops do between ops) would.
std::string round_to(Dtype d, const std::string& e) {
  if (d == float16) return "kiln_round_f16(" + e + ")";
  if (d == bfloat16) return "kiln_round_bf16(" + e + ")";
  return e;
}

// An exact literal for a constant: its bits, with the value in a comment.
std::string literal(const FusedConstant& c) {
  Dtype d = c.dtype;
  if (d == bool_) return c.bits ? "true" : "false";
  char value[40] = "";
  std::string e;
  if (d == float32) {
    uint32_t b = static_cast<uint32_t>(c.bits);
    std::snprintf(value, sizeof(value), "%.9g", bits_float(b));
    e = "__builtin_bit_cast(float, " + std::to_string(b) + "u)";
  } else if (d == float64) {
    double v;
    std::memcpy(&v, &c.bits, 8);
    std::snprintf(value, sizeof(value), "%.17g", v);
    e = "__builtin_bit_cast(double, " + detail::hex_literal(c.bits) + ")";
  } else if (is_half(d)) {
    uint16_t b = static_cast<uint16_t>(c.bits);
    float v = d == float16 ? half_bits_to_float(b) : bfloat16_bits_to_float(b);
    std::snprintf(value, sizeof(value), "%.9g", v);
    e = load(d, std::to_string(b));
  } else {
    // Integers: bits are the value's bytes, zero-extended; the conversion
    // to the signed type wraps (defined since C++20).
    return std::string("static_cast<") + storage_type(d) + ">(" +
           detail::hex_literal(c.bits) + ")";
  }
  return e + " /* " + value + " */";
}

std::string var(int arg) {
  std::string v(1, arg < 0 ? 'x' : 't');
  v += std::to_string(arg < 0 ? -arg - 1 : arg);
  return v;
}

Dtype arg_dtype(const JitKernelSpec& spec, int arg) {
  return arg < 0 ? spec.input_dtypes[-arg - 1] : spec.region->ops()[arg].dtype;
}

// The value of arg when it is a baked constant of a floating dtype.
bool float_constant(const JitKernelSpec& spec, int arg, double& value) {
  if (arg >= 0 || spec.roles[-arg - 1] != JitRole::constant) return false;
  const auto& c = spec.region->constants()[-arg - 1];
  if (!c) return false;
  if (c->dtype == float32) {
    value = bits_float(static_cast<uint32_t>(c->bits));
  } else if (c->dtype == float64) {
    std::memcpy(&value, &c->bits, 8);
  } else if (c->dtype == float16 || c->dtype == bfloat16) {
    uint16_t b = static_cast<uint16_t>(c->bits);
    value = c->dtype == float16 ? half_bits_to_float(b)
                                : bfloat16_bits_to_float(b);
  } else {
    return false;
  }
  return true;
}

// x ** y for a constant y as the unfused CPU kernel runs it
// (elementwise.h): a square for 2, pow(|x|, y) with x's sign for odd y
// and without for even y when y is another integer; empty otherwise.
std::string power_by_constant(const JitKernelSpec& spec, const FusedOp& op) {
  double y;
  bool odd = false;
  if (is_complex(op.dtype) || !float_constant(spec, op.args[1], y) ||
      !(op.dtype == float64
            ? integer_exponent(y, odd)
            : integer_exponent(static_cast<float>(y), odd))) {
    return "";
  }
  std::string x = var(op.args[0]);
  if (y == 2) return "Square{}(" + x + ")";
  std::string p = "std::pow(std::abs(" + x + "), " + var(op.args[1]) + ")";
  return odd ? "std::copysign(" + p + ", " + x + ")" : p;
}

// One statement per op: `const T tj = Op{}(args);`.
void emit_ops(std::ostringstream& os, const JitKernelSpec& spec,
              const char* indent) {
  auto& ops = spec.region->ops();
  for (size_t j = 0; j < ops.size(); ++j) {
    auto& op = ops[j];
    std::string name = op.primitive->name();
    if (std::string p; name == "Power" && is_inexact(op.dtype) &&
                       !(p = power_by_constant(spec, op)).empty()) {
      std::string ct = compute_type(op.dtype);
      os << indent << "const " << ct << " t" << j << " = "
         << round_to(op.dtype, "static_cast<" + ct + ">(" + p + ")") << ";\n";
      continue;
    }
    std::string e;
    if (name == "AsType") {
      Dtype from = arg_dtype(spec, op.args[0]);
      std::string x = var(op.args[0]);
      if (op.dtype == bool_) {
        e = x + " != " + compute_type(from) + "(0)";
      } else if (is_half(op.dtype)) {
        e = round_to(op.dtype, "static_cast<float>(" + x + ")");
      } else {
        e = std::string("static_cast<") + compute_type(op.dtype) + ">(" + x +
            ")";
      }
    } else {
      std::string call = name + "{}(";
      for (size_t k = 0; k < op.args.size(); ++k) {
        call += (k ? ", " : "") + var(op.args[k]);
      }
      call += ")";
      e = round_to(op.dtype, std::string("static_cast<") +
                                 compute_type(op.dtype) + ">(" + call + ")");
    }
    os << indent << "const " << compute_type(op.dtype) << " t" << j << " = "
       << e << ";\n";
  }
}

} // namespace

std::string jit_kernel_source(const JitKernelSpec& spec, const std::string& key,
                              const std::string& symbol) {
  auto& outs = spec.region->outputs();
  auto& ops = spec.region->ops();
  auto& constants = spec.region->constants();
  std::ostringstream os;
  os << "\n// ---- fused kernel " << symbol << "\n// key: " << key << "\n\n";
  os << "static inline float kiln_round_f16(float x) {\n"
        "  return kiln::detail::half_bits_to_float(\n"
        "      kiln::detail::float_to_half_bits(x));\n}\n"
        "static inline float kiln_round_bf16(float x) {\n"
        "  return kiln::detail::bfloat16_bits_to_float(\n"
        "      kiln::detail::float_to_bfloat16_bits(x));\n}\n\n";
  os << "extern \"C\" void " << symbol
     << "(const void* const* in, void* const* out, const int64_t* shape,\n"
        "    const int64_t* strides, int ndim, int64_t begin, int64_t end) {\n"
        "  using namespace kiln::detail;\n";
  // Inputs: constants and scalars are hoisted out of the loop.
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    Dtype d = spec.input_dtypes[k];
    auto role = spec.roles[k];
    std::string p = "in";
    p += std::to_string(k);
    if (role == JitRole::constant) {
      os << "  const " << compute_type(d) << " x" << k << " = "
         << literal(*constants[k]) << ";\n";
      continue;
    }
    os << "  const " << storage_type(d) << "* " << p << " = static_cast<const "
       << storage_type(d) << "*>(in[" << k << "]);\n";
    if (role == JitRole::scalar) {
      os << "  const " << compute_type(d) << " x" << k << " = "
         << load(d, p + "[0]") << ";\n";
    }
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    const char* t = storage_type(ops[outs[o]].dtype);
    os << "  " << t << "* out" << o << " = static_cast<" << t << "*>(out[" << o
       << "]);\n";
  }
  // Loop body: load the array inputs at `at`, run the ops, store outputs
  // through the pointers named `out`<o>.
  auto body = [&](const char* indent, const std::string& at,
                  const std::string& out) {
    for (size_t k = 0; k < spec.roles.size(); ++k) {
      auto role = spec.roles[k];
      Dtype d = spec.input_dtypes[k];
      std::ostringstream idx;
      if (role == JitRole::vector) {
        idx << "in" << k << "[" << at << "]";
      } else if (role == JitRole::strided) {
        idx << "p" << k << "[" << at << " * s" << k << "]";
      } else if (role == JitRole::inner_unit) {
        idx << "p" << k << "[" << at << "]";
      } else if (role == JitRole::inner_repeat) {
        idx << "p" << k << "[0]";
      } else {
        continue; // constants and scalars: hoisted above
      }
      os << indent << "const " << compute_type(d) << " x" << k << " = "
         << load(d, idx.str()) << ";\n";
    }
    emit_ops(os, spec, indent);
    for (size_t o = 0; o < outs.size(); ++o) {
      os << indent << out << o << "[" << at
         << "] = " << store(ops[outs[o]].dtype, var(outs[o])) << ";\n";
    }
  };
  if (spec.contiguous) {
    // ivdep: a donated output is exactly an input (same index), never a
    // shifted overlap, so no runtime alias check is needed.
    os << "  (void)shape; (void)strides; (void)ndim;\n"
          "#pragma GCC ivdep\n"
          "  for (int64_t i = begin; i < end; ++i) {\n";
    body("    ", "i", "out");
    os << "  }\n}\n";
    return os.str();
  }
  // Inputs read through their strides (offsets stepped per row).
  std::vector<size_t> strided;
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    auto r = spec.roles[k];
    if (r == JitRole::strided || r == JitRole::inner_unit ||
        r == JitRole::inner_repeat) {
      strided.push_back(k);
    }
  }
  // Emits `line` once per strided input, '#' standing for its index.
  auto each = [&](const std::string& line) {
    for (size_t k : strided) {
      std::string s = line, n = std::to_string(k);
      for (size_t p; (p = s.find('#')) != std::string::npos;) {
        s.replace(p, 1, n);
      }
      os << s;
    }
  };
  // Rows of the collapsed shape: unravel `begin` once, then step an
  // odometer over the outer dimensions.
  os << "  const int64_t inner = shape[ndim - 1];\n";
  os << "  int64_t idx[" << jit_max_dims << "] = {};\n";
  each("  int64_t o# = 0;\n  const int64_t* st# = strides + # * ndim;\n");
  for (size_t k : strided) {
    if (spec.roles[k] == JitRole::strided) {
      os << "  const int64_t s" << k << " = st" << k << "[ndim - 1];\n";
    }
  }
  os << "  int64_t r = begin;\n"
        "  for (int d = ndim - 2; d >= 0; --d) {\n"
        "    idx[d] = r % shape[d];\n"
        "    r /= shape[d];\n";
  each("    o# += idx[d] * st#[d];\n");
  os << "  }\n"
        "  for (int64_t row = begin; row < end; ++row) {\n";
  each("    const auto* p# = in# + o#;\n");
  for (size_t o = 0; o < outs.size(); ++o) {
    os << "    auto* q" << o << " = out" << o << " + row * inner;\n";
  }
  os << "#pragma GCC ivdep\n"
        "    for (int64_t j = 0; j < inner; ++j) {\n";
  body("      ", "j", "q");
  os << "    }\n";
  os << "    for (int d = ndim - 2; d >= 0; --d) {\n";
  each("      o# += st#[d];\n");
  os << "      if (++idx[d] < shape[d]) break;\n";
  each("      o# -= st#[d] * shape[d];\n");
  os << "      idx[d] = 0;\n    }\n  }\n}\n";
  return os.str();
}

} // namespace kiln::detail
