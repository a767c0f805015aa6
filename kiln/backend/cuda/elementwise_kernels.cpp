#include "kiln/backend/cuda/elementwise_kernels.h"

#include <functional>

#include "kiln/backend/cuda/kernels.h"

namespace kiln::cuda {

namespace {

const char* source = "#include \"kiln/backend/cuda/device/elementwise.cuh\"\n";

std::string name_of(const std::string& pattern, const std::string& op,
                    Dtype in, Dtype out, bool large) {
  std::string n = pattern + op + dtype_name(in);
  if (out != in) n += "_" + dtype_name(out);
  if (large) n += "_i64";
  return n;
}

std::string functor(const std::string& op) { return "kiln::cuda::" + op; }

std::string flag(char c) { return c == 's' ? "true" : "false"; }

std::string index_type(bool large) {
  return large ? "long long" : "unsigned int";
}

// The requested variant, with the family's other variants for the same op
// and dtypes as siblings compiled alongside it.
JitKernel with_siblings(const std::string& pattern, bool large,
                        const std::vector<std::string>& patterns,
                        const std::function<JitKernel(const std::string&,
                                                      bool)>& make) {
  JitKernel k = make(pattern, large);
  auto add = [&](const std::string& p, bool l) {
    if (p == pattern && l == large) return;
    JitKernel s = make(p, l);
    k.siblings.emplace_back(s.name, s.expression);
  };
  for (auto& p : patterns) add(p, false);
  add("g", true);
  return k;
}

JitKernel unary_one(const std::string& op, Dtype in, Dtype out,
                    const std::string& pattern, bool large) {
  std::string types = std::string(device_type(in)) + ", " + device_type(out);
  std::string expr =
      pattern == "g"
          ? "kiln::cuda::unary_g<" + functor(op) + ", " + types + ", " +
                index_type(large) + ">"
          : "kiln::cuda::unary_v<" + functor(op) + ", " + types + ", " +
                std::to_string(vec_width(in, out)) + ">";
  return {name_of(pattern, op, in, out, large), source, expr};
}

JitKernel binary_one(const std::string& op, Dtype in, Dtype out,
                     const std::string& pattern, bool large) {
  std::string types = std::string(device_type(in)) + ", " + device_type(out);
  std::string expr;
  if (pattern == "g") {
    expr = "kiln::cuda::binary_g<" + functor(op) + ", " + types + ", " +
           index_type(large) + ">";
  } else {
    expr = "kiln::cuda::binary_v<" + functor(op) + ", " + types + ", " +
           std::to_string(vec_width(in, out)) + ", " + flag(pattern[0]) +
           ", " + flag(pattern[1]) + ">";
  }
  return {name_of(pattern, op, in, out, large), source, expr};
}

JitKernel ternary_one(Dtype t, const std::string& pattern, bool large) {
  std::string expr;
  if (pattern == "g") {
    expr = "kiln::cuda::ternary_g<kiln::cuda::Select, " +
           std::string(device_type(t)) + ", " + index_type(large) + ">";
  } else {
    expr = "kiln::cuda::ternary_v<kiln::cuda::Select, " +
           std::string(device_type(t)) + ", " +
           std::to_string(vec_width(t, t)) + ", " + flag(pattern[0]) + ", " +
           flag(pattern[1]) + ", " + flag(pattern[2]) + ">";
  }
  return {name_of(pattern, "Select", t, t, large), source, expr};
}

} // namespace

JitKernel unary_kernel(const std::string& op, Dtype in, Dtype out,
                       const std::string& pattern, bool large) {
  return with_siblings(pattern, large, {"v", "g"},
                       [&](const std::string& p, bool l) {
                         return unary_one(op, in, out, p, l);
                       });
}

JitKernel binary_kernel(const std::string& op, Dtype in, Dtype out,
                        const std::string& pattern, bool large) {
  return with_siblings(pattern, large, {"vv", "vs", "sv", "ss", "g"},
                       [&](const std::string& p, bool l) {
                         return binary_one(op, in, out, p, l);
                       });
}

JitKernel ternary_kernel(Dtype t, const std::string& pattern, bool large) {
  return with_siblings(
      pattern, large,
      {"vvv", "vvs", "vsv", "vss", "svv", "svs", "ssv", "sss", "g"},
      [&](const std::string& p, bool l) { return ternary_one(t, p, l); });
}

JitKernel transpose_kernel(Dtype raw) {
  return {"tTransposeTiles" + dtype_name(raw),
          "#include \"kiln/backend/cuda/device/transpose.cuh\"\n",
          std::string("kiln::cuda::transpose_tiles<") + device_type(raw) + ">",
          {}};
}

} // namespace kiln::cuda
