#include "kiln/transforms/autograd.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "kiln/core/primitive.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/shape.h"
#include "kiln/transforms/trace.h"

namespace kiln {

namespace detail {

std::vector<array> zeros_like_all(const std::vector<array>& arrays) {
  std::vector<array> out;
  for (auto& a : arrays) out.push_back(zeros_like(a));
  return out;
}

} // namespace detail

namespace {

using detail::invalid;
using detail::shape_str;

void add_into(std::unordered_map<uintptr_t, array>& map, const array& key,
              const array& value) {
  auto it = map.find(key.id());
  if (it == map.end()) {
    map.emplace(key.id(), value);
  } else {
    it->second = add(it->second, value);
  }
}

} // namespace

namespace {

using CotangentFn =
    std::function<std::vector<array>(const std::vector<array>& outputs)>;

// vjp whose output cotangents are made from the traced outputs.
std::pair<std::vector<array>, std::vector<array>> vjp_with(
    const Fn& fun, const std::vector<array>& primals,
    const CotangentFn& make_cotangents) {
  detail::TracingScope scope(detail::TraceKind::vjp);
  auto tracers = detail::make_tracers(primals);
  auto outputs = fun(tracers);
  auto cotangents = make_cotangents(outputs);
  if (cotangents.size() != outputs.size()) {
    invalid("vjp", "got " + std::to_string(cotangents.size()) +
                       " cotangents for " + std::to_string(outputs.size()) +
                       " outputs.");
  }
  std::unordered_map<uintptr_t, array> cotan;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (cotangents[i].shape() != outputs[i].shape()) {
      invalid("vjp", "cotangent " + std::to_string(i) + " has shape " +
                         shape_str(cotangents[i].shape()) +
                         " but the output has shape " +
                         shape_str(outputs[i].shape()) + ".");
    }
    add_into(cotan, outputs[i], astype(cotangents[i], outputs[i].dtype()));
  }

  auto tape = detail::trace_tape(outputs, tracers);
  // Walk backwards, dropping each node's cotangents once used so the
  // backward graph holds only what it still needs.
  for (auto it = tape.nodes.rbegin(); it != tape.nodes.rend(); ++it) {
    array node = std::move(*it);
    auto outs = node.outputs();
    std::vector<array> cts;
    bool any = false;
    for (auto& o : outs) {
      auto c = cotan.find(o.id());
      if (c != cotan.end()) {
        cts.push_back(std::move(c->second));
        cotan.erase(c);
        any = true;
      } else {
        cts.push_back(zeros_like(o));
      }
    }
    if (!any) continue;
    auto argnums = tape.differentiable_inputs(node);
    if (argnums.empty()) continue;
    auto& inputs = node.inputs();
    auto vjps = node.primitive().vjp(inputs, cts, argnums, outs);
    for (size_t k = 0; k < argnums.size(); ++k) {
      const array& in = inputs[argnums[k]];
      if (vjps[k].shape() != in.shape()) {
        throw std::logic_error(
            std::string("[vjp] ") + node.primitive().name() +
            " returned a cotangent of shape " + shape_str(vjps[k].shape()) +
            " for an input of shape " + shape_str(in.shape()) + ".");
      }
      add_into(cotan, in, astype(vjps[k], in.dtype()));
    }
  }
  std::vector<array> grads;
  for (auto& t : tracers) {
    auto c = cotan.find(t.id());
    grads.push_back(c != cotan.end() ? c->second : zeros_like(t));
  }
  return {outputs, grads};
}

} // namespace

std::pair<std::vector<array>, std::vector<array>> vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents) {
  return vjp_with(fun, primals,
                  [&](const std::vector<array>&) { return cotangents; });
}

std::pair<array, array> vjp(const std::function<array(const array&)>& fun,
                            const array& primal, const array& cotangent) {
  auto [outs, vjps] = vjp(
      [&](const std::vector<array>& x) {
        return std::vector<array>{fun(x[0])};
      },
      {primal}, {cotangent});
  return {outs[0], vjps[0]};
}

