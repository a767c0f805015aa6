// Slices, slice updates, as_strided and split.
#include "kiln/ops/slicing.h"

#include <algorithm>

#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/slicing.h"

namespace kiln {

using detail::describe;
using detail::invalid;
using detail::shape_str;

namespace {

// Checks the sizes and steps of a static window; returns its shape. The
// primitives keep start and stop as given and normalize them when they run.
Shape window_shape(const char* op, const array& a, const Shape& start,
                   const Shape& stop, const Shape& strides) {
  size_t nd = a.ndim();
  if (start.size() != nd || stop.size() != nd || strides.size() != nd) {
    invalid(op, "start, stop and strides need one entry per axis of the " +
                    describe(a) + "; got " + std::to_string(start.size()) +
                    ", " + std::to_string(stop.size()) + " and " +
                    std::to_string(strides.size()) + ".");
  }
  for (size_t i = 0; i < nd; ++i) {
    if (strides[i] == 0) invalid(op, "slice strides must be nonzero.");
  }
  return slice_window(a.shape(), start, stop, strides).shape;
}

// Checks the integer start array and axes of the dynamic forms.
std::vector<int> check_dynamic(const char* op, const array& a,
                               const array& start, std::vector<int> axes) {
  if (!is_integral(start.dtype())) {
    invalid(op,
            "start indices must be integers, got a " + describe(start) + ".");
  }
  if (start.ndim() > 1) {
    invalid(op,
            "start indices must be 0-d or 1-d, got a " + describe(start) + ".");
  }
  if (start.size() != axes.size()) {
    invalid(op, std::to_string(start.size()) + " start indices for " +
                    std::to_string(axes.size()) + " axes.");
  }
  int nd = static_cast<int>(a.ndim());
  for (auto& ax : axes) ax = detail::normalize_axis(ax, nd, op);
  detail::normalize_axes(axes, nd, op); // rejects duplicates
  return axes;
}

} // namespace

array slice(const array& a, Shape start, Shape stop, Shape strides,
            StreamOrDevice s) {
  Shape shape = window_shape("slice", a, start, stop, strides);
  if (shape == a.shape() && std::all_of(strides.begin(), strides.end(),
                                        [](int x) { return x == 1; })) {
    return a;
  }
  auto p = std::make_shared<Slice>(to_stream(s), std::move(start),
                                   std::move(stop), std::move(strides));
  return array(std::move(shape), a.dtype(), std::move(p), {a});
}

array slice(const array& a, Shape start, Shape stop, StreamOrDevice s) {
  Shape strides(a.ndim(), 1);
  return slice(a, std::move(start), std::move(stop), std::move(strides), s);
}

array slice(const array& a, const array& start, std::vector<int> axes,
            Shape slice_size, StreamOrDevice s) {
  axes = check_dynamic("slice", a, start, std::move(axes));
  if (slice_size.size() != a.ndim()) {
    invalid("slice", "slice_size " + shape_str(slice_size) +
                         " needs one entry per axis of the " + describe(a) +
                         ".");
  }
  for (size_t i = 0; i < a.ndim(); ++i) {
    if (slice_size[i] < 0 || slice_size[i] > a.shape()[i]) {
      invalid("slice", "slice_size " + shape_str(slice_size) +
                           " does not fit in the " + describe(a) + ".");
    }
  }
  auto p = std::make_shared<DynamicSlice>(to_stream(s), axes, slice_size);
  return array(std::move(slice_size), a.dtype(), std::move(p), {a, start});
}

array slice_update(const array& src, const array& update, Shape start,
                   Shape stop, Shape strides, StreamOrDevice s) {
  Shape window = window_shape("slice_update", src, start, stop, strides);
  auto b = detail::broadcast_shapes(update.shape(), window, "slice_update");
  if (b != window) {
    invalid("slice_update", "an update of shape " + shape_str(update.shape()) +
                                " does not broadcast to the window " +
                                shape_str(window) + " of the " + describe(src) +
                                ".");
  }
  if (shape_size(window) == 0) return src;
  auto p = std::make_shared<SliceUpdate>(to_stream(s), std::move(start),
                                         std::move(stop), std::move(strides));
  return array(src.shape(), src.dtype(), std::move(p),
               {src, broadcast_to(update, window, s)});
}

array slice_update(const array& src, const array& update, Shape start,
                   Shape stop, StreamOrDevice s) {
  Shape strides(src.ndim(), 1);
  return slice_update(src, update, std::move(start), std::move(stop),
                      std::move(strides), s);
}

array slice_update(const array& src, const array& update, const array& start,
                   std::vector<int> axes, StreamOrDevice s) {
  axes = check_dynamic("slice_update", src, start, std::move(axes));
  if (update.ndim() > src.ndim()) {
    invalid("slice_update", "the update (" + describe(update) +
                                ") has more dimensions than the source (" +
                                describe(src) + ").");
  }
  Shape window(src.ndim() - update.ndim(), 1);
  window.insert(window.end(), update.shape().begin(), update.shape().end());
  Shape padded = window; // update's shape with leading 1s
  if (update.ndim() == 0) {
    window = src.shape();
    for (int ax : axes) window[ax] = 1;
  }
  for (size_t i = 0; i < src.ndim(); ++i) {
    if (window[i] > src.shape()[i]) {
      invalid("slice_update",
              "an update of shape " + shape_str(update.shape()) +
                  " does not fit in the " + describe(src) + ".");
    }
  }
  if (shape_size(window) == 0) return src;
  auto p = std::make_shared<DynamicSliceUpdate>(to_stream(s), axes);
  return array(
      src.shape(), src.dtype(), std::move(p),
      {src, broadcast_to(reshape(update, padded, s), window, s), start});
}

array as_strided(const array& a, Shape shape, Strides strides, size_t offset,
                 StreamOrDevice s) {
  if (shape.size() != strides.size()) {
    invalid("as_strided", "shape " + shape_str(shape) + " and " +
                              std::to_string(strides.size()) +
                              " strides differ in length.");
  }
  for (auto d : shape) {
    if (d < 0)
      invalid("as_strided", "negative dimension in " + shape_str(shape) + ".");
  }
  size_t size = shape_size(shape);
  if (size > 0) {
    int64_t lo = static_cast<int64_t>(offset), hi = lo;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t span = (shape[i] - 1) * strides[i];
      (span < 0 ? lo : hi) += span;
    }
    if (lo < 0 || hi >= static_cast<int64_t>(a.size())) {
      invalid("as_strided", "shape " + shape_str(shape) +
                                " with these strides and offset " +
                                std::to_string(offset) +
                                " reaches outside the " + describe(a) + ".");
    }
  }
  auto p = std::make_shared<AsStrided>(to_stream(s), shape, std::move(strides),
                                       offset);
  return array(std::move(shape), a.dtype(), std::move(p),
               {contiguous(a, false, s)});
}

