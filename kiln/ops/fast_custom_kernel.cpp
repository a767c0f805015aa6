// fast.cuda_kernel and fast.precompiled_cuda_kernel: argument checks and
// the CustomKernel node. The kernel's source text is written by
// backend/cuda/codegen; the GPU backend compiles and launches it
// (backend/cuda/custom_kernel.cpp).
#include <cctype>
#include <cstdio>
#include <iostream>
#include <stdexcept>

#include "kiln/backend/common/jit_disk.h"
#include "kiln/backend/cuda/codegen/custom_kernel_source.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/fast.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/custom_kernel.h"

namespace kiln::fast {

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) ||
                     s[0] == '_')) {
    return false;
  }
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

void check_identifier(const char* op, const char* what,
                      const std::string& s) {
  if (!is_identifier(s)) {
    throw std::invalid_argument(std::string("[") + op + "] the " + what +
                                " '" + s +
                                "' is not a C identifier (letters, digits "
                                "and underscores, not starting with a digit).");
  }
}

std::string dims(std::tuple<int, int, int> t) {
  auto [x, y, z] = t;
  return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " +
         std::to_string(z) + ")";
}

// CUDA's launch limits: blocks of at most 1024 threads (z at most 64), a grid
// of at most 2^31 - 1 blocks along x and 65535 along y and z.
void check_launch(const char* op, std::tuple<int, int, int> grid,
                  std::tuple<int, int, int> threadgroup, int shared_memory) {
  auto [gx, gy, gz] = grid;
  auto [tx, ty, tz] = threadgroup;
  if (gx < 0 || gy < 0 || gz < 0) {
    throw std::invalid_argument(std::string("[") + op + "] grid " +
                                dims(grid) + " has a negative size.");
  }
  if (tx < 1 || ty < 1 || tz < 1 || tz > 64 ||
      int64_t(tx) * ty * tz > 1024) {
    throw std::invalid_argument(
        std::string("[") + op + "] threadgroup " + dims(threadgroup) +
        ": a CUDA block has 1 to 1024 threads, at most 64 along z.");
  }
  int64_t bx = (int64_t(gx) + tx - 1) / tx, by = (int64_t(gy) + ty - 1) / ty,
          bz = (int64_t(gz) + tz - 1) / tz;
  if (bx > 2147483647 || by > 65535 || bz > 65535) {
    throw std::invalid_argument(
        std::string("[") + op + "] grid " + dims(grid) + " in blocks of " +
        dims(threadgroup) + " needs more blocks than CUDA launches (2^31 - 1 "
        "along x, 65535 along y and z).");
  }
  if (shared_memory < 0) {
    throw std::invalid_argument(std::string("[") + op +
                                "] shared_memory is negative (" +
                                std::to_string(shared_memory) + ").");
  }
}

void check_outputs(const char* op, size_t n_names,
                   const std::vector<Shape>& shapes,
                   const std::vector<Dtype>& dtypes) {
  if (shapes.size() != n_names || dtypes.size() != n_names) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + std::to_string(n_names) +
        " outputs, but " + std::to_string(shapes.size()) +
        " output_shapes and " + std::to_string(dtypes.size()) +
        " output_dtypes.");
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (int32_t d : shapes[i]) {
      if (d < 0) {
        throw std::invalid_argument(std::string("[") + op + "] output " +
                                    std::to_string(i) + " has shape " +
                                    kiln::detail::shape_str(shapes[i]) +
                                    " with a negative size.");
      }
    }
    cuda::cuda_type_name(dtypes[i], op, "output " + std::to_string(i));
  }
}

Stream gpu_stream(const char* op, StreamOrDevice s) {
  Stream st = to_stream(s);
  if (st.device.type != Device::gpu) {
    throw std::invalid_argument(std::string("[") + op +
                                "] runs on the GPU only; the stream given is "
                                "on the CPU.");
  }
  return st;
}

std::vector<array> make_node(Stream st, CustomKernel::Spec spec,
                             std::vector<array> inputs,
                             const std::vector<Shape>& output_shapes,
                             const std::vector<Dtype>& output_dtypes,
                             std::optional<float> init_value) {
  if (init_value) {
    spec.init = true;
    for (size_t i = 0; i < output_shapes.size(); ++i) {
      inputs.push_back(full(output_shapes[i], *init_value, output_dtypes[i],
                            st));
    }
  }
  spec.output_shapes = output_shapes;
  return array::make_arrays(
      output_shapes, output_dtypes,
      std::make_shared<CustomKernel>(st, std::move(spec)), inputs);
}

} // namespace

