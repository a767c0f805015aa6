#include "kiln/primitives/custom.h"

#include <algorithm>

#include "kiln/ops/creation.h"
#include "kiln/transforms/eval.h"

namespace kiln {

namespace {
std::vector<array> real_inputs(const std::vector<array>& all, int n_out) {
  return {all.begin(), all.end() - n_out};
}
} // namespace

std::vector<array> Depends::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>&) {
  std::vector<array> out;
  for (int i : argnums) {
    out.push_back(i < num_outputs_ ? cotangents[i] : zeros_like(primals[i]));
  }
  return out;
}

std::vector<array> Depends::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  std::vector<array> out;
  for (int i = 0; i < num_outputs_; ++i) {
    auto it = std::find(argnums.begin(), argnums.end(), i);
    out.push_back(it == argnums.end() ? zeros_like(primals[i])
                                      : tangents[it - argnums.begin()]);
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Depends::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  std::vector<array> forwarded(inputs.begin(), inputs.begin() + num_outputs_);
  std::vector<array> deps(inputs.begin() + num_outputs_, inputs.end());
  return {depends(forwarded, deps),
          std::vector<int>(axes.begin(), axes.begin() + num_outputs_)};
}

std::vector<Shape> Depends::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> out;
  for (int i = 0; i < num_outputs_; ++i) out.push_back(inputs[i].shape());
  return out;
}

std::vector<array> CustomTransforms::vjp(const std::vector<array>& primals,
                                         const std::vector<array>& cotangents,
                                         const std::vector<int>& argnums,
                                         const std::vector<array>& outputs) {
  auto inputs = real_inputs(primals, num_outputs_);
  std::vector<array> all;
  if (vjp_fn_) {
    all = (*vjp_fn_)(inputs, cotangents, outputs);
  } else {
    all = kiln::vjp(fun_, inputs, cotangents).second;
  }
  if (all.size() != inputs.size()) {
    throw std::invalid_argument(
        "[custom_function] the vjp returned " + std::to_string(all.size()) +
        " cotangents for " + std::to_string(inputs.size()) + " inputs.");
  }
  std::vector<array> out;
  for (int i : argnums) out.push_back(all[i]);
  return out;
}

std::vector<array> CustomTransforms::jvp(const std::vector<array>& primals,
                                         const std::vector<array>& tangents,
                                         const std::vector<int>& argnums) {
  auto inputs = real_inputs(primals, num_outputs_);
  if (jvp_fn_) return (*jvp_fn_)(inputs, tangents, argnums);
  auto full = detail::zeros_like_all(inputs);
  for (size_t k = 0; k < argnums.size(); ++k) full[argnums[k]] = tangents[k];
  return kiln::jvp(fun_, inputs, full).second;
}

std::pair<std::vector<array>, std::vector<int>> CustomTransforms::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto real = real_inputs(inputs, num_outputs_);
  std::vector<int> real_axes(axes.begin(), axes.end() - num_outputs_);
  if (vmap_fn_) return (*vmap_fn_)(real, real_axes);
  auto outs = kiln::vmap(fun_, real_axes)(real);
  return {outs, std::vector<int>(outs.size(), 0)};
}

Fn custom_function(Fn fun, std::optional<VjpFn> fun_vjp,
                   std::optional<JvpFn> fun_jvp,
                   std::optional<VmapFn> fun_vmap) {
  return [=](const std::vector<array>& inputs) {
    auto outs = fun(inputs);
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (auto& o : outs) {
      shapes.push_back(o.shape());
      dtypes.push_back(o.dtype());
    }
    auto all = inputs;
    all.insert(all.end(), outs.begin(), outs.end());
    auto p = std::make_shared<CustomTransforms>(
        default_stream(default_device()), static_cast<int>(outs.size()), fun,
        fun_vjp, fun_jvp, fun_vmap);
    return array::make_arrays(shapes, dtypes, p, all);
  };
}

Fn custom_vjp(Fn fun, VjpFn fun_vjp) {
  return custom_function(std::move(fun), std::move(fun_vjp));
}

Fn checkpoint(Fn fun) {
  // The backward pass recomputes fun from its inputs; the forward
  // intermediates are freed once the outputs are evaluated.
  VjpFn recompute = [fun](const std::vector<array>& primals,
                          const std::vector<array>& cotangents,
                          const std::vector<array>&) {
    return kiln::vjp(fun, primals, cotangents).second;
  };
  return custom_function(fun, recompute);
}

} // namespace kiln
