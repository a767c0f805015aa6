#include "kiln/ops/indexing.h"

#include <algorithm>
#include <numeric>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/indexing.h"

namespace kiln {

using detail::describe;
using detail::invalid;
using detail::shape_str;

namespace {

void check_integer(const char* op, const array& idx) {
  if (!is_integral(idx.dtype())) {
    invalid(op,
            "indices must have an integer dtype, got a " + describe(idx) + ".");
  }
}

// Normalized axes for a list of index arrays (checked to be integers) and
// their broadcast shape.
std::vector<int> check_axes(const char* op, const array& a,
                            const std::vector<array>& indices,
                            const std::vector<int>& axes, Shape& idx_shape) {
  if (indices.size() != axes.size()) {
    invalid(op, std::to_string(indices.size()) + " index arrays for " +
                    std::to_string(axes.size()) + " axes.");
  }
  if (indices.size() > a.ndim()) {
    invalid(op, "too many index arrays (" + std::to_string(indices.size()) +
                    ") for the " + describe(a) + ".");
  }
  std::vector<int> out;
  for (int ax : axes) {
    out.push_back(detail::normalize_axis(ax, static_cast<int>(a.ndim()), op));
  }
  detail::normalize_axes(out, static_cast<int>(a.ndim()), op); // duplicates
  idx_shape.clear();
  for (auto& idx : indices) {
    check_integer(op, idx);
    idx_shape = detail::broadcast_shapes(idx_shape, idx.shape(), op);
  }
  return out;
}

std::vector<array> with_broadcast(const array& a,
                                  const std::vector<array>& indices,
                                  const Shape& idx_shape, StreamOrDevice s) {
  std::vector<array> inputs{a};
  for (auto& idx : indices) inputs.push_back(broadcast_to(idx, idx_shape, s));
  return inputs;
}

array scatter_impl(const char* op, ScatterReduce reduce, const array& a,
                   const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes_in, StreamOrDevice s) {
  Shape idx_shape;
  auto axes = check_axes(op, a, indices, axes_in, idx_shape);
  bool extreme = reduce == ScatterReduce::Max || reduce == ScatterReduce::Min;
  if (extreme && is_complex(a.dtype())) {
    invalid(op, "not supported for complex64.");
  }
  if (updates.ndim() != idx_shape.size() + a.ndim()) {
    invalid(op, "updates of shape " + shape_str(updates.shape()) +
                    " need the index shape " + shape_str(idx_shape) +
                    " followed by one slice dimension per axis of the " +
                    describe(a) + ".");
  }
  Shape target = idx_shape;
  for (size_t i = 0; i < a.ndim(); ++i) {
    int d = updates.shape()[idx_shape.size() + i];
    if (d > a.shape()[i]) {
      invalid(op, "update slices of shape " + shape_str(updates.shape()) +
                      " do not fit in the " + describe(a) + ".");
    }
    target.push_back(d);
  }
  if (detail::broadcast_shapes(updates.shape(), target, op) != target) {
    invalid(op, "updates of shape " + shape_str(updates.shape()) +
                    " do not match the index shape " + shape_str(idx_shape) +
                    ".");
  }
  auto inputs = with_broadcast(a, indices, idx_shape, s);
  inputs.push_back(broadcast_to(astype(updates, a.dtype(), s), target, s));
  auto p = std::make_shared<Scatter>(to_stream(s), reduce, std::move(axes));
  return array(a.shape(), a.dtype(), std::move(p), std::move(inputs));
}

} // namespace

array gather(const array& a, const std::vector<array>& indices,
             const std::vector<int>& axes_in, const Shape& slice_sizes,
             StreamOrDevice s) {
  Shape idx_shape;
  auto axes = check_axes("gather", a, indices, axes_in, idx_shape);
  if (slice_sizes.size() != a.ndim()) {
    invalid("gather", "slice_sizes " + shape_str(slice_sizes) +
                          " needs one entry per axis of the " + describe(a) +
                          ".");
  }
  for (size_t i = 0; i < a.ndim(); ++i) {
    if (slice_sizes[i] < 0 || slice_sizes[i] > a.shape()[i]) {
      invalid("gather", "slice_sizes " + shape_str(slice_sizes) +
                            " do not fit in the " + describe(a) + ".");
    }
  }
  Shape out = idx_shape;
  out.insert(out.end(), slice_sizes.begin(), slice_sizes.end());
  auto p = std::make_shared<Gather>(to_stream(s), std::move(axes), slice_sizes,
                                    a.shape());
  return array(std::move(out), a.dtype(), std::move(p),
               with_broadcast(a, indices, idx_shape, s));
}

array gather(const array& a, const array& indices, int axis,
             const Shape& slice_sizes, StreamOrDevice s) {
  return gather(a, std::vector<array>{indices}, std::vector<int>{axis},
                slice_sizes, s);
}

#define KILN_SCATTER_FORMS(name, reduce)                                 \
  array name(const array& a, const std::vector<array>& indices,          \
             const array& updates, const std::vector<int>& axes,         \
             StreamOrDevice s) {                                         \
    return scatter_impl(#name, reduce, a, indices, updates, axes, s);    \
  }                                                                      \
  array name(const array& a, const array& indices, const array& updates, \
             int axis, StreamOrDevice s) {                               \
    return name(a, std::vector<array>{indices}, updates,                 \
                std::vector<int>{axis}, s);                              \
  }
KILN_SCATTER_FORMS(scatter, ScatterReduce::None)
KILN_SCATTER_FORMS(scatter_add, ScatterReduce::Sum)
KILN_SCATTER_FORMS(scatter_prod, ScatterReduce::Prod)
KILN_SCATTER_FORMS(scatter_max, ScatterReduce::Max)
KILN_SCATTER_FORMS(scatter_min, ScatterReduce::Min)
#undef KILN_SCATTER_FORMS

array take(const array& a, const array& indices, int axis, StreamOrDevice s) {
  check_integer("take", indices);
  int nd = static_cast<int>(a.ndim());
  axis = detail::normalize_axis(axis, nd, "take");
  int ni = static_cast<int>(indices.ndim());
  Shape out(a.shape().begin(), a.shape().begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), a.shape().begin() + axis + 1, a.shape().end());
  if (a.shape(axis) == 0) {
    if (indices.size() == 0) return zeros(out, a.dtype(), s);
    invalid("take", "cannot take from the empty axis " + std::to_string(axis) +
                        " of the " + describe(a) + ".");
  }
  Shape slice_sizes = a.shape();
  slice_sizes[axis] = 1;
  // Gather gives index dims first, then a's dims with axis of size 1: drop
  // that axis and move the index dims to where it was.
  auto g = squeeze(gather(a, indices, axis, slice_sizes, s), ni + axis, s);
  if (axis == 0 || ni == 0) return g;
  std::vector<int> perm(nd - 1 + ni);
  std::iota(perm.begin(), perm.begin() + axis, ni);
  std::iota(perm.begin() + axis, perm.begin() + axis + ni, 0);
  std::iota(perm.begin() + axis + ni, perm.end(), ni + axis);
  return transpose(g, perm, s);
}

array take(const array& a, const array& indices, StreamOrDevice s) {
  return take(flatten(a, 0, -1, s), indices, 0, s);
}

array take(const array& a, int index, int axis, StreamOrDevice s) {
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), "take");
  int n = a.shape(axis);
  if (index < -n || index >= n) {
    invalid("take", "index " + std::to_string(index) +
                        " is out of range for axis " + std::to_string(axis) +
                        " of the " + describe(a) + ".");
  }
  Shape start(a.ndim(), 0), stop = a.shape();
  start[axis] = index < 0 ? index + n : index;
  stop[axis] = start[axis] + 1;
  return squeeze(slice(a, start, stop, s), axis, s);
}

