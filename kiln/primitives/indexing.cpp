#include <algorithm>
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

Gather::Gather(Stream s, std::vector<int> axes, Shape slice_sizes,
               const Shape& src_shape)
    : UnaryPrimitive(s),
      axes_(std::move(axes)),
      slice_sizes_(std::move(slice_sizes)),
      whole_(slice_sizes_.size(), false) {
  for (size_t i = 0; i < whole_.size() && i < src_shape.size(); ++i) {
    bool indexed = std::find(axes_.begin(), axes_.end(),
                             static_cast<int>(i)) != axes_.end();
    whole_[i] = !indexed && slice_sizes_[i] == src_shape[i];
  }
}

Shape Gather::slice_sizes(const Shape& src) const {
  Shape sizes = slice_sizes_;
  for (size_t i = 0; i < sizes.size() && i < src.size(); ++i) {
    if (whole_[i]) sizes[i] = src[i];
  }
  return sizes;
}

bool Gather::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Gather*>(&other);
  return o && o->axes_ == axes_ && o->slice_sizes_ == slice_sizes_ &&
         o->whole_ == whole_;
}

std::vector<Shape> Gather::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs.size() > 1 ? inputs[1].shape() : Shape{};
  Shape sizes = slice_sizes(inputs[0].shape());
  out.insert(out.end(), sizes.begin(), sizes.end());
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
