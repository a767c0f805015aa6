#include "kiln/primitives/slicing.h"

namespace kiln {

int32_t slice_length(int32_t start, int32_t stop, int32_t step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / -step : 0;
}

bool Slice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Slice*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ &&
         o->strides_ == strides_;
}

std::vector<Shape> Slice::output_shapes(const std::vector<array>&) {
  Shape out(start_.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = slice_length(start_[i], stop_[i], strides_[i]);
  }
  return {out};
}

bool DynamicSlice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const DynamicSlice*>(&other);
  return o && o->axes_ == axes_ && o->slice_size_ == slice_size_;
}

bool SliceUpdate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const SliceUpdate*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ &&
         o->strides_ == strides_;
}

bool DynamicSliceUpdate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const DynamicSliceUpdate*>(&other);
  return o && o->axes_ == axes_;
}

bool Concatenate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Concatenate*>(&other);
  return o && o->axis_ == axis_;
}

std::vector<Shape> Concatenate::output_shapes(
    const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out[axis_] = 0;
  for (auto& in : inputs) out[axis_] += in.shape(axis_);
  return {out};
}

bool AsStrided::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AsStrided*>(&other);
  return o && o->shape_ == shape_ && o->strides_ == strides_ &&
         o->offset_ == offset_;
}

} // namespace kiln
