#include "kiln/primitives/compiled.h"

#include <cstring>
#include <ostream>

#include "kiln/core/run_nodes.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/transforms/autograd.h"

namespace kiln {

namespace {

Shape region_shape(const std::vector<array>& inputs) {
  Shape s;
  for (auto& in : inputs)
    s = detail::broadcast_shapes(s, in.shape(), "Compiled");
  return s;
}

} // namespace

std::vector<array> Compiled::unfused(const std::vector<array>& inputs) const {
  Shape shape = region_shape(inputs);
  std::vector<array> values;
  values.reserve(ops_.size());
  for (auto& op : ops_) {
    std::vector<array> args;
    for (int a : op.args) {
      // As the ops broadcast their operands (implicitly, so a shapeless
      // replay broadcasts them to a new shape).
      args.push_back(a < 0 ? detail::broadcast_operand(inputs[-a - 1], shape)
                           : values[a]);
    }
    values.push_back(array(shape, op.dtype, op.primitive, std::move(args)));
  }
  std::vector<array> outs;
  for (int o : outputs_) outs.push_back(values[o]);
  return outs;
}

std::vector<array> Compiled::run_unfused(
    const std::vector<array>& inputs) const {
  auto outs = unfused(inputs);
  detail::run_nodes(outs);
  return outs;
}

void Compiled::eval_unfused(const std::vector<array>& inputs,
                            std::vector<array>& outputs) const {
  auto outs = run_unfused(inputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(outs[i]);
  }
}

std::vector<Shape> Compiled::output_shapes(const std::vector<array>& inputs) {
  return std::vector<Shape>(outputs_.size(), region_shape(inputs));
}

bool Compiled::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Compiled*>(&other);
  if (!o || o->ops_.size() != ops_.size() || o->outputs_ != outputs_) {
    return false;
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    auto& a = ops_[i];
    auto& b = o->ops_[i];
    if (a.args != b.args || a.dtype != b.dtype ||
        !a.primitive->is_equivalent(*b.primitive)) {
      return false;
    }
  }
  if (constants_.size() != o->constants_.size()) return false;
  for (size_t i = 0; i < constants_.size(); ++i) {
    auto& a = constants_[i];
    auto& b = o->constants_[i];
    if (a.has_value() != b.has_value()) return false;
    if (a && (a->dtype != b->dtype || a->bits != b->bits)) return false;
  }
  return true;
}

void Compiled::print(std::ostream& os) const {
  os << "Compiled{";
  for (size_t i = 0; i < ops_.size(); ++i) {
    os << (i ? " " : "") << ops_[i].primitive->name();
  }
  os << "}";
}

// The transformations see through the region: they act on the same ops,
// unfused (the transformed graph may be compiled again).
std::vector<array> Compiled::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>&) {
  auto f = [this](const std::vector<array>& x) { return unfused(x); };
  auto all = kiln::vjp(f, primals, cotangents).second;
  std::vector<array> out;
  for (int i : argnums) out.push_back(all[i]);
  return out;
}

std::vector<array> Compiled::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  auto full = detail::zeros_like_all(primals);
  for (size_t k = 0; k < argnums.size(); ++k) full[argnums[k]] = tangents[k];
  auto f = [this](const std::vector<array>& x) { return unfused(x); };
  return kiln::jvp(f, primals, full).second;
}

std::pair<std::vector<array>, std::vector<int>> Compiled::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto f = [this](const std::vector<array>& x) { return unfused(x); };
  auto outs = kiln::vmap(f, axes)(inputs);
  return {outs, std::vector<int>(outs.size(), 0)};
}

} // namespace kiln