std::pair<std::vector<array>, std::vector<array>> jvp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& tangents) {
  if (tangents.size() != primals.size()) {
    invalid("jvp", "got " + std::to_string(tangents.size()) +
                       " tangents for " + std::to_string(primals.size()) +
                       " primals.");
  }
  for (size_t i = 0; i < primals.size(); ++i) {
    if (tangents[i].shape() != primals[i].shape()) {
      invalid("jvp", "tangent " + std::to_string(i) + " has shape " +
                         shape_str(tangents[i].shape()) +
                         " but the primal has shape " +
                         shape_str(primals[i].shape()) + ".");
    }
  }
  detail::TracingScope scope(detail::TraceKind::jvp);
  auto tracers = detail::make_tracers(primals);
  auto outputs = fun(tracers);
  std::unordered_map<uintptr_t, array> tan;
  for (size_t i = 0; i < tracers.size(); ++i) {
    tan.emplace(tracers[i].id(), astype(tangents[i], tracers[i].dtype()));
  }
  auto tape = detail::trace_tape(outputs, tracers);
  for (auto& node : tape.nodes) {
    std::vector<int> argnums;
    std::vector<array> tin;
    auto& inputs = node.inputs();
    for (int i : tape.differentiable_inputs(node)) {
      auto t = tan.find(inputs[i].id());
      if (t == tan.end()) continue;
      argnums.push_back(i);
      tin.push_back(t->second);
    }
    if (argnums.empty()) continue;
    auto outs = node.outputs();
    auto touts = node.primitive().jvp(inputs, tin, argnums);
    for (size_t k = 0; k < outs.size(); ++k) {
      // A predicate's tangent (zero) keeps the input tangent's dtype, as
      // MLX's: a bool tangent would break the ops downstream.
      bool keep = outs[k].dtype() == bool_;
      tan.insert_or_assign(outs[k].id(), keep ? touts[k]
                                              : astype(touts[k],
                                                       outs[k].dtype()));
    }
  }
  std::vector<array> out_tangents;
  for (auto& o : outputs) {
    auto t = tan.find(o.id());
    out_tangents.push_back(t != tan.end() ? t->second : zeros_like(o));
  }
  return {outputs, out_tangents};
}

std::pair<array, array> jvp(const std::function<array(const array&)>& fun,
                            const array& primal, const array& tangent) {
  auto [outs, jvps] = jvp(
      [&](const std::vector<array>& x) {
        return std::vector<array>{fun(x[0])};
      },
      {primal}, {tangent});
  return {outs[0], jvps[0]};
}

ValueAndGradFn value_and_grad(const Fn& fun, const std::vector<int>& argnums) {
  if (argnums.empty()) {
    invalid("value_and_grad", "argnums must not be empty.");
  }
  return [fun, argnums](const std::vector<array>& inputs) {
    int n = static_cast<int>(inputs.size());
    for (int a : argnums) {
      if (a < 0 || a >= n) {
        invalid("value_and_grad",
                "argnum " + std::to_string(a) + " is out of range for " +
                    std::to_string(n) + " arguments.");
      }
    }
    std::vector<array> chosen;
    for (int a : argnums) chosen.push_back(inputs[a]);
    // Differentiate with respect to the chosen arguments only; the others
    // enter as constants.
    auto partial = [&](const std::vector<array>& xs) {
      auto args = inputs;
      for (size_t k = 0; k < argnums.size(); ++k) args[argnums[k]] = xs[k];
      auto outs = fun(args);
      if (outs.empty() || outs[0].ndim() != 0) {
        invalid("value_and_grad",
                "the function's first output must be a scalar; got shape " +
                    (outs.empty() ? std::string("(no outputs)")
                                  : shape_str(outs[0].shape())) +
                    ".");
      }
      return outs;
    };
    // The first output is seeded with 1; other outputs (auxiliary values)
    // get zero cotangents and are returned as values.
    auto [values, grads] =
        vjp_with(partial, chosen, [](const std::vector<array>& outs) {
          std::vector<array> cts = {array(1.0f, outs[0].dtype())};
          for (size_t i = 1; i < outs.size(); ++i) {
            cts.push_back(zeros_like(outs[i]));
          }
          return cts;
        });
    return std::make_pair(values, grads);
  };
}

ValueAndGradFn value_and_grad(const Fn& fun, int argnum) {
  return value_and_grad(fun, std::vector<int>{argnum});
}

SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& x) { return std::vector<array>{fun(x)}; },
      argnums);
  return [vg](const std::vector<array>& inputs) {
    auto [values, grads] = vg(inputs);
    return std::make_pair(values[0], grads);
  };
}

std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& x) { return fun(x[0]); },
      std::vector<int>{0});
  return [vg](const array& x) {
    auto [value, grads] = vg({x});
    return std::make_pair(value, grads[0]);
  };
}

std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums) {
  auto vg = value_and_grad(fun, argnums);
  return [vg](const std::vector<array>& inputs) { return vg(inputs).second; };
}

std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun, int argnum) {
  return grad(fun, std::vector<int>{argnum});
}

std::function<array(const array&)> grad(
    const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad(fun);
  return [vg](const array& x) { return vg(x).second; };
}

} // namespace kiln
