// CustomKernel's graph side: equivalence for compile's CSE, and the rules it
// lacks (a user's kernel has no derivative or batching rule kiln can know).
#include "kiln/primitives/custom_kernel.h"

#include <stdexcept>

namespace kiln::fast {

namespace {

[[noreturn]] void no_rule(const char* what) {
  throw std::invalid_argument(
      std::string("[cuda_kernel] a custom kernel has no ") + what +
      " rule; wrap the call in custom_function and give it one.");
}

} // namespace

void CustomKernel::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  throw std::invalid_argument(
      "[cuda_kernel] a custom CUDA kernel cannot run on the CPU.");
}

std::vector<array> CustomKernel::vjp(const std::vector<array>&,
                                     const std::vector<array>&,
                                     const std::vector<int>&,
                                     const std::vector<array>&) {
  no_rule("vjp");
}

std::vector<array> CustomKernel::jvp(const std::vector<array>&,
                                     const std::vector<array>&,
                                     const std::vector<int>&) {
  no_rule("jvp");
}

std::pair<std::vector<array>, std::vector<int>> CustomKernel::vmap(
    const std::vector<array>&, const std::vector<int>&) {
  no_rule("vmap");
}

bool CustomKernel::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const CustomKernel*>(&other);
  if (!o) return false;
  const Spec &a = spec_, &b = o->spec_;
  auto same_infos = [&] {
    if (a.shape_infos.size() != b.shape_infos.size()) return false;
    for (size_t i = 0; i < a.shape_infos.size(); ++i) {
      const auto &x = a.shape_infos[i], &y = b.shape_infos[i];
      if (x.shape != y.shape || x.strides != y.strides || x.ndim != y.ndim) {
        return false;
      }
    }
    return true;
  };
  return a.name == b.name && a.source == b.source &&
         a.precompiled == b.precompiled && a.scalars == b.scalars &&
         a.grid == b.grid && a.threadgroup == b.threadgroup &&
         a.shared_memory == b.shared_memory && a.init == b.init &&
         a.ensure_row_contiguous == b.ensure_row_contiguous &&
         a.output_shapes == b.output_shapes && same_infos();
}

} // namespace kiln::fast
