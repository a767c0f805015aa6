#include "kiln/primitives/slicing.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kiln/ops/utils.h"

namespace kiln {

int32_t slice_length(int32_t start, int32_t stop, int32_t step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / -step : 0;
}

void normalize_slice_bounds(int32_t n, int32_t& start, int32_t& stop,
                            int32_t step) {
  auto norm = [&](int32_t v) {
    int64_t x = v < 0 ? int64_t(v) + n : v;
    return step > 0 ? std::clamp<int64_t>(x, 0, n)
                    : std::clamp<int64_t>(x, -1, int64_t(n) - 1);
  };
  start = static_cast<int32_t>(norm(start));
  stop = static_cast<int32_t>(norm(stop));
}

bool Slice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Slice*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ &&
         o->strides_ == strides_;
}

SliceWindow slice_window(const Shape& in, const Shape& start,
                         const Shape& stop, const Shape& strides) {
  SliceWindow w{start, Shape(in.size())};
  for (size_t i = 0; i < in.size(); ++i) {
    int32_t hi = stop[i];
    normalize_slice_bounds(in[i], w.start[i], hi, strides[i]);
    w.shape[i] = slice_length(w.start[i], hi, strides[i]);
  }
  return w;
}

WindowPlace window_place(const Shape& shape, const Strides& strides,
                         const Shape& start, const Shape& stop,
                         const Shape& steps) {
  Shape first = slice_window(shape, start, stop, steps).start;
  WindowPlace w{Strides(shape.size()), 0};
  for (size_t i = 0; i < shape.size(); ++i) {
    w.strides[i] = strides[i] * steps[i];
    w.offset += first[i] * strides[i];
  }
  return w;
}

std::vector<Shape> Slice::output_shapes(const std::vector<array>& inputs) {
  return {slice_window(inputs[0].shape(), start_, stop_, strides_).shape};
}

std::vector<Shape> SliceUpdate::output_shapes(
    const std::vector<array>& inputs) {
  // Under shapeless compile the window may move with src; the update,
  // replayed from its own inputs, has to still fill it.
  const Shape& src = inputs[0].shape();
  Shape window = slice_window(src, start_, stop_, strides_).shape;
  if (window != inputs[1].shape()) {
    throw std::invalid_argument(
        "[slice_update] an update of shape " +
        detail::shape_str(inputs[1].shape()) + " does not fill the window " +
        detail::shape_str(window) + " of an array of shape " +
        detail::shape_str(src) + ".");
  }
  return {src};
}

std::vector<std::pair<int32_t, int32_t>> Split::bounds(int32_t n) const {
  std::vector<std::pair<int32_t, int32_t>> out;
  if (num_splits_ > 0) {
    // The op checked divisibility; a new size under shapeless compile is
    // checked here.
    if (n % num_splits_ != 0) {
      throw std::invalid_argument(
          "[split] an axis of size " + std::to_string(n) +
          " does not split into " + std::to_string(num_splits_) +
          " equal parts.");
    }
    int32_t part = n / num_splits_;
    for (int32_t k = 0; k < num_splits_; ++k) {
      out.emplace_back(k * part, (k + 1) * part);
    }
    return out;
  }
  // As consecutive slices [indices[k-1], indices[k]) would be normalized.
  int32_t start = 0;
  for (size_t k = 0; k <= indices_.size(); ++k) {
    int32_t lo = start, hi = k < indices_.size() ? indices_[k] : n;
    start = hi;
    normalize_slice_bounds(n, lo, hi, 1);
    out.emplace_back(lo, std::max(lo, hi));
  }
  return out;
}

std::vector<std::pair<int32_t, int32_t>> Split::pieces(
    const std::vector<array>& inputs) const {
  int32_t n = inputs[0].shape(axis_);
  if (!like_) return bounds(n);
  std::vector<std::pair<int32_t, int32_t>> out;
  int32_t start = 0;
  for (size_t k = 1; k < inputs.size(); ++k) {
    int32_t extent = inputs[k].shape(axis_);
    out.emplace_back(start, start + extent);
    start += extent;
  }
  if (start != n) {
    throw std::invalid_argument(
        "[concatenate] the gradient's pieces along axis " +
        std::to_string(axis_) + " add up to " + std::to_string(start) +
        ", but the cotangent's extent there is " + std::to_string(n) + ".");
  }
  return out;
}

bool Split::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Split*>(&other);
  return o && o->indices_ == indices_ && o->num_splits_ == num_splits_ &&
         o->axis_ == axis_ && o->like_ == like_;
}

std::vector<Shape> Split::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  std::vector<Shape> out;
  for (auto [lo, hi] : pieces(inputs)) {
    shape[axis_] = hi - lo;
    out.push_back(shape);
  }
  return out;
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
