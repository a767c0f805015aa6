#include "kiln/backend/cuda/reduce_kernels.h"

#include "kiln/backend/cuda/kernels.h"

namespace kiln::cuda {

namespace {

const char* source = "#include \"kiln/backend/cuda/device/reduce.cuh\"\n";

std::string index_type(bool large) {
  return large ? "long long" : "unsigned int";
}

std::string name_of(char shape, const std::string& op, Dtype in, Dtype out,
                    bool large) {
  std::string n(1, shape);
  n += op + dtype_name(in);
  if (out != in) {
    n += "_";
    n += dtype_name(out);
  }
  if (large) n += "_i64";
  return n;
}

// The family's other shapes for the same op, dtypes and index width,
// compiled in one NVRTC program with the one asked for (a layout change
// then costs no compile). The 64-bit variants, for inputs past 2^32
// elements, compile on their own when needed.
JitKernel with_siblings(char shape, bool large, const std::string& shapes,
                        JitKernel (*make)(char, const std::string&, Dtype,
                                          Dtype, bool),
                        const std::string& op, Dtype in, Dtype out) {
  JitKernel k = make(shape, op, in, out, large);
  for (char s : shapes) {
    if (s == shape) continue;
    JitKernel sib = make(s, op, in, out, large);
    k.siblings.emplace_back(sib.name, sib.expression);
  }
  return k;
}

JitKernel reduce_one(char shape, const std::string& op, Dtype in, Dtype out,
                     bool large) {
  std::string acc = device_type(reduce_acc_dtype(op, in, out));
  std::string functor = op == "And"  ? "kiln::cuda::AndOp"
                        : op == "Or" ? "kiln::cuda::OrOp"
                                     : "kiln::cuda::" + op + "Op<" + acc + ">";
  std::string types = functor + ", " + device_type(in) + ", " +
                      device_type(out);
  std::string expr =
      shape == 'c' || shape == 'C'
          ? "kiln::cuda::col_reduce<" + types + ", " +
                std::to_string(shape == 'C' ? col_vec_width(in) : 1) + ", " +
                index_type(large) + ">"
          : "kiln::cuda::row_reduce<" + types + ", " +
                std::to_string(16 / in.size) + ", " +
                (shape == 'w' ? "true" : "false") + ", " + index_type(large) +
                ">";
  return {name_of(shape, op, in, out, large), source, expr, {}};
}

JitKernel arg_reduce_one(char shape, const std::string& op, Dtype in, Dtype,
                         bool large) {
  std::string is_max = op == "ArgMax" ? "true" : "false";
  std::string args = is_max + ", " + device_type(in);
  std::string expr =
      shape == 'c'
          ? "kiln::cuda::arg_reduce_col<" + args + ", " + index_type(large) +
                ">"
          : "kiln::cuda::arg_reduce_row<" + args + ", " +
                (shape == 'w' ? "true" : "false") + ", " + index_type(large) +
                ">";
  return {name_of(shape, op, in, in, large), source, expr, {}};
}

} // namespace

Dtype reduce_acc_dtype(const std::string& op, Dtype in, Dtype out) {
  if (op == "And" || op == "Or") return bool_;
  Dtype d = (op == "Max" || op == "Min") ? in : out;
  return d == float16 || d == bfloat16 ? float32 : d;
}

JitKernel reduce_kernel(char shape, const std::string& op, Dtype in,
                        Dtype out, bool large) {
  return with_siblings(shape, large, "wrcC", reduce_one, op, in, out);
}

JitKernel arg_reduce_kernel(char shape, const std::string& op, Dtype in,
                            bool large) {
  return with_siblings(shape, large, "wrc", arg_reduce_one, op, in, in);
}

JitKernel number_of_elements_kernel(Dtype out) {
  return {"NumberOfElements" + dtype_name(out), source,
          "kiln::cuda::number_of_elements<" + std::string(device_type(out)) +
              ">",
          {}};
}

} // namespace kiln::cuda