array take(const array& a, int index, StreamOrDevice s) {
  return take(flatten(a, 0, -1, s), index, 0, s);
}

array take_along_axis(const array& a, const array& indices, int axis,
                      StreamOrDevice s) {
  check_integer("take_along_axis", indices);
  if (indices.ndim() != a.ndim()) {
    invalid("take_along_axis", "indices (" + describe(indices) +
                                   ") must have the rank of the " +
                                   describe(a) + ".");
  }
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()),
                                "take_along_axis");
  Shape as = a.shape(), is = indices.shape();
  as[axis] = is[axis] = 1;
  Shape out = detail::broadcast_shapes(as, is, "take_along_axis");
  Shape src = out;
  out[axis] = indices.shape(axis);
  src[axis] = a.shape(axis);
  if (a.shape(axis) == 0 && shape_size(out) > 0) {
    invalid("take_along_axis", "cannot take from the empty axis " +
                                   std::to_string(axis) + " of the " +
                                   describe(a) + ".");
  }
  auto p = std::make_shared<GatherAxis>(to_stream(s), axis);
  return array(out, a.dtype(), std::move(p),
               {broadcast_to(a, src, s), broadcast_to(indices, out, s)});
}

array take_along_axis(const array& a, const array& indices, StreamOrDevice s) {
  return take_along_axis(flatten(a, 0, -1, s), flatten(indices, 0, -1, s), 0,
                         s);
}