namespace {

// One Split node whose outputs are views of a: its vjp is one concatenation
// of the cotangents (independent slices would each write theirs into zeros
// of a's shape).
std::vector<array> make_split(const array& a, Shape indices, int num_splits,
                              int axis, StreamOrDevice s) {
  auto p = std::make_shared<Split>(to_stream(s), std::move(indices),
                                   num_splits, axis);
  auto shapes = p->output_shapes({a});
  std::vector<Dtype> dtypes(shapes.size(), a.dtype());
  return array::make_arrays(std::move(shapes), dtypes, std::move(p), {a});
}

} // namespace

std::vector<array> split(const array& a, const Shape& indices, int axis,
                         StreamOrDevice s) {
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), "split");
  if (indices.empty()) return {a};
  return make_split(a, indices, 0, axis, s);
}

std::vector<array> split(const array& a, const Shape& indices,
                         StreamOrDevice s) {
  return split(a, indices, 0, s);
}

std::vector<array> split(const array& a, int num_splits, int axis,
                         StreamOrDevice s) {
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), "split");
  if (num_splits <= 0) {
    invalid("split", "num_splits must be positive, got " +
                         std::to_string(num_splits) + ".");
  }
  int n = a.shape(axis);
  if (n % num_splits != 0) {
    invalid("split", "axis " + std::to_string(axis) + " of the " + describe(a) +
                         " does not split into " + std::to_string(num_splits) +
                         " equal parts.");
  }
  if (num_splits == 1) return {a};
  return make_split(a, {}, num_splits, axis, s);
}

std::vector<array> split(const array& a, int num_splits, StreamOrDevice s) {
  return split(a, num_splits, 0, s);
}

} // namespace kiln
