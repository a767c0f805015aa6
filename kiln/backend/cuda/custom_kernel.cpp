// eval_gpu of CustomKernel (fast.cuda_kernel, fast.precompiled_cuda_kernel):
// a generated source compiles through the JIT like kiln's own kernels (its
// name ends with a hash of the source, so a changed body is a new entry); a
// precompiled module (PTX or cubin) is loaded once per name and contents.
// Parameters, in order: each input's pointer (with its shape, strides and
// ndim where the body uses them), each output's pointer, then the scalars.
#include <array>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <variant>

#include "kiln/backend/common/jit_disk.h"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/custom_kernel.h"

namespace kiln::cuda {

namespace {

// The kernel `name` of a precompiled module, loaded at first use.
CUfunction precompiled_function(const std::string& name,
                                const std::string& image) {
  static std::mutex m;
  static auto* loaded = new std::unordered_map<std::string, CUfunction>;
  std::string key = name + '\0' + detail::jit_digest(image);
  std::lock_guard<std::mutex> lock(m);
  auto it = loaded->find(key);
  if (it != loaded->end()) return it->second;
  set_current_device();
  std::string log;
  // c_str(): PTX text must end with a NUL; a cubin ignores what follows it.
  CUmodule mod = load_module_image(image.c_str(), &log);
  if (!mod) {
    throw std::invalid_argument(
        "[precompiled_cuda_kernel] the driver cannot load compiled_source "
        "(PTX text or a cubin for this GPU expected): " +
        log);
  }
  auto fs = module_functions(mod, {name});
  if (fs.empty()) {
    throw std::invalid_argument("[precompiled_cuda_kernel] the module has no "
                                "kernel named '" +
                                name + "' (an extern \"C\" name, or the "
                                "mangled one).");
  }
  CUfunction f = fs[0];
  loaded->emplace(key, f);
  return f;
}

CUfunction custom_function(const fast::CustomKernel::Spec& sp) {
  if (sp.precompiled) return precompiled_function(sp.name, sp.source);
  std::string fn = sp.name.substr(0, sp.name.find('|'));
  return get_kernel({sp.name, sp.source, "kiln::cuda::custom::" + fn, {}});
}

} // namespace

} // namespace kiln::cuda

namespace kiln::fast {

void CustomKernel::eval_gpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  const Spec& sp = spec();
  const Stream& s = stream();
  size_t n_in = inputs.size() - (sp.init ? outputs.size() : 0);
  auto fail = [](const array& x) {
    throw std::invalid_argument("[cuda_kernel] cannot copy " +
                                kiln::detail::describe(x) + " on the GPU.");
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!sp.init) {
      cuda::set_device_output(outputs[i], s);
    } else if (!cuda::copy_row_major(inputs[n_in + i], outputs[i], s)) {
      fail(inputs[n_in + i]);
    }
  }
  CUfunction f = cuda::custom_function(sp);

  // Parameter values live here until submit_kernel has copied them.
  std::vector<array> held(inputs.begin(), inputs.begin() + n_in);
  std::vector<void*> ptrs;
  std::vector<std::array<int32_t, 8>> shapes;
  std::vector<std::array<int64_t, 8>> strides;
  std::vector<int> ndims;
  ptrs.reserve(n_in + outputs.size());
  shapes.reserve(n_in);
  strides.reserve(n_in);
  ndims.reserve(n_in);
  std::vector<void*> args;
  for (size_t i = 0; i < n_in; ++i) {
    array& x = held[i];
    if (sp.ensure_row_contiguous && !x.flags().row_contiguous) {
      array copy = x;
      if (!cuda::row_contiguous(x, copy, s)) fail(x);
      x = copy;
    }
    ptrs.push_back(cuda::device_ptr(x, s));
    args.push_back(&ptrs.back());
    if (x.ndim() == 0) continue;
    const auto& info = sp.shape_infos[i];
    if (info.shape) {
      std::array<int32_t, 8> v{};
      for (size_t d = 0; d < x.ndim(); ++d) v[d] = x.shape(d);
      shapes.push_back(v);
      args.push_back(&shapes.back());
    }
    if (info.strides) {
      std::array<int64_t, 8> v{};
      for (size_t d = 0; d < x.ndim(); ++d) v[d] = x.strides()[d];
      strides.push_back(v);
      args.push_back(&strides.back());
    }
    if (info.ndim) {
      ndims.push_back(static_cast<int>(x.ndim()));
      args.push_back(&ndims.back());
    }
  }
  for (auto& out : outputs) {
    ptrs.push_back(out.raw_data_ptr());
    args.push_back(&ptrs.back());
  }
  std::vector<ScalarArg> scalars = sp.scalars;
  for (auto& v : scalars) {
    args.push_back(std::visit([](auto& x) { return static_cast<void*>(&x); },
                              v));
  }

  auto [gx, gy, gz] = sp.grid;
  auto [tx, ty, tz] = sp.threadgroup;
  auto blocks = [](int64_t n, int64_t per) { return (n + per - 1) / per; };
  if (gx == 0 || gy == 0 || gz == 0) return; // no threads: nothing to run
  cuda::allow_shared_bytes(f, sp.shared_memory);
  cuda::LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>(blocks(gx, tx));
  shape.grid[1] = static_cast<unsigned>(blocks(gy, ty));
  shape.grid[2] = static_cast<unsigned>(blocks(gz, tz));
  shape.block[0] = static_cast<unsigned>(tx);
  shape.block[1] = static_cast<unsigned>(ty);
  shape.block[2] = static_cast<unsigned>(tz);
  shape.shared_bytes = static_cast<unsigned>(sp.shared_memory);
  cuda::set_current_device();
  cuda::submit_kernel(f, shape, args, s.index);
}

} // namespace kiln::fast