CustomKernelFunction cuda_kernel(const std::string& name,
                                 const std::vector<std::string>& input_names,
                                 const std::vector<std::string>& output_names,
                                 const std::string& source,
                                 const std::string& header,
                                 bool ensure_row_contiguous,
                                 int shared_memory) {
  const char* op = "cuda_kernel";
  check_identifier(op, "kernel name", name);
  if (output_names.empty()) {
    throw std::invalid_argument("[cuda_kernel] a kernel needs at least one "
                                "output.");
  }
  std::vector<std::string> all = input_names;
  all.insert(all.end(), output_names.begin(), output_names.end());
  for (size_t i = 0; i < all.size(); ++i) {
    check_identifier(op, i < input_names.size() ? "input name" : "output name",
                     all[i]);
    for (size_t j = 0; j < i; ++j) {
      if (all[i] == all[j]) {
        throw std::invalid_argument("[cuda_kernel] the parameter name '" +
                                    all[i] + "' appears twice.");
      }
    }
  }
  if (shared_memory < 0) {
    throw std::invalid_argument("[cuda_kernel] shared_memory is negative (" +
                                std::to_string(shared_memory) + ").");
  }
  // Which inputs' shape, strides and ndim the body uses: only those become
  // parameters (as MLX decides it, by the names appearing in the source).
  std::vector<CustomKernelShapeInfo> shape_infos;
  for (const auto& n : input_names) {
    shape_infos.push_back({source.find(n + "_shape") != std::string::npos,
                           source.find(n + "_strides") != std::string::npos,
                           source.find(n + "_ndim") != std::string::npos});
  }
  return [=](const std::vector<array>& inputs,
             const std::vector<Shape>& output_shapes,
             const std::vector<Dtype>& output_dtypes,
             std::tuple<int, int, int> grid,
             std::tuple<int, int, int> threadgroup,
             const TemplateArgs& template_args,
             std::optional<float> init_value, bool verbose,
             StreamOrDevice s) {
    if (inputs.size() != input_names.size()) {
      throw std::invalid_argument(
          "[cuda_kernel] kernel '" + name + "' takes " +
          std::to_string(input_names.size()) + " inputs, got " +
          std::to_string(inputs.size()) + ".");
    }
    check_outputs(op, output_names.size(), output_shapes, output_dtypes);
    check_launch(op, grid, threadgroup, shared_memory);
    for (const auto& [tname, arg] : template_args) {
      check_identifier(op, "template argument name", tname);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      bool uses = shape_infos[i].shape || shape_infos[i].strides;
      if (uses && inputs[i].ndim() > 8) {
        throw std::invalid_argument(
            "[cuda_kernel] input '" + input_names[i] + "' " +
            kiln::detail::describe(inputs[i]) +
            " has more than 8 dimensions; a kernel reading its shape or "
            "strides takes at most 8.");
      }
    }
    Stream st = gpu_stream(op, s);
    auto [text, fn] = cuda::custom_kernel_source(
        name, input_names, inputs, shape_infos, output_names, output_dtypes,
        template_args, source, header);
    if (verbose) {
      std::cout << "Generated source code for `" << fn << "`:\n```\n"
                << text << "```" << std::endl;
    }
    CustomKernel::Spec spec;
    // The function's name, then a hash of the whole source: two kernels of
    // one name but different bodies never share a cache entry.
    char hash[17];
    std::snprintf(
        hash, sizeof(hash), "%016llx",
        static_cast<unsigned long long>(kiln::detail::jit_hash(text)));
    spec.name = fn + "|" + hash;
    spec.source = std::move(text);
    spec.shape_infos = shape_infos;
    spec.grid = grid;
    spec.threadgroup = threadgroup;
    spec.shared_memory = shared_memory;
    spec.ensure_row_contiguous = ensure_row_contiguous;
    return make_node(st, std::move(spec), inputs, output_shapes,
                     output_dtypes, init_value);
  };
}

std::vector<array> precompiled_cuda_kernel(
    const std::string& name, const std::string& compiled_source,
    const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes,
    const std::vector<ScalarArg>& scalars, std::tuple<int, int, int> grid,
    std::tuple<int, int, int> threadgroup, int shared_memory,
    std::optional<float> init_value, bool ensure_row_contiguous,
    StreamOrDevice s) {
  const char* op = "precompiled_cuda_kernel";
  if (name.empty()) {
    throw std::invalid_argument("[precompiled_cuda_kernel] the kernel's name "
                                "is empty.");
  }
  if (compiled_source.empty()) {
    throw std::invalid_argument("[precompiled_cuda_kernel] compiled_source "
                                "is empty (PTX text or a cubin expected).");
  }
  if (output_shapes.empty()) {
    throw std::invalid_argument("[precompiled_cuda_kernel] a kernel needs at "
                                "least one output.");
  }
  check_outputs(op, output_shapes.size(), output_shapes, output_dtypes);
  check_launch(op, grid, threadgroup, shared_memory);
  for (size_t i = 0; i < inputs.size(); ++i) {
    cuda::cuda_type_name(inputs[i].dtype(), op, "input " + std::to_string(i));
  }
  Stream st = gpu_stream(op, s);
  CustomKernel::Spec spec;
  spec.name = name;
  spec.source = compiled_source;
  spec.precompiled = true;
  spec.shape_infos.resize(inputs.size());
  spec.scalars = scalars;
  spec.grid = grid;
  spec.threadgroup = threadgroup;
  spec.shared_memory = shared_memory;
  spec.ensure_row_contiguous = ensure_row_contiguous;
  return make_node(st, std::move(spec), inputs, output_shapes, output_dtypes,
                   init_value);
}

} // namespace kiln::fast
