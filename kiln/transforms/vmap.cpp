// vmap: trace fun on one slice of the mapped inputs, then replay the traced
// graph with each primitive's vmap rule on the whole inputs.
#include <string>
#include <unordered_map>

#include "kiln/core/primitive.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/transforms/autograd.h"
#include "kiln/transforms/trace.h"

namespace kiln {

using detail::invalid;

Fn vmap(const Fn& fun, const std::vector<int>& in_axes_arg,
        const std::vector<int>& out_axes_arg) {
  return [fun, in_axes_arg, out_axes_arg](const std::vector<array>& inputs) {
    auto in_axes = in_axes_arg;
    if (in_axes.empty()) in_axes.assign(inputs.size(), 0);
    if (in_axes.size() != inputs.size()) {
      invalid("vmap", "got " + std::to_string(in_axes.size()) +
                          " in_axes for " + std::to_string(inputs.size()) +
                          " inputs.");
    }
    int batch = -1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (in_axes[i] < 0 && in_axes[i] != -1) {
        in_axes[i] += static_cast<int>(inputs[i].ndim());
      }
      if (in_axes[i] == -1) continue;
      in_axes[i] = detail::normalize_axis(
          in_axes[i], static_cast<int>(inputs[i].ndim()), "vmap");
      int n = inputs[i].shape(in_axes[i]);
      if (batch >= 0 && n != batch) {
        invalid("vmap", "mapped axes have different sizes: " +
                            std::to_string(batch) + " and " +
                            std::to_string(n) + " (input " +
                            std::to_string(i) + " of shape " +
                            detail::shape_str(inputs[i].shape()) + ").");
      }
      batch = n;
    }
    if (batch < 0) invalid("vmap", "at least one input must be mapped.");

    detail::TracingScope scope;
    std::vector<array> slices, mapped_inputs;
    std::vector<int> mapped_axes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (in_axes[i] >= 0) {
        slices.push_back(take(inputs[i], 0, in_axes[i]));
        mapped_inputs.push_back(inputs[i]);
        mapped_axes.push_back(in_axes[i]);
      }
    }
    auto tracers = detail::make_tracers(slices);
    std::vector<array> args;
    for (size_t i = 0, k = 0; i < inputs.size(); ++i) {
      args.push_back(in_axes[i] >= 0 ? tracers[k++] : inputs[i]);
    }
    auto outputs = fun(args);

    auto out_axes = out_axes_arg;
    if (out_axes.empty()) out_axes.assign(outputs.size(), 0);
    if (out_axes.size() != outputs.size()) {
      invalid("vmap", "got " + std::to_string(out_axes.size()) +
                          " out_axes for " + std::to_string(outputs.size()) +
                          " outputs.");
    }

    std::unordered_map<uintptr_t, std::pair<array, int>> batched;
    for (size_t k = 0; k < tracers.size(); ++k) {
      batched.emplace(tracers[k].id(),
                      std::make_pair(mapped_inputs[k], mapped_axes[k]));
    }
    auto tape = detail::trace_tape(outputs, tracers);
    for (auto& node : tape.nodes) {
      std::vector<array> vin;
      std::vector<int> vaxes;
      for (auto& in : node.inputs()) {
        auto it = batched.find(in.id());
        if (it != batched.end()) {
          vin.push_back(it->second.first);
          vaxes.push_back(it->second.second);
        } else {
          vin.push_back(in);
          vaxes.push_back(-1);
        }
      }
      auto [vouts, vaxes_out] = node.primitive().vmap(vin, vaxes);
      auto outs = node.outputs();
      for (size_t k = 0; k < outs.size(); ++k) {
        batched.insert_or_assign(outs[k].id(),
                                 std::make_pair(vouts[k], vaxes_out[k]));
      }
    }

    std::vector<array> results;
    for (size_t i = 0; i < outputs.size(); ++i) {
      int nd = static_cast<int>(outputs[i].ndim()) + 1;
      int oax = detail::normalize_axis(out_axes[i], nd, "vmap");
      auto it = batched.find(outputs[i].id());
      if (it != batched.end()) {
        auto& [b, ax] = it->second;
        results.push_back(ax < 0 ? b : moveaxis(b, ax, oax));
        if (ax >= 0) continue;
        results.pop_back();
      }
      // Not mapped: the same value for every batch element.
      auto e = expand_dims(outputs[i], oax);
      Shape shape = e.shape();
      shape[oax] = batch;
      results.push_back(broadcast_to(e, shape));
    }
    return results;
  };
}

std::function<array(const array&)> vmap(
    const std::function<array(const array&)>& fun, int in_axis,
    int out_axis) {
  auto f = vmap(
      [fun](const std::vector<array>& x) {
        return std::vector<array>{fun(x[0])};
      },
      {in_axis}, {out_axis});
  return [f](const array& x) { return f({x})[0]; };
}

std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun,
    int in_axis_a, int in_axis_b, int out_axis) {
  auto f = vmap(
      [fun](const std::vector<array>& x) {
        return std::vector<array>{fun(x[0], x[1])};
      },
      {in_axis_a, in_axis_b}, {out_axis});
  return [f](const array& a, const array& b) { return f({a, b})[0]; };
}

} // namespace kiln
