// The CUDA source of a fast.cuda_kernel call: the user's body wrapped in a
// __global__ function whose parameters follow the inputs, outputs and
// template arguments. Plain C++ built in every build: a CPU-only build
// still checks kernels, prints them (verbose) and exports their nodes.
#include "kiln/backend/cuda/codegen/custom_kernel_source.h"

#include <cctype>
#include <sstream>
#include <stdexcept>

#include "kiln/backend/common/c_types.h"

namespace kiln::cuda {

// The CUDA spelling of dt in a generated signature.
const char* cuda_type_name(Dtype dt, const char* op, const std::string& who) {
  if (dt == float16) return "__half";
  if (dt == bfloat16) return "__nv_bfloat16";
  if (const char* t = detail::c_scalar_type(dt)) return t;
  throw std::invalid_argument(std::string("[") + op + "] " + who +
                              " has dtype " + dtype_name(dt) +
                              ", which GPU kernels do not take.");
}

namespace {

// What the kernel's name adds for its template arguments, so different
// instantiations are different functions.
std::string template_suffix(const fast::TemplateArgs& args) {
  std::string s;
  for (const auto& [name, arg] : args) {
    s += '_';
    if (auto* i = std::get_if<int>(&arg)) {
      s += *i < 0 ? "m" + std::to_string(-static_cast<int64_t>(*i))
                  : std::to_string(*i);
    } else if (auto* b = std::get_if<bool>(&arg)) {
      s += *b ? 't' : 'f';
    } else {
      s += dtype_name(std::get<Dtype>(arg));
    }
  }
  return s;
}

// Whether `text` names cooperative groups: the `cg` alias or the namespace.
bool names_cooperative_groups(const std::string& text) {
  if (text.find("cooperative_groups") != std::string::npos) return true;
  auto ident = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  for (size_t p = text.find("cg"); p != std::string::npos;
       p = text.find("cg", p + 1)) {
    if ((p == 0 || !ident(text[p - 1])) &&
        (p + 2 == text.size() || !ident(text[p + 2]))) {
      return true;
    }
  }
  return false;
}

} // namespace

std::pair<std::string, std::string> custom_kernel_source(
    const std::string& name, const std::vector<std::string>& input_names,
    const std::vector<array>& inputs,
    const std::vector<fast::CustomKernelShapeInfo>& shape_infos,
    const std::vector<std::string>& output_names,
    const std::vector<Dtype>& output_dtypes,
    const fast::TemplateArgs& template_args, const std::string& source,
    const std::string& header) {
  const char* op = "cuda_kernel";
  std::string fn = "custom_kernel_" + name + template_suffix(template_args);
  std::vector<std::string> params;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& n = input_names[i];
    const char* type = cuda_type_name(inputs[i].dtype(), op,
                                      "input '" + n + "'");
    params.push_back(std::string("const ") + type + "* " + n);
    if (inputs[i].ndim() == 0) continue;
    if (shape_infos[i].shape) {
      params.push_back("const __grid_constant__ Shape " + n + "_shape");
    }
    if (shape_infos[i].strides) {
      params.push_back("const __grid_constant__ Strides " + n + "_strides");
    }
    if (shape_infos[i].ndim) params.push_back("const int " + n + "_ndim");
  }
  for (size_t i = 0; i < output_names.size(); ++i) {
    params.push_back(std::string(cuda_type_name(output_dtypes[i], op,
                                           "output '" + output_names[i] +
                                               "'")) +
                     "* " + output_names[i]);
  }
  std::ostringstream s;
  s << "// custom kernel " << fn << " (fast.cuda_kernel)\n";
  // cooperative_groups.h costs NVRTC about 1.4 s of parsing (the rest of a
  // small kernel about 50 ms), so only kernels that name it get it.
  if (names_cooperative_groups(header) || names_cooperative_groups(source)) {
    s << "#define KILN_CUSTOM_COOPERATIVE_GROUPS 1\n";
  }
  s << "#include \"kiln/backend/cuda/device/custom_kernel.cuh\"\n";
  if (!header.empty()) s << header << "\n";
  s << "\nnamespace kiln::cuda::custom {\n\n__global__ void " << fn << "(";
  for (size_t i = 0; i < params.size(); ++i) {
    s << (i ? ",\n    " : "\n    ") << params[i];
  }
  s << ") {\n";
  for (const auto& [tname, arg] : template_args) {
    if (auto* i = std::get_if<int>(&arg)) {
      s << "  constexpr int " << tname << " = " << *i << ";\n";
    } else if (auto* b = std::get_if<bool>(&arg)) {
      s << "  constexpr bool " << tname << " = " << (*b ? "true" : "false")
        << ";\n";
    } else {
      s << "  using " << tname << " = "
        << cuda_type_name(std::get<Dtype>(arg), op,
                     "template argument '" + tname + "'")
        << ";\n";
    }
  }
  s << source << "\n}\n\n} // namespace kiln::cuda::custom\n";
  return {s.str(), fn};
}

} // namespace kiln::cuda