namespace {

array scatter_axis(const char* op, ScatterReduce reduce, const array& a,
                   const array& indices, const array& values, int axis,
                   StreamOrDevice s) {
  if (indices.ndim() != a.ndim()) {
    invalid(op, "indices (" + describe(indices) +
                    ") must have the rank of the " + describe(a) + ".");
  }
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), op);
  // An empty array has nothing to update, whatever its indices (as MLX).
  if (a.size() == 0) return a;
  check_integer(op, indices);
  // Indices broadcast against a on the other axes, values against both.
  Shape target = a.shape();
  target[axis] = indices.shape(axis);
  for (auto* x : {&indices, &values}) {
    if (x->ndim() > target.size() ||
        detail::broadcast_shapes(x->shape(), target, op) != target) {
      invalid(op, "shape " + shape_str(x->shape()) + " does not broadcast to " +
                      shape_str(target) + " for the " + describe(a) +
                      " along axis " + std::to_string(axis) + ".");
    }
  }
  auto p = std::make_shared<ScatterAxis>(to_stream(s), reduce, axis);
  return array(a.shape(), a.dtype(), std::move(p),
               {a, broadcast_to(indices, target, s),
                broadcast_to(astype(values, a.dtype(), s), target, s)});
}

} // namespace

array put_along_axis(const array& a, const array& indices, const array& values,
                     int axis, StreamOrDevice s) {
  return scatter_axis("put_along_axis", ScatterReduce::None, a, indices, values,
                      axis, s);
}

array scatter_add_axis(const array& a, const array& indices,
                       const array& values, int axis, StreamOrDevice s) {
  return scatter_axis("scatter_add_axis", ScatterReduce::Sum, a, indices,
                      values, axis, s);
}

array masked_scatter(const array& a, const array& mask, const array& values,
                     StreamOrDevice s) {
  const char* op = "masked_scatter";
  if (mask.dtype() != bool_) {
    invalid(op, "the mask must be boolean; got a " + describe(mask) + ".");
  }
  if (mask.ndim() > a.ndim() ||
      !std::equal(mask.shape().begin(), mask.shape().end(),
                  a.shape().begin())) {
    invalid(op, "the mask's shape " + shape_str(mask.shape()) +
                    " must be the leading part of the target's shape " +
                    shape_str(a.shape()) + ".");
  }
  int unmasked = static_cast<int>(a.ndim() - mask.ndim());
  if (values.ndim() > unmasked + 1) {
    invalid(op, "the values (" + describe(values) +
                    ") must broadcast to (count, " + std::to_string(unmasked) +
                    " trailing axes of the " + describe(a) + ").");
  }
  auto stream = to_stream(s);
  // Values as rows of the unmasked axes: (count, trailing...), a single
  // row broadcast to every selected position.
  Shape rows(a.shape().end() - unmasked, a.shape().end());
  rows.insert(rows.begin(), values.ndim() == unmasked + 1
                                ? values.shape(0)
                                : static_cast<int32_t>(mask.size()));
  Shape vshape(unmasked + 1 - values.ndim(), 1);
  vshape.insert(vshape.end(), values.shape().begin(), values.shape().end());
  if (detail::broadcast_shapes(vshape, rows, op) != rows) {
    invalid(op, "the values (" + describe(values) + ") do not broadcast to " +
                    shape_str(rows) + " for the " + describe(a) + ".");
  }
  auto v = flatten(broadcast_to(reshape(astype(values, a.dtype(), stream),
                                        vshape, stream),
                                rows, stream),
                   0, -1, stream);
  if (a.size() == 0 || v.size() == 0) return a;
  // The k-th selected element (row-major) takes the k-th value. More
  // selected elements than values read the last value (see
  // docs/mlx_compatibility.md).
  Shape mshape = mask.shape();
  mshape.resize(a.ndim(), 1);
  auto m = flatten(broadcast_to(reshape(mask, mshape, stream), a.shape(),
                                stream),
                   0, -1, stream);
  auto pos = cumsum(astype(m, int32, stream), 0, false, false, stream);
  pos = minimum(pos, array(static_cast<int32_t>(v.size() - 1)), stream);
  auto picked = take(v, pos, 0, stream);
  return reshape(where(m, picked, flatten(a, 0, -1, stream), stream),
                 a.shape(), stream);
}

} // namespace kiln
