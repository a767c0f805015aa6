#include "kiln/primitives/indexing.h"

namespace kiln {

namespace {

const char* reduce_name(ScatterReduce r, const char* none, const char* sum,
                        const char* prod, const char* max, const char* min) {
  switch (r) {
    case ScatterReduce::Sum: return sum;
    case ScatterReduce::Prod: return prod;
    case ScatterReduce::Max: return max;
    case ScatterReduce::Min: return min;
    default: return none;
  }
}

} // namespace

bool Gather::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Gather*>(&other);
  return o && o->axes_ == axes_ && o->slice_sizes_ == slice_sizes_;
}

std::vector<Shape> Gather::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs.size() > 1 ? inputs[1].shape() : Shape{};
  out.insert(out.end(), slice_sizes_.begin(), slice_sizes_.end());
  return {out};
}

const char* Scatter::name() const {
  return reduce_name(reduce_, "Scatter", "ScatterSum", "ScatterProd",
                     "ScatterMax", "ScatterMin");
}

bool Scatter::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Scatter*>(&other);
  return o && o->reduce_ == reduce_ && o->axes_ == axes_;
}

bool GatherAxis::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const GatherAxis*>(&other);
  return o && o->axis_ == axis_;
}

const char* ScatterAxis::name() const {
  return reduce_name(reduce_, "ScatterAxis", "ScatterAxisSum",
                     "ScatterAxisProd", "ScatterAxisMax", "ScatterAxisMin");
}

bool ScatterAxis::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ScatterAxis*>(&other);
  return o && o->reduce_ == reduce_ && o->axis_ == axis_;
}

} // namespace kiln
